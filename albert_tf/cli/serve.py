"""`albert-tf serve`: the local development stand-in for TF Serving (gRPC + REST) on an export base.

It speaks TF Serving's protocols (see `albert_tf.model_server.server`) so clients can be developed and
tested without Docker; production serving is TF Serving itself (serving/README.md). A taken port
(either protocol) exits with status 2 and one line naming it. `--prefer-tflite-model` serves a
version's `model.tflite` (`albert-tf export --tflite ...`; token ids in) as TF Serving's
`--prefer_tflite_model` does. `--prefer-openvino-model` serves a version's OpenVINO IR
(`albert-tf export --openvino ...`; raw text in, `serving_default`) with `--openvino-threads`
inference threads.

What it serves: `--export-base` (the newest version of each model there), or
`--model_config_file` (TF Serving's `ModelServerConfig` text file: several models, version
policies `latest`/`specific`/`all`, version labels; re-read every
`--model_config_file_poll_wait_seconds`). The two are exclusive (TF Serving ignores
`--model_base_path` beside `--model_config_file`; this command refuses the pair rather than ignore
a flag); a field of the file it does not support is refused in one line naming it.

Batching follows `batching_parameters.txt`: on a length-aware export requests are batched by
length bucket (`albert_tf.model_server.length_batching`) unless the file turns it off or
`--no-length-grouping` is given (arrival order, as TF Serving); `--no-batching` runs each alone.
`--grpc-max-threads` (TF Serving's `--grpc_max_threads`) bounds the requests held at once; its
default lets every batch fill (`albert_tf.model_server.server.default_grpc_max_threads`).

`--onednn-frozen-weights` (default auto: on when every SavedModel served is a bf16 export) sets
`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS` for this process before its models load
(`albert_tf.export.onednn_weights`); the line that says where it serves says which.
"""

from __future__ import annotations

import argparse

from albert_tf.cli import CommandError

