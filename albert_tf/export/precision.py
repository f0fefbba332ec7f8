"""The precision an export computes in: `float32` or `mixed_bfloat16`, whatever the model was trained in.

`model_precision` reads it from the layers (a model fine-tuned in bf16 sets it on its layers, not
on the encoder alone); `with_precision` gives the same weights in a model of the asked precision,
for `export_saved_model(precision=...)` and `albert-tf export --precision`.
"""

from __future__ import annotations

from typing import Optional

FLOAT32 = "float32"
MIXED_BFLOAT16 = "mixed_bfloat16"
PRECISIONS = (FLOAT32, MIXED_BFLOAT16)
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


def _encoder_in(encoder, precision: str):
    from albert_tf.modeling import ENCODER_INPUTS, AlbertEncoder

    converted = AlbertEncoder.from_albert_config(encoder.to_albert_config(), dtype=precision, name=encoder.name)
    converted(_ids(ENCODER_INPUTS), training=False)
    converted.set_weights(encoder.get_weights())
    return converted


def with_precision(model, precision: Optional[str]):
    """`model` (an `AlbertEncoder` or an id-level task model) computing in `precision`: itself when
    it already does (or `precision` is None), else a copy with the same weights, the variables
    float32 and the layers' compute dtype `precision`'s."""
    from albert_tf.modeling import ENCODER_INPUTS, AlbertEncoder

    if precision is None or model_precision(model) == check_precision(precision):
        return model
    if isinstance(model, AlbertEncoder):
        return _encoder_in(model, precision)
    if not hasattr(model, "encoder") or not hasattr(model, "compute_task_loss"):
        raise ValueError(f"precision is for encoders and task models, not a {type(model).__name__}")
    converted = type(model).from_config({**model.get_config(), "encoder": _encoder_in(model.encoder, precision)})
    converted(_ids((*ENCODER_INPUTS, "p_mask")), training=False)  # SQuAD v2's head reads `p_mask` too
    # The same class and config: the same weights in the same order.
    converted.set_weights(model.get_weights())
    return converted
