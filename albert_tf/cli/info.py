"""`albert-tf info`: show a configuration (preset or albert_config.json) and its parameter counts."""

from __future__ import annotations

NAME = "info"
HELP = "Show an ALBERT configuration and its parameter counts for every sharing mode."


def add_arguments(parser):
    parser.add_argument("--config", default="base-v2", help="preset name (e.g. base-v2) or path to albert_config.json")
    parser.add_argument("--build", action="store_true", help="also build the Keras encoder and count its weights")


def run(args) -> int:
    from albert_tf.cli import CommandError
    from albert_tf.config import SHARING_MODES, ConfigError, count_parameters, load_config

    try:
        config = load_config(args.config)
    except ConfigError as e:
        raise CommandError(str(e)) from None
    print(config.to_json_string(), end="")
    print("\nparameters (encoder + pooler):")
    for sharing in SHARING_MODES:
        count = count_parameters(config.replace(sharing=sharing))
        marker = " <- this config" if sharing == config.sharing else ""
        print(f"  sharing={sharing:9s} {count:>13,d}  ({count / 1e6:.1f}M){marker}")
    if args.build:
        from albert_tf.modeling import AlbertEncoder

        encoder = AlbertEncoder.from_albert_config(config)
        print(f"built encoder: {encoder.count_params():,d} weights")
    return 0
