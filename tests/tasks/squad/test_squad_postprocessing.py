"""Tests for albert_tf.tasks.squad.postprocessing: n-best answers, official EM/F1, threshold tuning.

Features are built by hand (one piece per word) so that every expected answer and score can be
worked out on paper.
"""

import json

import numpy as np
import pytest

from albert_tf.tasks.squad.data import SquadExample, SquadFeature
from albert_tf.tasks.squad import postprocessing as P

CONTEXT = "The Normans were the people of Normandy in France ."
QUESTION_PIECES = 2  # [CLS] q q [SEP]: the context starts at position 4


def word_spans(context):
    spans, position = [], 0
    for word in context.split():
        start = context.index(word, position)
        spans.append((start, start + len(word) - 1))
        position = start + len(word)
    return spans


def make_feature(unique_id, example_index, context=CONTEXT, first_word=0, num_words=None, max_context=None, span=0):
    """A feature whose window holds words [first_word, first_word + num_words) of `context`."""
    spans = word_spans(context)
    num_words = len(spans) - first_word if num_words is None else num_words
    window = spans[first_word : first_word + num_words]
    words = context.split()[first_word : first_word + num_words]
    tokens = ["[CLS]"] + ["▁q"] * QUESTION_PIECES + ["[SEP]"] + ["▁" + w for w in words] + ["[SEP]"]
    offset = QUESTION_PIECES + 2
    is_max = {offset + i: True for i in range(num_words)} if max_context is None else max_context
    n = len(tokens)
    return SquadFeature(
        unique_id=unique_id,
        example_index=example_index,
        doc_span_index=span,
        tokens=tokens,
        tok_start_to_orig_index=[s for s, _ in window],
        tok_end_to_orig_index=[e for _, e in window],
        token_is_max_context=is_max,
        input_ids=[0] * n,
        input_mask=[1] * n,
        segment_ids=[0] * n,
        p_mask=[0] * n,
        paragraph_len=n,
    )


def logits(length, **peaks):
    values = np.zeros(length, np.float32)
    for position, value in peaks.items():
        values[int(position[1:])] = value
    return values


# --- v1 ------------------------------------------------------------------------------------------


def test_v1_crafted_logits_give_the_gold_answer():
    example = SquadExample("q", "Where?", CONTEXT)
    feature = make_feature(1, 0)
    n = len(feature.tokens)
    # "Normandy" is word 6, position 4 + 6 = 10.
    result = P.RawResultV1(1, logits(n, p10=9.0, p5=2.0), logits(n, p10=8.0, p11=3.0))
    predictions, nbest = P.postprocess_v1([example], [feature], [result])
    assert predictions == {"q": "Normandy"}
    assert nbest["q"][0]["text"] == "Normandy" and nbest["q"][0]["start_logit"] == 9.0
    probabilities = [entry["probability"] for entry in nbest["q"]]
    assert probabilities == sorted(probabilities, reverse=True)
    np.testing.assert_allclose(sum(probabilities), 1.0, rtol=1e-6)
    assert len({entry["text"] for entry in nbest["q"]}) == len(nbest["q"])  # no duplicate texts
    json.dumps(nbest)  # plain floats


def test_v1_max_answer_length_and_invalid_spans():
    example = SquadExample("q", "Who?", CONTEXT)
    feature = make_feature(1, 0)
    n = len(feature.tokens)
    # Best raw pair (4, 10) "The ... Normandy" is 7 pieces; the question piece 1 is never a start.
    result = P.RawResultV1(1, logits(n, p4=10.0, p10=1.0, p1=50.0), logits(n, p10=10.0, p4=2.0, p1=50.0))
    long, _ = P.postprocess_v1([example], [feature], [result])
    assert long == {"q": "The Normans were the people of Normandy"}
    short, _ = P.postprocess_v1([example], [feature], [result], max_answer_length=5)
    assert short == {"q": "The"}  # (4, 4): 12 beats (10, 10): 11


