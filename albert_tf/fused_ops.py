"""LayerNorm (with its residual add) and GELU as XLA-fused kernels with hand-written gradients.

Why: in a TensorFlow training step without whole-model XLA, every elementwise op of Keras's
`LayerNormalization` and of the tanh-approximate GELU (and of their autodiff gradients) is its own
kernel and its own pass over memory. On a CPU those passes cost as much as the matmuls in float32
and about twice as much in `mixed_bfloat16`, where oneDNN's AVX512_BF16 kernels make the matmuls cheap but
TensorFlow's bfloat16 elementwise kernels are slow. Here each op's forward and backward is one small
`jit_compile` function (XLA fuses it into one or two loops, computing in float32 whatever the input
dtype) joined by `tf.custom_gradient`.

The layers in `albert_tf.modeling` call these only when `training` is true and the model is not
compiled with XLA as a whole (XLA then fuses on its own), so exported SavedModels
and inference keep standard TensorFlow ops (TF Serving compatible, and open to Grappler's oneDNN
inference fusions).

For inference, `inference_layer_norm` writes the LayerNorm in the one form of core ops that
Grappler's oneDNN remapper turns into a single kernel, with no XLA and no custom op in the graph.

`set_enabled(False)` (or the environment variable `ALBERT_TF_FUSED_OPS=0`) switches back to the
plain Keras ops everywhere, in training and in inference, e.g. to compare speeds or to rule them out.

Example:

>>> import tensorflow as tf
>>> x = tf.random.normal([2, 3, 8])
>>> y = layer_norm(x, tf.ones([8]), tf.zeros([8]), epsilon=1e-12)
>>> bool(tf.reduce_max(tf.abs(tf.reduce_mean(y, -1))) < 1e-5)
True
"""

from __future__ import annotations

import contextlib
import functools
import math
import os

import tensorflow as tf

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715
_enabled = os.environ.get("ALBERT_TF_FUSED_OPS", "1").strip().lower() not in ("0", "false", "no", "off")


def set_enabled(enabled: bool) -> None:
    """Turns the fused training kernels on or off for models traced from now on."""
    global _enabled
    _enabled = bool(enabled)


def enabled() -> bool:
    """Whether the layers use the fused kernels when training."""
    return _enabled


# The inference graph's form for OpenVINO's converter (`openvino_form`). LayerNorms: OpenVINO turns
# `(x - mean) / sqrt(var + eps)` into one MVN op, but not Keras's folded form (x * inv + (beta -
# mean * inv)), which it runs as ten elementwise ops and two reductions per LayerNorm. Dense layers:
# on the 3-D hidden states, not on 2-D rows (`modeling.dense_rows`): a Reshape between a LayerNorm
# and the next MatMul keeps NNCF's int8 FakeQuantize from fusing into the LayerNorm, and the CPU
# plugin then runs it on its own, in f32, with a bf16 -> f32 reorder before it (38 of them in
# ALBERT-base: 0.8 ms of a 12 ms batch-1 request).
_openvino_form = False


@contextlib.contextmanager
def openvino_form():
    """In the block, inference graphs are traced in the form OpenVINO's converter fuses best."""
    global _openvino_form
    saved, _openvino_form = _openvino_form, True
    try:
        yield
    finally:
        _openvino_form = saved


def in_openvino_form() -> bool:
    """Whether inference graphs are traced in `openvino_form` now."""
    return _openvino_form


def mvn_layer_norm(x, gamma, beta, epsilon: float):
    """LayerNorm over the last axis written as `(x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma
    + beta`, statistics in float32: the pattern OpenVINO's MVN fusion recognises."""
    dtype = x.dtype
    x = tf.cast(x, tf.float32)
    # Axes as a list: MVN takes 1-D axes, and a scalar one fails the fused node's validation.
    centered = x - tf.reduce_mean(x, axis=[-1], keepdims=True)
    variance = tf.reduce_mean(centered * centered, axis=[-1], keepdims=True)
    y = centered / tf.sqrt(variance + epsilon)
    return tf.cast(y * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32), dtype)


