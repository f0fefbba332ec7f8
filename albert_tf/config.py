"""`AlbertConfig`: the model hyper-parameters, their validation, JSON I/O and the presets.

`PRESETS` holds the released sizes ("base-v2", ...) and two sizes that pretrain on a CPU ("tiny",
"small"); `PRETRAINING_PRESETS` holds the run settings `albert-tf pretrain` uses with them.

The field names are exactly those of the original `albert_config.json` files released with
google-research/albert, so those files load unchanged and files we write load in the original code.
One field is ours: `sharing`, which selects the cross-layer sharing strategy of the paper's
ablation (Table 4): "all" (the original scheme), "attention", "ffn" or "none".
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Dict, Mapping, Optional

from albert_tf import file_io

SHARING_MODES = ("all", "attention", "ffn", "none")

# "gelu" is the original's tanh approximation (Hugging Face calls it "gelu_new");
# "gelu_exact" is the erf form (Hugging Face's "gelu").
ACTIVATIONS = ("gelu", "gelu_new", "gelu_exact", "relu", "tanh", "swish", "silu", "linear")

_INT_FIELDS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "inner_group_num",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)


class ConfigError(ValueError):
    """An ALBERT configuration that cannot describe a model."""


@dataclasses.dataclass
class AlbertConfig:
    """Hyper-parameters of an ALBERT model, field for field as `albert_config.json`.

    Example:

    >>> config = AlbertConfig.preset("base-v2")
    >>> config.hidden_size, config.embedding_size
    (768, 128)
    >>> AlbertConfig(vocab_size=100, embedding_size=8, hidden_size=30, num_attention_heads=4)
    Traceback (most recent call last):
    ...
    albert_tf.config.ConfigError: hidden_size (30) is not a multiple of num_attention_heads (4)
    """

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    sharing: str = "all"
    # Keys of the JSON file that are not fields above (e.g. the original's `net_structure_type`,
    # `layers_to_keep`, `down_scale_factor`): kept so that writing the file back loses nothing.
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.validate()

    # --- validation -------------------------------------------------------------------------

    def validate(self) -> None:
        """Raises `ConfigError` naming the first impossible value."""
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                    setattr(self, name, value)
                else:
                    raise ConfigError(f"{name} must be an integer, got {value!r}")
            if value <= 0:
                raise ConfigError(f"{name} must be positive, got {value}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ConfigError(f"{name} must be a number, got {value!r}")
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {value}")
        if not isinstance(self.initializer_range, (int, float)) or not (
            self.initializer_range > 0 and math.isfinite(self.initializer_range)
        ):
            raise ConfigError(f"initializer_range must be a positive number, got {self.initializer_range!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) is not a multiple of "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.num_hidden_groups > self.num_hidden_layers or self.num_hidden_layers % self.num_hidden_groups:
            raise ConfigError(
                f"num_hidden_groups ({self.num_hidden_groups}) must divide "
                f"num_hidden_layers ({self.num_hidden_layers})"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"unknown hidden_act {self.hidden_act!r}; expected one of {', '.join(ACTIVATIONS)}")
        if self.sharing not in SHARING_MODES:
            raise ConfigError(f"unknown sharing {self.sharing!r}; expected one of {', '.join(SHARING_MODES)}")

    # --- dict / JSON ------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "AlbertConfig":
        """Builds a config from a mapping; unknown keys go to `extra`, missing keys take defaults.

        Of the keys the original files carry, only `vocab_size`, `hidden_size`,
        `num_hidden_layers` and `num_attention_heads` have no sensible default, so they must be present.
        """
        if not isinstance(values, Mapping):
            raise ConfigError(f"an ALBERT config must be a JSON object, got {type(values).__name__}")
        required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
        missing = [k for k in required if k not in values]
        if missing:
            raise ConfigError(f"config is missing required key(s): {', '.join(missing)}")
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: v for k, v in values.items() if k in names}
        extra = {k: v for k, v in values.items() if k not in names}
        extra.update(values.get("extra", {}) if isinstance(values.get("extra"), Mapping) else {})
        extra.pop("extra", None)
        # Original files for E == H models sometimes omit embedding_size (BERT-style configs).
        known.setdefault("embedding_size", known.get("hidden_size"))
        return cls(**known, extra=extra)

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object of `albert_config.json` (our `sharing` key included, extras kept)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "AlbertConfig":
        """Reads an `albert_config.json`; a malformed file raises `ConfigError` naming it."""
        try:
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path} is not valid JSON: {e}") from None
        try:
            return cls.from_dict(values)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None
        except TypeError as e:
            raise ConfigError(f"{path}: {e}") from None

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Writes the JSON atomically: an existing file is replaced only by a complete one."""
        file_io.atomic_write_text(os.fspath(path), self.to_json_string())

    def replace(self, **changes) -> "AlbertConfig":
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    # --- derived values -----------------------------------------------------------------------

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    # --- presets ------------------------------------------------------------------------------

    @classmethod
    def preset(cls, name: str, **overrides) -> "AlbertConfig":
        """One of `PRESETS` ("base-v2", "large-v1", ...), optionally with fields overridden."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; expected one of {', '.join(sorted(PRESETS))}")
        return cls(**{**PRESETS[name], **overrides})


def _sizes(hidden, layers, heads, intermediate):
    return dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=intermediate)


_SIZES = {
    "base": _sizes(768, 12, 12, 3072),
    "large": _sizes(1024, 24, 16, 4096),
    "xlarge": _sizes(2048, 24, 16, 8192),
    "xxlarge": _sizes(4096, 12, 64, 16384),
}


# Sizes that pretrain on a CPU in minutes to hours. The fine-tuning recipes
# (`albert_tf.training.recipes`, measured by `benchmarks/finetune_recipes.py`) and the State of the
# Union pretraining run (BENCHMARKS.md) use exactly these; both read them from here.
SMALL_SIZES: Dict[str, Dict[str, int]] = {
    "tiny": dict(embedding_size=64, **_sizes(128, 4, 2, 512)),
    "small": dict(embedding_size=128, **_sizes(256, 4, 4, 1024)),
}


def _make_presets() -> Dict[str, Dict[str, Any]]:
    presets = {}
    for size, shape in _SIZES.items():
        for version in ("v1", "v2"):
            # v1 used dropout 0.1 except for xxlarge, which the paper trained without dropout; v2 uses none.
            dropout = 0.1 if version == "v1" and size != "xxlarge" else 0.0
            presets[f"{size}-{version}"] = dict(
                vocab_size=30000,
                embedding_size=128,
                num_hidden_groups=1,
                inner_group_num=1,
                hidden_act="gelu",
                hidden_dropout_prob=dropout,
                attention_probs_dropout_prob=dropout,
                max_position_embeddings=512,
                type_vocab_size=2,
                initializer_range=0.02,
                **shape,
            )
    for size, shape in SMALL_SIZES.items():
        # No dropout, as v2; vocab_size 30000 is v2's, and `pretrain` replaces it with the data's vocabulary size.
        presets[size] = dict(
            vocab_size=30000,
            num_hidden_groups=1,
            inner_group_num=1,
            hidden_act="gelu",
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            max_position_embeddings=512,
            type_vocab_size=2,
            initializer_range=0.02,
            **shape,
        )
    return presets


PRESETS: Dict[str, Dict[str, Any]] = _make_presets()


@dataclasses.dataclass(frozen=True)
class PretrainingPreset:
    """The run settings `albert-tf pretrain` starts from for a model preset; flags override them.

    Attributes:
        max_seq_length: Sequence length of the records (data with `metadata.json` sets its own).
        max_predictions_per_seq: Masked positions per record (likewise).
        batch_size: Global batch size.
        num_train_steps: Optimizer updates.
        num_warmup_steps: Linear-warmup updates; a run of fewer steps keeps the same proportion.
        learning_rate: Peak LAMB learning rate.
        checkpoint_every_n_steps: Checkpoint interval in updates.
        keep_checkpoints: Newest checkpoints kept.
        vocab_from_data: Size the embeddings to the data's vocabulary (the CPU sizes, whose
            vocabulary is trained by the user) rather than the preset's (the released models'
            30,000-piece SentencePiece model).
    """

    max_seq_length: int
    max_predictions_per_seq: int
    batch_size: int
    num_train_steps: int
    num_warmup_steps: int
    learning_rate: float
    checkpoint_every_n_steps: int
    keep_checkpoints: int
    vocab_from_data: bool = False

    def warmup_for(self, num_train_steps: int) -> int:
        """Warmup updates for a run of `num_train_steps`: the preset's share, at most its count."""
        share = num_train_steps * self.num_warmup_steps // self.num_train_steps
        return min(self.num_warmup_steps, share)


