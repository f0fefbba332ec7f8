"""Distillation (`albert_tf.distillation`, `albert-tf distill`): the losses against hand-computed
values, the `shared:N` student, a student that learns from soft labels, bad input, and a student
directory that `evaluate` / `predict` / `export` read unchanged."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from _cli_helpers import SENTIMENT_WORDS, cli_runner, write_config, write_sentiment_tables, write_vocab

cli = cli_runner(["albert_tf.cli.distill", "albert_tf.cli.export"])


# --- losses ------------------------------------------------------------------------------------


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_soft_target_kl_is_t_squared_times_the_kl_of_the_softened_distributions():
    from albert_tf.distillation import losses

    teacher = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]], "float32")
    student = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 1.0]], "float32")
    t, s = _softmax(teacher / 2), _softmax(student / 2)
    expected = 4 * np.mean(np.sum(t * np.log(t / s), -1))
    assert float(losses.soft_target_kl(teacher, student, 2.0)) == pytest.approx(expected, rel=1e-5)
    assert float(losses.soft_target_kl(teacher, teacher, 3.0)) == pytest.approx(0.0, abs=1e-6)
    # Per-token weights: only the weighted rows count.
    first = 4 * np.sum(t[0] * np.log(t[0] / s[0]))
    assert float(losses.soft_target_kl(teacher, student, 2.0, weights=np.array([1.0, 0.0]))) == pytest.approx(first, rel=1e-5)


def test_hard_cross_entropy_and_mse_count_only_labelled_rows():
    from albert_tf.distillation import losses

    logits = np.array([[2.0, 0.0], [0.0, 1.0], [5.0, -5.0]], "float32")
    labels = np.array([0, 0, -100])
    p = _softmax(logits)
    expected = -(np.log(p[0, 0]) + np.log(p[1, 0])) / 2
    weights = np.array([1.0, 1.0, 0.0])
    assert float(losses.weighted_cross_entropy(labels, logits, weights)) == pytest.approx(expected, rel=1e-5)
    assert float(losses.weighted_cross_entropy(labels, logits, np.zeros(3))) == 0.0
    assert float(losses.weighted_mse([1.0, 2.0, 9.0], [1.5, 1.0, 0.0], weights)) == pytest.approx((0.25 + 1.0) / 2)
    assert float(losses.weighted_mse([1.0, 3.0], [0.0, 0.0])) == pytest.approx(5.0)


def test_hidden_state_mse_and_relation_kl_by_hand():
    from albert_tf.distillation import losses

    rng = np.random.default_rng(0)
    s = rng.normal(size=(1, 3, 4)).astype("float32")
    t = rng.normal(size=(1, 3, 4)).astype("float32")
    mask = np.array([[1, 1, 0]])
    expected = np.mean(np.mean((s - t) ** 2, -1)[0, :2])
    assert float(losses.hidden_state_mse([s], [t], mask)) == pytest.approx(expected, rel=1e-5)
    # One relation head: softmax(a a^T / 2) over the two real keys, KL averaged over real queries.
    def relation(a):
        scores = a[0] @ a[0].T / 2.0
        return _softmax(scores[:, :2])

    rt, rs = relation(t), relation(s)
    kl = np.sum(rt * np.log(rt / rs), -1)[:2].mean()
    assert float(losses.value_relation_kl(t, s, mask, 1)) == pytest.approx(kl, rel=1e-4)
    assert float(losses.attention_kl((t, t), (t, t), mask, 2)) == pytest.approx(0.0, abs=1e-6)
    assert losses.uniform_layer_map(2, 6) == [0, 3, 6] and losses.uniform_layer_map(3, 3) == [0, 1, 2, 3]


# --- runs --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A WordPiece vocabulary, the sentiment tables and a 2-layer all-shared teacher fine-tuned on them."""
    from albert_tf.tasks.runner import FinetuneSettings, finetune

    root = tmp_path_factory.mktemp("distill")
    words = [w for ws in SENTIMENT_WORDS.values() for w in ws]
    vocab_size = write_vocab(root / "vocab.txt", words)
    write_config(root / "teacher.json", vocab_size, num_hidden_layers=2)
    write_config(root / "student.json", vocab_size, hidden_size=8, embedding_size=8, intermediate_size=16)
    write_config(root / "other_vocab.json", vocab_size + 3)
    data = write_sentiment_tables(root / "data", {"train": 64, "dev": 16})
    (root / "unlabeled.txt").write_text("good great\nawful dull\nfine good\nbad awful\n", encoding="utf-8")
    finetune(FinetuneSettings(
        task="classification", data=str(data), model_dir=str(root / "teacher"), text_column="text", label_column="label",
        config=str(root / "teacher.json"), vocab_file=str(root / "vocab.txt"), max_seq_length=8, batch_size=8,
        num_epochs=4, learning_rate=3e-3, pooling="mean", quiet=True,
    ))
    return root


