"""`albert-tf info`: show a configuration (preset or albert_config.json) and its parameter counts."""

from __future__ import annotations

NAME = "info"
HELP = "Show an ALBERT configuration and its parameter counts for every sharing mode."


def add_arguments(parser):
    parser.add_argument(
        "--config",
        default="base-v2",
        help="preset name (base-v2, ..., or the CPU sizes tiny and small) or path to albert_config.json",
    )
    parser.add_argument("--build", action="store_true", help="also build the Keras encoder and count its weights")
    parser.add_argument(
        "--list", action="store_true", help="list every preset: its shape, parameters and pretraining settings"
    )


def _pretraining_line(preset) -> str:
    return (
        f"length {preset.max_seq_length}, batch {preset.batch_size}, {preset.num_train_steps:,d} steps "
        f"({preset.num_warmup_steps:,d} warmup), LAMB lr {preset.learning_rate:g}"
    )


def _print_presets() -> None:
    from albert_tf.config import PRESETS, AlbertConfig, count_parameters, pretraining_preset

    header = f"{'preset':10s} {'E':>4s} {'H':>5s} {'L':>3s} {'heads':>5s} {'I':>6s} {'parameters':>13s}"
    print(f"{header}  albert-tf pretrain")
    for name in PRESETS:
        config = AlbertConfig.preset(name)
        print(
            f"{name:10s} {config.embedding_size:4d} {config.hidden_size:5d} {config.num_hidden_layers:3d} "
            f"{config.num_attention_heads:5d} {config.intermediate_size:6d} {count_parameters(config):13,d}  "
            f"{_pretraining_line(pretraining_preset(name))}"
        )
    print("parameters: encoder + pooler at vocab_size 30000; `pretrain` sizes tiny and small to the data's vocabulary")


def run(args) -> int:
    from albert_tf.cli import CommandError
    from albert_tf.config import PRESETS, SHARING_MODES, ConfigError, count_parameters, load_config, pretraining_preset

    if args.list:
        _print_presets()
        return 0
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
    if args.config in PRESETS:
        print(f"\nalbert-tf pretrain --config {args.config}: {_pretraining_line(pretraining_preset(args.config))}")
    if args.build:
        from albert_tf.modeling import AlbertEncoder

        encoder = AlbertEncoder.from_albert_config(config)
        print(f"built encoder: {encoder.count_params():,d} weights")
    return 0
