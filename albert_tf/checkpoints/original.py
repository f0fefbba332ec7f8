"""Interop with the original google-research/albert TF1 checkpoints: names, loading, saving.

The original code stores its weights in a TF1 (V2 bundle) checkpoint under the variable scopes of
its `modeling.py`; `original_variable_map` pairs each of those names with one of our Keras
variables (the one table of this module). Dense kernels are [in, out] in both, so every value is
copied unchanged, which makes a save -> load round trip bitwise exact.

* `load_original_checkpoint` reads a checkpoint (a prefix, a directory, or a TF-Hub module's
  `variables/variables` with its `module/` scope), skips optimizer slots and bookkeeping, and
  reports every missing, unexpected and mis-shaped variable by name (`LoadReport`); `strict=True`
  raises `CheckpointError` before assigning anything.
* `assign_original_weights` is the single assignment path, also used by the Hugging Face importer
  after it has translated its names.
* `save_original_checkpoint` writes a checkpoint that `tf.train.load_checkpoint` and TF1's
  `tf.compat.v1.train.Saver` restore, atomically, and points the directory's `checkpoint` state
  file at it.
* `config_from_original_checkpoint` infers the sizes when no `albert_config.json` is at hand.

Beyond the original, sharing modes other than "all" keep their unshared parts under
`bert/encoder/transformer/layer_{l}/inner_group_{k}/...` with the same sub-names.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from google.protobuf import text_format

from albert_tf import file_io
from albert_tf.config import AlbertConfig, ConfigError

TFHUB_PREFIX = "module/"
DEFAULT_CHECKPOINT_NAME = "model.ckpt"

EMBEDDINGS_SCOPE = "bert/embeddings"
TRANSFORMER_SCOPE = "bert/encoder/transformer"
PROJECTION_SCOPE = "bert/encoder/embedding_hidden_mapping_in"
POOLER_SCOPE = "bert/pooler/dense"
MLM_SCOPE = "cls/predictions"
SOP_SCOPE = "cls/seq_relationship"

# Sub-names of one block part, relative to `.../group_{g}/inner_group_{k}` (or `layer_{l}/...`).
_ATTENTION_VARIABLES: Tuple[Tuple[str, Callable], ...] = (
    ("attention_1/self/query/kernel", lambda b: b.query.kernel),
    ("attention_1/self/query/bias", lambda b: b.query.bias),
    ("attention_1/self/key/kernel", lambda b: b.key.kernel),
    ("attention_1/self/key/bias", lambda b: b.key.bias),
    ("attention_1/self/value/kernel", lambda b: b.value.kernel),
    ("attention_1/self/value/bias", lambda b: b.value.bias),
    ("attention_1/output/dense/kernel", lambda b: b.output_dense.kernel),
    ("attention_1/output/dense/bias", lambda b: b.output_dense.bias),
    ("LayerNorm/gamma", lambda b: b.layer_norm.gamma),
    ("LayerNorm/beta", lambda b: b.layer_norm.beta),
)
_FFN_VARIABLES: Tuple[Tuple[str, Callable], ...] = (
    ("ffn_1/intermediate/dense/kernel", lambda b: b.intermediate.kernel),
    ("ffn_1/intermediate/dense/bias", lambda b: b.intermediate.bias),
    ("ffn_1/intermediate/output/dense/kernel", lambda b: b.output_dense.kernel),
    ("ffn_1/intermediate/output/dense/bias", lambda b: b.output_dense.bias),
    ("LayerNorm_1/gamma", lambda b: b.layer_norm.gamma),
    ("LayerNorm_1/beta", lambda b: b.layer_norm.beta),
)

# Our block names (see `albert_tf.modeling.attention_layer_name`) -> their original scope.
_BLOCK_NAME = re.compile(r"^(group|layer)_(\d+)_inner_group_(\d+)_(attention_1|ffn_1)$")

# Last path components of optimizer slots (TF1 Adam/Momentum/..., ALBERT's AdamWeightDecay and
# LAMB) and exact names of training bookkeeping: never model weights, so skipped on load.
_SLOT_SUFFIXES = frozenset(
    {
        "adam_m", "adam_v", "lamb_m", "lamb_v", "Adam", "Adam_1", "LAMB", "LAMB_1", "Momentum",
        "Adagrad", "AdagradDA", "RMSProp", "RMSProp_1", "Ftrl", "Ftrl_1", "Adadelta", "Adadelta_1",
        "ExponentialMovingAverage", "accumulator", "gradient_accumulator",
    }
)
_BOOKKEEPING_NAMES = frozenset(
    {
        "global_step", "beta1_power", "beta2_power", "good_steps", "loss_scale", "current_loss_scale",
        "_CHECKPOINTABLE_OBJECT_GRAPH",
    }
)


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or whose variables do not fit the model."""


