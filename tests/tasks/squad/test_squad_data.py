"""Tests for albert_tf.tasks.squad.data: reading SQuAD v1.1/v2.0 JSON, the features and their alignment."""

import json
import logging

import numpy as np
import pytest

from albert_tf.tasks.squad import data as S
from albert_tf.tokenization import SentencePieceTokenizer


# Double spaces, an accent (NFKD removes it), quotes, digits with commas (split off by the
# original piece post-processing): the alignment must survive all of them.
CONTEXT = (
    "The Normans  were the people who in the 10th and 11th centuries gave their name to Normandy, "
    "a region in France. Café owners say \"hello\" to every visitor. Paris had 2,100,000 people in 1990, "
    "and Albert Einstein was born in Ulm in 1879."
)


def _qa(qid, question, answer=None, impossible=None):
    qa = {"id": qid, "question": question, "answers": []}
    if answer is not None:
        qa["answers"] = [{"text": answer, "answer_start": CONTEXT.index(answer)}]
    if impossible is not None:
        qa["is_impossible"] = impossible
    return qa


ANSWERS = {
    "q1": ("Who gave their name to Normandy?", "The Normans"),
    "q2": ("Where is Normandy?", "France"),
    "q3": ("What do cafe owners say?", "hello"),
    "q4": ("How many people lived in Paris?", "2,100,000"),
    "q5": ("When was Einstein born?", "1879"),
    "q6": ("Who owns a cafe?", "Café owners"),
}


def squad_file(tmp_path, name, qas, context=CONTEXT, version="1.1"):
    path = tmp_path / name
    path.write_text(
        json.dumps({"version": version, "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}),
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def tokenizer(squad_spm_model):
    """The committed model of the SQuAD / RACE test texts (tests/fixtures/squad_spm_corpus.txt)."""
    return SentencePieceTokenizer(squad_spm_model)


@pytest.fixture()
def v2_path(tmp_path):
    qas = [_qa(qid, q, a, impossible=False) for qid, (q, a) in ANSWERS.items()]
    qas.append(_qa("n1", "Who is the king of Ulm?", impossible=True))
    return squad_file(tmp_path, "v2.json", qas, version="v2.0")


# --- reading -------------------------------------------------------------------------------------


def test_read_training_examples_v2(v2_path):
    examples, skipped = S.read_squad_examples(v2_path, is_training=True, version_2_with_negative=True)
    assert skipped == []
    assert [e.qas_id for e in examples] == list(ANSWERS) + ["n1"]
    for e in examples[:-1]:
        assert e.paragraph_text[e.start_position : e.start_position + len(e.orig_answer_text)] == e.orig_answer_text
        assert not e.is_impossible
    assert examples[-1].is_impossible and examples[-1].start_position == -1 and examples[-1].orig_answer_text == ""


def test_answer_not_found_is_skipped_with_a_warning_and_counted(tmp_path, caplog):
    qas = [
        _qa("good", "Where is Normandy?", "France"),
        {"id": "moved", "question": "Where?", "answers": [{"text": "France", "answer_start": 3}]},
        {"id": "outside", "question": "Where?", "answers": [{"text": "France", "answer_start": 10_000}]},
    ]
    path = squad_file(tmp_path, "v1.json", qas)
    with caplog.at_level(logging.WARNING, logger="albert_tf.tasks.squad.data"):
        examples, skipped = S.read_squad_examples(path, is_training=True)
    assert [e.qas_id for e in examples] == ["good"]
    assert [s.qas_id for s in skipped] == ["moved", "outside"]
    assert "could not find answer 'France'" in skipped[0].reason
    assert "outside the context" in skipped[1].reason
    assert "moved" in caplog.text and "skipped 2 of 3" in caplog.text


def test_answer_matching_tolerates_whitespace_differences(tmp_path):
    qas = [{"id": "ws", "question": "Who?", "answers": [{"text": "The Normans were", "answer_start": 0}]}]
    examples, skipped = S.read_squad_examples(squad_file(tmp_path, "ws.json", qas), is_training=True)
    # The training answer is the context's own span, so its end offset is right.
    assert skipped == [] and examples[0].orig_answer_text == "The Normans  were"
    assert examples[0].answers == ("The Normans were",)


def test_eval_examples_keep_every_gold_answer(tmp_path):
    qas = [{"id": "m", "question": "Where?", "answers": [{"text": "France", "answer_start": 0}, {"text": "a region in France"}]}]
    examples, _ = S.read_squad_examples(squad_file(tmp_path, "dev.json", qas), is_training=False)
    assert examples[0].answers == ("France", "a region in France")
    assert examples[0].start_position is None and examples[0].orig_answer_text is None


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda root: root.pop("data"), "'data' list"),
        (lambda root: root["data"][0].pop("paragraphs"), r"data\[0\] must be an object with a 'paragraphs' list"),
        (lambda root: root["data"][0]["paragraphs"][0].pop("context"), "question 'q1': 'context' is missing"),
        (lambda root: root["data"][0]["paragraphs"][0].update(context="  \n"), "question 'q1': the context is empty"),
        (lambda root: root["data"][0]["paragraphs"][0]["qas"][1].pop("question"), "question 'q2'.*'question' is missing"),
        (lambda root: root["data"][0]["paragraphs"][0]["qas"][1].update(question=" "), "question 'q2'.*question is empty"),
        (lambda root: root["data"][0]["paragraphs"][0]["qas"][1].update(id="q1"), "'q1' appears twice"),
        (lambda root: root["data"][0]["paragraphs"][0]["qas"][1].update(answers="France"), "'q2'.*'answers' must be a list"),
        (lambda root: root["data"][0]["paragraphs"][0]["qas"][1].update(answers=[{"answer_start": 1}]), "'q2'.*string 'text'"),
        (lambda root: root["data"][0]["paragraphs"][0]["qas"][1].update(is_impossible="no"), "'q2'.*true or false"),
    ],
)
def test_malformed_files_name_the_file_and_question(tmp_path, mutate, message):
    root = {"data": [{"paragraphs": [{"context": CONTEXT, "qas": [_qa("q1", "Who?", "The Normans"), _qa("q2", "Where?", "France")]}]}]}
    mutate(root)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(root), encoding="utf-8")
    with pytest.raises(S.SquadDataError, match=message) as info:
        S.read_squad_examples(path, is_training=False)
    assert str(path) in str(info.value)


