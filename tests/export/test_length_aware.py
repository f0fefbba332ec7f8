"""Length-aware packing (`length_bucket`): the tokenizer layer's widths, and parity with the
fixed-length path for every export kind (in-memory signatures, reloaded SavedModels and the
text models' `predict`), the per-bucket warmup requests, and the local batcher's merge of token
requests of different lengths."""

import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from albert_tf.export import signatures  # noqa: E402
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer, packed_width  # noqa: E402

SEQ = 48
BUCKET = 16
TOL = dict(rtol=1e-5, atol=1e-5)
# Mixed lengths in one batch: 1 piece, a few, one of about 20 and one cut at SEQ.
TEXTS = [
    "Norway",
    "Albert Einstein was born in Ulm.",
    "The Normans gave their name to Normandy, a region in France; they descended from Norse raiders.",
    " ".join(["Paris lies on the Seine, who sold 12,000 crêpes to the king of the north?"] * 6),
]
QUESTIONS = ["Where?", "Where was Einstein born?", "Who gave their name to Normandy?", "Who sold crêpes?"]
CHOICES = [["Ulm", "Paris", "Bern"], ["France", "no", "the Seine"],
           ["1,500,000 naïve résumés", "Denmark", "Norway"], ["the king", "ten", "Zürich café"]]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.fixture(scope="module")
def layer(squad_spm_model):
    return AlbertTokenizerLayer.from_sentencepiece(squad_spm_model, sequence_length=SEQ)


# --- the layer ----------------------------------------------------------------------------------------