def _settings(root, name, **overrides):
    from albert_tf.distillation import DistillSettings

    values = dict(teacher=str(root / "teacher"), student="shared:1", data=str(root / "data"), model_dir=str(root / name),
                  num_epochs=1, batch_size=8, quiet=True)
    values.update(overrides)
    return DistillSettings(**values)


@pytest.mark.slow
def test_shared_student_with_all_the_teachers_layers_is_the_teacher(workspace):
    from albert_tf.distillation.run import _read_teacher
    from albert_tf.distillation.student import build_student, resolve_student
    from albert_tf.tasks.classification import encode_examples
    from albert_tf.tasks.family import task_family

    spec, config, tokenizer, teacher = _read_teacher(str(workspace / "teacher"))
    plan = resolve_student("shared:2", config)
    assert plan.from_teacher and plan.config == config
    family = task_family(spec)
    student = build_student(plan, family, spec, teacher, dropout=0.1, pooling=teacher.pooling)
    examples = family.read_split(spec, str(workspace / "data"), "dev")
    features = encode_examples(examples, tokenizer, seq_length=8, with_labels=False)
    np.testing.assert_array_equal(student.predict(features, verbose=0)["logits"], teacher.predict(features, verbose=0)["logits"])
    # One application fewer: a different function of the same weights.
    shorter = build_student(resolve_student("shared:1", config), family, spec, teacher, dropout=0.1, pooling=teacher.pooling)
    assert not np.allclose(shorter.predict(features, verbose=0)["logits"], teacher.predict(features, verbose=0)["logits"])


