"""The fused training kernels: values and gradients against Keras's ops, and the layers that use them."""

import numpy as np
import pytest
import tensorflow as tf

import keras

from albert_tf import AlbertConfig, AlbertEncoder, fused_ops
from albert_tf.modeling import AlbertLayerNorm
from albert_tf.pretrainer import AlbertPretrainer


def _keras_layer_norm(x, gamma, beta, epsilon):
    layer = keras.layers.LayerNormalization(epsilon=epsilon)
    layer.build(x.shape)
    layer.gamma.assign(gamma)
    layer.beta.assign(beta)
    return layer(x)


def _value_and_grads(fn, *args):
    args = [tf.convert_to_tensor(a) for a in args]
    with tf.GradientTape() as tape:
        tape.watch(args)
        y = fn(*args)
        # A non-uniform upstream gradient, so that every term of the backward pass matters.
        upstream = tf.reshape(tf.sin(tf.range(tf.size(y), dtype=tf.float32)), tf.shape(y))
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
    return y, tape.gradient(loss, args)


@pytest.mark.parametrize("hidden", [8, 33])
@pytest.mark.parametrize("with_residual", [False, True])
def test_layer_norm_matches_keras_value_and_gradients(hidden, with_residual):
    rng = np.random.default_rng(hidden)
    x = rng.normal(3.0, 2.0, size=(3, 5, hidden)).astype("float32")
    residual = rng.normal(size=(3, 5, hidden)).astype("float32")
    gamma = rng.normal(1.0, 0.3, size=hidden).astype("float32")
    beta = rng.normal(size=hidden).astype("float32")

    def reference(x, r, g, b):
        return tf.convert_to_tensor(_keras_reference(x + r if with_residual else x, g, b))

    def _keras_reference(h, g, b):
        mean, var = tf.nn.moments(h, axes=[-1], keepdims=True)
        return (h - mean) * tf.math.rsqrt(var + 1e-12) * g + b

    def fused(x, r, g, b):
        return fused_ops.layer_norm(x, g, b, 1e-12, residual=r if with_residual else None)

    y_ref, grads_ref = _value_and_grads(reference, x, residual, gamma, beta)
    y, grads = _value_and_grads(fused, x, residual, gamma, beta)
    np.testing.assert_allclose(y, y_ref, atol=2e-5)
    np.testing.assert_allclose(y, _keras_layer_norm(x + residual if with_residual else x, gamma, beta, 1e-12), atol=2e-5)
    for name, got, want in zip(("x", "residual", "gamma", "beta"), grads, grads_ref):
        if name == "residual" and not with_residual:
            assert got is None
            continue
        np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-4, err_msg=name)


def test_layer_norm_bfloat16_keeps_dtype_and_float32_accuracy():
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(4, 16)).astype("float32"))
    gamma, beta = tf.ones([16]), tf.zeros([16])
    y = fused_ops.layer_norm(tf.cast(x, tf.bfloat16), gamma, beta, 1e-12)
    assert y.dtype == tf.bfloat16
    want = fused_ops.layer_norm(tf.cast(tf.cast(x, tf.bfloat16), tf.float32), gamma, beta, 1e-12)
    np.testing.assert_allclose(tf.cast(y, tf.float32), want, atol=2e-2)


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_matches_tensorflow_value_and_gradient(approximate):
    x = np.linspace(-6, 6, 241, dtype="float32").reshape(1, 241)
    y_ref, (g_ref,) = _value_and_grads(lambda x: tf.nn.gelu(x, approximate=approximate), x)
    y, (g,) = _value_and_grads(lambda x: fused_ops.gelu(x, approximate=approximate), x)
    np.testing.assert_allclose(y, y_ref, atol=2e-6)
    np.testing.assert_allclose(g, g_ref, atol=2e-5)
    y16 = fused_ops.gelu(tf.cast(x, tf.bfloat16), approximate=approximate)
    assert y16.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(y16, tf.float32), y_ref, atol=0.05)


def test_layer_norm_with_unknown_batch_shape_inside_a_function():
    @tf.function(input_signature=[tf.TensorSpec([None, None, 6], tf.float32)])
    def f(x):
        return fused_ops.layer_norm(x, tf.ones([6]), tf.zeros([6]), 1e-12, residual=x)

    y = f(tf.random.normal([2, 3, 6]))
    assert y.shape == (2, 3, 6)


