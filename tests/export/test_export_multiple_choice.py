"""Tests of the multiple-choice (RACE) export: `albert_tf.tasks.multiple_choice.serving` (in-graph
choice rows) against the Python conversion (`albert_tf.tasks.multiple_choice.data`), the exported signatures, warmup,
configs and op check, any number of choices, and the local server over REST and gRPC."""

import json
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _serving_helpers as helpers  # noqa: E402

from albert_tf.tasks.multiple_choice import data as race  # noqa: E402
from albert_tf.export import saved_model, signatures, warmup  # noqa: E402
from albert_tf.tasks import family as families  # noqa: E402
from albert_tf.tasks.multiple_choice import serving as multiple_choice  # noqa: E402
from albert_tf.tasks.spec import TaskSpec  # noqa: E402

MAX_QA = 6
CHOICE_INPUTS = ("input_ids", "input_mask", "segment_ids")
CASES = [
    ("the nation of good law " * 4, "the _ of people", ("states", "year _ law", "", "it's")),  # cloze, long text
    ("", "", ("good", "bad", "congress people states year law in the nation", "1,000")),  # no text, no question
    ("Caf\u00e9  LAW\u3000people", "What  is GOOD?", ("the\tlaw", "people", "x_y", "\u00c5ngstr\u00f6m")),
    ("congress 1,000,000 people", "_ and _", ("in", "year", "bad", "good law")),  # two blanks
]
JSON_DTYPES = {tf.float32.as_datatype_enum, tf.int32.as_datatype_enum, tf.string.as_datatype_enum}


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return helpers.tiny_spm(tmp_path_factory.mktemp("mc_spm"))


@pytest.fixture(scope="module")
def layer(spm):
    return helpers.tokenizer_layer(spm)


def _model(vocab_size=48, seed=0):
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.multiple_choice import AlbertForMultipleChoice

    keras.utils.set_random_seed(seed)
    encoder = AlbertEncoder.from_albert_config(AlbertConfig(
        vocab_size=vocab_size, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=helpers.SEQ))
    model = AlbertForMultipleChoice(encoder)
    model({k: np.zeros((1, 4, helpers.SEQ), "int32") for k in CHOICE_INPUTS})
    # Well separated choice scores: no argmax is a near tie.
    model.head.kernel.assign(model.head.kernel * 100.0)
    return model


@pytest.fixture(scope="module")
def model():
    return _model()


def _graph(model, layer, max_qa_length=MAX_QA):
    settings = multiple_choice.multiple_choice_settings({"max_qa_length": max_qa_length}, helpers.SEQ)
    return multiple_choice.MultipleChoiceGraph(model, layer, settings)


def _inputs(cases):
    return (tf.constant([c[0] for c in cases]), tf.constant([c[1] for c in cases]),
            tf.constant([list(c[2]) for c in cases]))


def _python_features(tokenizer, cases, max_qa_length=MAX_QA):
    examples = [race.RaceExample("e", i, text, question, tuple(choices), None)
                for i, (text, question, choices) in enumerate(cases)]
    features = race.convert_race_examples(examples, tokenizer, max_seq_length=helpers.SEQ, max_qa_length=max_qa_length)
    return race.race_features_to_arrays(features)


@pytest.mark.parametrize("max_qa_length", [MAX_QA, helpers.SEQ - 3])
def test_choice_rows_are_the_race_conversion_sentencepiece(spm, layer, model, max_qa_length):
    from albert_tf.tokenization import SentencePieceTokenizer

    features = _graph(model, layer, max_qa_length).features(*_inputs(CASES))
    expected = _python_features(SentencePieceTokenizer(spm), CASES, max_qa_length)
    for key in CHOICE_INPUTS:
        np.testing.assert_array_equal(features[key].numpy(), expected[key], err_msg=key)
    # The combined question+choice texts are `race.choice_texts` (preprocessed question and option).
    tokenizer = SentencePieceTokenizer(spm)
    combined = _graph(model, layer).choice_texts(_inputs(CASES)[1], _inputs(CASES)[2]).numpy()
    expected_texts = [t for i, (text, q, o) in enumerate(CASES)
                      for t in race.choice_texts(race.RaceExample("e", i, text, q, o, None), tokenizer.preprocess)]
    assert [t.decode("utf-8") for t in combined] == expected_texts


