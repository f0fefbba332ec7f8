"""Keras's `Model.quantize` on albert_tf models: refused, with the int8 path that works named.

Why refused: Keras 3 quantizes each `Dense` in place, but the encoder's blocks run their dense
layers as one MatMul + BiasAdd on the kernels (`albert_tf.modeling.dense_rows`, for Grappler's
oneDNN fusions), and Keras's int8 call on TensorFlow's CPU kernels measured 0.35x the float32
speed. A quantized Dense reached from `dense_rows` now runs its own quantized call (so a layer
quantized one by one still gives its mode's answers), but the supported int8 model is the LiteRT
one: `export_saved_model(..., tflite="dynamic-int8")` / `albert-tf export --tflite dynamic-int8`
(`albert_tf.export.tflite`: dynamic-range int8 with XNNPACK, pooled cosine >= 0.999 to float32,
about 4x smaller and faster on CPU).

`RefuseKerasQuantize` is mixed into `AlbertEncoder`, `AlbertPretrainer`, the id-level task models
(`AlbertTaskModel`) and the raw-text models (`AlbertTextTask`).
"""

from __future__ import annotations


class QuantizationError(ValueError):
    """`quantize()` called on an albert_tf model."""


def refusal_message(model_type: str, mode) -> str:
    return (
        f"{model_type}.quantize({mode!r}) is not supported: Keras-quantized ALBERT runs at 0.35x float32 speed on "
        "TensorFlow's CPU kernels; for int8 export a LiteRT model instead: "
        "export_saved_model(..., tflite='dynamic-int8') or `albert-tf export --tflite dynamic-int8`"
    )


class RefuseKerasQuantize:
    """Mixin (before `keras.Model`): `quantize(mode, ...)` raises `QuantizationError`, whatever the mode."""

    def quantize(self, mode=None, *args, **kwargs):
        raise QuantizationError(refusal_message(type(self).__name__, mode))
