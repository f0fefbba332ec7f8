"""Fine-tune ALBERT on the Rotten Tomatoes sentiment data and report dev / test accuracy.

The data is `../shared/data/en/rotten_tomatoes/{train,dev,test}.tsv` beside the repository
(`label<TAB>text`, CSV-quoted). The run is the library's `albert_tf.tasks.finetune`, exactly what
`albert-tf finetune --task classification` runs (AdamW, warmup + linear decay, dev evaluation every
epoch, best dev weights kept), so the numbers measure the library's fine-tuning path end to end.

Start from pretrained weights with `--init` (any checkpoint kind; the architecture and the
tokenizer are taken from it when they are stored with it), or from random weights: then the
architecture is `--config` (default: a small 4-layer model) and, without `--spm-model`, a
SentencePiece model is trained on the training texts first. Random initialisation gives the
no-pretraining baseline.

    python benchmarks/finetune_sentiment.py --max-train-examples 512 --epochs 1      # a quick check
    python benchmarks/finetune_sentiment.py --init albert_base_v2/ --max-seq-length 128
    python benchmarks/finetune_sentiment.py --config base-v2 --spm-model 30k-clean.model --epochs 3

The table ends with the majority-class accuracy of dev and test (always answering the most
frequent training label), the floor a model has to beat. BENCHMARKS.md's comparison of a
SOTU-pretrained small model with the same model from random weights used:

    python benchmarks/finetune_sentiment.py --init SOTU_RUN/tf1/model.ckpt --spm-model SOTU_RUN/spm.model \
        --max-seq-length 64 --batch-size 32 --learning-rate 1e-4 --epochs 1
    python benchmarks/finetune_sentiment.py --config albert_config.json --spm-model SOTU_RUN/spm.model \
        --max-seq-length 64 --batch-size 32 --learning-rate 1e-4 --epochs 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "en" / "rotten_tomatoes"
# The random-initialisation baseline: ALBERT's shapes, 4 layers of width 256.
SMALL_CONFIG = {
    "vocab_size": 8000, "embedding_size": 128, "hidden_size": 256, "num_hidden_layers": 4,
    "num_attention_heads": 4, "intermediate_size": 1024, "max_position_embeddings": 512,
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="directory with train.tsv, dev.tsv, test.tsv")
    parser.add_argument("--init", help="pretrained checkpoint (default: random initialisation)")
    parser.add_argument("--config", help="preset or albert_config.json (default: the one of --init, else a small model)")
    parser.add_argument("--spm-model", help="SentencePiece model (default: the one of --init, else trained here)")
    parser.add_argument("--vocab-file", help="WordPiece vocab.txt instead of a SentencePiece model")
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, help="default 1e-5 with --init (SST-2's), 1e-4 from random weights")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--max-train-examples", type=int, help="use only the first N training examples")
    parser.add_argument("--max-eval-examples", type=int, help="use only the first N dev/test examples")
    parser.add_argument("--seed", type=int, default=12345, help="seed of the head's initialisation, dropout and shuffling")
    parser.add_argument("--precision", choices=("float32", "mixed_bfloat16"), default="float32")
    parser.add_argument("--model-dir", help="where the fine-tuned model goes (default: a temporary directory)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def train_sentencepiece_on(train_file: Path, directory: Path, vocab_size: int) -> str:
    """A SentencePiece model (the ALBERT recipe) trained on the training texts."""
    from albert_tf.data.tables import read_table
    from albert_tf.tokenization import train_sentencepiece

    corpus = directory / "train_texts.txt"
    texts = [e.text_a.replace("\n", " ") for e in read_table(train_file, text_column="text", label_column="label")]
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return train_sentencepiece(str(corpus), str(directory / "sentiment"), vocab_size=vocab_size, seed=0).model_file


def majority_accuracy(data: Path, max_eval_examples=None) -> dict:
    """{split: accuracy} of always predicting the most frequent training label (the floor to beat)."""
    from collections import Counter

    from albert_tf.data.tables import read_table

    def labels(split):
        return [e.label for e in read_table(str(data / f"{split}.tsv"), text_column="text", label_column="label")]

    try:
        top = Counter(labels("train")).most_common(1)[0][0]
        out = {}
        for split in ("dev", "test"):
            values = labels(split)[:max_eval_examples]
            out[split] = sum(v == top for v in values) / len(values)
        return out
    except Exception:  # unlabelled test file or other layout: just no floor printed
        return {}


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = parse_args(argv)
    data = Path(args.data)
    if not (data / "train.tsv").is_file():
        print(f"no Rotten Tomatoes data at {data} (expected train.tsv, dev.tsv, test.tsv)", file=sys.stderr)
        return 2
    from albert_tf.tasks import FinetuneSettings, TaskError, finetune
    from albert_tf.tasks.spec import RESULTS_FILE

    work = Path(tempfile.mkdtemp(prefix="finetune_sentiment_"))
    model_dir = Path(args.model_dir) if args.model_dir else work / "model"
    learning_rate = args.learning_rate or (1e-5 if args.init else 1e-4)
    config = args.config
    if config is None and not args.init:
        config = str(work / "albert_config.json")
        Path(config).write_text(json.dumps(SMALL_CONFIG), encoding="utf-8")
    spm_model = args.spm_model
    if not args.vocab_file and not args.spm_model and not args.init:
        from albert_tf.config import load_config

        vocab_size = min(8000, load_config(config).vocab_size)
        print(f"training a {vocab_size}-piece SentencePiece model on the training texts ...", flush=True)
        spm_model = train_sentencepiece_on(data / "train.tsv", work, vocab_size)
    settings = FinetuneSettings(
        task="classification", data=str(data), text_column="text", label_column="label", model_dir=str(model_dir),
        max_seq_length=args.max_seq_length, batch_size=args.batch_size, num_epochs=args.epochs,
        precision=args.precision, seed=args.seed, overwrite=True, init=args.init, learning_rate=learning_rate,
        config=config, vocab_file=args.vocab_file, spm_model=None if args.vocab_file else spm_model,
        max_train_examples=args.max_train_examples or None, max_eval_examples=args.max_eval_examples or None,
        quiet=args.quiet,
    )
    started = time.time()
    try:
        finetune(settings)
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seconds = time.time() - started
    results = json.loads((model_dir / RESULTS_FILE).read_text(encoding="utf-8"))
    run_info = json.loads((model_dir / "finetuning.json").read_text(encoding="utf-8"))
    steps, batch = run_info["num_train_steps"], run_info["batch_size"]
    print()
    print("| split | accuracy | F1 (fresh) | examples |")
    print("|---|---|---|---|")
    for split in ("dev", "test"):
        if split in results:
            r = results[split]
            print(f"| {split} | {r['accuracy']:.4f} | {r['f1']:.4f} | {args.max_eval_examples or 'all'} |")
    majority = majority_accuracy(data, args.max_eval_examples)
    if majority:
        print("\nmajority class (predicting the most frequent training label): "
              + ", ".join(f"{split} {value:.4f}" for split, value in majority.items()))
    print(
        f"\ninit: {args.init or 'random'}; {steps} steps x batch {batch} (seq {args.max_seq_length}, lr {learning_rate}) "
        f"in {seconds:.0f} s, best dev step {run_info['best_step']}; model in {model_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
