"""Tests for albert_tf.tasks.squad: the v1 and v2 heads, their losses, training and prediction glue."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.tasks.squad import data as S
from albert_tf.tasks.squad import postprocessing as P
from albert_tf.tasks.squad import (
    AlbertSquadV2Head,
    AlbertForSquadV1,
    AlbertForSquadV2,
    build_squad_model,
    predict_squad,
    predict_squad_file,
    prepare_squad_task,
    write_squad_outputs,
)
from albert_tf.tokenization import SentencePieceTokenizer

CONTEXT = (
    "The Normans were the people who gave their name to Normandy, a region in France. "
    "Albert Einstein was born in Ulm in 1879."
)
QUESTIONS = [
    ("q1", "Who gave their name to Normandy?", "The Normans"),
    ("q2", "Where is Normandy?", "France"),
    ("q3", "Where was Einstein born?", "Ulm"),
    ("q4", "When was Einstein born?", "1879"),
    ("n1", "Who is the king of Ulm?", None),
]
SEQ = 48


@pytest.fixture(scope="module")
def task(tmp_path_factory, squad_spm_model):
    directory = tmp_path_factory.mktemp("squad")
    tokenizer = SentencePieceTokenizer(squad_spm_model)  # tests/fixtures/squad_spm.model, of these texts
    qas = []
    for qid, question, answer in QUESTIONS:
        if answer is None:
            qas.append({"id": qid, "question": question, "answers": [], "is_impossible": True})
        else:
            qas.append({"id": qid, "question": question, "answers": [{"text": answer, "answer_start": CONTEXT.index(answer)}]})
    path = directory / "v2.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": CONTEXT, "qas": qas}]}]}), encoding="utf-8")
    data = prepare_squad_task(
        tokenizer, version="v2", train_file=path, eval_file=path, max_seq_length=SEQ, doc_stride=16, max_query_length=10
    )
    return tokenizer, data


def encoder(tokenizer, seed=0):
    keras.utils.set_random_seed(seed)
    config = AlbertConfig(
        vocab_size=tokenizer.vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64,
    )
    return AlbertEncoder.from_albert_config(config)


def train_batch(data):
    return next(iter(data.train_dataset.batch(len(data.train_features))))


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_v1_loss_is_the_mean_of_start_and_end_cross_entropy(task):
    tokenizer, data = task
    model = AlbertForSquadV1(encoder(tokenizer))
    batch = train_batch(data)
    out = model(batch, training=False)
    assert out["start_logits"].shape == (len(data.train_features), SEQ)
    rows = np.arange(len(data.train_features))
    start = -log_softmax(np.asarray(out["start_logits"]))[rows, np.asarray(batch["start_positions"])].mean()
    end = -log_softmax(np.asarray(out["end_logits"]))[rows, np.asarray(batch["end_positions"])].mean()
    np.testing.assert_allclose(float(model.compute_task_loss(batch, out)), (start + end) / 2, rtol=1e-5)


@pytest.mark.slow
def test_v1_loss_falls_on_a_tiny_overfit_set(task):
    tokenizer, data = task
    model = build_squad_model(encoder(tokenizer), "v1")
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    batch = train_batch(data)

    def loss_and_accuracy():
        out = model(batch, training=False)
        hits = np.argmax(np.asarray(out["start_logits"]), -1) == np.asarray(batch["start_positions"])
        return float(model.compute_task_loss(batch, out)), hits.mean()

    before = loss_and_accuracy()
    model.fit(data.train_dataset.batch(8).repeat(), steps_per_epoch=40, epochs=1, verbose=0)
    after = loss_and_accuracy()
    assert after[0] < 0.5 * before[0]
    assert after[1] > before[1]
    results = predict_squad(model, data.eval_dataset, batch_size=4)
    assert [r.unique_id for r in results] == [f.unique_id for f in data.eval_features]
    assert isinstance(results[0], P.RawResultV1) and results[0].start_logits.shape == (SEQ,)


def test_v2_beam_matches_teacher_forcing_and_respects_p_mask(task):
    tokenizer, data = task
    model = AlbertForSquadV2(encoder(tokenizer), start_n_top=3, end_n_top=2)
    batch = train_batch(data)
    inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids", "p_mask")}
    beam = {k: np.asarray(v) for k, v in model(inputs, training=False).items()}
    p_mask = np.asarray(batch["p_mask"])
    assert beam["start_top_index"].shape == (len(p_mask), 3) and beam["end_top_index"].shape == (len(p_mask), 6)
    rows = np.arange(len(p_mask))[:, None]
    # Nothing in the beam sits where an answer cannot be.
    assert (p_mask[rows, beam["start_top_index"]] == 0).all() and (p_mask[rows, beam["end_top_index"]] == 0).all()
    for i in range(3):
        # The end scores of beam entry i are those computed with start i as the "gold" start.
        forced = model(dict(inputs, start_positions=beam["start_top_index"][:, i]), training=False)
        end_log_probs = np.asarray(forced["end_log_probs"])
        assert (end_log_probs[p_mask == 1] < -1e29).all()
        top = np.sort(end_log_probs, axis=-1)[:, ::-1][:, :2]
        np.testing.assert_allclose(beam["end_top_log_probs"][:, 2 * i : 2 * i + 2], top, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            np.take_along_axis(np.asarray(forced["start_log_probs"]), beam["start_top_index"][:, i : i + 1], axis=1)[:, 0],
            beam["start_top_log_probs"][:, i], rtol=1e-5, atol=1e-6,
        )
        # The answerability logit does not depend on the end branch.
        np.testing.assert_allclose(np.asarray(forced["cls_logits"]), beam["cls_logits"], rtol=1e-5, atol=1e-6)
    other = model(dict(inputs, start_positions=np.zeros(len(p_mask), "int32")), training=False)
    assert not np.allclose(np.asarray(other["end_log_probs"])[p_mask == 0], end_log_probs[p_mask == 0])


def test_v2_loss_is_the_original_combination(task):
    tokenizer, data = task
    model = AlbertForSquadV2(encoder(tokenizer))
    batch = train_batch(data)
    out = {k: np.asarray(v) for k, v in model(batch, training=False).items()}
    rows = np.arange(len(data.train_features))
    start = -out["start_log_probs"][rows, np.asarray(batch["start_positions"])].mean()
    end = -out["end_log_probs"][rows, np.asarray(batch["end_positions"])].mean()
    y, z = np.asarray(batch["is_impossible"], np.float64), out["cls_logits"].astype(np.float64)
    bce = np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z))))
    expected = (start + end) / 2 + 0.5 * bce
    np.testing.assert_allclose(float(model.compute_task_loss(batch, model(batch, training=False))), expected, rtol=1e-5)
    assert batch["is_impossible"].numpy().any() and not batch["is_impossible"].numpy().all()


@pytest.mark.slow
def test_v2_trains_predicts_and_round_trips(task, tmp_path):
    tokenizer, data = task
    model = AlbertForSquadV2(encoder(tokenizer, seed=1))
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    batch = train_batch(data)
    before = float(model.compute_task_loss(batch, model(batch, training=False)))
    history = model.fit(data.train_dataset.batch(8).repeat(), steps_per_epoch=40, epochs=1, verbose=0)
    after = float(model.compute_task_loss(batch, model(batch, training=False)))
    assert after < 0.6 * before
    assert set(history.history) >= {"loss", "start_accuracy", "end_accuracy", "answerable_accuracy"}

    # A labelled dataset is stripped of its labels for prediction, so the beam runs.
    labelled = tf.data.Dataset.from_tensor_slices(S.features_to_arrays(data.train_features, is_training=True))
    results = predict_squad(model, labelled)
    assert isinstance(results[0], P.RawResultV2) and len(results) == len(data.train_features)
    assert [r.unique_id for r in results] == [f.unique_id for f in data.train_features]
    metrics = data.eval_fn(model, data.eval_dataset)
    assert {"exact", "f1", "best_f1", "best_f1_thresh", "null_score_diff_threshold"} <= set(metrics)
    assert metrics["f1"] == pytest.approx(metrics["best_f1"])

    model.save(tmp_path / "squad_v2.keras")
    restored = keras.saving.load_model(tmp_path / "squad_v2.keras")
    assert isinstance(restored, AlbertForSquadV2) and restored.head.start_n_top == 5
    batch = next(iter(data.eval_dataset.batch(4)))
    expected, got = model(batch), restored(batch)
    for key in expected:
        np.testing.assert_allclose(np.asarray(got[key]), np.asarray(expected[key]), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_v1_through_run_finetuning_keeps_the_best_f1(task, tmp_path):
    from albert_tf.training.finetuning import run_finetuning
    from albert_tf.training.run_directory import load_finetuned_model

    tokenizer, _ = task
    qas = [
        {"id": qid, "question": q, "answers": [{"text": a, "answer_start": CONTEXT.index(a)}]}
        for qid, q, a in QUESTIONS
        if a is not None
    ]
    path = tmp_path / "v1.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": CONTEXT, "qas": qas}]}]}), encoding="utf-8")
    data = prepare_squad_task(
        tokenizer, version="v1", train_file=path, eval_file=path, max_seq_length=SEQ, doc_stride=16,
        max_query_length=10, eval_batch_size=8,
    )
    assert data.best_metric == "f1" and data.skipped == {str(path): []}
    result = run_finetuning(
        lambda: AlbertForSquadV1(encoder(tokenizer, seed=2)),
        data.train_dataset,
        data.eval_dataset,
        num_train_steps=20,
        warmup_steps=2,
        learning_rate=5e-3,
        model_dir=str(tmp_path / "run"),
        eval_fn=data.eval_fn,
        best_metric=data.best_metric,
        eval_every_n_steps=10,
        batch_size=8,
        tensorboard=False,
        verbose=0,
    )
    assert set(result.best_metrics) == {"exact_match", "f1"}
    assert len(result.history) == 2
    assert result.best_metrics["f1"] == max(h["eval_f1"] for h in result.history)
    restored = load_finetuned_model(str(tmp_path / "run"))
    assert data.eval_fn(restored, data.eval_dataset)["f1"] == pytest.approx(result.best_metrics["f1"])

    from albert_tf.tasks.squad import evaluate_squad

    metrics, outputs = evaluate_squad(
        restored, data.eval_json, data.eval_examples, data.eval_features, data.eval_dataset, version="v1"
    )
    assert set(outputs["predictions"]) == {qid for qid, _, a in QUESTIONS if a is not None}
    written = write_squad_outputs(outputs, tmp_path / "preds")
    assert sorted(written) == ["nbest", "predictions"]
    assert json.loads((tmp_path / "preds" / "predictions.json").read_text(encoding="utf-8")) == outputs["predictions"]
    assert P.squad_v1_metrics(data.eval_json, outputs["predictions"]) == metrics
    answered = predict_squad_file(
        restored, tokenizer, path, version="v1", max_seq_length=SEQ, doc_stride=16, max_query_length=10
    )
    assert answered["predictions"] == outputs["predictions"] and answered["skipped"] == []


def test_head_and_model_argument_errors(task):
    tokenizer, data = task
    with pytest.raises(ValueError, match="start_n_top must be a positive integer"):
        AlbertSquadV2Head(32, start_n_top=0)
    with pytest.raises(ValueError, match="version must be one of"):
        build_squad_model(encoder(tokenizer), "v3")
    model = AlbertForSquadV2(encoder(tokenizer))
    batch = train_batch(data)
    inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids", "p_mask")}
    with pytest.raises(ValueError, match="needs start_positions"):
        model.compute_task_loss(batch, model(inputs))
    with pytest.raises(ValueError, match="no unique_ids"):
        predict_squad(model, data.train_dataset)