def test_v1_only_max_context_windows_may_start_an_answer():
    example = SquadExample("q", "Where?", CONTEXT)
    # Two windows share "Normandy" (word 6); only the second is its max-context window.
    first = make_feature(1, 0, first_word=0, num_words=7, max_context={4 + i: i < 4 for i in range(7)})
    second = make_feature(2, 0, first_word=4, num_words=6, span=1)
    n1, n2 = len(first.tokens), len(second.tokens)
    # In the first window "Normandy" (position 10) scores highest but may not start an answer there,
    # and every start it allows scores -50.
    first_starts = logits(n1, p10=20.0, p4=-50.0, p5=-50.0, p6=-50.0, p7=-50.0)
    results = [
        P.RawResultV1(1, first_starts, logits(n1, p10=20.0)),
        P.RawResultV1(2, logits(n2, p6=5.0), logits(n2, p6=5.0)),  # second window, word 6: "Normandy"
    ]
    predictions, nbest = P.postprocess_v1([example], [first, second], results)
    assert predictions == {"q": "Normandy"}
    assert nbest["q"][0]["start_logit"] == 5.0


def test_v1_missing_results_and_bad_arguments():
    example = SquadExample("q", "Where?", CONTEXT)
    feature = make_feature(7, 0)
    with pytest.raises(ValueError, match="no model result.*unique_id 7"):
        P.postprocess_v1([example], [feature], [])
    with pytest.raises(ValueError, match="n_best_size"):
        P.postprocess_v1([example], [feature], [], n_best_size=0)
    with pytest.raises(ValueError, match="belongs to example 3"):
        P.postprocess_v1([example], [make_feature(7, 3)], [P.RawResultV1(7, [0.0], [0.0])])


# --- v2 ------------------------------------------------------------------------------------------


def test_v2_beam_filters_and_null_score():
    example = SquadExample("q", "Where?", CONTEXT)
    a, b = make_feature(1, 0, span=0), make_feature(2, 0, span=1)
    # start 1 is in the question, (12, 10) ends before it starts, 40 is past the window.
    result_a = P.RawResultV2(1, [-0.1, -0.5, -0.7], [1, 12, 10], [-0.1, -0.2, -0.3, -0.4, -0.3, -0.9],
                             [4, 10, 10, 40, 10, 11], 2.5)
    result_b = P.RawResultV2(2, [-3.0, -4.0, -5.0], [4, 5, 6], [-3.0, -4.0, -5.0, -6.0, -6.0, -6.0],
                             [5, 4, 6, 6, 6, 6], 1.5)
    predictions, nbest, null = P.postprocess_v2([example], [a, b], [result_a, result_b])
    # Valid: (10, 10) -1.0 "Normandy", (10, 11) -1.6 "Normandy in", then feature b's spans.
    assert predictions == {"q": "Normandy"}
    assert [entry["text"] for entry in nbest["q"]][:2] == ["Normandy", "Normandy in"]
    np.testing.assert_allclose(nbest["q"][0]["start_log_prob"] + nbest["q"][0]["end_log_prob"], -1.0, rtol=1e-6)
    assert null == {"q": 1.5}  # the lowest answerability logit over the features
    answered, _, _ = P.postprocess_v2([example], [a, b], [result_a, result_b], null_score_diff_threshold=1.5)
    assert answered == {"q": "Normandy"}  # not above the threshold
    unanswered, _, _ = P.postprocess_v2([example], [a, b], [result_a, result_b], null_score_diff_threshold=1.4)
    assert unanswered == {"q": ""}


def test_v2_no_valid_span_answers_empty():
    example = SquadExample("q", "Where?", CONTEXT)
    feature = make_feature(1, 0)
    result = P.RawResultV2(1, [-0.1], [1], [-0.1], [2], -3.0)
    predictions, nbest, null = P.postprocess_v2([example], [feature], [result])
    assert predictions == {"q": ""}
    assert nbest["q"] == [{"text": "", "probability": 1.0, "start_log_prob": -1e6, "end_log_prob": -1e6}]
    with pytest.raises(ValueError, match="inconsistent beam sizes"):
        P.postprocess_v2([example], [feature], [P.RawResultV2(1, [-0.1, -0.2], [4, 5], [-0.1], [4, 5], 0.0)])