@pytest.mark.slow
def test_student_learns_from_soft_labels_and_its_directory_works_unchanged(workspace, capsys):
    from albert_tf.distillation import distill
    from albert_tf.tasks.inference import evaluate_model_dir, predict_model_dir

    # 4 labels; the rest of train and a text file labelled by the teacher only.
    outcome = distill(_settings(
        workspace, "student", student=str(workspace / "student.json"), max_labeled=4, unlabeled_from_train=True,
        unlabeled=str(workspace / "unlabeled.txt"), alpha=1.0, temperature=1.0, num_epochs=6, learning_rate=3e-3,
    ))
    printed = capsys.readouterr().out
    assert outcome.num_labeled == 4 and outcome.num_unlabeled == 64 and "best constant answer: accuracy=0.5000" in printed
    assert outcome.teacher_metrics["accuracy"] == 1.0
    assert outcome.student_metrics["accuracy"] > outcome.constant_baseline.metrics["accuracy"] + 0.2
    model_dir = workspace / "student"
    info = json.loads((model_dir / "finetuning.json").read_text())["metadata"]
    record = info["distillation"]
    assert record["teacher"]["dev_metrics"]["accuracy"] == 1.0 and record["settings"]["max_labeled"] == 4
    assert record["student"].startswith("config ") and info["config"]["hidden_size"] == 8
    assert json.loads((model_dir / "albert_config.json").read_text())["hidden_size"] == 8
    results = evaluate_model_dir(str(model_dir), str(workspace / "data"))
    assert results["dev"]["accuracy"] == pytest.approx(outcome.student_metrics["accuracy"])
    records = predict_model_dir(str(model_dir), texts=["good great fine", "bad awful dull"]).records
    assert [r["label"] for r in records] == ["pos", "neg"]
    code, message = cli(["export", "--model-dir", model_dir, "--export-base", workspace / "export", "--model-name", "student"])
    assert code == 0, message
    assert any((workspace / "export" / "student").iterdir())
    # The student's directory holds it whole, as every model directory does: from_pretrained (two loads
    # alike) and keras.saving.load_model answer as `albert-tf predict` does.
    import keras

    from albert_tf import AlbertTextClassifier

    texts = ["good great fine", "bad awful dull", "the plot"]
    student = AlbertTextClassifier.from_pretrained(model_dir)
    logits = student.predict(texts, verbose=0)
    assert student.labels == ["neg", "pos"]
    np.testing.assert_array_equal(AlbertTextClassifier.from_pretrained(model_dir).predict(texts, verbose=0), logits)
    records = predict_model_dir(str(model_dir), texts=texts).records
    np.testing.assert_allclose([[r["probabilities"][name] for name in student.labels] for r in records],
                               _softmax(logits), rtol=1e-5, atol=1e-5)
    reloaded = keras.saving.load_model(model_dir / "model.keras")
    np.testing.assert_allclose(reloaded.predict(texts, verbose=0), logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("transfer", ["hidden", "attention"])
@pytest.mark.slow
def test_transfer_losses_train_a_narrower_student(workspace, transfer):
    from albert_tf.distillation import distill

    outcome = distill(_settings(workspace, f"student_{transfer}", student=str(workspace / "student.json"), transfer=transfer,
                                num_train_steps=3, overwrite=True))
    history = json.loads((workspace / f"student_{transfer}" / "finetuning.json").read_text())
    assert outcome.num_train_steps == 3 and history["metadata"]["distillation"]["settings"]["transfer"] == transfer


@pytest.mark.slow
def test_tagging_and_regression_teachers(tmp_path):
    from albert_tf.distillation import distill
    from albert_tf.tasks.runner import FinetuneSettings, finetune

    vocab = tmp_path / "vocab.txt"
    size = write_vocab(vocab, ["john", "lives", "in", "paris", "mary", "visits", "rome"])
    write_config(tmp_path / "cfg.json", size)
    conll = tmp_path / "conll"
    conll.mkdir()
    sentence = "john B-PER\nlives O\nin O\nparis B-LOC\n\nmary B-PER\nvisits O\nrome B-LOC\n\n"
    for name in ("train.txt", "dev.txt"):
        (conll / name).write_text(sentence * 4, encoding="utf-8")
    (tmp_path / "text.txt").write_text("mary lives in rome\njohn visits paris\n", encoding="utf-8")
    table = tmp_path / "table"
    table.mkdir()
    rows = "".join(f"{v}\t{t}\n" for v, t in [("1.0", "john paris"), ("0.0", "mary rome")] * 4)
    for split in ("train", "dev"):
        (table / f"{split}.tsv").write_text("score\ttext\n" + rows, encoding="utf-8")
    common = dict(config=str(tmp_path / "cfg.json"), vocab_file=str(vocab), max_seq_length=8, batch_size=4,
                  num_train_steps=2, quiet=True)
    finetune(FinetuneSettings(task="conll", data=str(conll), model_dir=str(tmp_path / "tagger"), **common))
    finetune(FinetuneSettings(task="regression", data=str(table), model_dir=str(tmp_path / "regressor"), text_column="text",
                              label_column="score", **common))
    tagged = distill(_settings(tmp_path, "tagger_student", teacher=str(tmp_path / "tagger"), data=str(conll),
                               unlabeled=str(tmp_path / "text.txt"), num_train_steps=2, transfer="hidden"))
    assert tagged.num_unlabeled == 2 and "entity_f1" in tagged.student_metrics
    regressed = distill(_settings(tmp_path, "regression_student", teacher=str(tmp_path / "regressor"), data=str(table),
                                  num_train_steps=2))
    assert "pearson" in regressed.student_metrics and regressed.constant_baseline is not None


@pytest.mark.slow
def test_bad_input_is_one_line(workspace, tmp_path):
    base = ["distill", "--data", workspace / "data", "--model-dir", tmp_path / "out"]
    teacher = ["--teacher", workspace / "teacher"]
    cases = [
        (["--teacher", tmp_path / "missing", "--student", "tiny"], "--teacher must be a fine-tuned model directory"),
        (["--teacher", workspace / "teacher" / "model.keras", "--student", "tiny"], "distillation reads a model directory"),
        (teacher + ["--student", "huge-v9"], "is neither a preset"),
        (teacher + ["--student", workspace / "other_vocab.json"], "the vocabularies must be the same"),
        (teacher + ["--student", "shared:0"], "positive layer count"),
        (teacher + ["--student", "tiny", "--unlabeled-from-train"], "needs --max-labeled"),
        (teacher + ["--student", "tiny", "--alpha", "1.5"], "--alpha must be in [0, 1]"),
    ]
    for extra, expected in cases:
        code, message = cli(base + extra)
        assert code == 2 and expected in message and "\n" not in message, (extra, message)
    squad_like = tmp_path / "squad_teacher"
    shutil.copytree(workspace / "teacher", squad_like)
    spec = json.loads((squad_like / "task.json").read_text())
    spec["kind"] = "squad"
    (squad_like / "task.json").write_text(json.dumps(spec))
    code, message = cli(base + ["--teacher", squad_like, "--student", "tiny"])
    assert code == 2 and "is a squad model" in message and "distillation covers" in message
