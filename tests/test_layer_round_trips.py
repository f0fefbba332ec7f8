"""Round trips of every Keras-serializable class that albert_tf registers, in the spirit of
keras-hub's `run_layer_test`.

Layers and models: built with tiny arguments and called on tiny inputs; `from_config(get_config())`
gives an equal config and, with the same weights, the same outputs; a `.keras` archive (the layer
wrapped in a small functional model when it is not a model) reloads with identical outputs.
Optimizers, the learning-rate schedule and the metric: the config round trip gives an equal config
and the same updates / rates / results, and they come back from a compiled model's `.keras` archive.

`test_every_registered_class_has_a_case` fails for a newly registered class until it gets a case.
"""

from __future__ import annotations

import copy
import importlib
import re
from pathlib import Path

import keras
import numpy as np
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "albert_tf"
B, S = 2, 8  # batch, sequence length
VOCAB = 64  # the tiny SentencePiece model's (conftest.tiny_config)
TEXTS = ["a good dog, 1,000 cats.", "the film was bad"]


def _registering_modules():
    """The albert_tf modules whose source registers a Keras-serializable class."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "register_keras_serializable" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def registered_albert_classes():
    """{registered name: class} of every albert_tf class in Keras' custom-object registry."""
    for name in _registering_modules():
        importlib.import_module(name)
    return {
        name: obj
        for name, obj in keras.saving.get_custom_objects().items()
        if isinstance(obj, type) and obj.__module__.split(".")[0] == "albert_tf"
    }