NAME = "serve"
HELP = "Serve an export base locally over TF Serving's gRPC and REST protocols (a development stand-in)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--export-base", default=None,
        help="directory of <model>/<version>/ SavedModels; the newest version of each is served "
        "(or --model_config_file)",
    )
    parser.add_argument(
        "--model_config_file", "--model-config-file", dest="model_config_file", default=None, metavar="FILE",
        help="TF Serving ModelServerConfig text file (model_config_list: name, base_path, model_platform "
        "\"tensorflow\", model_version_policy, version_labels) instead of --export-base",
    )
    parser.add_argument(
        "--model_config_file_poll_wait_seconds", "--model-config-file-poll-wait-seconds",
        dest="model_config_file_poll_wait_seconds", type=_non_negative, default=None, metavar="SECONDS",
        help="re-read --model_config_file this often (0 or absent: read once), as TF Serving's flag",
    )
    parser.add_argument(
        "--allow_version_labels_for_unavailable_models", "--allow-version-labels-for-unavailable-models",
        dest="allow_version_labels_for_unavailable_models", action="store_true",
        help="let a new version label of --model_config_file name a version not loaded yet (TF Serving's flag; "
        "by default a label must name an AVAILABLE version, so labels cannot be given at startup)",
    )
    parser.add_argument("--model-name", action="append", help="model of --export-base to serve (repeatable; default: all)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8500, help="gRPC port (default 8500)")
    parser.add_argument("--rest-api-port", type=int, default=8501, help="REST port (default 8501)")
    parser.add_argument("--poll-seconds", type=float, default=1.0, help="version polling interval (0: never)")
    parser.add_argument("--no-batching", action="store_true", help="run every request on its own")
    parser.add_argument(
        "--no-length-grouping", action="store_true",
        help="batch in arrival order, not by length bucket, whatever batching_parameters.txt says",
    )
    parser.add_argument(
        "--max-request-bytes", type=_positive(int), default=None,
        help="largest request, REST body or gRPC message (default: what the largest batch needs, "
        "max_batch_size x 2 texts x 64 KiB x 3 for JSON escapes + 64 KiB; 12.1 MiB for 32 rows)",
    )
    parser.add_argument(
        "--grpc-max-threads", "--grpc_max_threads", dest="grpc_max_threads", type=_positive(int), default=None,
        help="gRPC handler threads, the most requests held at once; more get RESOURCE_EXHAUSTED (TF Serving's flag; "
        "default: 4 per CPU, at least 16, and with batching what the batcher holds, "
        "(max_enqueued_batches + num_batch_threads) x max_batch_size, at most 4096)",
    )
    parser.add_argument(
        "--prefer-tflite-model", "--prefer_tflite_model", dest="prefer_tflite_model", action="store_true",
        help="serve a version's model.tflite (token ids in, Predict only) when it has one, as TF Serving's flag",
    )
    parser.add_argument(
        "--prefer-openvino-model", action="store_true",
        help="serve a version's OpenVINO IR (export --openvino; raw text in, serving_default only) when it has one",
    )
    parser.add_argument(
        "--openvino-threads", type=_positive(int), default=None,
        help="inference threads of each OpenVINO model (default: OpenVINO's, all cores)",
    )
    parser.add_argument(
        "--onednn-frozen-weights", choices=("auto", "on", "off"), default="auto",
        help="let TensorFlow's oneDNN matmuls take the weights as constants (TF_ONEDNN_ASSUME_FROZEN_WEIGHTS: "
        "blocked bf16 weights for the AMX / AVX512_BF16 kernels, 1.3x at batch 32 on a bf16 ALBERT-base); "
        "auto (default): on when every SavedModel served is a bf16 export; a value set in the environment wins",
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


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}")
    return value


def _check_sources(args) -> None:
    """`--export-base` or `--model_config_file`, and only the flags that apply to the one given."""
    if args.export_base is not None and args.model_config_file is not None:
        raise CommandError(
            "--model_config_file and --export-base are exclusive (TF Serving would ignore --model_base_path "
            "beside --model_config_file): give one"
        )
    if args.export_base is None and args.model_config_file is None:
        raise CommandError("give --export-base DIR or --model_config_file FILE")
    if args.model_config_file is not None and args.model_name:
        raise CommandError("--model-name selects models of --export-base; with --model_config_file the file lists the models")
    if args.model_config_file is None:
        for flag, given in (
            ("--model_config_file_poll_wait_seconds", args.model_config_file_poll_wait_seconds is not None),
            ("--allow_version_labels_for_unavailable_models", args.allow_version_labels_for_unavailable_models),
        ):
            if given:
                raise CommandError(f"{flag} applies to --model_config_file only")


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
    import dataclasses
    import logging
    import os

    from albert_tf.export.onednn_weights import apply_frozen_weights
    from albert_tf.model_server.server import LocalModelServer

    _check_sources(args)
    if args.export_base is not None and not os.path.isdir(args.export_base):
        raise CommandError(f"--export-base not found: {args.export_base}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.model_config_file is not None:
        source = dict(
            model_config_file=args.model_config_file,
            model_config_file_poll_wait_s=args.model_config_file_poll_wait_seconds or 0.0,
            allow_version_labels_for_unavailable_models=args.allow_version_labels_for_unavailable_models,
        )
    else:
        source = dict(export_base=args.export_base, model_names=args.model_name)
    try:
        server = LocalModelServer(
            grpc_port=args.port, rest_port=args.rest_api_port,
            poll_interval_s=args.poll_seconds, host=args.host, max_request_bytes=args.max_request_bytes,
            grpc_max_threads=args.grpc_max_threads,
            rest_read_timeout_s=args.rest_read_timeout_seconds, prefer_tflite_model=args.prefer_tflite_model,
            prefer_openvino_model=args.prefer_openvino_model, openvino_threads=args.openvino_threads,
            request_logging=args.request_logging_config, **source,
        )
        # Before any model loads: TensorFlow reads the variable once (`albert_tf.export.onednn_weights`).
        frozen_weights = apply_frozen_weights(args.onednn_frozen_weights, server.manager.tensorflow_version_dirs())
        if args.no_batching:
            server.manager.batching = None
        elif args.no_length_grouping and server.manager.batching is not None:
            server.manager.batching = dataclasses.replace(server.manager.batching, length_grouping=False)
        server.start()
    except (ValueError, OSError) as e:
        raise CommandError(str(e)) from None
    print(
        f"serving {', '.join(server.manager.models)}: gRPC {args.host}:{server.grpc_port}, REST {args.host}:{server.rest_port}"
        f" (requests up to {server.max_request_bytes} bytes, {server.grpc_max_threads} gRPC threads); {frozen_weights}",
        flush=True,
    )
    try:
        server.wait()
    finally:
        server.stop()
    return 0
