"""Tests of the token-classification (NER) export: `albert_tf.tasks.tagging.serving` (in-graph units,
character spans, BIO/BIOES entity decoding) against the Python path
(`albert_tf.tasks.tagging.predict_text_entities`, `albert_tf.tasks.tagging.metrics.get_entities`), the exported
signatures, warmup, configs and op check, and the local server over REST and gRPC."""

import json
import shutil
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _serving_helpers as helpers  # noqa: E402

from albert_tf.tasks.tagging.data import TagVocab  # noqa: E402
from albert_tf.export import saved_model, signatures, warmup  # noqa: E402
from albert_tf.tasks import family as families  # noqa: E402
from albert_tf.tasks import tagging as python_tagging  # noqa: E402
from albert_tf.tasks.tagging import serving as tagging  # noqa: E402
from albert_tf.tasks.tagging.metrics import get_entities  # noqa: E402
from albert_tf.tasks.spec import TaskSpec  # noqa: E402

# BIOES for LOC, BIO for PER: both decodings in one tag set.
TAGS = ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC", "B-PER", "I-PER"]
TEXTS = [
    "the nation of  good law",
    "",
    "  \u3000 ",
    "Caf\u00e9 1,000 people\u00a0states year\tlaw it's in good bad " * 3,  # units cut off by SEQ
    "x\u2003y\nz \x00 congress",  # Unicode whitespace; a unit that gives no piece ([UNK])
]
JSON_DTYPES = {tf.float32.as_datatype_enum, tf.int32.as_datatype_enum, tf.string.as_datatype_enum}
ENTITY_OUTPUTS = ("entity_labels", "entity_texts", "entity_starts", "entity_ends", "entity_scores")
WORD_OUTPUTS = ("words", "word_tags")


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return helpers.tiny_spm(tmp_path_factory.mktemp("tagging_spm"))


@pytest.fixture(scope="module")
def layer(spm):
    return helpers.tokenizer_layer(spm)


def _tagger(num_labels=len(TAGS), seed=0, vocab_size=48):
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.tagging import AlbertForTagging

    keras.utils.set_random_seed(seed)
    encoder = AlbertEncoder.from_albert_config(AlbertConfig(
        vocab_size=vocab_size, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=helpers.SEQ))
    model = AlbertForTagging(encoder, num_labels=num_labels)
    model(helpers.features())
    # Peaky logits: the tags vary from word to word and no argmax is a near tie.
    model.head.kernel.assign(model.head.kernel * 100.0)
    return model


@pytest.fixture(scope="module")
def model():
    return _tagger()


def _graph(model, layer, token_unit="word"):
    return tagging.TaggingGraph(model, layer, TAGS, tagging.tagging_settings({"token_unit": token_unit}, TAGS))


def _rows(outputs, row):
    """Row `row` of the graph's outputs, trimmed to its entity and word counts, as Python values."""
    def value(name, count):
        items = np.asarray(outputs[name])[row][:count].tolist()
        return [v.decode("utf-8") if isinstance(v, bytes) else v for v in items]

    n, w = int(outputs["num_entities"][row]), int(outputs["num_words"][row])
    return {**{k: value(k, n) for k in ENTITY_OUTPUTS}, **{k: value(k, w) for k in WORD_OUTPUTS}}


def _assert_matches_python(outputs, records, texts):
    for row, (record, text) in enumerate(zip(records, texts)):
        got = _rows(outputs, row)
        assert got["words"] == record["words"] and got["word_tags"] == record["tags"], row
        entities = record["entities"]
        assert got["entity_labels"] == [e["label"] for e in entities], row
        assert got["entity_starts"] == [e["start"] for e in entities], row
        assert got["entity_ends"] == [e["end"] for e in entities], row
        assert got["entity_texts"] == [e["text"] for e in entities] == [text[e["start"]:e["end"]] for e in entities], row
        np.testing.assert_allclose(got["entity_scores"], [e["score"] for e in entities], rtol=1e-5, atol=1e-6)


def _python_records(model, spm, texts, token_unit="word", tokenizer=None):
    from albert_tf.tokenization import SentencePieceTokenizer

    tokenizer = tokenizer or SentencePieceTokenizer(spm)
    return python_tagging.predict_text_entities(model, tokenizer, texts, TagVocab(TAGS), seq_length=helpers.SEQ,
                                                token_unit=token_unit)