def _tokens(batch=B, seq=S, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB, size=(batch, seq)).astype("int32")
    ids[:, 0] = 2
    mask = np.ones((batch, seq), "int32")
    mask[1, seq - 2 :] = 0
    segments = np.zeros((batch, seq), "int32")
    segments[:, seq // 2 :] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def _encoder(config):
    from albert_tf.modeling import AlbertEncoder

    return AlbertEncoder.from_albert_config(config)


def _preprocessor(spm_model):
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    return AlbertTokenizerLayer.from_sentencepiece(spm_model, sequence_length=S, name="preprocessor")


# --- the cases: registered name -> builder(tiny_config, tiny_spm_model) -> (object, call arguments) ---


def _layer_norm(config, spm):
    from albert_tf.modeling import AlbertLayerNorm

    rng = np.random.default_rng(1)
    layer = AlbertLayerNorm(epsilon=1e-12, gamma_initializer="random_normal", beta_initializer="random_normal")
    return layer, (rng.normal(size=(B, S, 16)).astype("float32"), rng.normal(size=(B, S, 16)).astype("float32"))


def _embeddings(config, spm):
    from albert_tf.modeling import AlbertEmbeddings

    tokens = _tokens()
    layer = AlbertEmbeddings(VOCAB, 8, max_position_embeddings=16, initializer_range=0.5)
    return layer, (tokens["input_ids"], tokens["segment_ids"])


def _attention(config, spm):
    from albert_tf.modeling import AlbertAttention

    rng = np.random.default_rng(2)
    bias = np.zeros((B, 1, 1, S), "float32")
    bias[1, ..., S - 2 :] = -10000.0
    return AlbertAttention(16, 2, initializer_range=0.5), (rng.normal(size=(B, S, 16)).astype("float32"), bias)


def _feed_forward(config, spm):
    from albert_tf.modeling import AlbertFeedForward

    rng = np.random.default_rng(3)
    return AlbertFeedForward(16, 32, initializer_range=0.5), (rng.normal(size=(B, S, 16)).astype("float32"),)


def _encoder_case(config, spm):
    return _encoder(config), (_tokens(),)


def _mlm_head(config, spm):
    from albert_tf.modeling import AlbertMLMHead

    rng = np.random.default_rng(4)
    positions = np.array([[1, 3, 5], [2, 4, 0]], "int32")
    return AlbertMLMHead(VOCAB, 8, initializer_range=0.5), (
        rng.normal(size=(B, S, 16)).astype("float32"), rng.normal(size=(VOCAB, 8)).astype("float32"), positions)


def _sop_head(config, spm):
    from albert_tf.modeling import AlbertSOPHead

    return AlbertSOPHead(16, initializer_range=0.5), (np.random.default_rng(5).normal(size=(B, 16)).astype("float32"),)


def _pretrainer(config, spm):
    from albert_tf.pretrainer import AlbertPretrainer

    inputs = {**_tokens(), "masked_lm_positions": np.array([[1, 3], [2, 4]], "int32")}
    return AlbertPretrainer(_encoder(config)), (inputs,)


def _classifier(config, spm):
    from albert_tf.tasks.classification import AlbertForClassification

    return AlbertForClassification(_encoder(config), num_labels=3, pooling="mean"), (_tokens(),)


def _regressor(config, spm):
    from albert_tf.tasks.classification import AlbertForRegression

    return AlbertForRegression(_encoder(config)), (_tokens(),)


def _token_classifier(config, spm):
    from albert_tf.tasks.tagging import AlbertForTagging

    return AlbertForTagging(_encoder(config), num_labels=5), (_tokens(),)


def _multiple_choice(config, spm):
    from albert_tf.tasks.multiple_choice import AlbertForMultipleChoice

    flat = _tokens(batch=2 * 3)
    return AlbertForMultipleChoice(_encoder(config)), ({k: v.reshape(2, 3, S) for k, v in flat.items()},)


def _squad_v1(config, spm):
    from albert_tf.tasks.squad import AlbertForSquadV1

    return AlbertForSquadV1(_encoder(config)), (_tokens(),)


def _p_mask():
    p_mask = np.zeros((B, S), "int32")
    p_mask[:, :3] = 1
    return p_mask


def _squad_v2(config, spm):
    from albert_tf.tasks.squad import AlbertForSquadV2

    return AlbertForSquadV2(_encoder(config), start_n_top=2, end_n_top=2), ({**_tokens(), "p_mask": _p_mask()},)


def _squad_v2_head(config, spm):
    from albert_tf.tasks.squad import AlbertSquadV2Head

    sequence = np.random.default_rng(6).normal(size=(B, S, 16)).astype("float32")
    return AlbertSquadV2Head(16, start_n_top=2, end_n_top=3, initializer_range=0.5), (sequence, _p_mask())


def _tokenizer_layer(config, spm):
    return _preprocessor(spm), (np.array(TEXTS, dtype=object),)


def _text_classifier(config, spm):
    """Compiled (the default), as the one case of a compiled text model: loading builds the optimizer.
    The other text models are not compiled, to keep the file fast (test_text_models round-trips them compiled)."""
    from albert_tf import AlbertTextClassifier

    return AlbertTextClassifier(_encoder(config), _preprocessor(spm), num_classes=3), (_tokens(),)


def _text_regressor(config, spm):
    from albert_tf import AlbertTextRegressor

    return AlbertTextRegressor(_encoder(config), _preprocessor(spm), pooling="mean", compile=False), (_tokens(),)


def _text_tagger(config, spm):
    from albert_tf import AlbertTextTagger

    return AlbertTextTagger(_encoder(config), _preprocessor(spm), tags=["O", "B-PER", "I-PER"], compile=False), (_tokens(),)


def _text_multiple_choice(config, spm):
    from albert_tf import AlbertMultipleChoice

    flat = _tokens(batch=2 * 3)
    return AlbertMultipleChoice(_encoder(config), _preprocessor(spm), compile=False), ({k: v.reshape(2, 3, S) for k, v in flat.items()},)


def _question_answerer(config, spm):
    from albert_tf import AlbertQuestionAnswerer

    model = AlbertQuestionAnswerer(_encoder(config), _preprocessor(spm), doc_stride=2, max_query_length=3,
                                   compile=False)
    return model, (_tokens(),)


LAYER_CASES = {
    "albert_tf>AlbertLayerNorm": _layer_norm,
    "albert_tf>AlbertEmbeddings": _embeddings,
    "albert_tf>AlbertAttention": _attention,
    "albert_tf>AlbertFeedForward": _feed_forward,
    "albert_tf>AlbertEncoder": _encoder_case,
    "albert_tf>AlbertMLMHead": _mlm_head,
    "albert_tf>AlbertSOPHead": _sop_head,
    "albert_tf>AlbertPretrainer": _pretrainer,
    "albert_tf>AlbertForClassification": _classifier,
    "albert_tf>AlbertForRegression": _regressor,
    "albert_tf>AlbertForTagging": _token_classifier,
    "albert_tf>AlbertForMultipleChoice": _multiple_choice,
    "albert_tf>AlbertForSquadV1": _squad_v1,
    "albert_tf>AlbertForSquadV2": _squad_v2,
    "albert_tf>AlbertSquadV2Head": _squad_v2_head,
    "albert_tf>AlbertTokenizerLayer": _tokenizer_layer,
    "albert_tf>AlbertTextClassifier": _text_classifier,
    "albert_tf>AlbertTextRegressor": _text_regressor,
    "albert_tf>AlbertTextTagger": _text_tagger,
    "albert_tf>AlbertMultipleChoice": _text_multiple_choice,
    "albert_tf>AlbertQuestionAnswerer": _question_answerer,
}
OTHER_CASES = (
    "albert_tf>LAMBOptimizer",
    "albert_tf>AdamWeightDecayOptimizer",
    "albert_tf>WarmupPolynomialDecay",
    "albert_tf>MaskedTokenAccuracy",
)


def test_every_registered_class_has_a_case():
    registered = registered_albert_classes()
    assert len(registered) >= 25, sorted(registered)  # the enumeration finds them at all
    assert not set(registered) - set(LAYER_CASES) - set(OTHER_CASES), "registered classes without a round-trip case"
    assert not (set(LAYER_CASES) | set(OTHER_CASES)) - set(registered), "cases of classes no longer registered"
    for name, build in LAYER_CASES.items():
        assert re.fullmatch(r"albert_tf>\w+", name)


# --- helpers -------------------------------------------------------------------------------------


def _arrays(outputs):
    """The outputs as a flat {path: numpy array} (dicts by key, sequences by index)."""
    flat = {}

    def walk(value, path):
        if isinstance(value, dict):
            for key in sorted(value):
                walk(value[key], f"{path}/{key}")
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{path}/{i}")
        else:
            flat[path] = np.asarray(keras.ops.convert_to_numpy(value))

    walk(outputs, "")
    return flat


def _assert_same(got, expected, atol=0.0):
    got, expected = _arrays(got), _arrays(expected)
    assert sorted(got) == sorted(expected)
    for key in expected:
        assert got[key].shape == expected[key].shape, key
        if atol:
            np.testing.assert_allclose(got[key], expected[key], rtol=0, atol=atol, err_msg=key)
        else:
            np.testing.assert_array_equal(got[key], expected[key], err_msg=key)


def _call(obj, args):
    return obj(*args, training=False) if not _is_tokenizer(obj) else obj(*args)


def _is_tokenizer(obj):
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    return isinstance(obj, AlbertTokenizerLayer)


def _functional(layer, args):
    """`layer` in a functional model with one input per call argument (fixed shapes)."""
    inputs = [
        keras.Input(batch_shape=(None,) + a.shape[1:], dtype="string" if a.dtype == object else str(a.dtype))
        for a in args
    ]
    if len(inputs) == 3 and layer.__class__.__name__ == "AlbertMLMHead":
        # The word-embedding table is not batched.
        inputs[1] = keras.Input(batch_shape=args[1].shape, dtype="float32")
    return keras.Model(inputs, layer(*inputs))


def _call_functional(model, args):
    return model(list(args) if len(args) > 1 else args[0])


# --- the layer and model round trips --------------------------------------------------------------


# The raw-text models (a tokenizer layer, an encoder and a task model in one graph) take the longest:
# outside the fast loop (`-m "not slow"`).
SLOW_CASES = {name for name in LAYER_CASES if name.startswith(("albert_tf>AlbertText", "albert_tf>AlbertMultipleChoice",
                                                               "albert_tf>AlbertQuestionAnswerer"))}


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_CASES else name for name in sorted(LAYER_CASES)]
)
@pytest.mark.slow
def test_layer_round_trip(name, tiny_config, tiny_spm_model, tmp_path):
    keras.utils.set_random_seed(0)
    obj, args = LAYER_CASES[name](tiny_config, tiny_spm_model)
    cls = registered_albert_classes()[name]
    assert type(obj) is cls
    expected = _call(obj, args)
    assert _arrays(expected), "the case produced no outputs"
    weights = obj.get_weights()
    assert weights or _is_tokenizer(obj), "a tiny case with no weights compares nothing"
    if weights:
        assert any(np.std(w) > 0 for w in weights), "all weights constant: outputs would match by accident"

    # get_config -> from_config: an equal config, and the same outputs with the same weights.
    config = obj.get_config()
    clone = cls.from_config(copy.deepcopy(config))  # Keras may change the dict in place
    assert type(clone) is cls
    assert clone.get_config() == config
    _call(clone, args)  # builds
    assert [w.shape for w in clone.get_weights()] == [w.shape for w in weights]
    if weights:
        clone.set_weights(weights)
    _assert_same(_call(clone, args), expected)

    # The .keras archive: identical outputs after reload.
    model = obj if isinstance(obj, keras.Model) else _functional(obj, args)
    before = _call(model, args) if isinstance(obj, keras.Model) else _call_functional(model, args)
    _assert_same(before, expected)
    path = tmp_path / "x.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert type(reloaded) is type(model)
    if isinstance(obj, keras.Model):
        assert reloaded.get_config() == model.get_config()
        _assert_same(_call(reloaded, args), expected)
    else:
        (inner,) = [layer for layer in reloaded.layers if type(layer) is cls]
        assert inner.get_config() == config
        _assert_same(_call_functional(reloaded, args), expected)