def in_xla_context() -> bool:
    """Whether the graph being traced is compiled by XLA as a whole (`jit_compile=True`).

    There XLA fuses the plain ops itself, and a custom gradient would only stop it from fusing
    across the op's boundary (measured: 15% slower), so the layers skip the fused kernels.
    """
    try:
        from tensorflow.python.framework import ops as tf_ops
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # internal modules moved: assume no XLA context, the fused path is still correct
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf_ops.get_default_graph()))


@functools.lru_cache(maxsize=None)
def _reduce_with_matmul() -> bool:
    # On a CPU a row mean is faster as a matmul with a 1/n column (oneDNN/Eigen GEMV) than as
    # XLA's reduction loop. GPUs and TPUs may run float32 matmuls at reduced precision (TF32,
    # bfloat16 passes), so there the exact reduction is kept.
    return not (tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def _last_dim(x):
    return x.shape[-1] if x.shape[-1] is not None else tf.shape(x)[-1]


def _row_mean(v):
    """Mean over the last axis of a float32 [rows, n] tensor, as [rows, 1]."""
    if _reduce_with_matmul():
        n = _last_dim(v)
        return tf.matmul(v, tf.fill(tf.stack([n, 1]), 1.0 / tf.cast(n, tf.float32)))
    return tf.reduce_mean(v, axis=-1, keepdims=True)


@tf.function(jit_compile=True, autograph=False)
def _layer_norm_forward(x, residual, gamma, beta, epsilon):
    n = _last_dim(x)
    h = tf.reshape(tf.cast(x, tf.float32), [-1, n])
    if residual is not None:
        h = h + tf.reshape(tf.cast(residual, tf.float32), [-1, n])
    mean = _row_mean(h)
    centered = h - mean
    inv_std = tf.math.rsqrt(_row_mean(centered * centered) + epsilon)
    y = centered * inv_std * gamma + beta
    return tf.reshape(tf.cast(y, x.dtype), tf.shape(x)), h, mean, inv_std


@tf.function(jit_compile=True, autograph=False)
def _layer_norm_backward(h, mean, inv_std, gamma, dy):
    n = _last_dim(h)
    dy2 = tf.reshape(tf.cast(dy, tf.float32), [-1, n])
    x_hat = (h - mean) * inv_std
    d_gamma = tf.reduce_sum(dy2 * x_hat, axis=0)
    d_beta = tf.reduce_sum(dy2, axis=0)
    d_hat = dy2 * gamma
    dx = inv_std * (d_hat - _row_mean(d_hat) - x_hat * _row_mean(d_hat * x_hat))
    return tf.reshape(tf.cast(dx, dy.dtype), tf.shape(dy)), d_gamma, d_beta


def layer_norm(x, gamma, beta, epsilon: float, residual=None):
    """LayerNorm over the last axis of `x` (+ `residual`), computed in float32, returned in `x.dtype`.

    `gamma` and `beta` are float32 [n]. Same result as `keras.layers.LayerNormalization` applied to
    `x + residual` (the sum is taken in float32 here, not in `x.dtype`).
    """
    epsilon = tf.constant(epsilon, tf.float32)
    gamma = tf.convert_to_tensor(gamma, tf.float32)
    beta = tf.convert_to_tensor(beta, tf.float32)

    if residual is None:

        @tf.custom_gradient
        def fused(x, gamma, beta):
            y, h, mean, inv_std = _layer_norm_forward(x, None, gamma, beta, epsilon)
            return y, lambda dy: _layer_norm_backward(h, mean, inv_std, gamma, dy)

        return fused(x, gamma, beta)

    @tf.custom_gradient
    def fused_residual(x, residual, gamma, beta):
        y, h, mean, inv_std = _layer_norm_forward(x, residual, gamma, beta, epsilon)

        def grad(dy):
            dx, d_gamma, d_beta = _layer_norm_backward(h, mean, inv_std, gamma, dy)
            return dx, tf.cast(dx, residual.dtype), d_gamma, d_beta

        return y, grad

    return fused_residual(x, residual, gamma, beta)


def inference_layer_norm(x, gamma, beta, epsilon: float):
    """LayerNorm over the last axis of `x` (static size) for inference, in `x.dtype`.

    Written as Reshape to [1, rows, n, 1] -> `FusedBatchNormV3` (NCHW, batch statistics, unit scale,
    zero offset) -> Reshape -> Mul(gamma) -> AddV2(beta): the one sequence of core ops that
    Grappler's oneDNN remapper replaces with a single `_MklLayerNorm` kernel when the graph runs in a
    session (TF Serving, `SessionServable`). Keras's own layer is seven elementwise ops and two
    reductions; in mixed bfloat16 on the AVX512_BF16 CPU here the fused kernel takes 1.35 instead of 5.2 ms
    per [4096, 768] LayerNorm. Where no fusion happens (another TF build, a GPU, eager mode) the
    same ops still compute a LayerNorm: statistics in float32, the output in `x.dtype`.

    The epsilon is passed to the op as given (the Python `fused_batch_norm` wrapper would raise it to
    1.001e-5, which is not ALBERT's 1e-12).
    """
    n = x.shape[-1]
    if n is None:
        raise ValueError("inference_layer_norm needs a static last dimension")
    shape = tf.shape(x)
    # The row count from the shape (not a -1 in the Reshape): the remapper matches only this form.
    # PlaceholderWithDefault keeps it a runtime value: with a fully static shape, constant folding
    # would turn the Fill ops below into constants and the pattern would no longer match.
    rows = tf.raw_ops.PlaceholderWithDefault(input=tf.reduce_prod(shape[:-1]), shape=[])
    planes = tf.reshape(x, tf.stack([1, rows, n, 1]))
    count = tf.reshape(rows, [1])
    empty = tf.constant([], tf.float32)
    y = tf.raw_ops.FusedBatchNormV3(
        x=planes, scale=tf.fill(count, 1.0), offset=tf.fill(count, 0.0), mean=empty, variance=empty,
        epsilon=float(epsilon), data_format="NCHW", is_training=True,
    )[0]
    y = tf.reshape(y, shape)
    return y * tf.cast(gamma, y.dtype) + tf.cast(beta, y.dtype)


def _gelu_float32(x, approximate):
    if approximate:
        return 0.5 * x * (1.0 + tf.tanh(x * (_SQRT_2_OVER_PI + _SQRT_2_OVER_PI * _GELU_CUBIC * x * x)))
    return 0.5 * x * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))