def test_invalid_json_and_utf8_and_missing_file(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [', encoding="utf-8")
    with pytest.raises(S.SquadDataError, match=f"{broken}: not valid JSON"):
        S.load_squad_json(broken)
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"data": "caf\xe9"}')
    with pytest.raises(S.SquadDataError, match="not valid UTF-8"):
        S.load_squad_json(latin)
    with pytest.raises(FileNotFoundError, match="nope.json"):
        S.load_squad_json(tmp_path / "nope.json")


def test_training_rules(tmp_path):
    two = [{"id": "two", "question": "Where?", "answers": [{"text": "France", "answer_start": CONTEXT.index("France")}] * 2}]
    with pytest.raises(S.SquadDataError, match="'two'.*exactly 1 answer, found 2"):
        S.read_squad_examples(squad_file(tmp_path, "two.json", two), is_training=True)
    none = [{"id": "none", "question": "Where?", "answers": []}]
    with pytest.raises(S.SquadDataError, match="'none'.*found 0"):
        S.read_squad_examples(squad_file(tmp_path, "none.json", none), is_training=True)
    start = [{"id": "start", "question": "Where?", "answers": [{"text": "France", "answer_start": "12"}]}]
    with pytest.raises(S.SquadDataError, match="'start'.*'answer_start' must be an integer"):
        S.read_squad_examples(squad_file(tmp_path, "start.json", start), is_training=True)
    impossible = [_qa("imp", "Who is king?", impossible=True)]
    with pytest.raises(S.SquadDataError, match="'imp' is unanswerable.*version 2"):
        S.read_squad_examples(squad_file(tmp_path, "imp.json", impossible), is_training=True)


# --- features ------------------------------------------------------------------------------------


@pytest.fixture()
def v2_features(v2_path, tokenizer):
    examples, _ = S.read_squad_examples(v2_path, is_training=True, version_2_with_negative=True)
    features, skipped = S.convert_examples_to_features(
        examples, tokenizer, is_training=True, max_seq_length=64, doc_stride=16, max_query_length=12
    )
    assert skipped == []
    return examples, features


def test_answer_positions_map_back_to_the_answer_text(v2_features):
    examples, features = v2_features
    found = set()
    for f in features:
        example = examples[f.example_index]
        if f.is_impossible:
            assert (f.start_position, f.end_position) == (0, 0)
            continue
        # Through the piece -> character alignment, the labelled span is the original answer,
        # accents, quotes and the comma-separated digits included.
        assert S.answer_text_of_feature(f, example, f.start_position, f.end_position) == example.orig_answer_text
        assert f.p_mask[f.start_position] == 0 and f.p_mask[f.end_position] == 0
        found.add(example.qas_id)
    assert found == set(ANSWERS)
    assert all(f.is_impossible for f in features if examples[f.example_index].qas_id == "n1")


def test_feature_layout_windows_and_masks(v2_features, tokenizer):
    examples, features = v2_features
    cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
    by_example = {}
    for f in features:
        assert len(f.input_ids) == len(f.input_mask) == len(f.segment_ids) == len(f.p_mask) == 64
        n = sum(f.input_mask)
        assert f.input_mask == [1] * n + [0] * (64 - n)
        first_sep = f.input_ids.index(sep_id)
        assert f.input_ids[0] == cls_id and f.input_ids[n - 1] == sep_id
        assert first_sep - 1 <= 12  # the question was cut to max_query_length
        assert f.segment_ids == [0] * (first_sep + 1) + [1] * (n - first_sep - 1) + [0] * (64 - n)
        # p_mask is 0 exactly on [CLS] and the context window.
        assert f.p_mask == [0] + [1] * first_sep + [0] * (n - first_sep - 2) + [1] * (64 - n + 1)
        assert len(f.tok_start_to_orig_index) == n - first_sep - 2 == f.paragraph_len - first_sep - 2
        by_example.setdefault(f.example_index, []).append(f)
    for index, group in by_example.items():
        assert [f.doc_span_index for f in group] == list(range(len(group)))
        assert len(group) > 1  # the context is longer than one window
        offsets = [f.tok_start_to_orig_index[0] for f in group]
        assert offsets == sorted(offsets)
        # Every context piece has its max-context window in exactly one feature.
        # Windows start every doc_stride (16) pieces (checked below), which numbers the pieces.
        counts = {}
        for f in group:
            start = f.tokens.index("[SEP]") + 1
            for position, is_max in f.token_is_max_context.items():
                counts.setdefault(16 * f.doc_span_index + position - start, []).append(is_max)
        assert all(sum(flags) == 1 for flags in counts.values())
    assert [f.unique_id for f in features] == list(range(S.FIRST_UNIQUE_ID, S.FIRST_UNIQUE_ID + len(features)))


def test_windows_advance_by_doc_stride(v2_path, tokenizer):
    examples, _ = S.read_squad_examples(v2_path, is_training=False, version_2_with_negative=True)
    features, _ = S.convert_examples_to_features(
        examples[:1], tokenizer, is_training=False, max_seq_length=48, doc_stride=10, max_query_length=12
    )
    pieces = tokenizer.tokenize(CONTEXT)
    starts = []
    for f in features:
        start = f.tokens.index("[SEP]") + 1
        window = f.tokens[start : sum(f.input_mask) - 1]
        assert window == pieces[10 * f.doc_span_index : 10 * f.doc_span_index + len(window)]
        starts.append(10 * f.doc_span_index)
    assert [f.doc_span_index for f in features] == list(range(len(features)))
    assert starts[-1] + len(window) == len(pieces)
    assert all(f.start_position is None and f.is_impossible is None for f in features)


def test_answer_outside_a_window_points_at_cls(v2_features):
    examples, features = v2_features
    last = [f for f in features if examples[f.example_index].qas_id == "q5"]
    assert last[0].is_impossible and (last[0].start_position, last[0].end_position) == (0, 0)
    assert not last[-1].is_impossible


def test_conversion_argument_errors(v2_path, tokenizer):
    examples, _ = S.read_squad_examples(v2_path, is_training=False, version_2_with_negative=True)
    with pytest.raises(S.SquadDataError, match="max_seq_length .* must exceed max_query_length"):
        S.convert_examples_to_features(examples, tokenizer, is_training=False, max_seq_length=64, max_query_length=61)
    with pytest.raises(S.SquadDataError, match="doc_stride must be a positive integer"):
        S.convert_examples_to_features(examples, tokenizer, is_training=False, doc_stride=0)
    with pytest.raises(S.SquadDataError, match="'q1' has no training answer"):
        S.convert_examples_to_features(examples, tokenizer, is_training=True)
    with pytest.raises(TypeError, match="SentencePiece tokenizer"):
        S.convert_examples_to_features(examples, object(), is_training=False)


def test_datasets_and_tfrecord_round_trip(v2_features, tmp_path):
    _, features = v2_features
    arrays = S.features_to_arrays(features, is_training=True)
    assert arrays["input_ids"].shape == (len(features), 64) and arrays["input_ids"].dtype == np.int32
    train = S.make_squad_dataset(features, is_training=True)
    assert set(train.element_spec) == {"input_ids", "input_mask", "segment_ids", "p_mask", *S.TRAINING_LABELS}
    predict = S.make_squad_dataset(features, is_training=False)
    assert set(predict.element_spec) == {"input_ids", "input_mask", "segment_ids", "p_mask", "unique_ids"}

    path = tmp_path / "out" / "train.tf_record"
    assert S.write_squad_tfrecord(features, path, is_training=True) == len(features)
    assert [p.name for p in path.parent.iterdir()] == ["train.tf_record"]  # no temporary left
    read = list(S.read_squad_tfrecord(str(path), seq_length=64, is_training=True).as_numpy_iterator())
    for name in ("input_ids", "p_mask", "start_positions", "end_positions", "is_impossible"):
        np.testing.assert_array_equal(np.stack([r[name] for r in read]), arrays[name])
    with pytest.raises(FileNotFoundError, match="no SQuAD TFRecord"):
        S.read_squad_tfrecord(str(tmp_path / "missing*"), seq_length=64, is_training=True)
    with pytest.raises(S.SquadDataError, match="no SQuAD features"):
        S.features_to_arrays([], is_training=True)