# --- optimizers, the schedule and the metric -------------------------------------------------------


def _dense_model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    return keras.Model(inputs, keras.layers.Dense(1, name="dense")(keras.layers.Dense(3, name="hidden")(inputs)))


def _steps(model, optimizer, count=2):
    """`count` eager optimizer steps with fixed gradients (no traced training loop: fast)."""
    rng = np.random.default_rng(7)
    variables = model.trainable_variables
    for _ in range(count):
        optimizer.apply_gradients([(rng.normal(size=v.shape).astype("float32"), v) for v in variables])


@pytest.mark.parametrize("name", ["albert_tf>LAMBOptimizer", "albert_tf>AdamWeightDecayOptimizer"])
def test_optimizer_round_trip(name, tmp_path):
    from albert_tf.training.schedules import WarmupPolynomialDecay

    cls = registered_albert_classes()[name]
    schedule = WarmupPolynomialDecay(num_train_steps=10, num_warmup_steps=2, peak_learning_rate=0.05)
    optimizer = cls(learning_rate=schedule, weight_decay_rate=0.01, exclude_from_weight_decay=["bias"])
    config = optimizer.get_config()
    clone = cls.from_config(copy.deepcopy(config))  # Keras may change the dict in place
    assert type(clone) is cls and clone.get_config() == config
    assert isinstance(clone._learning_rate, WarmupPolynomialDecay)

    # Same updates from the same start.
    models = []
    for opt in (optimizer, clone):
        model = _dense_model()
        model.compile(optimizer=opt, loss="mse")
        _steps(model, opt)
        models.append(model)
    _assert_same(models[1].get_weights(), models[0].get_weights())
    assert not np.array_equal(models[0].get_weights()[0], _dense_model().get_weights()[0])  # it updated

    # The .keras archive of the compiled model: the optimizer, its schedule and its state.
    trained = models[0]
    path = tmp_path / "x.keras"
    trained.save(path)
    reloaded = keras.saving.load_model(path)
    assert type(reloaded.optimizer) is cls and reloaded.optimizer.get_config() == config
    _assert_same(reloaded.optimizer.variables, trained.optimizer.variables)
    for model in (trained, reloaded):
        _steps(model, model.optimizer)
    _assert_same(reloaded.get_weights(), trained.get_weights())


