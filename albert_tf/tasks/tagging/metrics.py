"""How a tagger scores and what its tags mean: entities read from BIO tags the conlleval way,
their entity-level precision / recall / F1, one tag per word from piece logits, and the dev
evaluation of a fine-tuning run.

* `get_entities` and `entity_scores`: entity-level precision / recall / F1 over exact spans of
  BIO (IOB2, also IOB1) tag sequences, the conlleval / `seqeval` (default mode) definition: an
  entity starts at `B-X`, or at `I-X` not preceded by a tag of type X, and ends before the next
  tag that does not continue it;
* `entity_record`: the one shape of an entity found in a raw text (`label`, `start`, `end`,
  `text`, `score`), which `AlbertTextTagger.predict` and `predict_text_entities` return and the
  served `entity_*` outputs hold column by column; `entity_spans` makes them from unit tags;
* `decode_predictions`, `predict_logits`, `score_tagging` and `make_eval_fn` (the dev
  evaluation for `albert_tf.training.finetuning.run_finetuning`: entity scores over the words
  and token accuracy over the labelled pieces).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Sequence, Tuple

import numpy as np

from albert_tf.metrics import token_accuracy
from albert_tf.tasks.tagging.data import FEATURE_NAMES, EncodedSentences, TaggedSentence, TagVocab

# --- entity-level scores -------------------------------------------------------------------------


def split_tag(tag: str) -> Tuple[str, str]:
    if tag == "O" or not tag:
        return "O", ""
    if len(tag) > 2 and tag[1] in "-_" and tag[0] in "BIES":
        return tag[0], tag[2:]
    raise ValueError(f"tag {tag!r} is not 'O' or PREFIX-TYPE with PREFIX in B, I, E, S")


def get_entities(tags: Sequence[str]) -> List[Tuple[str, int, int]]:
    """The entities of one BIO tag sequence as `(type, start, end)`, `end` inclusive.

    Follows conlleval: an `I-X` after `O` or after another type starts a new entity (so IOB1
    data scores as intended); `E-X`/`S-X` (IOBES) close an entity.
    """
    entities = []
    current_type, start = None, None
    previous_prefix = "O"
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = split_tag(tag)
        # Does an entity end before position i?
        if current_type is not None:
            ends = (
                prefix in ("O", "B", "S")
                or kind != current_type
                or previous_prefix in ("E", "S")
            )
            if ends:
                entities.append((current_type, start, i - 1))
                current_type, start = None, None
        # Does one start at i?
        if prefix != "O" and current_type is None:
            current_type, start = kind, i
        previous_prefix = prefix
    return entities


def entity_scores(
    predicted_tags: Iterable[Sequence[str]], true_tags: Iterable[Sequence[str]]
) -> Dict[str, object]:
    """Micro-averaged entity precision / recall / F1 over exact (type, start, end) spans.

    Args:
        predicted_tags: One tag sequence per sentence.
        true_tags: The gold sequences, each as long as its prediction.

    Returns:
        `precision`, `recall`, `f1` (floats; 0 for 0/0), `num_predicted`, `num_true`, `num_correct`,
        and `per_type`: {type: {precision, recall, f1, support}}.
    """
    predicted_sequences = [list(s) for s in predicted_tags]
    true_sequences = [list(s) for s in true_tags]
    if len(predicted_sequences) != len(true_sequences):
        raise ValueError(f"{len(predicted_sequences)} predicted and {len(true_sequences)} true sequences")
    predicted_set, true_set = set(), set()
    for index, (predicted, gold) in enumerate(zip(predicted_sequences, true_sequences)):
        if len(predicted) != len(gold):
            raise ValueError(f"sequence {index}: {len(predicted)} predicted tags for {len(gold)} true tags")
        predicted_set.update((index,) + e for e in get_entities(predicted))
        true_set.update((index,) + e for e in get_entities(gold))
    correct = predicted_set & true_set

    def prf(num_correct, num_predicted, num_true):
        precision = num_correct / num_predicted if num_predicted else 0.0
        recall = num_correct / num_true if num_true else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    per_type = {}
    for kind in sorted({e[1] for e in predicted_set | true_set}):
        n_correct = sum(1 for e in correct if e[1] == kind)
        n_predicted = sum(1 for e in predicted_set if e[1] == kind)
        n_true = sum(1 for e in true_set if e[1] == kind)
        p, r, f = prf(n_correct, n_predicted, n_true)
        per_type[kind] = {"precision": p, "recall": r, "f1": f, "support": n_true}
    precision, recall, f1 = prf(len(correct), len(predicted_set), len(true_set))
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "num_predicted": len(predicted_set),
        "num_true": len(true_set),
        "num_correct": len(correct),
        "per_type": per_type,
    }


# --- entities in raw text ------------------------------------------------------------------------


def entity_record(label: str, start: int, end: int, text: str, score: float) -> Dict[str, Any]:
    """One entity found in a raw text, as every tagging path gives it.

    Args:
        label: Its type (`PER` for `B-PER I-PER`).
        start: The first character of its first unit.
        end: The end (exclusive) of its last unit: `text == source[start:end]`.
        text: Its characters.
        score: The mean over its units of the softmax probability of each unit's tag.
    """
    return {"label": label, "start": int(start), "end": int(end), "text": text, "score": float(score)}


def unit_probabilities(logits: np.ndarray, word_positions: Sequence[Sequence[int]]) -> List[List[float]]:
    """Per text, the probability of each unit's predicted tag (the softmax at its first piece),
    0 for a unit cut off by the sequence length (tagged `O`, which belongs to no entity)."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
    return [[float(probabilities[row, p].max()) if p >= 0 else 0.0 for p in positions]
            for row, positions in enumerate(word_positions)]


