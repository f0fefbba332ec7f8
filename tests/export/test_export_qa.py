"""Tests of the SQuAD (question answering) export: `albert_tf.tasks.squad.serving` (in-graph windows,
span decoding, character offsets) against the Python pipeline (`albert_tf.tasks.squad.data` features +
`albert_tf.tasks.squad.postprocessing`), the exported signatures, reload, the local server's REST
API and `albert-tf export` of a `finetune --task squad-v2` directory."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from albert_tf.tasks.squad import data as squad_data  # noqa: E402
from albert_tf.export import saved_model, signatures  # noqa: E402
from albert_tf.tasks.squad import postprocessing as post  # noqa: E402
from albert_tf.tasks.squad import serving as qa  # noqa: E402
from albert_tf.tokenization import SentencePieceTokenizer  # noqa: E402
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer  # noqa: E402

SEQ = 48
SETTINGS = dict(doc_stride=16, max_query_length=8, n_best_size=20, max_answer_length=30)
CORPUS = """The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in France.
They were descended from Norse raiders and pirates from Denmark, Iceland and Norway.
Albert Einstein was born in Ulm in 1879 and developed the theory of relativity.
The café in Zürich sold 12,000 crêpes and 1,500,000 naïve résumés to the Ångström family.
Paris lies on the Seine; who, where, when, what is the king of the north?
"""
LONG = " ".join(CORPUS.split()) + " Einstein moved to Bern in 1902, then to Zürich."
CASES = [
    ("Where was Einstein born?", "Albert Einstein was born in Ulm in 1879."),
    ("Who sold crêpes?", "  The  Café in\tZÜRICH sold 12,000 crêpes;   naïve  résumés\u00a0à la carte.  "),
    ("Where did Einstein move in 1902?", LONG),  # several windows
    ("What?", "Norway"),
    ("Who is the king of the north?", "\u3000Paris lies on the Seine;\n\n who, where, when?\u2003"),
]
JSON_DTYPES = {tf.float32.as_datatype_enum, tf.int32.as_datatype_enum, tf.string.as_datatype_enum}


@pytest.fixture(scope="module")
def spm(squad_spm_model):
    """The committed model of the SQuAD / RACE test texts, CORPUS among them (tests/fixtures/squad_spm.model)."""
    return squad_spm_model


@pytest.fixture(scope="module")
def layer(spm):
    return AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=SEQ)


def _pseudo(ids, position, salt):
    """Deterministic, nearly tie-free pseudo logits of (token id, position)."""
    value = tf.math.floormod(tf.cast(ids, tf.int64) * 7919 + tf.cast(position, tf.int64) * 104729 + salt, 100003)
    return tf.cast(value, tf.float32) / 1000.0


class StubV1:
    """Start/end logits that depend only on the features: the same for both pipelines."""

    def __call__(self, inputs, training=False):
        position = tf.range(tf.shape(inputs["input_ids"])[1])[None, :]
        return {"start_logits": _pseudo(inputs["input_ids"], position, 11),
                "end_logits": _pseudo(inputs["input_ids"], position, 977)}


class StubV2:
    """The v2 head's beam outputs (3 starts x 2 ends) from pseudo log-probabilities."""

    def __init__(self, null_logit):
        self.null_logit = null_logit

    def __call__(self, inputs, training=False):
        ids, p_mask = inputs["input_ids"], tf.cast(inputs["p_mask"], tf.float32)
        position = tf.range(tf.shape(ids)[1])[None, :]
        start = _pseudo(ids, position, 5) - 1e4 * p_mask
        start_lp, start_index = tf.math.top_k(tf.nn.log_softmax(start), k=3)
        end = _pseudo(ids, position, 31)[:, None, :] + 0.37 * tf.cast(start_index, tf.float32)[:, :, None]
        end_lp, end_index = tf.math.top_k(tf.nn.log_softmax(end - 1e4 * p_mask[:, None, :]), k=2)
        batch = tf.shape(ids)[0]
        return {"start_top_log_probs": start_lp, "start_top_index": start_index,
                "end_top_log_probs": tf.reshape(end_lp, [batch, 6]), "end_top_index": tf.reshape(end_index, [batch, 6]),
                "cls_logits": tf.fill([batch], tf.constant(self.null_logit, tf.float32))}


