"""`albert-tf serve`: the local development stand-in for TF Serving (gRPC + REST) on an export base.

It speaks TF Serving's protocols (see `albert_tf.model_server.server`) so clients can be developed and
tested without Docker; production serving is TF Serving itself (serving/README.md). A taken port
(either protocol) exits with status 2 and one line naming it. `--prefer-tflite-model` serves a
version's `model.tflite` (`albert-tf export --tflite ...`; token ids in) as TF Serving's
`--prefer_tflite_model` does.
"""

from __future__ import annotations

import argparse

from albert_tf.cli import CommandError

NAME = "serve"
HELP = "Serve an export base locally over TF Serving's gRPC and REST protocols (a development stand-in)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--export-base", required=True, help="directory of <model>/<version>/ SavedModels")
    parser.add_argument("--model-name", action="append", help="model to serve (repeatable; default: all)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8500, help="gRPC port (default 8500)")
    parser.add_argument("--rest-api-port", type=int, default=8501, help="REST port (default 8501)")
    parser.add_argument("--poll-seconds", type=float, default=1.0, help="version polling interval (0: never)")
    parser.add_argument("--no-batching", action="store_true", help="run every request on its own")
    parser.add_argument(
        "--max-request-bytes", type=_positive(int), default=None,
        help="largest request, REST body or gRPC message (default: what the largest batch needs, "
        "max_batch_size x 2 texts x 64 KiB x 3 for JSON escapes + 64 KiB; 12.1 MiB for 32 rows)",
    )
    parser.add_argument(
        "--prefer-tflite-model", "--prefer_tflite_model", dest="prefer_tflite_model", action="store_true",
        help="serve a version's model.tflite (token ids in, Predict only) when it has one, as TF Serving's flag",
    )
    parser.add_argument(
        "--rest-read-timeout-seconds", type=_positive(float), default=30.0,
        help="time a REST request body has to arrive, and an idle connection is kept (default 30)",
    )
    parser.add_argument(
        "--request-logging-config", default=None, metavar="FILE",
        help="TF Serving LoggingConfig (text): log a sample of requests as PredictionLog TFRecords "
        "(log_collector_config.filename_prefix, sampling_config.sampling_rate)",
    )


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"must be a positive {'integer' if kind is int else 'number'}, got {text!r}")
        return value

    return parse


def run(args) -> int:
    import logging
    import os

    from albert_tf.model_server.server import LocalModelServer

    if not os.path.isdir(args.export_base):
        raise CommandError(f"--export-base not found: {args.export_base}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        server = LocalModelServer(
            args.export_base, model_names=args.model_name, grpc_port=args.port, rest_port=args.rest_api_port,
            poll_interval_s=args.poll_seconds, host=args.host, max_request_bytes=args.max_request_bytes,
            rest_read_timeout_s=args.rest_read_timeout_seconds, prefer_tflite_model=args.prefer_tflite_model,
            request_logging=args.request_logging_config,
        )
        if args.no_batching:
            server.manager.batching = None
        server.start()
    except (ValueError, OSError) as e:
        raise CommandError(str(e)) from None
    print(
        f"serving {', '.join(server.manager.models)}: gRPC {args.host}:{server.grpc_port}, REST {args.host}:{server.rest_port}"
        f" (requests up to {server.max_request_bytes} bytes)",
        flush=True,
    )
    try:
        server.wait()
    finally:
        server.stop()
    return 0