def test_bucketed_packing_is_the_fixed_packing_without_trailing_padding(squad_spm_model, layer):
    bucketed = AlbertTokenizerLayer.from_sentencepiece(squad_spm_model, sequence_length=SEQ, length_bucket=BUCKET)
    fixed = layer(tf.constant(TEXTS))
    for texts in (TEXTS[:1], TEXTS[:2], TEXTS[:3], TEXTS, ["", ""]):
        out = bucketed(tf.constant(texts))
        longest = int(layer(tf.constant(texts))["input_mask"].numpy().sum(axis=1).max())
        width = out["input_ids"].shape[1]
        assert width == min(SEQ, max(BUCKET, -(-longest // BUCKET) * BUCKET)), (texts, width)
        reference = layer(tf.constant(texts))
        for key, value in out.items():
            np.testing.assert_array_equal(value.numpy(), reference[key].numpy()[:, :width])
            assert not reference[key].numpy()[:, width:].any()
    # Pairs, a scalar and an override per call.
    pair = bucketed((tf.constant(TEXTS[:2]), tf.constant(TEXTS[1:3])))
    reference = layer((tf.constant(TEXTS[:2]), tf.constant(TEXTS[1:3])))
    np.testing.assert_array_equal(pair["segment_ids"].numpy(), reference["segment_ids"].numpy()[:, : pair["segment_ids"].shape[1]])
    assert bucketed(tf.constant("Norway"))["input_ids"].shape == (BUCKET,)
    assert bucketed.tokenize_and_pack(tf.constant(TEXTS[:1]), length_bucket=None)["input_ids"].shape == (1, SEQ)
    real = int(fixed["input_mask"].numpy()[0].sum())
    assert layer.tokenize_and_pack(tf.constant(TEXTS[:1]), length_bucket=4)["input_ids"].shape == (1, -(-real // 4) * 4)
    np.testing.assert_array_equal(fixed["input_ids"].numpy(), layer(tf.constant(TEXTS))["input_ids"].numpy())


def test_packed_width_rounds_up_within_the_sequence_length():
    assert packed_width(tf.constant([3, 17]), 48, None) == 48
    assert int(packed_width(tf.constant([3, 17]), 48, 16)) == 32
    assert int(packed_width(tf.constant([3]), 48, 16)) == 16
    assert int(packed_width(tf.constant([47]), 40, 16)) == 40
    assert int(packed_width(tf.zeros([0], tf.int32), 48, 16)) == 16
    assert int(packed_width(tf.zeros([0], tf.int32), 8, 16)) == 8


def test_layer_config_carries_the_bucket_and_old_configs_load(squad_spm_model):
    layer = AlbertTokenizerLayer.from_sentencepiece(squad_spm_model, sequence_length=SEQ, length_bucket=8)
    config = layer.get_config()
    assert config["length_bucket"] == 8
    assert AlbertTokenizerLayer.from_config(config).length_bucket == 8
    config.pop("length_bucket")
    assert AlbertTokenizerLayer.from_config(config).length_bucket is None
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="length_bucket"):
            AlbertTokenizerLayer.from_sentencepiece(squad_spm_model, sequence_length=SEQ, length_bucket=bad)


# --- every kind: length-aware signatures answer as the fixed-length ones -------------------------------


def _encoder(vocab_size, seed=0):
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder

    keras.utils.set_random_seed(seed)
    return AlbertEncoder.from_albert_config(AlbertConfig(
        vocab_size=vocab_size, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=SEQ))

# Every export kind: the encoder's, the pretrainer's and each task model's.
KINDS = ("classification", "regression", "encoder", "pretrainer", "squad_v1", "squad_v2", "tagging", "multiple_choice")
QA_KINDS = ("squad_v1", "squad_v2")


def _model(kind, vocab_size):
    from albert_tf.pretrainer import AlbertPretrainer
    from albert_tf.tasks.classification import AlbertForClassification, AlbertForRegression
    from albert_tf.tasks.multiple_choice import AlbertForMultipleChoice
    from albert_tf.tasks.squad import AlbertForSquadV1, AlbertForSquadV2
    from albert_tf.tasks.tagging import AlbertForTagging

    encoder = _encoder(vocab_size)
    model = {
        "classification": lambda: AlbertForClassification(encoder, num_labels=3),
        "regression": lambda: AlbertForRegression(encoder),
        "encoder": lambda: encoder,
        "pretrainer": lambda: AlbertPretrainer(encoder),
        "squad_v1": lambda: AlbertForSquadV1(encoder),
        "squad_v2": lambda: AlbertForSquadV2(encoder, start_n_top=5, end_n_top=5),
        "tagging": lambda: AlbertForTagging(encoder, num_labels=len(TAGS)),
        "multiple_choice": lambda: AlbertForMultipleChoice(encoder),
    }[kind]()
    ones = np.ones((1, SEQ), "int32")
    features = {"input_ids": ones, "input_mask": ones, "segment_ids": 0 * ones}
    if kind == "multiple_choice":
        features = {k: v[:, None, :].repeat(2, axis=1) for k, v in features.items()}
    if kind == "squad_v2":
        features["p_mask"] = 0 * ones
    if kind == "pretrainer":
        model(dict(features, masked_lm_positions=np.zeros((1, 2), "int32")))
    else:
        model(features)
    return model


def _module_kwargs(kind):
    kwargs = {"pair": kind == "regression"}
    if kind == "tagging":
        kwargs["labels"] = TAGS
    if kind in QA_KINDS:
        # Exhaustive span search: the fixed path's n-best also ranks padding positions.
        kwargs["qa_settings"] = dict(doc_stride=16, max_query_length=8, n_best_size=SEQ, max_answer_length=30)
    return kwargs


def _module(kind, model, layer, length_bucket):
    return signatures.ServingModule(model, layer, length_bucket=length_bucket, **_module_kwargs(kind))


def _text_inputs(kind):
    if kind in QA_KINDS:
        return {"question": tf.constant(QUESTIONS), "context": tf.constant(TEXTS)}
    if kind == "multiple_choice":
        return {"text": tf.constant(TEXTS), "question": tf.constant(["", "", "Who?", "Where _?"]),
                "choices": tf.constant(CHOICES)}
    if kind == "regression":
        return {"text": tf.constant(TEXTS), "text_b": tf.constant(TEXTS[::-1])}
    return {"text": tf.constant(TEXTS)}


def _short_inputs(kind):
    """The first two (short) rows of `_text_inputs`; pairs get the two short texts reversed."""
    inputs = {k: v[:2] for k, v in _text_inputs(kind).items()}
    if "text_b" in inputs:
        inputs["text_b"] = inputs["text"][::-1]
    return inputs


def _assert_outputs_equal(got, want):
    """Equal outputs; an output with a sequence axis is compared on the bucketed width (the rest of
    the fixed-length one is padding)."""
    assert set(got) == set(want)
    for key, value in want.items():
        value, other = np.asarray(value), np.asarray(got[key])
        if other.shape != value.shape:
            width = other.shape[1] if value.ndim == other.ndim else None
            assert width is not None and other.shape[2:] == value.shape[2:] and width < value.shape[1], key
            value = value[:, :width]
        if value.dtype.kind == "f":
            np.testing.assert_allclose(other, value, err_msg=key, **TOL)
        else:
            np.testing.assert_array_equal(other, value, err_msg=key)


def _short_tokens(module, fixed_module, inputs):
    """The fixed module's model rows for `inputs`, and the same rows cut to the bucketed width."""
    mask, _ = module.text_input_mask(**inputs)
    width = int(mask.shape[-1])
    if module.kind in ("squad_v1", "squad_v2"):
        features = fixed_module._objects.qa.features(inputs["question"], inputs["context"])
        long = {k: features[k] for k in fixed_module.token_keys}
    elif module.kind == "multiple_choice":
        long = fixed_module._objects.task.features(inputs["text"], inputs["question"], inputs["choices"])
    elif module.kind == "tagging":
        features = fixed_module._objects.task.features(inputs["text"])
        long = {k: features[k] for k in fixed_module.token_keys}
    else:
        long = fixed_module._tokenize(inputs["text"], inputs.get("text_b"))
    short = {k: v[..., :width] for k, v in long.items()}
    assert width < SEQ
    return long, short


@pytest.fixture(scope="module")
def exported(layer, tmp_path_factory):
    """Per kind: the fixed-length module, and the length-aware one that `export_saved_model` made
    (caught as it is made) with its export's result: one trace of each length-aware module serves
    the in-memory and the exported checks."""
    from albert_tf.export import saved_model

    # All models first: seeding clears TF's eager kernel cache, and with it the kernel-owned
    # SentencePiece resource of a QA graph built before.
    models = {kind: _model(kind, layer.vocab_size) for kind in KINDS}
    base = tmp_path_factory.mktemp("length_aware_exports")
    made, track = [], signatures.ServingModule.track_resources

    def tracked(module):  # the last step of a module's construction
        track(module)
        made.append(module)

    results = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(signatures.ServingModule, "track_resources", tracked)
        for kind, model in models.items():
            made.clear()
            result = saved_model.export_saved_model(model, layer, str(base), kind.replace("_", "-"), check=False,
                                                    length_bucket=BUCKET, **_module_kwargs(kind))
            (aware,) = made
            results[kind] = (aware, result)
    return {kind: (_module(kind, models[kind], layer, None), aware, result) for kind, (aware, result) in results.items()}


@pytest.fixture(scope="module")
def modules(exported):
    return {kind: (fixed, aware) for kind, (fixed, aware, _) in exported.items()}


@pytest.mark.slow  # exports 8 serving modules and builds 8 more
@pytest.mark.parametrize("kind", KINDS)
def test_length_aware_signatures_answer_as_the_fixed_length_ones(modules, kind):
    fixed, aware = modules[kind]
    fixed_functions, aware_functions = fixed.signatures(), aware.signatures()
    inputs = _text_inputs(kind)
    _assert_outputs_equal(aware_functions["serving_default"](**inputs), fixed_functions["serving_default"](**inputs))
    # Short batches (only the short texts) pack narrower still, with the same answers.
    short_inputs = _short_inputs(kind)
    _assert_outputs_equal(aware_functions["serving_default"](**short_inputs), fixed_functions["serving_default"](**short_inputs))
    # The tokens signatures take the shorter ids.
    long, short = _short_tokens(aware, fixed, short_inputs)
    for key in ["tokens"] + [k for k in ("sop",) if k in fixed_functions]:
        _assert_outputs_equal(aware_functions[key](**short), fixed_functions[key](**long))
    if kind == "pretrainer":
        positions = tf.constant([[1, 2], [3, 1]], tf.int32)
        _assert_outputs_equal(aware_functions["mlm"](**short, mlm_positions=positions),
                              fixed_functions["mlm"](**long, mlm_positions=positions))
    if kind == "classification":
        examples = tf.constant([
            tf.train.Example(features=tf.train.Features(feature={"text": tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[t.encode("utf-8")]))})).SerializeToString() for t in TEXTS])
        _assert_outputs_equal(aware_functions["classify"](inputs=examples), fixed_functions["classify"](inputs=examples))


@pytest.mark.slow
def test_tokens_signatures_are_variable_length_and_refuse_longer_ids(modules):
    fixed, aware = modules["classification"]
    ids_spec = lambda module: tf.nest.flatten(module.signatures()["tokens"].structured_input_signature)[0]  # noqa: E731
    assert ids_spec(aware).name == "input_ids" and ids_spec(aware).shape.as_list() == [None, None]
    assert ids_spec(fixed).shape.as_list() == [None, SEQ]
    ids = tf.ones([1, SEQ + 1], tf.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="at most sequence_length = 48"):
        aware.signatures()["tokens"](input_ids=ids, input_mask=ids, segment_ids=0 * ids)
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_mask must have the shape of input_ids"):
        aware.signatures()["tokens"](input_ids=ids[:, :8], input_mask=ids[:, :9], segment_ids=0 * ids[:, :8])


@pytest.mark.slow
def test_tokens_signatures_ignore_tf_serving_first_element_padding(modules):
    # TF Serving pads a shorter request merged with a longer one with the request's first
    # element: [CLS] ids, mask 1, segment 0 (p_mask 0).
    for kind in ("tagging", "squad_v2"):
        fixed, aware = modules[kind]
        long, short = _short_tokens(aware, fixed, _short_inputs(kind))
        padded = {k: tf.concat([v, tf.fill([v.shape[0], 8], v[0, 0])], axis=1) for k, v in short.items()}
        # The padded request's sequence outputs are wider; on the request's own width they agree.
        _assert_outputs_equal(aware.signatures()["tokens"](**short), aware.signatures()["tokens"](**padded))


@pytest.mark.slow
def test_warmup_requests_cover_every_bucket(modules):
    from albert_tf.export import warmup

    for kind in ("classification", "squad_v1", "tagging", "multiple_choice"):
        _, aware = modules[kind]
        defs = {k: _signature_def(f) for k, f in aware.signatures().items()}
        requests = warmup.bucket_warmup_inputs(defs, aware, pair=aware.pair)
        widths = []
        for key, inputs in requests:
            if key == "serving_default":
                mask, _ = aware.text_input_mask(**{k: tf.constant(v) for k, v in inputs.items()})
                widths.append(int(mask.shape[-1]))
        assert widths == warmup.bucket_bounds(SEQ, BUCKET) == [16, 32, 48], (kind, widths)
    fixed, _ = modules["classification"]
    assert warmup.bucket_warmup_inputs({}, fixed, pair=False) == []


def _signature_def(function):
    """A SignatureDef-like object (input names and method) of a concrete function."""
    from tensorflow.core.protobuf import meta_graph_pb2

    definition = meta_graph_pb2.SignatureDef(method_name=signatures.PREDICT_METHOD)
    for spec in tf.nest.flatten(function.structured_input_signature):
        definition.inputs[spec.name].name = spec.name
    return definition


# --- exported SavedModels ------------------------------------------------------------------------------


@pytest.mark.slow
def test_exported_length_aware_savedmodels_answer_as_the_fixed_length_path(exported):
    from albert_tf.export import saved_model, warmup

    for kind in KINDS:
        fixed, aware, result = exported[kind]
        assert saved_model.read_export_info(result.path)["length_bucket"] == BUCKET
        loaded = tf.saved_model.load(result.path)
        inputs = _text_inputs(kind)
        _assert_outputs_equal(loaded.signatures["serving_default"](**inputs), fixed.signatures()["serving_default"](**inputs))
        long, short = _short_tokens(aware, fixed, _short_inputs(kind))
        _assert_outputs_equal(loaded.signatures["tokens"](**short), fixed.signatures()["tokens"](**long))
        logs = warmup.read_warmup_file(result.path)
        text_logs = [log for log in logs if log.predict_log.request.model_spec.signature_name == "serving_default"]
        # The two-row request and one per bucket (16 only where the fixed question / text_b fit in it).
        assert 1 + 2 <= len(text_logs) <= 1 + 3, kind


# --- text models -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_text_model_predict_is_length_aware_with_fixed_length_answers(layer, tmp_path):
    import keras

    from albert_tf import AlbertMultipleChoice, AlbertTextClassifier, AlbertTextTagger

    classifier = AlbertTextClassifier(_encoder(layer.vocab_size), layer, num_classes=2, compile=False)
    assert classifier.length_bucket == 16
    aware = classifier.predict(TEXTS, batch_size=4, verbose=0)
    classifier.length_bucket = None
    np.testing.assert_allclose(aware, classifier.predict(TEXTS, batch_size=4, verbose=0), **TOL)
    config = classifier.get_config()
    assert config["length_bucket"] is None
    config.pop("length_bucket")
    assert AlbertTextClassifier.from_config(config).length_bucket == 16
    # The features predict runs on are narrower than the sequence length.
    classifier.length_bucket = BUCKET
    batch = next(iter(classifier.make_dataset(TEXTS[:1], batch_size=1, length_bucket=BUCKET)))
    assert batch["input_ids"].shape[1] == BUCKET

    tagger = AlbertTextTagger(_encoder(layer.vocab_size), layer, tags=TAGS, compile=False, length_bucket=BUCKET)
    entities = tagger.predict(TEXTS, batch_size=4, verbose=0)
    tagger.length_bucket = None
    assert entities == tagger.predict(TEXTS, batch_size=4, verbose=0)

    chooser = AlbertMultipleChoice(_encoder(layer.vocab_size), layer, compile=False)
    aware = chooser.predict((TEXTS, CHOICES), batch_size=4, verbose=0)
    chooser.length_bucket = None
    np.testing.assert_allclose(aware, chooser.predict((TEXTS, CHOICES), batch_size=4, verbose=0), **TOL)
    keras.backend.clear_session()


@pytest.mark.slow
def test_question_answerer_predict_is_length_aware_with_fixed_length_answers(layer):
    from albert_tf import AlbertQuestionAnswerer

    model = AlbertQuestionAnswerer(_encoder(layer.vocab_size), layer, doc_stride=16, max_query_length=8,
                                   n_best_size=SEQ, compile=False)
    assert model.length_bucket == 16
    aware = model.predict((QUESTIONS, TEXTS), batch_size=4)
    model.length_bucket = None
    fixed = model.predict((QUESTIONS, TEXTS), batch_size=4)
    assert [(a["text"], a["start"], a["end"]) for a in aware] == [(a["text"], a["start"], a["end"]) for a in fixed]
    np.testing.assert_allclose([a["score"] for a in aware], [a["score"] for a in fixed], **TOL)


# --- the local batcher --------------------------------------------------------------------------------


@pytest.mark.slow
def test_batcher_merges_token_requests_of_different_lengths(exported):
    import threading

    from albert_tf.export import serving_config
    from albert_tf.model_server.batching import Batcher
    from albert_tf.model_server.servable import SessionServable

    fixed, aware, result = exported["tagging"]  # exported length-aware, the default
    servable = SessionServable(result.path)
    runs = []
    original = servable.run
    servable.run = lambda *a, **k: runs.append(a[1]["input_ids"].shape) or original(*a, **k)
    config = serving_config.BatchingConfig(max_batch_size=8, batch_timeout_micros=500_000, num_batch_threads=1)
    batcher = Batcher(servable, config)
    requests = []
    for texts in (TEXTS[:1], TEXTS[1:2]):
        features = fixed._objects.task.features(tf.constant(texts))
        width = int(aware._objects.task.features(tf.constant(texts))["input_ids"].shape[1])
        requests.append(({k: features[k].numpy()[:, :width] for k in signatures.TOKEN_KEYS},
                         fixed.signatures()["tokens"](**{k: features[k] for k in signatures.TOKEN_KEYS})))
    assert requests[0][0]["input_ids"].shape[1] != requests[1][0]["input_ids"].shape[1]
    replies = [None, None]

    def send(index):
        replies[index] = batcher.run("tokens", requests[index][0])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    batcher.stop()
    servable.close()
    widths = [inputs["input_ids"].shape[1] for inputs, _ in requests]
    assert runs == [(2, max(widths))]  # one merged run, padded to the longer request only
    for (inputs, want), got in zip(requests, replies):
        assert got["logits"].shape[1] == inputs["input_ids"].shape[1]
        _assert_outputs_equal(got, {k: v.numpy() for k, v in want.items()})


def test_batching_parameters_pad_variable_length_inputs(tmp_path):
    from albert_tf.export import serving_config

    config = serving_config.BatchingConfig()
    assert config.pad_variable_length_inputs is True
    # A plain bool in TF Serving's BatchingParameters: `name: value`, not a wrapper message.
    assert "pad_variable_length_inputs: true" in config.to_text_proto()
    path = tmp_path / "batching_parameters.txt"
    path.write_text(config.to_text_proto())
    assert serving_config.read_batching_parameters(str(path)) == config
    path.write_text(serving_config.BatchingConfig(pad_variable_length_inputs=False).to_text_proto())
    assert serving_config.read_batching_parameters(str(path)).pad_variable_length_inputs is False
    path.write_text("max_batch_size { value: 4 }\n")  # files written before the field
    assert serving_config.read_batching_parameters(str(path)).pad_variable_length_inputs is True
    path.write_text("pad_variable_length_inputs { value: false }\n")  # files written in the old form
    assert serving_config.read_batching_parameters(str(path)).pad_variable_length_inputs is False
