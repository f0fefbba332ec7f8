"""Length-sorted chunks (`length_chunk`): a length-aware classifier's or regressor's text
signatures compute a batch in chunks of rows of similar length, each padded to its own longest, and
answer as the whole batch does, in the request's order."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export import signatures
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

SEQ = 48
BUCKET = 8
TOL = dict(rtol=1e-5, atol=1e-5)
# Seven texts out of length order: chunks of 2 are three pairs and a single row.
TEXTS = [
    "The Normans gave their name to Normandy, a region in France; they descended from Norse raiders.",
    "Norway",
    " ".join(["Paris lies on the Seine, who sold 12,000 crêpes to the king of the north?"] * 6),
    "Albert Einstein was born in Ulm.",
    "",
    "Where was Einstein born? In Ulm, a city on the Danube.",
    "France",
]


@pytest.fixture(scope="module")
def layer(squad_spm_model):
    return AlbertTokenizerLayer.from_sentencepiece(squad_spm_model, sequence_length=SEQ)


def _model(kind, vocab_size):
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.classification import AlbertForClassification, AlbertForRegression

    keras.utils.set_random_seed(3)
    encoder = AlbertEncoder.from_albert_config(AlbertConfig(
        vocab_size=vocab_size, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=SEQ))
    model = AlbertForClassification(encoder, num_labels=3) if kind == "classification" else AlbertForRegression(encoder)
    ones = np.ones((1, SEQ), "int32")
    model({"input_ids": ones, "input_mask": ones, "segment_ids": 0 * ones})
    return model


@pytest.fixture(scope="module")
def models(layer):
    return {kind: _model(kind, layer.vocab_size) for kind in ("classification", "regression")}


def _inputs(kind, texts):
    texts = tf.constant(texts, tf.string)
    return {"text": texts, "text_b": tf.reverse(texts, [0])} if kind == "regression" else {"text": texts}


def _examples(texts):
    return tf.constant([tf.train.Example(features=tf.train.Features(feature={"text": tf.train.Feature(
        bytes_list=tf.train.BytesList(value=[t.encode("utf-8")]))})).SerializeToString() for t in texts])


def _assert_equal(got, want):
    assert set(got) == set(want)
    for key in want:
        a, b = np.asarray(got[key]), np.asarray(want[key])
        assert a.shape == b.shape, key
        if b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, err_msg=key, **TOL)
        else:
            np.testing.assert_array_equal(a, b, err_msg=key)


@pytest.mark.parametrize("kind", ["classification", "regression"])
def test_chunked_signatures_answer_as_the_whole_batch_in_the_requests_order(models, layer, kind):
    pair = kind == "regression"
    chunked = signatures.ServingModule(models[kind], layer, pair=pair, length_bucket=BUCKET, length_chunk=2)
    whole = signatures.ServingModule(models[kind], layer, pair=pair, length_bucket=BUCKET, length_chunk=None)
    fixed = signatures.ServingModule(models[kind], layer, pair=pair, length_bucket=None)
    assert (chunked.length_chunk, whole.length_chunk, fixed.length_chunk) == (2, None, None)
    functions = [module.signatures() for module in (chunked, whole, fixed)]
    for texts in (TEXTS, TEXTS[:1], TEXTS[1:3], []):
        answers = [f["serving_default"](**_inputs(kind, texts)) for f in functions]
        _assert_equal(answers[0], answers[1])
        _assert_equal(answers[0], answers[2])
        assert len(next(iter(answers[0].values()))) == len(texts)
    extra, key = ("regress", "outputs") if pair else ("classify", "scores")
    if not pair:  # the Classify / Regress APIs read tf.Examples with `text` (a pair also needs `text_b`)
        got, want = (f[extra](inputs=_examples(TEXTS)) for f in functions[:2])
        _assert_equal(got, want)
    graph = functions[0]["serving_default"].graph
    assert any(op.type in ("While", "StatelessWhile") for op in graph.get_operations())
    assert not any(op.type in ("While", "StatelessWhile") for op in functions[1]["serving_default"].graph.get_operations())


@pytest.mark.parametrize("length_bucket", [BUCKET, 16, 4])
def test_each_chunk_is_rows_of_similar_length_padded_to_its_own_longest(models, layer, monkeypatch, length_bucket):
    from albert_tf.tasks.classification.serving import ClassifierServing

    seen = []
    token_outputs = ClassifierServing._token_outputs

    def recording(self, features):  # the model's rows and width, each time the graph runs the model
        shape = tf.numpy_function(lambda s: seen.append(tuple(s)) or s, [tf.shape(features["input_ids"])], tf.int32)
        with tf.control_dependencies([shape]):
            return token_outputs(self, {k: tf.identity(v) for k, v in features.items()})

    # Patched before the module is made: it traces its functions as it is made.
    monkeypatch.setattr(ClassifierServing, "_token_outputs", recording)
    module = signatures.ServingModule(models["classification"], layer, length_bucket=length_bucket, length_chunk=2)
    module.signatures()["serving_default"](text=tf.constant(TEXTS))
    lengths = sorted(int(n) for n in layer(tf.constant(TEXTS))["input_mask"].numpy().sum(axis=1))
    # Sorted rows are close in length: a chunk rounds finer than the packing's (default) 16.
    rounding = min(length_bucket, signatures.CHUNK_LENGTH_BUCKET)
    want = [(len(lengths[i:i + 2]), min(SEQ, -(-max(lengths[i:i + 2]) // rounding) * rounding)) for i in range(0, 7, 2)]
    assert seen == want
    assert want[0][1] < want[-1][1] == SEQ  # the short rows did not pay for the long one
    if length_bucket == 16:
        assert signatures.CHUNK_LENGTH_BUCKET == 8 and any(width % 16 for _, width in want)


def test_auto_chunks_models_with_enough_work_per_token():
    from albert_tf.config import AlbertConfig

    def config(hidden, layers, inner_group_num=1):
        return AlbertConfig(vocab_size=100, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                            intermediate_size=4 * hidden, inner_group_num=inner_group_num)

    assert signatures.auto_length_chunk(config(768, 12)) == signatures.DEFAULT_LENGTH_CHUNK == 8
    assert signatures.auto_length_chunk(config(312, 4)) == 8
    assert signatures.auto_length_chunk(config(128, 2)) is None
    assert signatures.auto_length_chunk(config(128, 2, inner_group_num=8)) == 8  # 16 layers applied


def test_export_records_the_chunk_and_bad_values_are_refused(models, layer, tmp_path):
    from albert_tf.export import saved_model

    model = models["classification"]
    result = saved_model.export_saved_model(model, layer, str(tmp_path), "chunked", check=False, length_bucket=BUCKET,
                                            length_chunk=2)
    auto = saved_model.export_saved_model(model, layer, str(tmp_path), "auto", check=False, length_bucket=BUCKET)
    fixed = saved_model.export_saved_model(model, layer, str(tmp_path), "fixed", check=False, length_bucket=None,
                                           length_chunk=2)
    assert [saved_model.read_export_info(r.path)["length_chunk"] for r in (result, auto, fixed)] == [2, None, None]
    loaded = tf.saved_model.load(result.path).signatures["serving_default"]
    whole = signatures.ServingModule(model, layer, length_bucket=BUCKET, length_chunk=None).signatures()
    _assert_equal(loaded(text=tf.constant(TEXTS)), whole["serving_default"](text=tf.constant(TEXTS)))
    for bad in (0, -1, True, 2.5, "8"):
        with pytest.raises(ValueError, match="length_chunk"):
            signatures.ServingModule(model, layer, length_bucket=BUCKET, length_chunk=bad)
    assert sorted(os.listdir(tmp_path)) == ["auto", "batching_parameters.txt", "chunked", "fixed", "models.config",
                                            "serving.env"]
    with open(os.path.join(result.path, "assets", "export.json"), encoding="utf-8") as f:
        assert json.load(f)["length_bucket"] == BUCKET


def test_warmup_reaches_every_width_the_chunks_run_at(models, layer):
    from types import SimpleNamespace

    from albert_tf.export import warmup

    defs = {"serving_default": SimpleNamespace(inputs={"text": None})}
    widths = {}
    for chunk in (2, None):
        module = signatures.ServingModule(models["classification"], layer, length_bucket=16, length_chunk=chunk)
        requests = warmup.bucket_warmup_inputs(defs, module, pair=False)
        lengths = [int(layer(tf.constant(inputs["text"]))["input_mask"].numpy().sum()) for _, inputs in requests]
        step = module.width_step
        widths[chunk] = (step, [min(SEQ, -(-n // step) * step) for n in lengths])
    # In chunks the model runs at widths rounded to 8, so the warmup has a request for each of them.
    assert widths[2] == (signatures.CHUNK_LENGTH_BUCKET, [8, 16, 24, 32, 40, 48])
    assert widths[None] == (16, [16, 32, 48])