@pytest.mark.parametrize("token_unit", ["word", "char"])
@pytest.mark.slow
def test_units_and_spans_match_python_split(layer, model, token_unit):
    graph = _graph(model, layer, token_unit)
    units, starts, ends = graph.split(tf.constant(TEXTS))
    for row, text in enumerate(TEXTS):
        expected = python_tagging.split_with_offsets(text, token_unit)
        got = list(zip([u.decode("utf-8") for u in units[row].numpy()], starts[row].numpy().tolist(), ends[row].numpy().tolist()))
        assert got == expected, row
        assert all(text[s:e] == u for u, s, e in expected)
    assert python_tagging.split_with_offsets("a  bc\u3000d", "word") == [("a", 0, 1), ("bc", 3, 5), ("d", 6, 7)]
    assert python_tagging.split_with_offsets("a b", "char") == [("a", 0, 1), ("b", 2, 3)]
    with pytest.raises(ValueError, match="token_unit"):
        python_tagging.split_with_offsets("a", "piece")


@pytest.mark.slow
def test_entity_decoding_matches_get_entities_on_random_tag_sequences(layer, model):
    """Every BIO/BIOES corner (I after O, type changes, E/S closing, runs) against conlleval's rule."""
    graph = _graph(model, layer)
    rng = np.random.default_rng(0)
    batch, width = 400, 12
    lengths = rng.integers(0, width + 1, size=batch)
    tag_id = rng.integers(0, len(TAGS), size=(batch, width)).astype(np.int32)
    tag_id[np.arange(width)[None, :] >= lengths[:, None]] = -1
    probability = np.where(tag_id >= 0, rng.uniform(0.2, 1.0, size=(batch, width)), 0.0).astype(np.float32)
    # Unit i covers characters [2i, 2i + 1) of "a a a ...".
    text = " ".join(["a"] * width)
    features = {
        "text": tf.constant([text] * batch),
        "unit_start": tf.constant(np.tile(2 * np.arange(width, dtype=np.int32), (batch, 1))),
        "unit_end": tf.constant(np.tile(2 * np.arange(width, dtype=np.int32) + 1, (batch, 1))),
    }
    out = graph.entities(features, tf.constant(tag_id), tf.constant(probability))
    out = {k: v.numpy() for k, v in out.items()}
    total = 0
    for row in range(batch):
        tags = [TAGS[t] for t in tag_id[row, : lengths[row]]]
        spans = [("a", 2 * i, 2 * i + 1) for i in range(lengths[row])]
        expected = python_tagging.entity_spans(tags, probability[row, : lengths[row]].tolist(), spans, text)
        assert [(label, 2 * first, 2 * last + 1) for label, first, last in get_entities(tags)] == [
            (e["label"], e["start"], e["end"]) for e in expected]
        n = int(out["num_entities"][row])
        total += n
        assert n == len(expected), (row, tags)
        assert [l.decode() for l in out["entity_labels"][row][:n]] == [e["label"] for e in expected], (row, tags)
        assert out["entity_starts"][row][:n].tolist() == [e["start"] for e in expected], (row, tags)
        assert out["entity_ends"][row][:n].tolist() == [e["end"] for e in expected], (row, tags)
        np.testing.assert_allclose(out["entity_scores"][row][:n], [e["score"] for e in expected], rtol=1e-5)
        assert (out["entity_starts"][row][n:] == -1).all() and (out["entity_labels"][row][n:] == b"").all()
    assert total > batch  # the sample is not degenerate


@pytest.mark.slow
def test_graph_matches_the_python_path_sentencepiece_words(spm, layer, model):
    out = {k: v.numpy() for k, v in _graph(model, layer)(tf.constant(TEXTS)).items()}
    records = _python_records(model, spm, TEXTS)
    _assert_matches_python(out, records, TEXTS)
    assert sum(len(r["entities"]) for r in records) >= 4
    assert out["num_words"].tolist() == [5, 0, 0, 30, 5]
    # The long text's words beyond the sequence length are "O", as in the Python path.
    assert set(records[3]["tags"][16:]) == {"O"}
    assert out["entity_labels"].shape[1] == max(1, out["num_entities"].max())


def test_graph_matches_the_python_path_wordpiece_characters(tmp_path):
    """A Chinese WordPiece vocabulary tagged per character (People's Daily's `token_unit`)."""
    from albert_tf.tokenization import WordPieceTokenizer
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("中国人民北京天安门上海的是") + ["a", "##b", "，"]
    model = _tagger(vocab_size=len(vocab), seed=2)
    layer = AlbertTokenizerLayer(wordpiece_vocab=vocab, sequence_length=helpers.SEQ)
    tokenizer = WordPieceTokenizer(vocab={t: i for i, t in enumerate(vocab)})
    texts = ["中国人民 北京\u3000天安门，在上海。", "ab 中\x00国", "", "人民的北京是中国的北京，天安门上海北京中国人民"]
    out = {k: v.numpy() for k, v in _graph(model, layer, "char")(tf.constant(texts)).items()}
    records = _python_records(model, None, texts, "char", tokenizer)
    _assert_matches_python(out, records, texts)
    assert records[0]["words"][:4] == ["中", "国", "人", "民"] and sum(len(r["entities"]) for r in records) >= 3