def _reference(spm, model, version, cases, threshold=None):
    """The Python pipeline: features, the model on them, the original post-processing."""
    tokenizer = SentencePieceTokenizer(spm, lower_case=True)
    examples = [squad_data.SquadExample(qas_id=str(i), question_text=q, paragraph_text=c) for i, (q, c) in enumerate(cases)]
    features, skipped = squad_data.convert_examples_to_features(
        examples, tokenizer, is_training=False, max_seq_length=SEQ, doc_stride=SETTINGS["doc_stride"],
        max_query_length=SETTINGS["max_query_length"])
    assert not skipped
    arrays = squad_data.features_to_arrays(features, is_training=False)
    outputs = {k: v.numpy() for k, v in model({k: tf.constant(arrays[k]) for k in squad_data.MODEL_INPUTS}).items()}
    if version == "v1":
        results = [post.RawResultV1(f.unique_id, outputs["start_logits"][i], outputs["end_logits"][i])
                   for i, f in enumerate(features)]
        predictions, _ = post.postprocess_v1(examples, features, results, n_best_size=SETTINGS["n_best_size"],
                                             max_answer_length=SETTINGS["max_answer_length"])
        null = None
    else:
        results = [post.RawResultV2(f.unique_id, *(outputs[k][i] for k in ("start_top_log_probs", "start_top_index",
                                                                              "end_top_log_probs", "end_top_index")),
                                    float(outputs["cls_logits"][i])) for i, f in enumerate(features)]
        predictions, _, null = post.postprocess_v2(examples, features, results, max_answer_length=SETTINGS["max_answer_length"],
                                                   null_score_diff_threshold=threshold)
    return features, arrays, [predictions[str(i)] for i in range(len(cases))], null


def _run(graph, cases):
    out = graph(tf.constant([q for q, _ in cases]), tf.constant([c for _, c in cases]))
    return {k: v.numpy() for k, v in out.items()}


def test_windows_are_the_training_features(spm, layer):
    graph = qa.QaGraph(StubV1(), layer, qa.qa_settings(SETTINGS, "v1"))
    features = graph.features(tf.constant([q for q, _ in CASES]), tf.constant([c for _, c in CASES]))
    _, arrays, _, _ = _reference(spm, StubV1(), "v1", CASES)
    for key in squad_data.MODEL_INPUTS:
        np.testing.assert_array_equal(features[key].numpy(), arrays[key], err_msg=key)
    assert features["num_windows"].numpy()[2] > 1 and features["num_windows"].numpy()[0] == 1
    # The per-character normalization is the layer's whole-string preprocessing.
    normalized, _ = graph._normalize_chars(tf.constant([c for _, c in CASES]))
    assert normalized.numpy().tolist() == layer.preprocess(tf.constant([c for _, c in CASES])).numpy().tolist()


def test_v1_span_decoding_matches_the_python_reference(spm, layer):
    graph = qa.QaGraph(StubV1(), layer, qa.qa_settings(SETTINGS, "v1"))
    out = _run(graph, CASES)
    _, _, expected, _ = _reference(spm, StubV1(), "v1", CASES)
    answers = [t.decode("utf-8") for t in out["answer_text"]]
    assert answers == [("" if e == "empty" else e) for e in expected]
    for (_, context), answer, start, end, has in zip(CASES, answers, out["start_char"], out["end_char"], out["has_answer"]):
        if has:
            assert context[start:end] == answer != ""
        else:
            assert (answer, start, end) == ("", -1, -1)
    assert out["has_answer"].sum() >= 3