PRETRAINING_PRESETS: Dict[str, PretrainingPreset] = {
    # The original run_pretraining.py flags of the released models.
    "paper": PretrainingPreset(512, 20, 4096, 125000, 3125, 0.00176, 5000, 5),
    # Measured on the State of the Union addresses (BENCHMARKS.md, "Pretraining on the State of the
    # Union corpus"): tiny 4,199 LAMB steps x 32 at peak 0.003 with 10 % warmup; small (there
    # with 6 layers) 4,000 x 32 at 0.005 with 400 warmup steps. About 20-30 minutes on 2 cores.
    "tiny": PretrainingPreset(128, 20, 32, 4000, 400, 0.003, 500, 3, vocab_from_data=True),
    "small": PretrainingPreset(128, 20, 32, 4000, 400, 0.005, 500, 3, vocab_from_data=True),
}


def pretraining_preset(config_name: Optional[str]) -> PretrainingPreset:
    """The pretraining run settings for a model preset name (the paper's for any other config)."""
    return PRETRAINING_PRESETS.get(config_name or "", PRETRAINING_PRESETS["paper"])


def load_config(name_or_path: str, **overrides) -> AlbertConfig:
    """A preset name ("base-v2") or a path to an `albert_config.json`."""
    if name_or_path in PRESETS:
        return AlbertConfig.preset(name_or_path, **overrides)
    if os.path.exists(name_or_path):
        config = AlbertConfig.from_json_file(name_or_path)
        return config.replace(**overrides) if overrides else config
    raise ConfigError(
        f"{name_or_path!r} is neither a preset ({', '.join(sorted(PRESETS))}) nor an existing config file"
    )


def count_parameters(config: AlbertConfig, include_pooler: bool = True) -> int:
    """Parameters of the encoder (and pooler) derived by hand from the equations.

    Used to check the model and to reproduce the paper's Table 1/Table 4 figures.
    """
    V, E, H, I = config.vocab_size, config.embedding_size, config.hidden_size, config.intermediate_size
    L, G, K = config.num_hidden_layers, config.num_hidden_groups, config.inner_group_num
    embeddings = (V + config.max_position_embeddings + config.type_vocab_size) * E + 2 * E
    projection = E * H + H if E != H else 0
    attention = 4 * (H * H + H) + 2 * H
    ffn = (H * I + I) + (I * H + H) + 2 * H
    n_attention = G * K if config.sharing in ("all", "attention") else L * K
    n_ffn = G * K if config.sharing in ("all", "ffn") else L * K
    pooler = H * H + H if include_pooler else 0
    return embeddings + projection + n_attention * attention + n_ffn * ffn + pooler
