"""Tests for RACE: albert_tf.tasks.multiple_choice.data (reading, choice texts, truncation) and
albert_tf.tasks.multiple_choice (the softmax-over-choices model, training, accuracy)."""

import json

import keras
import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.tasks.multiple_choice import data as R
from albert_tf.tasks.multiple_choice import (
    AlbertForMultipleChoice,
    predict_race,
    predict_race_examples,
    prepare_race_task,
    race_accuracy,
)
from albert_tf.tokenization import SentencePieceTokenizer


MIDDLE = {
    "id": "middle1.txt",
    "article": "The Normans gave their name to Normandy, a region in France.",
    "questions": ["Where is Normandy?", "The Normans gave their name to _ ."],
    "options": [["France", "Denmark", "Norway", "Iceland"], ["Paris", "Normandy", "Ulm", "the Seine"]],
    "answers": ["A", "B"],
}
HIGH = {
    "id": "high7.txt",
    "article": "Albert Einstein was born in Ulm in 1879.",
    "questions": ["Where was Einstein born?"],
    "options": [["Paris", "Ulm", "France", "Norway"]],
    "answers": ["B"],
}


@pytest.fixture(scope="module")
def tokenizer(squad_spm_model):
    """The committed model of the SQuAD / RACE test texts (tests/fixtures/squad_spm_corpus.txt)."""
    return SentencePieceTokenizer(squad_spm_model)


@pytest.fixture()
def race_dir(tmp_path):
    split = tmp_path / "RACE" / "train"
    (split / "middle").mkdir(parents=True)
    (split / "high").mkdir()
    (split / "high" / "7.txt").write_text(json.dumps(HIGH), encoding="utf-8")
    (split / "middle" / "1.txt").write_text(json.dumps(MIDDLE), encoding="utf-8")
    (split / "middle" / "notes.md").write_text("not a RACE file", encoding="utf-8")
    return split


def test_reader_walks_levels_in_the_original_order(race_dir):
    examples = R.read_race_examples(race_dir)
    assert [(e.example_id, e.question_index, e.label) for e in examples] == [
        ("middle1.txt", 0, 0), ("middle1.txt", 1, 1), ("high7.txt", 0, 1)
    ]
    assert examples[1].options == ("Paris", "Normandy", "Ulm", "the Seine")
    assert examples[2].source.endswith("7.txt")
    assert [e.example_id for e in R.read_race_examples(race_dir, levels=("high",))] == ["high7.txt"]
    assert len(R.read_race_examples(str(race_dir / "*" / "*.txt"))) == 3
    assert len(R.read_race_examples([race_dir / "middle" / "1.txt"])) == 2


def test_json_lines_and_unlabelled_files(tmp_path):
    unlabelled = dict(HIGH)
    del unlabelled["answers"]
    path = tmp_path / "lines.txt"
    path.write_text(json.dumps(MIDDLE) + "\n" + json.dumps(unlabelled) + "\n", encoding="utf-8")
    examples = R.read_race_examples(path)
    assert [e.label for e in examples] == [0, 1, None]
    with pytest.raises(R.RaceDataError, match="'high7.txt' .*has no answer"):
        R.make_race_dataset([R.RaceFeature(e.example_id, e.question_index, [[0]], [[0]], [[0]], e.label) for e in examples])


def test_choice_texts_fill_the_blank_or_append(tokenizer):
    examples = [R.RaceExample("m", 0, "a", MIDDLE["questions"][0], tuple(MIDDLE["options"][0]), 0),
                R.RaceExample("m", 1, "a", MIDDLE["questions"][1], tuple(MIDDLE["options"][1]), 1)]
    assert R.choice_texts(examples[0]) == ["Where is Normandy? France", "Where is Normandy? Denmark",
                                           "Where is Normandy? Norway", "Where is Normandy? Iceland"]
    assert R.choice_texts(examples[1])[3] == "The Normans gave their name to the Seine ."
    # The question and options are preprocessed (lower-cased here) before they are combined.
    assert R.choice_texts(examples[1], tokenizer.preprocess)[1] == "the normans gave their name to normandy ."


def test_conversion_truncates_the_original_way(tokenizer):
    example = R.RaceExample("m", 1, MIDDLE["article"], MIDDLE["questions"][1], tuple(MIDDLE["options"][1]), 1)
    feature = R.convert_race_example(example, tokenizer, max_seq_length=24, max_qa_length=8)
    article = tokenizer.tokenize(MIDDLE["article"])
    for text, ids, mask, segments in zip(R.choice_texts(example, tokenizer.preprocess), feature.input_ids,
                                         feature.input_mask, feature.segment_ids):
        qa = tokenizer.tokenize(text)
        kept = qa[-8:]  # the LAST max_qa_length tokens of the question+option side
        context = article[: 24 - 3 - len(kept)]
        expected = tokenizer.convert_tokens_to_ids(["[CLS]"] + context + ["[SEP]"] + kept + ["[SEP]"])
        assert len(qa) > 8 and len(article) > len(context)
        assert ids == expected + [0] * (24 - len(expected))
        assert mask == [1] * len(expected) + [0] * (24 - len(expected))
        assert segments == [0] * (len(context) + 2) + [1] * (len(kept) + 1) + [0] * (24 - len(expected))
    short = R.convert_race_example(example, tokenizer, max_seq_length=128, max_qa_length=64)
    assert sum(short.input_mask[0]) == 3 + len(article) + len(tokenizer.tokenize(R.choice_texts(example, tokenizer.preprocess)[0]))
    with pytest.raises(R.RaceDataError, match="max_qa_length .* at most max_seq_length - 3"):
        R.convert_race_example(example, tokenizer, max_seq_length=16, max_qa_length=14)