@pytest.mark.parametrize("null_logit", [-1.0, 1.0])
def test_v2_span_and_no_answer_match_the_python_reference(spm, layer, null_logit):
    stub = StubV2(null_logit)
    graph = qa.QaGraph(stub, layer, qa.qa_settings(dict(SETTINGS, null_score_diff_threshold=0.0), "v2"))
    out = _run(graph, CASES)
    _, _, expected, null = _reference(spm, stub, "v2", CASES, threshold=0.0)
    assert [t.decode("utf-8") for t in out["answer_text"]] == expected
    np.testing.assert_allclose(out["null_score"], [null[str(i)] for i in range(len(CASES))])
    if null_logit > 0:
        assert not out["has_answer"].any() and (out["start_char"] == -1).all()
    else:
        assert out["has_answer"].sum() >= 3
        for (_, context), answer, start, end, has in zip(CASES, out["answer_text"], out["start_char"], out["end_char"],
                                                          out["has_answer"]):
            assert bool(has) == bool(answer) and (context[start:end] == answer.decode("utf-8") if has else start == end == -1)


def _tiny_squad_model(version, seed=0):
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.squad import build_squad_model

    keras.utils.set_random_seed(seed)
    encoder = AlbertEncoder.from_albert_config(AlbertConfig(
        vocab_size=200, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=SEQ))
    model = build_squad_model(encoder, version)
    model({k: np.zeros((1, SEQ), "int32") for k in squad_data.MODEL_INPUTS})
    return model


@pytest.fixture(scope="module")
def v1_export(layer, tmp_path_factory):
    base = tmp_path_factory.mktemp("qa_base")
    model = _tiny_squad_model("v1")
    # The fresh-process reload of the check is what the next test does itself (the TF1 loader of
    # `SessionServable`, compared with the Python pipeline); the v2 CLI export runs the full check.
    # Fixed length: the Python reference ranks the n-best over all positions, padding included,
    # as the fixed-length export does (the length-aware v1 search ranks real positions only, see
    # albert_tf.tasks.squad.serving; this untrained model scores padding high enough for that to matter).
    result = saved_model.export_saved_model(model, layer, str(base), "qa", qa_settings=SETTINGS, check=False,
                                            length_bucket=None)
    return base, result, model


@pytest.mark.slow
def test_export_signatures_reload_and_answers(spm, layer, v1_export):
    from albert_tf.model_server.servable import SessionServable

    from albert_tf.export import compatibility

    base, result, model = v1_export
    report = compatibility.check_ops(result.path)
    assert report.ok, report.problems
    assert {"SentencepieceTokenizeWithOffsetsOp", "TFText>FastSentencepieceTokenize"} <= set(report.text_ops)
    info = saved_model.read_export_info(result.path)
    assert info["kind"] == "squad_v1" and info["qa"]["doc_stride"] == 16
    servable = SessionServable(result.path)
    try:
        defs = servable.signature_defs
        assert set(defs) == {"serving_default", "tokens"}
        assert set(defs["serving_default"].inputs) == {"question", "context"}
        assert set(defs["serving_default"].outputs) == {"answer_text", "start_char", "end_char", "score", "has_answer",
                                                        "num_windows"}
        assert set(defs["tokens"].outputs) == {"start_logits", "end_logits"}
        for key, definition in defs.items():
            for name, tensor in list(definition.inputs.items()) + list(definition.outputs.items()):
                assert tensor.dtype in JSON_DTYPES, (key, name)
                assert tensor.WhichOneof("encoding") == "name" and tensor.tensor_shape.dim[0].size == -1, (key, name)
        got = servable.run("serving_default", {"question": np.array([q.encode() for q, _ in CASES], object),
                                               "context": np.array([c.encode() for _, c in CASES], object)})
    finally:
        servable.close()
    assert all(v.shape == (len(CASES),) for v in got.values())
    # The reloaded graph answers as the Python pipeline with the real model does.
    _, _, expected, _ = _reference(spm, model, "v1", CASES)
    assert [t.decode("utf-8") for t in got["answer_text"]] == [("" if e == "empty" else e) for e in expected]
    # Warmup requests exist for both signatures.
    from albert_tf.export import warmup

    logs = warmup.read_warmup_file(result.path)
    assert sorted(log.predict_log.request.model_spec.signature_name for log in logs) == ["serving_default", "tokens"]


