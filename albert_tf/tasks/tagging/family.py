"""The tagging family: token classification (BIO tags) as `albert-tf finetune`, `evaluate`,
`predict` and `export` run it, on CoNLL-style files (`conll`) or the People's Daily corpus
(`peoples-daily`) (`TaggingFamily`, looked up by `albert_tf.tasks.family.task_family`)."""

from __future__ import annotations

import os
from typing import Dict, Optional

from albert_tf.tasks.tagging import TAGGING
from albert_tf.data.features import examples_dataset
from albert_tf.data.tables import DataFormatError, read_text
from albert_tf.tasks.errors import TaskError, param
from albert_tf.tasks.family import TableFamily, progress_callbacks_for
from albert_tf.tasks.spec import TaskSpec
from albert_tf.tasks.tagging.data import (
    TaggedSentence,
    TagVocab,
    encode_sentences,
    read_conll,
    read_peoples_daily,
    split_long_sentences,
    split_with_offsets,
)
from albert_tf.tasks.tagging.metrics import (
    decode_predictions,
    entity_spans,
    get_entities,
    make_eval_fn,
    predict_logits,
    score_tagging,
    unit_probabilities,
)

TAGGING_TASKS = ("conll", "peoples-daily")
CONLL_FILES = {
    "train": ("train.txt", "train.conll", "train.bio", "eng.train"),
    "dev": ("dev.txt", "valid.txt", "validation.txt", "dev.conll", "dev.bio", "eng.testa"),
    "test": ("test.txt", "test.conll", "test.bio", "eng.testb"),
}
PEOPLES_DAILY_FRACTIONS = (0.8, 0.1, 0.1)


def conll_split_file(data_dir: str, split: str) -> Optional[str]:
    """The CoNLL file of `split` in `data_dir` (the first of `CONLL_FILES[split]` there), or None."""
    for name in CONLL_FILES[split]:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    return None


def peoples_daily_splits(path: str) -> Dict[str, list]:
    """The corpus cut by position into train / dev / test (80 / 10 / 10 %)."""
    sentences = read_peoples_daily(path)
    n = len(sentences)
    first = int(n * PEOPLES_DAILY_FRACTIONS[0])
    second = first + int(n * PEOPLES_DAILY_FRACTIONS[1])
    return {"train": sentences[:first], "dev": sentences[first:second], "test": sentences[second:]}