def test_albert_layer_norm_same_in_training_and_inference():
    layer = AlbertLayerNorm(epsilon=1e-12)
    x = tf.random.normal([2, 4, 8], seed=1)
    r = tf.random.normal([2, 4, 8], seed=2)
    layer.build(x.shape)
    layer.gamma.assign(tf.random.normal([8], 1.0, 0.1, seed=3))
    np.testing.assert_allclose(layer(x, residual=r, training=True), layer(x, residual=r, training=False), atol=2e-6)


def _tiny_pretrainer(seed=0):
    keras.utils.set_random_seed(seed)
    config = AlbertConfig(vocab_size=40, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=32)
    return AlbertPretrainer(AlbertEncoder.from_albert_config(config))


def _batch():
    rng = np.random.default_rng(0)
    mask = np.ones((3, 10), "int32")
    mask[0, 7:] = 0
    return {"input_ids": rng.integers(5, 40, (3, 10)).astype("int32"), "input_mask": mask,
            "segment_ids": np.repeat([[0] * 5 + [1] * 5], 3, 0).astype("int32"),
            "masked_lm_positions": np.array([[1, 2], [3, 4], [5, 0]], "int32"),
            "masked_lm_ids": rng.integers(5, 40, (3, 2)).astype("int32"),
            "masked_lm_weights": np.array([[1, 1], [1, 1], [1, 0]], "float32"),
            "next_sentence_labels": np.array([[0], [1], [0]], "int32")}


def _loss_and_grads(model, batch):
    with tf.GradientTape() as tape:
        outputs = model(batch, training=True)
        loss = model.compute_loss(x=batch, y_pred=outputs)
    return loss, tape.gradient(loss, model.trainable_variables)


def test_pretrainer_gradients_same_with_and_without_fused_ops():
    model, batch = _tiny_pretrainer(), _batch()
    loss_fused, grads_fused = _loss_and_grads(model, batch)
    fused_ops.set_enabled(False)
    try:
        loss_plain, grads_plain = _loss_and_grads(model, batch)
    finally:
        fused_ops.set_enabled(True)
    np.testing.assert_allclose(loss_fused, loss_plain, rtol=1e-6)
    for variable, a, b in zip(model.trainable_variables, grads_fused, grads_plain):
        np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b), atol=1e-5, rtol=1e-4,
                                   err_msg=variable.path)


@pytest.mark.slow
def test_fused_ops_are_only_in_the_training_graph():
    model, batch = _tiny_pretrainer(), _batch()
    specs = {k: tf.TensorSpec([None, v.shape[1]], tf.as_dtype(v.dtype)) for k, v in batch.items()}

    def op_types(training):
        graph = tf.function(lambda b: model(b, training=training)).get_concrete_function(specs).graph
        types = set()
        for op in graph.get_operations():
            types.add(op.type)
            if "_XlaMustCompile" in op.node_def.attr and op.get_attr("_XlaMustCompile"):
                types.add("XlaMustCompile")
        return types

    assert "XlaMustCompile" in op_types(True)
    assert "XlaMustCompile" not in op_types(False)


def test_fused_ops_are_left_to_xla_when_the_whole_step_is_compiled():
    model, batch = _tiny_pretrainer(), _batch()
    specs = {k: tf.TensorSpec([None, v.shape[1]], tf.as_dtype(v.dtype)) for k, v in batch.items()}
    graph = tf.function(lambda b: model(b, training=True), jit_compile=True).get_concrete_function(specs).graph
    nested_must_compile = [op.name for op in graph.get_operations()
                           if "_XlaMustCompile" in op.node_def.attr and op.get_attr("_XlaMustCompile")]
    assert nested_must_compile == []
    assert not fused_ops.in_xla_context()



@pytest.mark.parametrize("shape", [(7, 33), (2, 5, 16)])
def test_inference_layer_norm_matches_keras_with_albert_epsilon(shape):
    rng = np.random.default_rng(len(shape))
    x = rng.normal(0.0, 1.0, size=shape).astype("float32")
    # Rows of tiny variance: with the 1.001e-5 floor of tf.nn.fused_batch_norm they would shrink
    # by ~20%; the op must use ALBERT's 1e-12 as given.
    x[0] = x[0] * 1e-3
    gamma = rng.normal(1.0, 0.3, size=shape[-1]).astype("float32")
    beta = rng.normal(size=shape[-1]).astype("float32")
    got = fused_ops.inference_layer_norm(tf.constant(x), gamma, beta, 1e-12)
    want = _keras_layer_norm(x, gamma, beta, 1e-12)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=2e-5)
    got16 = fused_ops.inference_layer_norm(tf.constant(x, tf.bfloat16), gamma, beta, 1e-12)
    assert got16.dtype == tf.bfloat16
    np.testing.assert_allclose(tf.cast(got16, tf.float32).numpy(), want.numpy(), atol=0.05)
    with pytest.raises(ValueError, match="static last dimension"):
        tf.function(lambda t: fused_ops.inference_layer_norm(t, gamma, beta, 1e-12)).get_concrete_function(
            tf.TensorSpec([None, None], tf.float32))


