"""The precision an export computes in: `float32` or `mixed_bfloat16`, whatever the model was trained in.

`model_precision` reads it from the layers (a model fine-tuned in bf16 sets it on its layers, not
on the encoder alone); `with_precision` gives the same weights in a model of the asked precision;
`export_form` the model `export_saved_model(precision=...)` and `albert-tf export --precision` trace.

The exported bf16 graph is not Keras's `mixed_bfloat16` (float32 variables cast to bf16 at every
read: with ALBERT's sharing each shared weight once per layer it serves, 68 Casts of variable
reads in an ALBERT-base graph) but `AlbertEncoder(dtype="float32", matmul_dtype="bfloat16")`: the
dense weights of the blocks are bf16 variables, read as they are stored; LayerNorm (and the
residual stream it produces), softmax, embeddings, pooler and heads stay float32, as PyTorch's
autocast runs them. `variable_dtypes` counts the saved variables by dtype for export.json.
"""

from __future__ import annotations

from typing import Optional

FLOAT32 = "float32"
MIXED_BFLOAT16 = "mixed_bfloat16"
PRECISIONS = (FLOAT32, MIXED_BFLOAT16)
# The dtype the bf16 export stores its dense weights in.
BFLOAT16 = "bfloat16"
# The reload check compares a bf16 graph at bf16's precision: the session's optimizer may rewrite
# it otherwise than eager tf.function execution does.
TOLERANCES = {FLOAT32: {}, MIXED_BFLOAT16: dict(rtol=2e-2, atol=2e-2)}


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def model_precision(model) -> str:
    """`mixed_bfloat16` when any layer of `model` computes in bfloat16, else `float32`."""
    layers = [model, *model._flatten_layers(include_self=False)]
    return MIXED_BFLOAT16 if any(getattr(layer, "compute_dtype", None) == "bfloat16" for layer in layers) else FLOAT32


def _ids(names):
    """One row of the inputs `names`: a call builds a model's weights."""
    import numpy as np

    return {name: np.zeros((1, 8), "int32") for name in names}


def _encoder_in(encoder, precision: str, matmul_dtype: Optional[str] = None):
    from albert_tf.modeling import ENCODER_INPUTS, AlbertEncoder

    converted = AlbertEncoder.from_albert_config(
        encoder.to_albert_config(), dtype=precision, matmul_dtype=matmul_dtype, name=encoder.name
    )
    converted(_ids(ENCODER_INPUTS), training=False)
    converted.set_weights(encoder.get_weights())
    return converted


def _converted(model, precision: str, matmul_dtype: Optional[str] = None):
    """A copy of `model` (an `AlbertEncoder` or an id-level task model) with the same weights, its
    encoder built with `dtype=precision, matmul_dtype=matmul_dtype`."""
    from albert_tf.modeling import ENCODER_INPUTS, AlbertEncoder

    if isinstance(model, AlbertEncoder):
        return _encoder_in(model, precision, matmul_dtype)
    if not hasattr(model, "encoder") or not hasattr(model, "compute_task_loss"):
        raise ValueError(f"precision is for encoders and task models, not a {type(model).__name__}")
    encoder = _encoder_in(model.encoder, precision, matmul_dtype)
    converted = type(model).from_config({**model.get_config(), "encoder": encoder})
    converted(_ids((*ENCODER_INPUTS, "p_mask")), training=False)  # SQuAD v2's head reads `p_mask` too
    # The same class and config: the same weights in the same order (cast to each variable's dtype).
    converted.set_weights(model.get_weights())
    return converted


def with_precision(model, precision: Optional[str]):
    """`model` (an `AlbertEncoder` or an id-level task model) computing in `precision`: itself when
    it already does (or `precision` is None), else a copy with the same weights, the variables
    float32 and the layers' compute dtype `precision`'s."""
    if precision is None or model_precision(model) == check_precision(precision):
        return model
    return _converted(model, precision)


def export_form(model, precision: Optional[str]):
    """The model an export of `model` in `precision` (default: the model's own) traces: for
    `mixed_bfloat16` a copy with bf16 dense weights in float32 blocks (module docstring), else
    `with_precision(model, "float32")`."""
    precision = check_precision(precision or model_precision(model))
    if precision == FLOAT32:
        return with_precision(model, FLOAT32)
    encoder = getattr(model, "encoder", model)
    if getattr(encoder, "matmul_dtype", None) == BFLOAT16 and model_precision(encoder.embeddings) == FLOAT32:
        return model
    return _converted(model, FLOAT32, matmul_dtype=BFLOAT16)


def variable_dtypes(variables) -> dict:
    """`{dtype name: number of variables}` of `variables` (what a SavedModel stores)."""
    counts: dict = {}
    for variable in variables:
        name = variable.dtype.name if hasattr(variable.dtype, "name") else str(variable.dtype)
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))