@pytest.mark.slow
def test_local_server_rest_and_client_answers(v1_export):
    import urllib.request

    from albert_tf.model_server.client import predict_qa
    from albert_tf.model_server.server import LocalModelServer

    base, _, _ = v1_export
    with LocalModelServer(str(base), model_names=["qa"], poll_interval_s=0) as server:
        body = json.dumps({"instances": [{"question": q, "context": c} for q, c in CASES[:2]]}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{server.rest_port}/v1/models/qa:predict", data=body)
        with urllib.request.urlopen(request, timeout=60) as response:
            predictions = json.loads(response.read())["predictions"]
        grpc = predict_qa(f"127.0.0.1:{server.grpc_port}", "qa", [q for q, _ in CASES[:2]], [c for _, c in CASES[:2]])
    assert [p["answer_text"] for p in predictions] == [t.decode("utf-8") for t in grpc["answer_text"]]
    assert len(predictions) == 2
    for (_, context), prediction in zip(CASES, predictions):
        assert set(prediction) >= {"answer_text", "start_char", "end_char", "score", "has_answer"}
        if prediction["has_answer"]:
            assert context[prediction["start_char"]:prediction["end_char"]] == prediction["answer_text"]


QA_CONTEXT = ("The Normans were the people who gave their name to Normandy, a region in France. "
              "Albert Einstein was born in Ulm in 1879.")
QA_QUESTIONS = [("q1", "Who gave their name to Normandy?", "The Normans"), ("q2", "Where is Normandy?", "France"),
                ("q3", "Where was Einstein born?", "Ulm"), ("q4", "When was Einstein born?", "1879")]


def _squad_v2_json():
    qas = [{"id": q, "question": text, "answers": [{"text": a, "answer_start": QA_CONTEXT.index(a)}]}
           for q, text, a in QA_QUESTIONS]
    qas.append({"id": "n1", "question": "Who is the king of Ulm?", "answers": [], "is_impossible": True})
    return json.dumps({"version": "test", "data": [{"title": "t", "paragraphs": [{"context": QA_CONTEXT, "qas": qas}]}]})


def _cli(module_name, argv):
    import argparse
    import importlib

    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return module.run(parser.parse_args([str(a) for a in argv]))


@pytest.mark.slow
def test_cli_export_of_a_squad_v2_finetune_dir(tmp_path, spm):
    data = tmp_path / "squad_v2"
    data.mkdir()
    for name in ("train-v2.0.json", "dev-v2.0.json"):
        (data / name).write_text(_squad_v2_json(), encoding="utf-8")
    # The model's vocabulary is the tokenizer's (finetune refuses unused embedding rows).
    config = {"vocab_size": SentencePieceTokenizer(spm).vocab_size, "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 64}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    out = tmp_path / "model"
    assert _cli("albert_tf.cli.finetune", [
        "--task", "squad-v2", "--data", data, "--config", tmp_path / "config.json", "--spm-model", spm,
        "--model-dir", out, "--batch-size", 4, "--num-train-steps", 4, "--eval-every", 4, "--learning-rate", 1e-3,
        "--quiet", "--max-seq-length", 64, "--doc-stride", 32, "--max-query-length", 10]) == 0
    threshold = json.loads((out / "task.json").read_text())["settings"]["null_score_diff_threshold"]
    assert _cli("albert_tf.cli.export", ["--model-dir", out, "--export-base", tmp_path / "base", "--model-name", "squad2"]) == 0
    version = tmp_path / "base" / "squad2" / "1"
    info = saved_model.read_export_info(str(version))
    assert info["kind"] == "squad_v2" and info["qa"]["null_score_diff_threshold"] == pytest.approx(threshold)
    assert info["qa"]["doc_stride"] == 32 and info["sequence_length"] == 64

    from albert_tf.model_server.servable import SessionServable

    servable = SessionServable(str(version))
    try:
        assert set(servable.signature_defs["tokens"].inputs) == {"input_ids", "input_mask", "segment_ids", "p_mask"}
        got = servable.run("serving_default", {"question": np.array([b"Where was Einstein born?"], object),
                                               "context": np.array([QA_CONTEXT.encode()], object)})
    finally:
        servable.close()
    assert set(got) >= {"answer_text", "null_score", "has_answer"}
    answer = got["answer_text"][0].decode()
    assert (answer == "") == (got["has_answer"][0] == 0)
    if answer:
        assert QA_CONTEXT[got["start_char"][0]:got["end_char"][0]] == answer