@tf.function(jit_compile=True, autograph=False)
def _gelu_forward(x, approximate):
    return tf.cast(_gelu_float32(tf.cast(x, tf.float32), approximate), x.dtype)


@tf.function(jit_compile=True, autograph=False)
def _gelu_backward(x, dy, approximate):
    # Recomputes the activation's derivative from x: one read of x and dy, no saved intermediates.
    x = tf.cast(x, tf.float32)
    if approximate:
        t = tf.tanh(x * (_SQRT_2_OVER_PI + _SQRT_2_OVER_PI * _GELU_CUBIC * x * x))
        slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (
            _SQRT_2_OVER_PI + 3.0 * _SQRT_2_OVER_PI * _GELU_CUBIC * x * x
        )
    else:
        slope = 0.5 * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0)))) + x * tf.exp(-0.5 * x * x) / math.sqrt(
            2.0 * math.pi
        )
    return tf.cast(tf.cast(dy, tf.float32) * slope, dy.dtype)


def gelu(x, approximate: bool = True):
    """GELU (tanh approximation, or exact with `approximate=False`), computed in float32, in `x.dtype`."""

    @tf.custom_gradient
    def fused(x):
        return _gelu_forward(x, approximate), lambda dy: _gelu_backward(x, dy, approximate)

    return fused(x)