@dataclasses.dataclass
class LoadReport:
    """What loading a checkpoint did, variable by variable (names as the source spells them).

    Attributes:
        loaded: variables assigned to the model.
        missing: variables the model has that the source lacks.
        unexpected: source variables that correspond to nothing in the model.
        shape_mismatches: `(name, source_shape, model_shape)` for variables present in both.
        conflicts: `(name, reason)` for values that cannot be used (wrong dtype, tied copies that
            disagree).
        skipped: optimizer slots and training bookkeeping, ignored on purpose.
        unused: known ALBERT head variables (`cls/...`) of heads that were not passed in.
    """

    loaded: List[str] = dataclasses.field(default_factory=list)
    missing: List[str] = dataclasses.field(default_factory=list)
    unexpected: List[str] = dataclasses.field(default_factory=list)
    shape_mismatches: List[Tuple[str, Tuple[int, ...], Tuple[int, ...]]] = dataclasses.field(default_factory=list)
    conflicts: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    skipped: List[str] = dataclasses.field(default_factory=list)
    unused: List[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every model variable was loaded and nothing in the source was left unexplained."""
        return not (self.missing or self.unexpected or self.shape_mismatches or self.conflicts)

    def problems(self) -> List[str]:
        """One line per problem, naming the variable."""
        lines = [f"missing: {name}" for name in self.missing]
        lines += [f"unexpected: {name}" for name in self.unexpected]
        lines += [
            f"shape mismatch: {name}: source {list(src)} vs model {list(dst)}"
            for name, src, dst in self.shape_mismatches
        ]
        lines += [f"conflict: {name}: {reason}" for name, reason in self.conflicts]
        return lines

    def summary(self) -> str:
        head = (
            f"loaded {len(self.loaded)}, missing {len(self.missing)}, unexpected {len(self.unexpected)}, "
            f"shape mismatches {len(self.shape_mismatches)}, conflicts {len(self.conflicts)}, "
            f"skipped {len(self.skipped)}, unused head variables {len(self.unused)}"
        )
        return "\n".join([head] + ["  " + line for line in self.problems()])


# --- the name table ---------------------------------------------------------------------------


def _block_scope(block_name: str) -> str:
    match = _BLOCK_NAME.match(block_name)
    if not match:
        raise ValueError(f"unrecognised ALBERT block name {block_name!r}")
    kind, index, inner, _ = match.groups()
    return f"{TRANSFORMER_SCOPE}/{kind}_{index}/inner_group_{inner}"


def _ensure_heads_built(encoder, mlm_head, sop_head) -> None:
    # Heads are built lazily on first call; loading must not depend on having run them.
    if mlm_head is not None and not mlm_head.built:
        mlm_head.build((None, None, encoder.hidden_size))
    if sop_head is not None and not sop_head.built:
        sop_head.build((None, encoder.hidden_size))


def original_variable_map(encoder, mlm_head=None, sop_head=None) -> Dict[str, Any]:
    """Original checkpoint name -> our Keras variable, for the encoder and the heads given.

    Args:
        encoder: an `AlbertEncoder`.
        mlm_head: optional `AlbertMLMHead` (`cls/predictions/...`); its logits are tied to the
            encoder's word embeddings, so it has no table of its own.
        sop_head: optional `AlbertSOPHead` (`cls/seq_relationship/...`).

    Returns:
        An ordered dict, embeddings first, then blocks in execution order, pooler, heads.
    """
    _ensure_heads_built(encoder, mlm_head, sop_head)
    emb = encoder.embeddings
    table: Dict[str, Any] = {
        f"{EMBEDDINGS_SCOPE}/word_embeddings": emb.word_embeddings,
        f"{EMBEDDINGS_SCOPE}/token_type_embeddings": emb.token_type_embeddings,
        f"{EMBEDDINGS_SCOPE}/position_embeddings": emb.position_embeddings,
        f"{EMBEDDINGS_SCOPE}/LayerNorm/gamma": emb.layer_norm.gamma,
        f"{EMBEDDINGS_SCOPE}/LayerNorm/beta": emb.layer_norm.beta,
    }
    if encoder.embedding_hidden_mapping_in is not None:
        table[f"{PROJECTION_SCOPE}/kernel"] = encoder.embedding_hidden_mapping_in.kernel
        table[f"{PROJECTION_SCOPE}/bias"] = encoder.embedding_hidden_mapping_in.bias
    for a_name, f_name in encoder.schedule:
        for block_name, block, variables in (
            (a_name, encoder.attention_blocks[a_name], _ATTENTION_VARIABLES),
            (f_name, encoder.ffn_blocks[f_name], _FFN_VARIABLES),
        ):
            scope = _block_scope(block_name)
            for sub_name, get in variables:
                # A shared block recurs in the schedule; setdefault keeps the first position.
                table.setdefault(f"{scope}/{sub_name}", get(block))
    table[f"{POOLER_SCOPE}/kernel"] = encoder.pooler.kernel
    table[f"{POOLER_SCOPE}/bias"] = encoder.pooler.bias
    if mlm_head is not None:
        table[f"{MLM_SCOPE}/transform/dense/kernel"] = mlm_head.dense.kernel
        table[f"{MLM_SCOPE}/transform/dense/bias"] = mlm_head.dense.bias
        table[f"{MLM_SCOPE}/transform/LayerNorm/gamma"] = mlm_head.layer_norm.gamma
        table[f"{MLM_SCOPE}/transform/LayerNorm/beta"] = mlm_head.layer_norm.beta
        table[f"{MLM_SCOPE}/output_bias"] = mlm_head.output_bias
    if sop_head is not None:
        table[f"{SOP_SCOPE}/output_weights"] = sop_head.output_weights
        table[f"{SOP_SCOPE}/output_bias"] = sop_head.output_bias
    return table


def is_optimizer_or_bookkeeping(name: str) -> bool:
    """True for optimizer slots (`.../adam_m`, `.../Adam_1`, ...) and names like `global_step`."""
    last = name.split("/")[-1]
    if name in _BOOKKEEPING_NAMES or last in _BOOKKEEPING_NAMES:
        return True
    # TF1 optimizers name slots `<var>/<Slot>`; a second optimizer instance gets `<Slot>_<n>`.
    return "/" in name and (last in _SLOT_SUFFIXES or re.sub(r"_\d+$", "", last) in _SLOT_SUFFIXES)


# --- the single assignment path ---------------------------------------------------------------


def assign_original_weights(
    values: Mapping[str, np.ndarray],
    encoder,
    mlm_head=None,
    sop_head=None,
    strict: bool = True,
    *,
    skipped: Sequence[str] = (),
    unexpected: Sequence[str] = (),
    conflicts: Sequence[Tuple[str, str]] = (),
    display_name: Optional[Callable[[str], str]] = None,
    source: str = "checkpoint",
) -> LoadReport:
    """Assigns weights keyed by original names to the model; the one place that writes variables.

    Everything is checked before anything is assigned, so with `strict=True` a failed load leaves
    the model untouched.

    Args:
        values: original name -> array.
        encoder, mlm_head, sop_head: the model (see `original_variable_map`).
        strict: raise `CheckpointError` listing every problem instead of loading what matches.
        skipped, unexpected, conflicts: findings of the caller's own reading step (e.g. names a
            translator could not map), merged into the report under their names.
        display_name: how to name an original name in the report (a translator's own names).
        source: what `values` came from, for error messages.

    Returns:
        The `LoadReport`.

    Raises:
        CheckpointError: with `strict=True`, if the report has any problem.
    """
    name_of = display_name or (lambda n: n)
    targets = original_variable_map(encoder, mlm_head, sop_head)
    report = LoadReport(skipped=list(skipped), unexpected=list(unexpected), conflicts=list(conflicts))
    plan = []
    for name, value in values.items():
        if name in targets:
            continue
        if (name.startswith(MLM_SCOPE + "/") and mlm_head is None) or (
            name.startswith(SOP_SCOPE + "/") and sop_head is None
        ):
            report.unused.append(name_of(name))
        else:
            report.unexpected.append(name_of(name))
    for name, variable in targets.items():
        if name not in values:
            report.missing.append(name_of(name))
            continue
        value = values[name]
        model_shape = tuple(int(d) for d in variable.shape)
        src_shape = tuple(int(d) for d in np.shape(value))
        if src_shape != model_shape:
            report.shape_mismatches.append((name_of(name), src_shape, model_shape))
            continue
        array = np.asarray(value)
        if not (np.issubdtype(array.dtype, np.floating) or array.dtype.name == "bfloat16"):
            report.conflicts.append((name_of(name), f"dtype {array.dtype} is not a floating-point type"))
            continue
        plan.append((name, variable, array))
    if strict and not report.ok:
        raise CheckpointError(
            f"{source} does not match the model ({len(report.problems())} problem(s); "
            f"pass strict=False to load what matches):\n  " + "\n  ".join(report.problems())
        )
    for name, variable, array in plan:
        variable.assign(array if array.dtype.name == variable.dtype else tf.cast(array, variable.dtype))
        report.loaded.append(name_of(name))
    return report


# --- reading ----------------------------------------------------------------------------------


def resolve_checkpoint_prefix(path: str | os.PathLike) -> str:
    """The checkpoint prefix that `path` designates.

    Args:
        path: a prefix (`dir/model.ckpt-1000`), one of its files (`.index`, `.data-*`), or a
            directory: its `checkpoint` state file's latest entry, else its single `*.index`.

    Raises:
        CheckpointError: if no checkpoint is there, or a directory holds several and no state file.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        indexes = sorted(glob.glob(os.path.join(glob.escape(path), "*.index")))
        if not indexes:
            raise CheckpointError(f"no checkpoint in directory {path} (no `checkpoint` file, no *.index file)")
        if len(indexes) > 1:
            names = ", ".join(os.path.basename(p)[: -len(".index")] for p in indexes)
            raise CheckpointError(
                f"directory {path} holds several checkpoints ({names}) and no `checkpoint` state file "
                f"naming the latest; pass a prefix"
            )
        return indexes[0][: -len(".index")]
    match = re.match(r"^(.*)\.(index|data-\d{5}-of-\d{5})$", path)
    if match:
        path = match.group(1)
    if not os.path.exists(path + ".index"):
        raise CheckpointError(f"no checkpoint at {path} ({path}.index does not exist)")
    return path


def _open_reader(prefix: str):
    try:
        return tf.train.load_checkpoint(prefix)
    except Exception as e:  # TF raises several error types (OpError, DataLossError, ...) for bad files.
        raise CheckpointError(f"cannot read checkpoint {prefix}: {type(e).__name__}: {e}") from None


def _model_names(names: Iterable[str]) -> Tuple[List[str], List[str], str]:
    """Splits checkpoint names into (weights, skipped) and finds the TF-Hub prefix if any."""
    names = sorted(names)
    kept = [n for n in names if not is_optimizer_or_bookkeeping(n)]
    skipped = [n for n in names if is_optimizer_or_bookkeeping(n)]
    # A TF-Hub module's variables all live under `module/`; strip it only if nothing else is there.
    prefix = TFHUB_PREFIX if kept and all(n.startswith(TFHUB_PREFIX) for n in kept) else ""
    return kept, skipped, prefix


def _check_not_object_based(prefix: str, names: Sequence[str]) -> None:
    if not any(n.startswith(("bert/", "cls/")) for n in names) and any("/.ATTRIBUTES/" in n for n in names):
        raise CheckpointError(
            f"{prefix} is a TF2 object-based checkpoint (tf.train.Checkpoint), not an original TF1 ALBERT checkpoint"
        )


def _read(path) -> Tuple[Dict[str, np.ndarray], List[str], str]:
    prefix = resolve_checkpoint_prefix(path)
    reader = _open_reader(prefix)
    kept, skipped, hub_prefix = _model_names(reader.get_variable_to_shape_map())
    _check_not_object_based(prefix, kept)
    values = {}
    for name in kept:
        try:
            values[name[len(hub_prefix) :]] = reader.get_tensor(name)
        except Exception as e:  # a truncated data file surfaces here, with various TF error types.
            raise CheckpointError(
                f"checkpoint {prefix} is corrupt or truncated: cannot read {name!r}: {type(e).__name__}: {e}"
            ) from None
    return values, skipped, prefix


def _read_shapes(path) -> Tuple[Dict[str, Tuple[int, ...]], str]:
    """Variable shapes (TF-Hub prefix removed, slots left out) without reading any values."""
    prefix = resolve_checkpoint_prefix(path)
    shape_map = _open_reader(prefix).get_variable_to_shape_map()
    kept, _, hub_prefix = _model_names(shape_map)
    _check_not_object_based(prefix, kept)
    return {name[len(hub_prefix) :]: tuple(shape_map[name]) for name in kept}, prefix


def read_original_variables(path: str | os.PathLike, include_skipped: bool = False) -> Dict[str, np.ndarray]:
    """The variables of an original checkpoint as NumPy arrays, keyed by name.

    Args:
        path: a checkpoint prefix, file or directory (see `resolve_checkpoint_prefix`).
        include_skipped: also return optimizer slots and bookkeeping (under their raw names).

    A TF-Hub `module/` scope is removed from the names.
    """
    values, skipped, prefix = _read(path)
    if include_skipped:
        reader = _open_reader(prefix)
        for name in skipped:
            values[name] = reader.get_tensor(name)
    return values


def load_original_checkpoint(
    path: str | os.PathLike, encoder, mlm_head=None, sop_head=None, strict: bool = True
) -> LoadReport:
    """Loads an original (or TF-Hub, or our own) TF1 ALBERT checkpoint into the model.

    Args:
        path: a checkpoint prefix, one of its files, or a directory (see `resolve_checkpoint_prefix`).
        encoder: an `AlbertEncoder` whose config matches the checkpoint (any G, K and sharing).
        mlm_head, sop_head: optional heads to load `cls/predictions` and `cls/seq_relationship` into;
            when not given, those variables are listed as `unused`, not as errors.
        strict: raise `CheckpointError` naming every missing, unexpected or mis-shaped variable
            instead of loading what matches.

    Returns:
        The `LoadReport`; `skipped` lists the optimizer slots and bookkeeping left out.

    Example:

    >>> report = load_original_checkpoint("albert_base/model.ckpt-best", encoder)  # doctest: +SKIP
    >>> report.ok  # doctest: +SKIP
    True
    """
    values, skipped, prefix = _read(path)
    return assign_original_weights(
        values, encoder, mlm_head, sop_head, strict, skipped=skipped, source=f"checkpoint {prefix}"
    )


# --- config inference -------------------------------------------------------------------------


def config_from_original_checkpoint(
    path: str | os.PathLike,
    num_attention_heads: int,
    num_hidden_layers: Optional[int] = None,
    **overrides,
) -> AlbertConfig:
    """Infers an `AlbertConfig` from variable names and shapes.

    vocab_size, embedding_size, hidden_size, intermediate_size, type_vocab_size,
    max_position_embeddings, num_hidden_groups, inner_group_num and sharing come from the
    checkpoint; the head count does not show in any shape, and with the original sharing the layer
    count does not either, so those are arguments.

    Args:
        path: a checkpoint prefix, file or directory.
        num_attention_heads: N (e.g. 12 for base, 64 for xxlarge).
        num_hidden_layers: L; may be omitted only if the checkpoint has unshared `layer_{l}` scopes.
        **overrides: other `AlbertConfig` fields (hidden_act, dropout, ...).

    Raises:
        CheckpointError: if the checkpoint lacks the variables the sizes are read from.
    """
    shapes, prefix = _read_shapes(path)

    def shape(name):
        if name not in shapes:
            raise CheckpointError(f"checkpoint {prefix} has no {name}; cannot infer the config")
        return shapes[name]

    vocab_size, embedding_size = shape(f"{EMBEDDINGS_SCOPE}/word_embeddings")
    type_vocab_size = shape(f"{EMBEDDINGS_SCOPE}/token_type_embeddings")[0]
    max_positions = shape(f"{EMBEDDINGS_SCOPE}/position_embeddings")[0]
    scope_re = re.compile(rf"^{TRANSFORMER_SCOPE}/(group|layer)_(\d+)/inner_group_(\d+)/(attention_1|ffn_1|LayerNorm_1)/")
    seen = {"attention_1": set(), "ffn_1": set()}
    inner = set()
    for name in shapes:
        match = scope_re.match(name)
        if match:
            kind, index, k, part = match.groups()
            part = "ffn_1" if part == "LayerNorm_1" else part
            seen[part].add((kind, int(index)))
            inner.add(int(k))
    if not seen["attention_1"] or not seen["ffn_1"]:
        raise CheckpointError(f"checkpoint {prefix} has no transformer blocks under {TRANSFORMER_SCOPE}/")
    attention_kinds = {kind for kind, _ in seen["attention_1"]}
    ffn_kinds = {kind for kind, _ in seen["ffn_1"]}
    if len(attention_kinds) != 1 or len(ffn_kinds) != 1:
        raise CheckpointError(f"checkpoint {prefix} mixes group_ and layer_ scopes within one block part")
    sharing = {
        ("group", "group"): "all",
        ("group", "layer"): "attention",
        ("layer", "group"): "ffn",
        ("layer", "layer"): "none",
    }[(attention_kinds.pop(), ffn_kinds.pop())]
    groups = {i for kind, i in seen["attention_1"] | seen["ffn_1"] if kind == "group"}
    layers = {i for kind, i in seen["attention_1"] | seen["ffn_1"] if kind == "layer"}
    if num_hidden_layers is None:
        if not layers:
            raise CheckpointError(
                f"checkpoint {prefix} shares all layers, so the layer count is not in it: pass num_hidden_layers"
            )
        num_hidden_layers = max(layers) + 1
    num_groups = max(groups) + 1 if groups else 1
    first = f"{TRANSFORMER_SCOPE}/" + ("group_0" if sharing in ("all", "attention") else "layer_0") + "/inner_group_0"
    hidden_size = shape(f"{first}/attention_1/self/query/kernel")[1]
    ffn_first = f"{TRANSFORMER_SCOPE}/" + ("group_0" if sharing in ("all", "ffn") else "layer_0") + "/inner_group_0"
    intermediate_size = shape(f"{ffn_first}/ffn_1/intermediate/dense/kernel")[1]
    fields = dict(
        vocab_size=int(vocab_size),
        embedding_size=int(embedding_size),
        hidden_size=int(hidden_size),
        num_hidden_layers=int(num_hidden_layers),
        num_hidden_groups=int(num_groups),
        inner_group_num=max(inner) + 1,
        num_attention_heads=int(num_attention_heads),
        intermediate_size=int(intermediate_size),
        max_position_embeddings=int(max_positions),
        type_vocab_size=int(type_vocab_size),
        sharing=sharing,
    )
    fields.update(overrides)
    try:
        return AlbertConfig(**fields)
    except ConfigError as e:
        raise CheckpointError(f"checkpoint {prefix}: inferred config is invalid: {e}") from None


# --- writing ----------------------------------------------------------------------------------


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _bundle_files(prefix: str) -> List[str]:
    return [prefix + ".index"] + sorted(glob.glob(glob.escape(prefix) + ".data-?????-of-?????"))


def _update_state_file(directory: str, basename: str) -> None:
    """Points `directory/checkpoint` at `basename`, keeping the earlier entries that still exist."""
    directory = os.path.abspath(directory)
    previous = []
    state = tf.train.get_checkpoint_state(directory)
    if state is not None:
        for p in state.all_model_checkpoint_paths:
            rel = os.path.relpath(p, directory) if os.path.isabs(p) else p
            if rel != basename and os.path.exists(os.path.join(directory, rel) + ".index"):
                previous.append(rel)
    # With an absolute directory the proto keeps relative names, so the folder can be moved.
    proto = tf.compat.v1.train.generate_checkpoint_state_proto(
        directory, basename, all_model_checkpoint_paths=previous + [basename]
    )
    file_io.atomic_write_text(os.path.join(directory, "checkpoint"), text_format.MessageToString(proto))


def save_original_checkpoint(path_prefix: str | os.PathLike, encoder, mlm_head=None, sop_head=None) -> str:
    """Writes the model as a TF1 checkpoint with exactly the original variable names.

    Floating-point weights are stored as float32 (what the original code declares), which is
    lossless for float32, float16 and bfloat16 variables. The write is atomic: the bundle is
    written under a temporary prefix in the same directory and renamed into place, `.index` last
    (a prefix without its `.index` is no checkpoint), then the `checkpoint` state file is updated
    so that `tf.train.latest_checkpoint(directory)` returns the new prefix.

    Args:
        path_prefix: e.g. `out/model.ckpt-1000`; an existing directory means `<dir>/model.ckpt`.
        encoder, mlm_head, sop_head: the model (see `original_variable_map`).

    Returns:
        The checkpoint prefix written.
    """
    prefix = os.fspath(path_prefix)
    if os.path.isdir(prefix):
        prefix = os.path.join(prefix, DEFAULT_CHECKPOINT_NAME)
    directory, basename = os.path.split(os.path.abspath(prefix))
    if basename == "checkpoint":
        raise ValueError("the checkpoint prefix cannot be `checkpoint`: that is the state file's name")
    os.makedirs(directory, exist_ok=True)
    table = original_variable_map(encoder, mlm_head, sop_head)
    names = list(table)
    tensors = []
    for name in names:
        value = np.asarray(table[name].numpy())
        if value.dtype != np.float32:
            value = value.astype(np.float32)
        tensors.append(value)
    tmp_prefix = file_io.temp_path(os.path.join(directory, basename))
    final = os.path.join(directory, basename)
    try:
        tf.raw_ops.SaveV2(
            prefix=tmp_prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors
        )
        # An old index left beside new data would describe the wrong bytes: drop it (and any old shards) first.
        for old in _bundle_files(final):
            _remove_quietly(old)
        tmp_files = _bundle_files(tmp_prefix)
        for tmp_file in tmp_files[1:] + tmp_files[:1]:
            file_io.commit(tmp_file, final + tmp_file[len(tmp_prefix) :])
    finally:
        for leftover in _bundle_files(tmp_prefix):
            _remove_quietly(leftover)
    _update_state_file(directory, basename)
    return final
