"""Tests of `albert_tf.training.optimizers`: LAMB and AdamW step by step against a NumPy
reference of the original algorithms, global-norm clipping, gradient accumulation, `model.fit`
(also under XLA and mixed_bfloat16), serialization and MirroredStrategy."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import albert_tf  # noqa: F401  (selects the TensorFlow backend)
import keras
import tensorflow as tf

from albert_tf.training import (
    ALBERT_EXCLUDE_FROM_WEIGHT_DECAY,
    AdamWeightDecayOptimizer,
    LAMBOptimizer,
    WarmupPolynomialDecay,
    create_optimizer,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

# Variable paths like those of our model; the zero-initialized one hits LAMB's ||w|| == 0 branch.
VARIABLE_PATHS = (
    "group_0_inner_group_0_ffn_1/intermediate/kernel",
    "embeddings/LayerNorm/gamma",
    "group_0_inner_group_0_attention_1/query/bias",
    "cls/head/zero_kernel",
)


# ----------------------------------------------------------------------------- NumPy reference


def _excluded(name, patterns):
    import re

    return bool(patterns) and any(re.search(p, name) for p in patterns)


def reference_updates(
    kind,
    initial,
    grad_steps,
    learning_rates,
    *,
    weight_decay_rate=0.01,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
    exclude_from_weight_decay=ALBERT_EXCLUDE_FROM_WEIGHT_DECAY,
    exclude_from_layer_adaptation=None,
    clip_norm=None,
    per_tensor_clip=False,
    bias_correction=False,
):
    """The original `LAMBOptimizer` / `AdamWeightDecayOptimizer` (plus `tf.clip_by_global_norm`),
    in float64. Returns the weights after every step and the final first moments."""
    if exclude_from_layer_adaptation is None:
        exclude_from_layer_adaptation = exclude_from_weight_decay
    w = {k: np.asarray(v, np.float64).copy() for k, v in initial.items()}
    m = {k: np.zeros_like(v) for k, v in w.items()}
    v = {k: np.zeros_like(x) for k, x in w.items()}
    history = []
    for t, (grads, lr) in enumerate(zip(grad_steps, learning_rates), 1):
        grads = {k: np.asarray(g, np.float64) for k, g in grads.items()}
        if clip_norm is not None and per_tensor_clip:
            grads = {k: g * clip_norm / max(np.linalg.norm(g), clip_norm) for k, g in grads.items()}
        elif clip_norm is not None:
            global_norm = np.sqrt(sum(np.sum(g**2) for g in grads.values()))
            grads = {k: g * clip_norm / max(global_norm, clip_norm) for k, g in grads.items()}
        for name, g in grads.items():
            m[name] = beta_1 * m[name] + (1 - beta_1) * g
            v[name] = beta_2 * v[name] + (1 - beta_2) * g**2
            if bias_correction:
                update = (m[name] / (1 - beta_1**t)) / (np.sqrt(v[name] / (1 - beta_2**t)) + epsilon)
            else:
                update = m[name] / (np.sqrt(v[name]) + epsilon)
            if weight_decay_rate and not _excluded(name, exclude_from_weight_decay):
                update = update + weight_decay_rate * w[name]
            ratio = 1.0
            if kind == "lamb" and not _excluded(name, exclude_from_layer_adaptation):
                w_norm, u_norm = np.linalg.norm(w[name]), np.linalg.norm(update)
                ratio = w_norm / u_norm if (w_norm > 0 and u_norm > 0) else 1.0
            w[name] = w[name] - lr * ratio * update
        history.append({k: x.copy() for k, x in w.items()})
    return history, m


# ----------------------------------------------------------------------------- helpers


def make_variables(initial):
    """Keras variables whose paths are the dict keys (`a/b/c` -> scopes `a`, `b`, name `c`)."""
    variables = []
    for path, value in initial.items():
        *scopes, name = path.split("/")
        scope_stack = [keras.name_scope(s) for s in scopes]
        for scope in scope_stack:
            scope.__enter__()
        try:
            variables.append(keras.Variable(np.asarray(value, np.float32), name=name))
        finally:
            for scope in reversed(scope_stack):
                scope.__exit__(None, None, None)
        assert variables[-1].path == path
    return variables


def make_problem(seed=0, steps=5, grad_scale=1.0):
    rng = np.random.default_rng(seed)
    signs = lambda shape: np.where(rng.random(shape) < 0.5, -1.0, 1.0)  # noqa: E731
    initial = {
        VARIABLE_PATHS[0]: signs((3, 4)) * rng.uniform(0.5, 1.5, (3, 4)),
        VARIABLE_PATHS[1]: np.ones(4),
        VARIABLE_PATHS[2]: signs(4) * rng.uniform(0.5, 1.5, 4),
        VARIABLE_PATHS[3]: np.zeros((2, 3)),
    }
    grad_steps = [
        {k: rng.normal(size=np.shape(x)) * grad_scale * (0.2 + step) for k, x in initial.items()}
        for step in range(steps)
    ]
    return initial, grad_steps


def run_optimizer(optimizer, initial, grad_steps, mode="eager"):
    """Applies `grad_steps` with `optimizer` and returns the weights after every step."""
    variables = make_variables(initial)
    optimizer.build(variables)

    def step(grads):
        optimizer.apply(grads, variables)

    if mode == "function":
        step = tf.function(step)
    elif mode == "xla":
        step = tf.function(step, jit_compile=True)
    history = []
    for grads in grad_steps:
        step([tf.constant(grads[k], tf.float32) for k in initial])
        history.append({k: var.numpy() for k, var in zip(initial, variables)})
    return history


def first_moments(optimizer, initial):
    by_name = {v.name: v.numpy() for v in optimizer.variables}
    return {k: by_name[f"{k.replace('/', '_')}_adam_m"] for k in initial}


def assert_history_close(actual, expected, rtol=1e-6):
    assert len(actual) == len(expected)
    for step, (got, want) in enumerate(zip(actual, expected)):
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=1e-12, err_msg=f"step {step} {name}")


# Hand-computed: peak 0.01, 10 train steps, 2 warmup: 0, 0.01*1/2, then 0.01*(1 - step/10).
SCHEDULE_LRS = [0.0, 0.005, 0.008, 0.007, 0.006]


def schedule():
    return WarmupPolynomialDecay(num_train_steps=10, num_warmup_steps=2, peak_learning_rate=0.01)


# ----------------------------------------------------------------------------- step-by-step


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
@pytest.mark.parametrize("kind", ["lamb", "adamw"])
def test_matches_reference_step_by_step(kind, mode):
    initial, grad_steps = make_problem()
    cls = LAMBOptimizer if kind == "lamb" else AdamWeightDecayOptimizer
    # Defaults: wd 0.01, betas 0.9/0.999, eps 1e-6, global clipnorm 1.0, ALBERT exclusions.
    got = run_optimizer(cls(learning_rate=schedule()), initial, grad_steps, mode)
    want, _ = reference_updates(kind, initial, grad_steps, SCHEDULE_LRS, clip_norm=1.0)
    assert_history_close(got, want)
    # The rate is 0 at step 0, so the zero-initialized variable is still 0; from step 1 it moves.
    np.testing.assert_array_equal(got[0][VARIABLE_PATHS[3]], 0.0)
    assert np.all(got[1][VARIABLE_PATHS[3]] != 0.0)


@pytest.mark.parametrize("mode", ["eager", "xla"])
@pytest.mark.parametrize("kind", ["lamb", "adamw"])
def test_bias_correction_matches_reference(kind, mode):
    initial, grad_steps = make_problem()
    cls = LAMBOptimizer if kind == "lamb" else AdamWeightDecayOptimizer
    got = run_optimizer(cls(learning_rate=schedule(), bias_correction=True), initial, grad_steps, mode)
    want, _ = reference_updates(kind, initial, grad_steps, SCHEDULE_LRS, clip_norm=1.0, bias_correction=True)
    assert_history_close(got, want)
    uncorrected, _ = reference_updates(kind, initial, grad_steps, SCHEDULE_LRS, clip_norm=1.0)
    kernel = VARIABLE_PATHS[0]
    assert not np.allclose(want[-1][kernel], uncorrected[-1][kernel], rtol=1e-5)


def test_bias_correction_through_create_optimizer_and_config():
    opt = create_optimizer("adamw", 1e-3, num_train_steps=10, num_warmup_steps=1, bias_correction=True)
    assert opt.bias_correction and not create_optimizer("adamw", 1e-3, num_train_steps=10, num_warmup_steps=1).bias_correction
    clone = AdamWeightDecayOptimizer.from_config(json.loads(json.dumps(opt.get_config())))
    assert clone.bias_correction
    with pytest.raises(TypeError, match="bias_correction"):
        AdamWeightDecayOptimizer(bias_correction="yes")


def test_lamb_differs_from_adamw_and_from_bias_corrected_variants():
    # Guards the reference itself: trust ratio and the missing bias correction both matter.
    initial, grad_steps = make_problem()
    lamb, _ = reference_updates("lamb", initial, grad_steps, [0.01] * 5)
    adamw, _ = reference_updates("adamw", initial, grad_steps, [0.01] * 5)
    kernel = VARIABLE_PATHS[0]
    delta = lambda history: history[-1][kernel] - initial[kernel]  # noqa: E731
    assert not np.allclose(delta(lamb), delta(adamw), rtol=0.05)
    keras_lamb = run_optimizer(keras.optimizers.Lamb(0.01), initial, grad_steps)
    assert not np.allclose(delta(keras_lamb), delta(lamb), rtol=0.05)


def test_exclusion_flags_follow_variable_paths():
    initial, _ = make_problem()
    variables = make_variables(initial)
    opt = LAMBOptimizer()
    opt.build(variables)
    flags = {v.path: (opt.uses_weight_decay(v), opt.uses_layer_adaptation(v)) for v in variables}
    assert flags == {
        VARIABLE_PATHS[0]: (True, True),
        VARIABLE_PATHS[1]: (False, False),
        VARIABLE_PATHS[2]: (False, False),
        VARIABLE_PATHS[3]: (True, True),
    }


def test_exclusions_on_the_albert_encoder():
    encoder = albert_tf.AlbertEncoder(
        vocab_size=20, embedding_size=4, hidden_size=8, num_layers=1, num_heads=2,
        intermediate_size=8, max_position_embeddings=8,
    )
    opt = LAMBOptimizer()
    opt.build(encoder.trainable_variables)
    for variable in encoder.trainable_variables:
        path = variable.path
        excluded = "LayerNorm" in path or path.endswith("bias")
        assert opt.uses_weight_decay(variable) is (not excluded), path
        assert opt.uses_layer_adaptation(variable) is (not excluded), path
    paths = [v.path for v in encoder.trainable_variables]
    assert "embeddings/LayerNorm/gamma" in paths and "group_0_inner_group_0_ffn_1/LayerNorm_1/beta" in paths


def test_keras_hub_style_layer_norm_names_are_excluded():
    variables = make_variables({"transformer_layer_0/self_attention_layer_norm/gamma": np.ones(2)})
    opt = AdamWeightDecayOptimizer()
    opt.build(variables)
    assert not opt.uses_weight_decay(variables[0])


def test_separate_layer_adaptation_list_and_zero_update_norm_branch():
    # `nodecay` is excluded from decay but not from adaptation; with a zero gradient its update
    # is exactly 0 while ||w|| > 0, the ratio's other 1.0 branch.
    initial, grad_steps = make_problem()
    initial["encoder/nodecay_kernel"] = np.full((2, 2), 0.7)
    for grads in grad_steps:
        grads["encoder/nodecay_kernel"] = np.zeros((2, 2))
    kwargs = dict(
        weight_decay_rate=0.05,
        exclude_from_weight_decay=["LayerNorm", "bias", "nodecay"],
        exclude_from_layer_adaptation=["LayerNorm"],
    )
    got = run_optimizer(
        LAMBOptimizer(learning_rate=0.01, global_clipnorm=None, **kwargs), initial, grad_steps, "function"
    )
    want, _ = reference_updates("lamb", initial, grad_steps, [0.01] * 5, **kwargs)
    assert_history_close(got, want)
    np.testing.assert_array_equal(got[-1]["encoder/nodecay_kernel"], 0.7 * np.ones((2, 2), np.float32))
    # The bias is now adapted (trust ratio) but still not decayed: it differs from the default.
    default, _ = reference_updates("lamb", initial, grad_steps, [0.01] * 5, weight_decay_rate=0.05)
    assert not np.allclose(want[-1][VARIABLE_PATHS[2]], default[-1][VARIABLE_PATHS[2]], rtol=1e-4)


def test_no_weight_decay_when_rate_is_zero():
    initial, grad_steps = make_problem()
    got = run_optimizer(AdamWeightDecayOptimizer(0.01, weight_decay_rate=0.0), initial, grad_steps)
    want, _ = reference_updates("adamw", initial, grad_steps, [0.01] * 5, weight_decay_rate=0.0, clip_norm=1.0)
    assert_history_close(got, want)


# ----------------------------------------------------------------------------- clipping


@pytest.mark.parametrize("grad_scale,expect_clipped", [(10.0, True), (0.01, False)])
def test_global_clipnorm_clips_by_the_global_norm(grad_scale, expect_clipped):
    initial, grad_steps = make_problem(seed=1, steps=1, grad_scale=grad_scale)
    grads = grad_steps[0]
    global_norm = np.sqrt(sum(np.sum(g**2) for g in grads.values()))
    assert bool(global_norm > 1.0) is expect_clipped
    opt = AdamWeightDecayOptimizer(0.01)  # default global_clipnorm=1.0
    run_optimizer(opt, initial, grad_steps)
    # After one step m = (1 - beta_1) * clipped gradient: the clipped gradients themselves.
    got = first_moments(opt, initial)
    scale = 1.0 / max(global_norm, 1.0)
    for name, g in grads.items():
        np.testing.assert_allclose(got[name], 0.1 * g * scale, rtol=1e-6)
    if expect_clipped:
        # Per-tensor clipping would have given different moments.
        _, per_tensor = reference_updates("adamw", initial, grad_steps, [0.01], clip_norm=1.0, per_tensor_clip=True)
        assert not np.allclose(got[VARIABLE_PATHS[0]], per_tensor[VARIABLE_PATHS[0]], rtol=1e-3)


def test_clipping_can_be_disabled():
    initial, grad_steps = make_problem(seed=1, steps=1, grad_scale=10.0)
    opt = LAMBOptimizer(0.01, global_clipnorm=None)
    run_optimizer(opt, initial, grad_steps)
    got = first_moments(opt, initial)
    for name, g in grad_steps[0].items():
        np.testing.assert_allclose(got[name], 0.1 * g, rtol=1e-6)


def test_sparse_embedding_gradients_are_densified():
    initial = np.arange(12, dtype=np.float32).reshape(6, 2) / 10
    table = keras.Variable(initial, name="word_embeddings")
    opt = LAMBOptimizer(0.01)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(table.value, [1, 3]) ** 2)
    grad = tape.gradient(loss, table.value)
    assert isinstance(grad, tf.IndexedSlices)
    opt.apply([grad], [table])
    dense = tf.convert_to_tensor(grad).numpy()
    assert np.count_nonzero(dense.any(axis=1)) == 2
    want, _ = reference_updates(
        "lamb", {"word_embeddings": initial}, [{"word_embeddings": dense}], [0.01], clip_norm=1.0
    )
    np.testing.assert_allclose(table.numpy(), want[0]["word_embeddings"], rtol=1e-6)


# ----------------------------------------------------------------------------- accumulation


@pytest.mark.parametrize("mode", ["eager", "xla"])
@pytest.mark.parametrize("kind", ["lamb", "adamw"])
def test_gradient_accumulation_is_one_step_on_the_mean_gradient(kind, mode):
    accumulation = 3
    initial, micro = make_problem(seed=2, steps=6, grad_scale=0.7)
    opt = create_optimizer(
        kind, 0.01, num_train_steps=10, num_warmup_steps=0, gradient_accumulation_steps=accumulation
    )
    got = run_optimizer(opt, initial, micro, mode)
    means = [
        {k: np.mean([g[k] for g in micro[i : i + accumulation]], axis=0) for k in initial}
        for i in range(0, len(micro), accumulation)
    ]
    # The schedule is evaluated at the update count (0, 1), not at the micro-batch count (2, 5).
    want, _ = reference_updates(kind, initial, means, [0.01, 0.009], clip_norm=1.0)
    init32 = {k: np.asarray(v, np.float32) for k, v in initial.items()}
    for i in (0, 1):
        assert_history_close([got[i]], [init32], rtol=0)  # nothing moves between updates
    assert_history_close([got[2], got[5]], want)
    assert_history_close([got[3], got[4]], [got[2], got[2]], rtol=0)
    assert int(opt.iterations) == 2


# ----------------------------------------------------------------------------- model.fit


def tiny_model():
    inputs = keras.Input((3,), dtype="int32")
    x = keras.layers.Embedding(10, 4, name="word_embeddings")(inputs)
    x = keras.layers.LayerNormalization(name="LayerNorm")(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(1, name="dense")(x)
    return keras.Model(inputs, outputs)


def tiny_data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10, (32, 3)).astype("int32")
    y = (x[:, :1] / 5.0 - 1.0).astype("float32")
    return x, y


@pytest.mark.parametrize("kind", ["lamb", "adamw"])
@pytest.mark.slow
def test_model_fit_with_xla_reduces_the_loss(kind):
    keras.utils.set_random_seed(0)
    model = tiny_model()
    model.compile(create_optimizer(kind, 0.02, num_train_steps=40, num_warmup_steps=4), "mse", jit_compile=True)
    x, y = tiny_data()
    history = model.fit(x, y, batch_size=8, epochs=8, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.8 * losses[0], losses
    assert int(model.optimizer.iterations) == 32
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 0.02 * (1 - 32 / 40), rtol=1e-6)


def test_mixed_bfloat16_keeps_float32_variables():
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        keras.utils.set_random_seed(0)
        model = tiny_model()
        opt = create_optimizer("lamb", 0.02, num_train_steps=40, num_warmup_steps=0)
        model.compile(opt, "mse", jit_compile=True)
        before = [v.numpy().copy() for v in model.trainable_variables]
        x, y = tiny_data()
        model.fit(x, y, batch_size=8, epochs=2, verbose=0)
        assert model.layers[-1].compute_dtype == "bfloat16"
        for variable, old in zip(model.trainable_variables, before):
            assert variable.dtype == "float32", variable.path
            value = variable.numpy()
            assert np.all(np.isfinite(value)) and not np.array_equal(value, old), variable.path
        assert all(v.dtype == "float32" for v in opt.variables if "adam_" in v.name)
    finally:
        keras.config.set_dtype_policy(previous)


# ----------------------------------------------------------------------------- serialization


def test_get_config_round_trip():
    opt = LAMBOptimizer(
        learning_rate=schedule(), weight_decay_rate=0.02, beta_1=0.8, epsilon=1e-7,
        exclude_from_weight_decay=["bias"], exclude_from_layer_adaptation=["LayerNorm"],
        global_clipnorm=2.0, gradient_accumulation_steps=4,
    )
    config = opt.get_config()
    assert "weight_decay" not in config
    clone = LAMBOptimizer.from_config(json.loads(json.dumps(config)))
    assert clone.get_config() == config
    assert isinstance(clone._learning_rate, WarmupPolynomialDecay)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(AdamWeightDecayOptimizer(3e-5)))
    assert isinstance(restored, AdamWeightDecayOptimizer)
    assert restored.get_config()["exclude_from_weight_decay"] == list(ALBERT_EXCLUDE_FROM_WEIGHT_DECAY)


def test_keras_file_save_and_load_restores_the_optimizer_state(tmp_path):
    keras.utils.set_random_seed(0)
    model = tiny_model()
    model.compile(create_optimizer("lamb", 0.02, num_train_steps=20, num_warmup_steps=2), "mse")
    x, y = tiny_data()
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.optimizer, LAMBOptimizer)
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    for a, b in zip(model.optimizer.variables, loaded.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # Training on from both gives the same weights: moments, step and schedule all restored.
    model.fit(x[:8], y[:8], batch_size=8, epochs=1, verbose=0, shuffle=False)
    loaded.fit(x[:8], y[:8], batch_size=8, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(model.trainable_variables, loaded.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


# ----------------------------------------------------------------------------- bad input


def test_rejects_keras_weight_decay_and_bad_hyperparameters():
    with pytest.raises(ValueError, match="weight_decay_rate"):
        LAMBOptimizer(weight_decay=0.01)
    with pytest.raises(ValueError, match="beta_1"):
        LAMBOptimizer(beta_1=1.0)
    with pytest.raises(ValueError, match="weight_decay_rate"):
        AdamWeightDecayOptimizer(weight_decay_rate=-0.1)
    with pytest.raises(TypeError, match="list of regular-expression"):
        LAMBOptimizer(exclude_from_weight_decay="bias")
    with pytest.raises(ValueError, match="invalid regular expression"):
        LAMBOptimizer(exclude_from_layer_adaptation=["("])
    with pytest.raises(ValueError, match="Unsupported optimizer 'sgd'"):
        create_optimizer("sgd", num_train_steps=10, num_warmup_steps=1)
    with pytest.raises(ValueError, match="clipnorm"):
        create_optimizer("lamb", num_train_steps=10, num_warmup_steps=1, clipnorm=-1.0)


def test_create_optimizer_defaults_are_the_original_ones():
    opt = create_optimizer(num_train_steps=125000, num_warmup_steps=3125)
    assert isinstance(opt, LAMBOptimizer)
    config = opt.get_config()
    assert (config["weight_decay_rate"], config["beta_1"], config["beta_2"], config["epsilon"]) == (0.01, 0.9, 0.999, 1e-6)
    assert config["global_clipnorm"] == 1.0 and config["clipnorm"] is None
    assert config["exclude_from_weight_decay"] == ["LayerNorm", "layer_norm", "bias"]
    assert config["learning_rate"]["config"]["peak_learning_rate"] == 0.00176
    assert create_optimizer("adamw", 3e-5, num_train_steps=10, num_warmup_steps=1, clipnorm=None).global_clipnorm is None


# ----------------------------------------------------------------------------- MirroredStrategy

_MIRRORED_SCRIPT = textwrap.dedent(
    """
    import json
    import albert_tf
    import numpy as np, keras, tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from albert_tf.training import LAMBOptimizer

    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4)).astype("float32")
    y = (rng.normal(size=(16, 2)) * 10).astype("float32")
    init = [rng.normal(size=(4, 2)).astype("float32"), np.zeros(2, "float32")]

    def train(make_optimizer, strategy):
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="dense")])
            model.set_weights(init)
            model.compile(make_optimizer(), "mse")
        model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        return [w.numpy() for w in model.trainable_variables]

    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    single = tf.distribute.get_strategy()
    # Clipping is active here (global norm > 0.5), so clipping per replica before the
    # cross-replica sum, as stock Keras does, would not match the single-device run.
    cases = {
        "lamb": lambda: LAMBOptimizer(0.1, global_clipnorm=0.5),
        "lamb_accumulated": lambda: LAMBOptimizer(0.1, global_clipnorm=0.5, gradient_accumulation_steps=2),
    }
    results = {"replicas": mirrored.num_replicas_in_sync}
    weights = {}
    for name, make in cases.items():
        weights[name] = train(make, single)
        other = train(make, mirrored)
        results[name] = max(float(np.max(np.abs(a - b))) for a, b in zip(weights[name], other))
    unclipped = train(lambda: LAMBOptimizer(0.1, global_clipnorm=None), single)
    results["clip_effect"] = max(float(np.max(np.abs(a - b))) for a, b in zip(weights["lamb"], unclipped))
    print("RESULT " + json.dumps(results))
    """
)


def test_mirrored_strategy_matches_single_device():
    # Logical devices must be configured before TensorFlow initializes: a fresh interpreter.
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, "-c", _MIRRORED_SCRIPT], cwd=REPO_ROOT, env=env,
        capture_output=True, text=True, timeout=300,
    )
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    results = json.loads(lines[-1][len("RESULT "):])
    assert results["replicas"] == 2
    assert results["clip_effect"] > 1e-3  # clipping was active, so the comparison means something
    for name in ("lamb", "lamb_accumulated"):
        assert results[name] < 1e-5, (name, results)


def test_keras_exclude_from_weight_decay_method():
    initial, grad_steps = make_problem()
    variables = make_variables(initial)
    opt = LAMBOptimizer(0.01)
    opt.exclude_from_weight_decay(var_names=["zero_kernel"], var_list=[variables[0]])
    opt.build(variables)
    assert [opt.uses_weight_decay(v) for v in variables] == [False, False, False, False]
    assert [opt.uses_layer_adaptation(v) for v in variables] == [False, False, False, False]
    assert "zero_kernel" in opt.get_config()["exclude_from_weight_decay"]
    with pytest.raises(ValueError, match="before the optimizer is built"):
        opt.exclude_from_weight_decay(var_names=["kernel"])
    with pytest.raises(ValueError, match="not built"):
        AdamWeightDecayOptimizer().uses_weight_decay(variables[0])