def test_choice_rows_are_the_race_conversion_wordpiece():
    from albert_tf.tokenization import WordPieceTokenizer
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    vocab = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "_"] + list("中国人民北京天安门上海的是")
             + ["the", "law", "##s", "good", "?"])
    layer = AlbertTokenizerLayer(wordpiece_vocab=vocab, sequence_length=helpers.SEQ)
    tokenizer = WordPieceTokenizer(vocab={t: i for i, t in enumerate(vocab)})
    cases = [("中国人民的北京", "北京是_的", ("中国", "上海", "天安门", "the laws")),
             ("The LAW is good", "Is it good?", ("the law", "laws", "人民", ""))]
    graph = _graph(_model(vocab_size=len(vocab)), layer)
    features = graph.features(*_inputs(cases))
    expected = _python_features(tokenizer, cases)
    for key in CHOICE_INPUTS:
        np.testing.assert_array_equal(features[key].numpy(), expected[key], err_msg=key)


def test_scores_match_the_model_on_python_features_for_any_number_of_choices(spm, layer, model):
    from albert_tf.tokenization import SentencePieceTokenizer

    graph = _graph(model, layer)
    tokenizer = SentencePieceTokenizer(spm)
    for cases in (CASES, [(t, q, c[:2]) for t, q, c in CASES], [(t, q, c + ("people", "law")) for t, q, c in CASES[:2]]):
        out = {k: v.numpy() for k, v in graph(*_inputs(cases)).items()}
        arrays = _python_features(tokenizer, cases)
        logits = model({k: tf.constant(arrays[k]) for k in CHOICE_INPUTS})["logits"].numpy()
        np.testing.assert_allclose(out["logits"], logits, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["scores"], tf.nn.softmax(logits).numpy(), rtol=1e-5, atol=1e-6)
        assert out["predicted_choice"].tolist() == logits.argmax(-1).tolist()
        assert out["scores"].shape == (len(cases), len(cases[0][2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="at least one choice"):
        graph(tf.constant(["a"]), tf.constant(["b"]), tf.zeros([1, 0], tf.string))
    with pytest.raises(tf.errors.InvalidArgumentError, match="same batch size"):
        graph(tf.constant(["a", "b"]), tf.constant(["b"]), tf.constant([["c"]]))


def test_settings_and_argument_errors(layer, model):
    assert multiple_choice.multiple_choice_settings(None, 512) == {"max_qa_length": 128}
    assert multiple_choice.multiple_choice_settings({}, helpers.SEQ) == {"max_qa_length": helpers.SEQ - 3}
    race_settings = {"max_seq_length": 512, "max_qa_length": 64, "levels": ["middle", "high"]}
    assert multiple_choice.multiple_choice_settings(race_settings, 512) == {"max_qa_length": 64}
    with pytest.raises(ValueError, match="max_qa_length"):
        multiple_choice.multiple_choice_settings({"max_qa_length": helpers.SEQ - 2}, helpers.SEQ)
    with pytest.raises(ValueError, match="unknown multiple-choice settings"):
        multiple_choice.multiple_choice_settings({"doc_stride": 1}, helpers.SEQ)
    with pytest.raises(ValueError, match="labels are for classifiers"):
        signatures.ServingModule(model, layer, labels=["A", "B", "C", "D"])
    with pytest.raises(ValueError, match="no pair"):
        signatures.ServingModule(model, layer, pair=True)
    with pytest.raises(ValueError, match="qa_settings are for SQuAD"):
        signatures.ServingModule(model, layer, qa_settings={"doc_stride": 3})
    spec = TaskSpec("regression", "regression", None, 16, [], "pearson", {})
    assert families.export_arguments(spec)["task_settings"] is None
    with pytest.raises(ValueError, match="export supports"):
        families.export_arguments(TaskSpec("x", "pretraining", None, 16, [], "x", {}))


@pytest.fixture(scope="module")
def exported(tmp_path_factory, model, spm, layer):
    """The export of a RACE model directory the way `albert-tf export --model-dir` does it (checked)."""
    from albert_tf.tasks.resources import load_model

    directory = tmp_path_factory.mktemp("race_model_dir")
    model.save(str(directory / "model.keras"))
    shutil.copyfile(spm, directory / "spiece.model")
    TaskSpec("race", "multiple_choice", ["A", "B", "C", "D"], helpers.SEQ, ["accuracy"], "accuracy",
             {"type": "sentencepiece", "file": "spiece.model", "lower_case": True},
             settings={"max_seq_length": helpers.SEQ, "max_qa_length": MAX_QA, "levels": ["middle", "high"]},
             ).write(str(directory))
    (directory / "COMPLETE").write_text("")
    arguments = families.export_arguments(TaskSpec.read(str(directory)))
    assert arguments == dict(labels=None, pair=False, qa_settings=None, task_settings={"max_qa_length": MAX_QA})
    loaded = load_model(str(directory))
    base = tmp_path_factory.mktemp("race_base")
    result = saved_model.export_saved_model(loaded, layer, str(base), "race", extra_assets=[str(directory / "task.json")],
                                            **arguments)
    return base, result, loaded


@pytest.mark.slow
def test_export_layout_signatures_warmup_and_ops(exported):
    from albert_tf.export import compatibility
    from albert_tf.model_server.servable import SessionServable

    base, result, loaded = exported
    assert result.signatures == {"serving_default": signatures.PREDICT_METHOD, "tokens": signatures.PREDICT_METHOD}
    report = compatibility.check_ops(result.path)
    assert report.ok, report.problems
    assert "TFText>FastSentencepieceTokenize" in report.text_ops
    info = saved_model.read_export_info(result.path)
    assert info["kind"] == "multiple_choice" and info["task_settings"] == {"max_qa_length": MAX_QA}
    assert 'name: "race"' in (base / "models.config").read_text()
    logs = warmup.read_warmup_file(result.path)
    # One request per signature, then one per length bucket (one: sequence length 16, bucket 16).
    assert [log.predict_log.request.model_spec.signature_name for log in logs] == ["serving_default", "tokens", "serving_default"]
    servable = SessionServable(result.path)
    try:
        defs = servable.signature_defs
        assert set(defs["serving_default"].inputs) == {"text", "question", "choices"}
        assert [d.size for d in defs["serving_default"].inputs["choices"].tensor_shape.dim] == [-1, -1]
        assert set(defs["serving_default"].outputs) == {"logits", "scores", "predicted_choice"}
        # Length-aware: any number of choices, any length up to the sequence length.
        assert [d.size for d in defs["tokens"].inputs["input_ids"].tensor_shape.dim] == [-1, -1, -1]
        assert set(defs["tokens"].outputs) == {"logits", "scores", "predicted_choice"}
        for key, definition in defs.items():
            for name, tensor in list(definition.inputs.items()) + list(definition.outputs.items()):
                assert tensor.dtype in JSON_DTYPES, (key, name)
                assert tensor.WhichOneof("encoding") == "name" and tensor.tensor_shape.dim[0].size == -1, (key, name)
        # Warmup's tokens rows (4 differing choices) through the reloaded graph and the model.
        inputs = warmup.warmup_inputs(defs, False, helpers.SEQ)
        got = servable.run("tokens", inputs["tokens"])
        text = servable.run("serving_default", inputs["serving_default"])
    finally:
        servable.close()
    expected = loaded({k: tf.constant(v) for k, v in inputs["tokens"].items()})["logits"].numpy()
    np.testing.assert_allclose(got["logits"], expected, rtol=1e-5, atol=1e-5)
    assert text["scores"].shape == (2, 4) and inputs["serving_default"]["choices"].shape == (2, 4)


def _rest(server, body, model="race"):
    request = urllib.request.Request(f"http://127.0.0.1:{server.rest_port}/v1/models/{model}:predict",
                                     data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.slow
def test_local_server_rest_and_grpc_answer_as_the_in_process_model(exported, layer):
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from albert_tf.model_server.server import LocalModelServer

    base, _, loaded = exported
    graph = _graph(loaded, layer)
    five = [(t, q, c + ("law",)) for t, q, c in CASES[:2]]
    expected = {k: v.numpy() for k, v in graph(*_inputs(CASES)).items()}
    expected_five = {k: v.numpy() for k, v in graph(*_inputs(five)).items()}
    with LocalModelServer(str(base), model_names=["race"], poll_interval_s=0) as server:
        status, rows = _rest(server, {"instances": [{"text": t, "question": q, "choices": list(c)} for t, q, c in CASES]})
        assert status == 200, rows
        status, columns = _rest(server, {"inputs": {"text": [c[0] for c in five], "question": [c[1] for c in five],
                                                    "choices": [list(c[2]) for c in five]}})
        assert status == 200, columns
        status, error = _rest(server, {"inputs": {"text": ["a"], "question": ["b"], "choices": [[]]}})
        assert status == 400 and "at least one choice" in error["error"]
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "race"
            for name, value in zip(("text", "question", "choices"), _inputs(CASES)):
                request.inputs[name].CopyFrom(tf.make_tensor_proto(value.numpy()))
            response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=60)
    grpc_outputs = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
    rows = rows["predictions"]
    for got, want in ((grpc_outputs, expected), ({k: [r[k] for r in rows] for k in expected}, expected),
                      (columns["outputs"], expected_five)):
        np.testing.assert_allclose(np.asarray(got["logits"]), want["logits"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(got["scores"]), want["scores"], rtol=1e-5, atol=1e-6)
        assert np.asarray(got["predicted_choice"]).tolist() == want["predicted_choice"].tolist()
    assert np.asarray(columns["outputs"]["scores"]).shape == (2, 5)