# --- official scores -----------------------------------------------------------------------------

V1_DATASET = [
    {
        "paragraphs": [
            {
                "context": "unused",
                "qas": [
                    {"id": "q1", "answers": [{"text": "Denver Broncos"}, {"text": "The Denver Broncos"}]},
                    {"id": "q2", "answers": [{"text": "Santa Clara, California"}]},
                    {"id": "q3", "answers": [{"text": "Levi's Stadium"}]},
                    {"id": "q4", "answers": [{"text": "February 7"}]},
                ],
            }
        ]
    }
]


def test_v1_exact_match_and_f1_against_hand_computed_values():
    predictions = {"q1": "the Denver Broncos!", "q2": "Santa Clara", "q3": "Stadium Levi"}
    scores = P.squad_v1_metrics(V1_DATASET, predictions)
    # q1: normalised equal (EM 1, F1 1). q2: P=2/2, R=2/3 -> F1 0.8. q3: "levis stadium" vs
    # "stadium levi": 1 common, P=R=1/2 -> F1 0.5. q4: no prediction -> 0.
    assert scores["exact_match"] == pytest.approx(25.0)
    assert scores["f1"] == pytest.approx(100 * (1 + 0.8 + 0.5 + 0) / 4)
    assert P.squad_v1_metrics({"data": V1_DATASET}, predictions) == scores
    with pytest.raises(TypeError, match="string answers"):
        P.squad_v1_metrics(V1_DATASET, {"q1": 3})
    no_gold = [{"paragraphs": [{"context": "c", "qas": [{"id": "x", "answers": []}]}]}]
    with pytest.raises(ValueError, match="'x' has no gold answer"):
        P.squad_v1_metrics(no_gold, {"x": ""})


V2_CONTEXT = "Paris is under a blue sky with a cat in London"
V2_DATASET = [
    {
        "paragraphs": [
            {
                "context": V2_CONTEXT,
                "qas": [
                    {"id": "a1", "question": "City?", "answers": [{"text": "Paris", "answer_start": 0}]},
                    {"id": "a2", "question": "Above?", "answers": [{"text": "blue sky", "answer_start": 17}]},
                    {"id": "n1", "question": "King?", "answers": [], "is_impossible": True},
                    {"id": "n2", "question": "Queen?", "answers": [], "is_impossible": True},
                ],
            }
        ]
    }
]
# Best spans: "Paris" (right), "sky" (F1 2/3), "London" and "cat" (wrong: no answer).
V2_PREDICTIONS = {"a1": "Paris", "a2": "sky", "n1": "London", "n2": "cat"}
V2_NULL = {"a1": 0.1, "n1": 0.3, "a2": 0.5, "n2": 0.9}