class TaggingFamily(TableFamily):
    """Token classification (BIO tags): CoNLL-style files (`conll`) or the People's Daily corpus
    cut 80/10/10 by position (`peoples-daily`, per character)."""

    tasks = TAGGING_TASKS
    kinds = (TAGGING,)
    text_models = {TAGGING: "AlbertTextTagger"}
    spec_kind_when_reading = TAGGING

    def check_data(self, data: str) -> None:
        if self.task != "peoples-daily":
            return super().check_data(data)
        if not os.path.isfile(data):
            raise TaskError(f"{param('data')} for peoples-daily must be the corpus file; not a file: {data}")

    def build_spec(self, settings, config, tokenizer_entry, train_examples) -> TaskSpec:
        vocab = TagVocab.from_sentences(train_examples)
        return TaskSpec(
            settings.task, TAGGING, list(vocab.tags), config.data.max_seq_length,
            ["entity_f1", "entity_precision", "entity_recall", "token_accuracy"], "entity_f1", tokenizer_entry,
            token_unit="char" if settings.task == "peoples-daily" else "word",
        )

    def prepare_data(self, spec, tokenizer, train_examples, dev_examples, eval_batch_size):
        from albert_tf.evaluation import majority_tag_baseline

        vocab = TagVocab(spec.labels)
        try:
            train = encode_sentences(train_examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab)
            dev = encode_sentences(dev_examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab)
        except DataFormatError as e:
            raise TaskError(str(e)) from None
        eval_fn = make_eval_fn(dev, dev_examples, vocab, batch_size=eval_batch_size)
        gold = dev.features["labels"][dev.features["labels"] >= 0]
        constant = majority_tag_baseline(gold, vocab.tags) if gold.size else None
        return examples_dataset(train.features), examples_dataset(dev.features), eval_fn, constant

    def build_task_model(self, encoder, spec, *, dropout, pooling=None):
        from albert_tf.tasks.tagging.head import AlbertForTagging

        return AlbertForTagging(encoder, num_labels=len(spec.labels), dropout=dropout)

    def build_model(self, encoder, preprocessor, spec, *, dropout, pooling=None):
        from albert_tf.tasks.tagging.text_model import AlbertTextTagger

        return AlbertTextTagger(encoder, preprocessor, spec.labels, dropout=dropout, token_unit=spec.token_unit,
                                compile=False, task_model_name=None)

    def split_names(self, spec, data):
        if spec.task == "peoples-daily":
            return {"dev": ["dev"], "test": ["test"]}
        return {kind: [kind] for kind in ("dev", "test") if conll_split_file(data, kind)}

    def read_split(self, spec, data, split, *, on_error="raise", cache=None, table_format=None):
        try:
            if spec.task == "peoples-daily":
                if cache is None or "peoples-daily" not in cache:
                    splits = peoples_daily_splits(data)
                    if cache is not None:
                        cache["peoples-daily"] = splits
                else:
                    splits = cache["peoples-daily"]
                sentences = splits[split]
            else:
                path = conll_split_file(data, split)
                if path is None:
                    raise TaskError(f"no CoNLL {split} file in {data} (looked for {', '.join(CONLL_FILES[split])})")
                sentences = read_conll(path)
            # Long sentences are cut so that every token gets a prediction.
            return split_long_sentences(sentences, max(1, spec.max_seq_length - 2))
        except (DataFormatError, ValueError) as e:
            if isinstance(e, TaskError):
                raise
            raise TaskError(str(e)) from None

    def has_labels(self, spec, examples):
        return True

    def evaluate_examples(self, model, spec, tokenizer, examples, batch_size, label="evaluating"):
        vocab = TagVocab(spec.labels)
        try:
            encoded = encode_sentences(examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab)
        except DataFormatError as e:
            raise TaskError(str(e)) from None
        logits = predict_logits(model, encoded.features, batch_size, callbacks=progress_callbacks_for(label))
        return score_tagging(logits, encoded, examples, vocab)

    def predict_examples(self, model, spec, tokenizer, examples, batch_size, label="predicting"):
        """Per sentence its `tokens`, their `tags` and the `entities` as `model.predict` and the
        served model give them (`entity_record`: label, start and end as character offsets in
        the text, text, score); for pre-tokenized input, whose text is its tokens joined, each
        entity also has its tokens' `start_token` and `end_token`."""
        vocab = TagVocab(spec.labels)
        encoded = encode_sentences(examples, tokenizer, seq_length=spec.max_seq_length, tag_vocab=vocab, with_labels=False)
        logits = predict_logits(model, encoded.features, batch_size, callbacks=progress_callbacks_for(label))
        probabilities = unit_probabilities(logits, encoded.word_positions)
        records = []
        for sentence, tags, scores in zip(examples, decode_predictions(logits, encoded.word_positions, vocab), probabilities):
            text, spans = _text_and_spans(sentence, spec.token_unit)
            entities = entity_spans(tags, scores, spans, text)
            if sentence.text is None:
                for entity, (_, first, last) in zip(entities, get_entities(tags)):
                    entity.update(start_token=first, end_token=last + 1)
            records.append({"tokens": list(sentence.tokens), "tags": tags, "entities": entities})
        return records

    def prediction_row(self, spec, index, example, record):
        return f"{example.source}:{example.line}", " ".join(record["tags"])

    def examples_from_texts(self, spec, texts, texts_b):
        if texts_b:
            raise TaskError("--text-b is for sentence-pair tasks")
        sentences = []
        for i, text in enumerate(texts):
            # Unchecked unit, as before: a task.json unit other than "char" splits into words.
            tokens = [unit for unit, _, _ in split_with_offsets(text, spec.token_unit, strict=False)]
            if not tokens:
                raise TaskError(f"text {i + 1} is empty")
            sentences.append(TaggedSentence(tuple(tokens), tuple("O" for _ in tokens), "<command line>", i + 1, text))
        return sentences

    def examples_from_file(self, spec, path):
        """`.txt`: one sentence per line; else CoNLL columns (the first is the token; tags, if
        any, are ignored)."""
        try:
            if path.lower().endswith(".txt"):
                texts = [l for l in read_text(path).split("\n") if l.strip()]
                if not texts:
                    raise TaskError(f"{path} has no text")
                return self.examples_from_texts(spec, texts, None)
            return read_conll(path, with_tags=False)
        except DataFormatError as e:
            raise TaskError(str(e)) from None

    def export_arguments(self, spec):
        result = super().export_arguments(spec)
        result["labels"] = list(spec.labels)
        result["task_settings"] = {"token_unit": spec.token_unit}
        return result


def _text_and_spans(sentence: TaggedSentence, token_unit: str):
    """The text of a sentence and its units' `(unit, start, end)` in it: the raw text it was split
    from, or its tokens joined (by nothing for characters, by a space for words)."""
    if sentence.text is not None:
        return sentence.text, split_with_offsets(sentence.text, token_unit, strict=False)
    joiner = "" if token_unit == "char" else " "
    spans, offset = [], 0
    for token in sentence.tokens:
        spans.append((token, offset, offset + len(token)))
        offset += len(token) + len(joiner)
    return joiner.join(sentence.tokens), spans