def entity_spans(
    tags: Sequence[str], probabilities: Sequence[float], spans: Sequence[Tuple[str, int, int]], text: str
) -> List[Dict[str, Any]]:
    """The entities of one text's unit tags, with character spans.

    Args:
        tags: One tag per unit (entities as `get_entities` reads them).
        probabilities: The probability of each unit's tag.
        spans: The units' `(unit, start, end)` from `split_with_offsets`.
        text: The text the spans point into.

    Returns:
        An `entity_record` per entity.
    """
    entities = []
    for label, first, last in get_entities(tags):
        start, end = spans[first][1], spans[last][2]
        score = float(np.mean(probabilities[first : last + 1]))
        entities.append(entity_record(label, start, end, text[start:end], score))
    return entities


# --- predictions and scores ----------------------------------------------------------------------


def decode_predictions(logits: np.ndarray, word_positions: Sequence[Sequence[int]], tag_vocab: TagVocab) -> List[List[str]]:
    """One tag per word from piece logits [n, seq, num_labels] (argmax at each first piece)."""
    predicted = np.asarray(logits).argmax(axis=-1)
    out = []
    for row, positions in enumerate(word_positions):
        out.append([tag_vocab.tag_of(predicted[row, p]) if p >= 0 else "O" for p in positions])
    return out


def predict_logits(model, features: Dict[str, np.ndarray], batch_size: int = 32, *, callbacks=None) -> np.ndarray:
    """Piece logits [n, seq, num_labels] for encoded features (`callbacks` go to `model.predict`)."""
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices({k: features[k] for k in FEATURE_NAMES}).batch(batch_size)
    return np.asarray(model.predict(dataset, verbose=0, callbacks=callbacks)["logits"])


def score_tagging(
    logits: np.ndarray, encoded: EncodedSentences, sentences: Sequence[TaggedSentence], tag_vocab: TagVocab
) -> Dict[str, float]:
    """Entity precision / recall / F1 over the words, token accuracy over the labelled pieces,
    and the mean cross-entropy over the labelled pieces (`loss`)."""
    predicted_tags = decode_predictions(logits, encoded.word_positions, tag_vocab)
    entities = entity_scores(predicted_tags, [list(s.tags) for s in sentences])
    labels = encoded.features["labels"]
    mask = labels >= 0
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, np.where(mask, labels, 0)[..., None], axis=-1)[..., 0]
    return {
        "entity_precision": float(entities["precision"]),
        "entity_recall": float(entities["recall"]),
        "entity_f1": float(entities["f1"]),
        "token_accuracy": token_accuracy(logits.argmax(axis=-1), labels, weights=mask),
        "loss": float(-picked[mask].mean()),
    }


def make_eval_fn(encoded: EncodedSentences, sentences: Sequence[TaggedSentence], tag_vocab: TagVocab, batch_size: int = 32):
    """`eval_fn(model, eval_data) -> metrics` for `run_finetuning`; `eval_data` is ignored in
    favour of the encoded dev sentences, whose word alignment the entity scores need."""

    def eval_fn(model, eval_data=None, callbacks=None) -> Dict[str, float]:
        logits = predict_logits(model, encoded.features, batch_size, callbacks=callbacks)
        return score_tagging(logits, encoded, sentences, tag_vocab)

    return eval_fn