@pytest.mark.slow
def test_settings_and_argument_errors(layer, model):
    assert tagging.tagging_settings(None, TAGS) == {"token_unit": "word"}
    with pytest.raises(ValueError, match="token_unit"):
        tagging.tagging_settings({"token_unit": "piece"}, TAGS)
    with pytest.raises(ValueError, match="unknown tagging settings"):
        tagging.tagging_settings({"doc_stride": 3}, TAGS)
    with pytest.raises(ValueError, match="needs its tags"):
        signatures.ServingModule(model, layer)
    with pytest.raises(ValueError, match="6 tags for a token classifier of 7"):
        signatures.ServingModule(model, layer, labels=TAGS[:-1])
    with pytest.raises(ValueError, match="B-/I-TYPE"):
        signatures.ServingModule(model, layer, labels=TAGS[:-1] + ["PER"])
    with pytest.raises(ValueError, match="no pair"):
        signatures.ServingModule(model, layer, labels=TAGS, pair=True)
    with pytest.raises(ValueError, match="task_settings are for"):
        signatures.ServingModule(helpers.tiny_classifier(), layer, task_settings={"token_unit": "word"})


def _model_dir(tmp_path_factory, model, spm):
    """A fine-tuned model directory as `albert-tf finetune --task conll03` leaves it."""
    directory = tmp_path_factory.mktemp("ner_model_dir")
    model.save(str(directory / "model.keras"))
    shutil.copyfile(spm, directory / "spiece.model")
    TaskSpec("conll03", "tagging", TAGS, helpers.SEQ, ["entity_f1"], "entity_f1",
             {"type": "sentencepiece", "file": "spiece.model", "lower_case": True}).write(str(directory))
    (directory / "COMPLETE").write_text("")
    return directory


@pytest.fixture(scope="module")
def exported(tmp_path_factory, model, spm, layer):
    """The export of a model directory the way `albert-tf export --model-dir` does it (checked)."""
    from albert_tf.tasks.resources import load_model

    directory = _model_dir(tmp_path_factory, model, spm)
    spec = TaskSpec.read(str(directory))
    arguments = families.export_arguments(spec)
    assert arguments == dict(labels=TAGS, pair=False, qa_settings=None, task_settings={"token_unit": "word"})
    loaded = load_model(str(directory))
    base = tmp_path_factory.mktemp("ner_base")
    result = saved_model.export_saved_model(loaded, layer, str(base), "ner", extra_assets=[str(directory / "task.json")],
                                            **arguments)
    return base, result, loaded


@pytest.mark.slow
def test_export_layout_signatures_warmup_and_ops(exported):
    from albert_tf.export import compatibility
    from albert_tf.model_server.servable import SessionServable

    base, result, _ = exported
    assert result.version == 1 and result.signatures == {"serving_default": signatures.PREDICT_METHOD,
                                                         "tokens": signatures.PREDICT_METHOD}
    report = compatibility.check_ops(result.path)
    assert report.ok, report.problems
    assert "TFText>FastSentencepieceTokenize" in report.text_ops and "UnsortedSegmentJoin" in report.ops
    info = saved_model.read_export_info(result.path)
    assert info["kind"] == "tagging" and info["labels"] == TAGS
    assert info["task_settings"] == {"token_unit": "word"} and (Path(result.path) / "assets" / "task.json").is_file()
    config = (base / "models.config").read_text()
    assert 'name: "ner"' in config and 'base_path: "/models/ner"' in config
    assert (base / "batching_parameters.txt").is_file()
    logs = warmup.read_warmup_file(result.path)
    # One request per signature, then one per length bucket (one: sequence length 16, bucket 16).
    assert [log.predict_log.request.model_spec.signature_name for log in logs] == ["serving_default", "tokens", "serving_default"]
    servable = SessionServable(result.path)
    try:
        defs = servable.signature_defs
        assert set(defs) == {"serving_default", "tokens"}
        assert set(defs["serving_default"].inputs) == {"text"}
        assert set(defs["serving_default"].outputs) == set(ENTITY_OUTPUTS + WORD_OUTPUTS) | {"num_entities", "num_words"}
        assert set(defs["tokens"].inputs) == {"input_ids", "input_mask", "segment_ids"}
        assert set(defs["tokens"].outputs) == {"logits", "probabilities", "tag_id", "tag"}
        ranks = {name: len(info.tensor_shape.dim) for name, info in defs["serving_default"].outputs.items()}
        assert ranks == {**{k: 2 for k in ENTITY_OUTPUTS + WORD_OUTPUTS}, "num_entities": 1, "num_words": 1}
        for key, definition in defs.items():
            for name, tensor in list(definition.inputs.items()) + list(definition.outputs.items()):
                assert tensor.dtype in JSON_DTYPES, (key, name)
                assert tensor.WhichOneof("encoding") == "name" and tensor.tensor_shape.dim[0].size == -1, (key, name)
    finally:
        servable.close()