def test_schedule_round_trip(tmp_path):
    cls = registered_albert_classes()["albert_tf>WarmupPolynomialDecay"]
    schedule = cls(num_train_steps=10, num_warmup_steps=3, peak_learning_rate=0.1, power=2.0)
    config = schedule.get_config()
    clone = cls.from_config(copy.deepcopy(config))  # Keras may change the dict in place
    assert type(clone) is cls and clone.get_config() == config
    steps = [0, 1, 3, 5, 10, 12]
    rates = [float(schedule(s)) for s in steps]
    assert len(set(rates)) > 3
    assert [float(clone(s)) for s in steps] == rates

    from albert_tf.training.optimizers import AdamWeightDecayOptimizer

    model = _dense_model()
    model.compile(optimizer=AdamWeightDecayOptimizer(learning_rate=schedule), loss="mse")
    path = tmp_path / "x.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path).optimizer
    restored = reloaded._learning_rate
    assert type(restored) is cls and restored.get_config() == config
    assert [float(restored(s)) for s in steps] == rates


def test_metric_round_trip(tmp_path):
    cls = registered_albert_classes()["albert_tf>MaskedTokenAccuracy"]
    metric = cls(name="tokens")
    config = metric.get_config()
    clone = cls.from_config(copy.deepcopy(config))  # Keras may change the dict in place
    assert type(clone) is cls and clone.get_config() == config
    labels = np.array([[0, 1, -100], [2, -100, 1]], "int32")
    logits = np.eye(3, dtype="float32")[np.array([[0, 2, 1], [2, 0, 1]])]
    for m in (metric, clone):
        m.update_state(labels, logits)
    assert float(clone.result()) == float(metric.result()) == 0.75

    # Compiled into a model: the reloaded model evaluates it to the same value.
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,), dtype="int32")
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Embedding(10, 4)(inputs)))
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-100),
                  metrics=[cls(name="tokens")])
    x = np.random.default_rng(8).integers(0, 10, size=(6, 3)).astype("int32")
    y = np.random.default_rng(9).integers(0, 3, size=(6, 3)).astype("int32")
    y[0, 0] = -100
    expected = model.evaluate(x, y, verbose=0, return_dict=True)
    path = tmp_path / "x.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    got = reloaded.evaluate(x, y, verbose=0, return_dict=True)
    assert got == expected and "tokens" in got
    assert [type(m) for m in _flat_metrics(reloaded) if m.name == "tokens"] == [cls]


def _flat_metrics(model):
    out = []
    for metric in model.metrics:
        out.extend(_flat_metrics_of(metric))
    return out


def _flat_metrics_of(metric):
    inner = getattr(metric, "metrics", None)
    if isinstance(inner, (list, tuple)) and inner and inner[0] is not metric:
        return [m for sub in inner for m in _flat_metrics_of(sub)]
    return [metric]