def _session_op_types(build, feed_value, static_shape=False):
    """Op types of the graph a session actually runs (after Grappler), and the fetched value."""
    graph = tf.Graph()
    with graph.as_default():
        shape = feed_value.shape if static_shape else [None, feed_value.shape[-1]]
        placeholder = tf.compat.v1.placeholder(tf.float32, shape)
        # Inside a function reading variables, as a SavedModel signature runs in TF Serving.
        output = tf.function(build)(placeholder)
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        metadata = tf.compat.v1.RunMetadata()
        value = session.run(output, {placeholder: feed_value},
                            options=tf.compat.v1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
    return {node.op for g in metadata.partition_graphs for node in g.node}, value


def _onednn_layer_norm_available():
    from tensorflow.python.framework import kernels

    return any(k.op == "_MklLayerNorm" for k in kernels.get_all_registered_kernels().kernel)


@pytest.mark.skipif(not _onednn_layer_norm_available(), reason="this TensorFlow build has no oneDNN _MklLayerNorm")
@pytest.mark.parametrize("static_shape", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_inference_layer_norm_becomes_one_onednn_kernel_in_a_session(dtype, static_shape):
    rng = np.random.default_rng(0)
    feed = rng.normal(size=(6, 16)).astype("float32")
    gamma = rng.normal(1.0, 0.3, size=16).astype("float32")
    beta = rng.normal(size=16).astype("float32")

    variables = []

    def build(x):
        if not variables:
            variables.extend([tf.Variable(gamma), tf.Variable(beta)])
        h = tf.cast(tf.matmul(x, tf.eye(16)), dtype)  # rank known, rows unknown: as in the encoder
        return tf.cast(fused_ops.inference_layer_norm(h, *variables, 1e-12), tf.float32)

    types, value = _session_op_types(build, feed, static_shape)
    assert "_MklLayerNorm" in types and "FusedBatchNormV3" not in types and "_MklNativeFusedBatchNormV3" not in types
    np.testing.assert_allclose(value, _keras_layer_norm(feed, gamma, beta, 1e-12).numpy(),
                               atol=1e-5 if dtype == "float32" else 0.05)


def test_inference_layer_norm_used_only_outside_training():
    layer = AlbertLayerNorm(epsilon=1e-12)
    layer.build((None, 8))

    def op_types(training):
        fn = tf.function(lambda x: layer(x, residual=x, training=training))
        return {op.type for op in fn.get_concrete_function(tf.TensorSpec([None, 8])).graph.get_operations()}

    assert "FusedBatchNormV3" in op_types(False)
    assert "FusedBatchNormV3" not in op_types(True)
    fused_ops.set_enabled(False)
    try:
        assert "FusedBatchNormV3" not in op_types(False)
    finally:
        fused_ops.set_enabled(True)


_WITHOUT_ONEDNN = """
import numpy as np, tensorflow as tf
from albert_tf import fused_ops
rng = np.random.default_rng(0)
x = rng.normal(size=(2, 5, 16)).astype("float32")
gamma = rng.normal(1.0, 0.3, size=16).astype("float32")
beta = rng.normal(size=16).astype("float32")
want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12) * gamma + beta
for dtype, tolerance in (("float32", 1e-5), ("bfloat16", 0.05)):
    fn = tf.function(lambda t: fused_ops.inference_layer_norm(tf.cast(t, dtype), gamma, beta, 1e-12))
    got = tf.cast(fn(tf.constant(x)), tf.float32).numpy()
    assert np.abs(got - want).max() < tolerance, (dtype, np.abs(got - want).max())
print("ok")
"""


def test_inference_layer_norm_runs_where_tensorflow_has_no_onednn():
    """TF Serving builds without oneDNN run the same graph unfused: plain FusedBatchNormV3 (NCHW) on the CPU."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", _WITHOUT_ONEDNN], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")