@pytest.mark.slow
def test_reloaded_export_answers_as_the_python_path(exported, spm):
    from albert_tf.model_server.servable import SessionServable

    _, result, loaded = exported
    servable = SessionServable(result.path)
    try:
        got = servable.run("serving_default", {"text": np.array([t.encode("utf-8") for t in TEXTS], object)})
        # Invalid UTF-8 is read as `bytes.decode("utf-8", "replace")`: offsets count U+FFFD as one.
        raw = "ab\xff\xfe law of nation".encode("latin-1")
        invalid = servable.run("serving_default", {"text": np.array([raw], object)})
    finally:
        servable.close()
    _assert_matches_python(got, _python_records(loaded, spm, TEXTS), TEXTS)
    decoded = raw.decode("utf-8", "replace")
    _assert_matches_python(invalid, _python_records(loaded, spm, [decoded]), [decoded])


def _rest(server, model, body):
    request = urllib.request.Request(f"http://127.0.0.1:{server.rest_port}/v1/models/{model}:predict",
                                     data=json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def _assert_same_outputs(got, expected):
    """Served outputs (gRPC arrays or REST JSON) equal the in-process ones: strings and ints exactly."""
    for name, value in expected.items():
        if value.dtype == object:
            served = np.vectorize(lambda v: v if isinstance(v, bytes) else v.encode("utf-8"), otypes=[object])(
                np.array(got[name], dtype=object))
            assert served.tolist() == value.tolist(), name
        elif value.dtype.kind == "f":
            np.testing.assert_allclose(np.asarray(got[name]), value, rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(np.asarray(got[name]), value, err_msg=name)


@pytest.mark.slow
def test_local_server_rest_and_grpc_answer_as_the_in_process_model(exported, layer, spm):
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from albert_tf.export import compatibility
    from albert_tf.model_server.server import LocalModelServer

    base, result, loaded = exported
    texts = TEXTS[:1] + TEXTS[3:]
    module = signatures.ServingModule(loaded, layer, labels=TAGS, task_settings={"token_unit": "word"})
    expected = {k: v.numpy() for k, v in module.serve_text(tf.constant(texts)).items()}
    tokens_def = compatibility.read_meta_graph(result.path).signature_def["tokens"]
    token_inputs = warmup.warmup_inputs({"tokens": tokens_def}, False, helpers.SEQ)["tokens"]
    served_tokens = module.serve_tokens(**{k: tf.constant(v) for k, v in token_inputs.items()})
    expected_tokens = {k: v.numpy() for k, v in served_tokens.items()}
    with LocalModelServer(str(base), model_names=["ner"], poll_interval_s=0) as server:
        rows = _rest(server, "ner", {"instances": [{"text": t} for t in texts]})["predictions"]
        columns = _rest(server, "ner", {"inputs": {"text": texts}})["outputs"]
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "ner"
            request.inputs["text"].CopyFrom(tf.make_tensor_proto(np.array([t.encode() for t in texts], object)))
            response = stub.Predict(request, timeout=60)
            tokens_request = predict_pb2.PredictRequest()
            tokens_request.model_spec.name, tokens_request.model_spec.signature_name = "ner", "tokens"
            for name, value in token_inputs.items():
                tokens_request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
            tokens_response = stub.Predict(tokens_request, timeout=60)
    grpc_outputs = {k: tf.make_ndarray(v) for k, v in response.outputs.items()}
    _assert_same_outputs(grpc_outputs, expected)
    _assert_same_outputs(columns, expected)
    _assert_same_outputs({k: [row[k] for row in rows] for k in expected}, expected)
    _assert_matches_python(grpc_outputs, _python_records(loaded, spm, texts), texts)
    _assert_same_outputs({k: tf.make_ndarray(v) for k, v in tokens_response.outputs.items()}, expected_tokens)
    # The tokens signature is the model's logits and their argmax tags.
    logits = loaded({k: tf.constant(v) for k, v in token_inputs.items()})["logits"].numpy()
    np.testing.assert_allclose(tf.make_ndarray(tokens_response.outputs["logits"]), logits, rtol=1e-5, atol=1e-5)
    assert tf.make_ndarray(tokens_response.outputs["tag"]).tolist() == [[TAGS[i].encode() for i in r] for r in logits.argmax(-1)]