@pytest.mark.parametrize(
    "record, message",
    [
        ({k: v for k, v in MIDDLE.items() if k != "article"}, "missing field 'article'"),
        (dict(MIDDLE, article="   "), "the article is empty"),
        (dict(MIDDLE, options=[["a", "b", "c"], MIDDLE["options"][1]]), "question 0: 'options' must be a list of 4 strings"),
        (dict(MIDDLE, answers=["A", "E"]), "question 1: answer 'E' is not one of A, B, C, D"),
        (dict(MIDDLE, answers=["A"]), "'answers' must be a list with one letter per question"),
        (dict(MIDDLE, questions="Where?"), "'questions' must be a list of strings"),
        ([MIDDLE], "holds a JSON object"),
    ],
)
def test_malformed_files_name_the_file(tmp_path, record, message):
    path = tmp_path / "bad.txt"
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(R.RaceDataError, match=message) as info:
        R.read_race_examples(path)
    assert str(path) in str(info.value)


def test_unreadable_files(tmp_path):
    broken = tmp_path / "broken.txt"
    broken.write_text('{"article": ', encoding="utf-8")
    with pytest.raises(R.RaceDataError, match=f"{broken}: not valid JSON"):
        R.read_race_examples(broken)
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(FileNotFoundError, match="no RACE files"):
        R.read_race_examples(tmp_path / "empty_dir")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        R.read_race_examples(tmp_path / "missing.txt")


def make_model(tokenizer, seed=0, dropout=0.1):
    keras.utils.set_random_seed(seed)
    config = AlbertConfig(
        vocab_size=tokenizer.vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64,
        # Wider than the original 0.02: the choices start less alike, so a few dozen steps learn.
        initializer_range=0.2,
    )
    return AlbertForMultipleChoice(AlbertEncoder.from_albert_config(config), dropout=dropout)


@pytest.mark.slow
def test_model_trains_and_reports_accuracy(tokenizer, race_dir, tmp_path):
    task = prepare_race_task(tokenizer, train_path=race_dir, eval_path=race_dir, max_seq_length=40, max_qa_length=16)
    assert task.best_metric == "accuracy" and len(task.train_examples) == 3
    assert task.train_dataset.element_spec["input_ids"].shape == (4, 40)
    model = make_model(tokenizer)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    batch = next(iter(task.eval_dataset.batch(3)))
    labels = np.asarray(batch["labels"])

    def loss():
        return float(model.compute_task_loss(batch, model(batch, training=False)))

    before = loss()
    model.fit(task.train_dataset.batch(3).repeat(), steps_per_epoch=30, epochs=1, verbose=0)
    after = loss()
    assert after < 0.5 * before

    logits = np.asarray(model(batch, training=False)["logits"])
    assert logits.shape == (3, 4)
    scored = model.evaluate(task.eval_dataset.batch(2), return_dict=True, verbose=0)
    assert scored["accuracy"] == pytest.approx(np.mean(logits.argmax(-1) == labels))
    predicted = predict_race(model, task.eval_dataset)
    np.testing.assert_array_equal(predicted["predictions"], logits.argmax(-1))
    np.testing.assert_allclose(predicted["probabilities"].sum(-1), 1.0, rtol=1e-5)
    assert race_accuracy(predicted["predictions"], labels) == pytest.approx(scored["accuracy"])
    records = predict_race_examples(model, tokenizer, task.eval_examples, max_seq_length=40, max_qa_length=16)
    assert [r["prediction"] for r in records] == ["ABCD"[i] for i in logits.argmax(-1)]
    assert [(r["id"], r["question_index"], r["answer"]) for r in records] == [
        ("middle1.txt", 0, "A"), ("middle1.txt", 1, "B"), ("high7.txt", 0, "B")
    ]

    model.save(tmp_path / "race.keras")
    restored = keras.saving.load_model(tmp_path / "race.keras")
    np.testing.assert_allclose(np.asarray(restored(batch)["logits"]), logits, rtol=1e-5, atol=1e-6)


def test_scores_follow_the_pooled_output_of_each_choice(tokenizer):
    """Each choice is scored on its own: permuting the choices permutes the logits."""
    model = make_model(tokenizer, dropout=0.0)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, tokenizer.vocab_size, size=(2, 4, 12)).astype("int32")
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    logits = np.asarray(model(inputs)["logits"])
    order = [2, 0, 3, 1]
    permuted = np.asarray(model({k: v[:, order] for k, v in inputs.items()})["logits"])
    np.testing.assert_allclose(permuted, logits[:, order], rtol=1e-5, atol=1e-6)
    flat = model.encoder({k: v.reshape(8, 12) for k, v in inputs.items()})["pooled_output"]
    np.testing.assert_allclose(np.asarray(model.head(flat)).reshape(2, 4), logits, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"\[batch, choices, seq\]"):
        model({k: v[:, 0] for k, v in inputs.items()})


def test_race_accuracy_checks():
    assert race_accuracy([0, 1, 2, 3], [0, 1, 0, 0]) == 0.5
    with pytest.raises(ValueError, match="3 predictions for 2 labels"):
        race_accuracy([0, 1, 2], [0, 1])
