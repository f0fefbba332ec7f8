"""Entry point: send raw texts to TF Serving (or the local stand-in) and print the predictions.

Usage: python serving/client.py --server localhost:8500 --model NAME [--protocol rest] [--vocab PATH] TEXT...

A model served from `model.tflite` (`--prefer_tflite_model`) takes token ids: `--vocab` (the
export's version directory, or its spiece.model / vocab.txt) tokenizes the texts here.
"""

import argparse
import json
import sys

from albert_tf.model_server.client import ServingClientError, format_predictions, predict_text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("texts", nargs="+", metavar="TEXT")
    parser.add_argument("--server", required=True, help="HOST:PORT (gRPC 8500, REST 8501)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--text-b", action="append", help="second text of a pair (once per TEXT)")
    parser.add_argument("--protocol", choices=("grpc", "rest"), default="grpc")
    parser.add_argument("--signature", default="serving_default")
    parser.add_argument("--vocab", help="for a model that takes token ids: the export's version directory or vocabulary file")
    args = parser.parse_args(argv)
    try:
        outputs = predict_text(args.server, args.model, args.texts, text_b=args.text_b, protocol=args.protocol, signature=args.signature,
                               vocab=args.vocab)
    except (ServingClientError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for row in format_predictions(outputs):
        print(json.dumps(row, ensure_ascii=False, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