def test_v2_scores_and_threshold_search_by_hand():
    scores = P.squad_v2_metrics(V2_DATASET, V2_PREDICTIONS, V2_NULL)
    assert scores["exact"] == pytest.approx(25.0)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3) / 4)
    assert scores["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2) and scores["NoAns_f1"] == 0.0
    assert scores["total"] == 4
    # Threshold search (answer when null score <= t): all null -> 2 right; + a1 (0.1) -> 3;
    # + n1 (0.3) -> 2; + a2 (0.5) -> 2 2/3; + n2 (0.9) -> 1 2/3. Best 3/4 at t = 0.1.
    assert scores["best_f1"] == pytest.approx(75.0) and scores["best_f1_thresh"] == pytest.approx(0.1)
    assert scores["best_exact"] == pytest.approx(75.0) and scores["best_exact_thresh"] == pytest.approx(0.1)
    plain = P.squad_v2_metrics(V2_DATASET, V2_PREDICTIONS)
    assert "best_f1" not in plain and plain["f1"] == pytest.approx(scores["f1"])
    with pytest.raises(ValueError, match="na_probs lacks"):
        P.squad_v2_metrics(V2_DATASET, V2_PREDICTIONS, {"a1": 0.0})


def _v2_word_feature(unique_id, example_index):
    return make_feature(unique_id, example_index, context=V2_CONTEXT)


def _v2_inputs(null_scores):
    """Examples, features and raw results whose best spans are `V2_PREDICTIONS`."""
    examples = [SquadExample(qa["id"], qa["question"], V2_CONTEXT) for qa in V2_DATASET[0]["paragraphs"][0]["qas"]]
    features = [_v2_word_feature(10 + i, i) for i in range(4)]
    word = {w: 4 + i for i, w in enumerate(V2_CONTEXT.split())}
    results = []
    for feature, example in zip(features, examples):
        position = word[V2_PREDICTIONS[example.qas_id]]
        # Beam of 2 starts x 1 end; the second start (a question piece) is always filtered out.
        results.append(P.RawResultV2(feature.unique_id, [-0.2, -0.3], [position, 1], [-0.1, -0.1],
                                     [position, 1], null_scores[example.qas_id]))
    return examples, features, results


def test_evaluate_v2_tunes_the_threshold_and_reaches_best_f1():
    examples, features, results = _v2_inputs(V2_NULL)
    metrics, predictions, nbest, null = P.evaluate_v2(V2_DATASET, examples, features, results)
    assert metrics["null_score_diff_threshold"] == pytest.approx(0.1)
    # a1 sits exactly at the threshold and keeps its answer; the others go to "".
    assert predictions == {"a1": "Paris", "a2": "", "n1": "", "n2": ""}
    assert metrics["f1"] == pytest.approx(75.0) == metrics["best_f1"]
    assert metrics["HasAns_f1"] == pytest.approx(50.0) and metrics["NoAns_f1"] == pytest.approx(100.0)
    assert null == V2_NULL
    fixed, predictions, _, _ = P.evaluate_v2(V2_DATASET, examples, features, results, null_score_diff_threshold=0.6)
    assert predictions == {"a1": "Paris", "a2": "sky", "n1": "London", "n2": ""}
    assert fixed["f1"] == pytest.approx(100 * (1 + 2 / 3 + 0 + 1) / 4)


def test_evaluate_v2_answers_nothing_when_that_is_best_with_negative_null_scores():
    # The official search starts from "answer nothing" at threshold 0.0; with negative null scores
    # that threshold would answer everything, so the tuned threshold must go below every score.
    null_scores = {"n1": -0.9, "n2": -0.7, "a1": -0.5, "a2": -0.3}
    examples, features, results = _v2_inputs(null_scores)
    metrics, predictions, _, _ = P.evaluate_v2(V2_DATASET, examples, features, results)
    # All null: n1 and n2 right (2/4); answering in null-score order gives 1, 0, 1, 1 2/3.
    assert metrics["best_f1"] == pytest.approx(50.0)
    assert predictions == {"a1": "", "a2": "", "n1": "", "n2": ""}
    assert metrics["f1"] == pytest.approx(50.0)
    assert metrics["null_score_diff_threshold"] < min(null_scores.values())


def test_evaluate_v1_end_to_end():
    examples = [SquadExample("q", "Where?", CONTEXT)]
    answers = [{"text": "in France"}, {"text": "Normandy"}]
    dataset = [{"paragraphs": [{"context": CONTEXT, "qas": [{"id": "q", "answers": answers}]}]}]
    feature = make_feature(1, 0)
    n = len(feature.tokens)
    result = P.RawResultV1(1, logits(n, p12=5.0), logits(n, p12=5.0))  # "France"
    metrics, predictions, _ = P.evaluate_v1(dataset, examples, [feature], [result])
    assert predictions == {"q": "France"}
    # Best gold "in France": P = 1, R = 1/2 -> F1 2/3; no exact match.
    assert metrics["exact_match"] == 0.0 and metrics["f1"] == pytest.approx(200 / 3)


def test_write_json_atomically(tmp_path):
    path = tmp_path / "out" / "predictions.json"
    P.write_json_atomically(path, {"q": "Café"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"q": "Café"}
    assert [p.name for p in path.parent.iterdir()] == ["predictions.json"]
