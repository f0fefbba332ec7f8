"""Raw-text Keras task models, the keras-hub way: strings in, answers out.

Each task folder holds its own (`albert_tf.tasks.<task>.text_model`: `AlbertMultipleChoice` in
`multiple_choice`, `AlbertQuestionAnswerer` in `squad`); all are importable from here.

Each model holds the three parts of a keras-hub task: the in-graph tokenizer
(`AlbertTokenizerLayer`, `model.preprocessor`), the `AlbertEncoder` (`model.encoder`, keras-hub's
backbone) and the task head, which is the token-level task model of `albert_tf.tasks`
(`model.task_model`: an `AlbertClassifier`, `AlbertRegressor`, ...) so that its head, pooling and
losses are the ones `albert-tf finetune` trains and `albert-tf export` serves. The Keras graph
runs on token ids; `fit`, `evaluate` and `predict` take raw text and map the tokenizer over the
data in `tf.data`, as keras-hub's tasks do with their preprocessors:

* a `[batch]` string tensor, a list or array of `str`, or a pair `(texts_a, texts_b)` of them for
  sentence-pair tasks, with `y` (and `sample_weight`) as arrays, batched by `batch_size`
  (default 32) and shuffled for `fit` unless `shuffle=False`;
* a `tf.data.Dataset` of texts (or pairs), unbatched with `y` given as an array (zipped, then
  batched by `batch_size`), or yielding `(texts, labels)` itself, batched or not;
* a dict of token features (`input_ids`, `input_mask`, `segment_ids`) bypasses the tokenizer.

`AlbertMultipleChoice` takes `(contexts, choices)` the same ways. The tagger and the question
answerer convert their labels in Python, as `albert-tf finetune` does (word alignment, SQuAD
windows), so they take lists: texts, or `(questions, contexts)`; their `predict` returns entities
and answers with character spans rather than arrays. `AlbertQuestionAnswerer` is SQuAD v1.1 by
default and SQuAD v2.0 with `version="v2"` (the CLI's `squad-v2` head: unanswerable questions
train with the answer `None` and get the empty answer when their null score exceeds
`null_score_diff_threshold`).

`from_pretrained(path, ...)` builds a model from any checkpoint layout this package reads, with its
tokenizer (see `resolve_pretrained`): an original TF1 release directory (`albert_config.json`,
`model.ckpt-*`, `30k-clean.model`) or TF-Hub module (`variables/`, `assets/30k-clean.model`), a
Hugging Face directory (`config.json`, `model.safetensors`, `spiece.model`), a keras-hub preset
(`assets/tokenizer/vocabulary.spm`), or the output of `albert-tf pretrain` / `albert-tf finetune`
(`spm.model` or `vocab.txt`, described by `tokenizer.json` / `task.json`). Only the encoder is
taken from the checkpoint; the head starts from random weights, as keras-hub's `from_preset` does
when `num_classes` is given.

With `compile=True` the model is compiled with the package's fine-tuning recipe for its size
(`albert_tf.training.recipes.recommended_recipe`): bias-corrected AdamW
(`AdamWeightDecayOptimizer`, weight decay 0.01, global clipnorm 1.0) at the recipe's learning rate,
held constant as keras-hub's tasks compile (the recipe's 10 % warmup and linear decay need the
number of updates, which only the caller knows: pass `optimizer=create_optimizer("adamw", ...,
bias_correction=True)` to `compile` for them), and the task's loss and metrics. The recipe also
chooses the pooling of classifiers and regressors when `pooling=None`.

In a `.keras` file the tokenizer's vocabulary is an asset of the archive (`AlbertTokenizerLayer`
`save_assets` / `load_assets`), not text in `config.json`; `keras.saving.load_model` restores the
model with identical predictions (import `albert_tf.tasks.text_models`, or the class from `albert_tf`,
first: it registers the classes, as importing keras-hub does for its tasks).
`model.export(export_base)` writes the TF Serving SavedModel with
`albert_tf.export.export_saved_model`, the code behind `albert-tf export`, so that the signatures
are the ones the command writes for the same task: classifier, regressor, tagger, multiple choice
and question answerer alike. The export's `assets/weights.json` makes the version a checkpoint
again: `from_pretrained` reads its encoder.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from albert_tf.data.tagging import TOKEN_UNITS, split_with_offsets
from albert_tf.kinds import RECIPE_CLASSIFICATION, RECIPE_REGRESSION, RECIPE_TAGGING
from albert_tf.tasks.classification import AlbertClassifier, AlbertRegressor
from albert_tf.tokenization.in_graph import DEFAULT_LENGTH_BUCKET, check_length_bucket, packed_width

# What every raw-text model shares and what `from_pretrained` reads, importable from here as before.
from albert_tf.tasks.pretrained import (  # noqa: F401
    PRETRAINED_LAYOUTS,
    PretrainedFiles,
    PretrainedNotFoundError,
    TokenizerNotFoundError,
    find_tokenizer_file,
    load_pretrained_backbone,
    resolve_pretrained,
)
from albert_tf.tasks.text_task import (  # noqa: F401
    DEFAULT_BATCH_SIZE,
    AlbertTextTask,
    check_parts,
    export_text_model,
    python_tokenizer,
    resolve_pooling,
    string_tensor,
    token_inputs,
)
# The raw-text models of the task folders, importable from here as before.
from albert_tf.tasks.multiple_choice.text_model import AlbertMultipleChoice  # noqa: F401
from albert_tf.tasks.squad.text_model import AlbertQuestionAnswerer  # noqa: F401

@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextClassifier(AlbertTextTask):
    """Text (or text-pair) classifier on raw strings: tokenizer -> `AlbertEncoder` -> `AlbertClassifier` head.

    Input: a batch of texts, or a pair `(texts_a, texts_b)`; output: logits `[batch, num_classes]`.
    The head is `AlbertClassifier`'s (dropout, dense on the `[CLS]` pooler or the token mean),
    kept as `task_model`, which is what `export` serves.

    Compiled by default (`compile=True`) with the recipe's bias-corrected AdamW, sparse
    categorical cross-entropy on the logits and `accuracy` (`SparseCategoricalAccuracy`).

    Args:
        encoder: An `AlbertEncoder`.
        preprocessor: The `AlbertTokenizerLayer` of the encoder's vocabulary.
        num_classes: Number of classes (>= 2).
        dropout: Dropout before the head.
        pooling: "cls" (the encoder's pooler) or "mean" (the mean of the last layer over the real
            tokens; the pooler is then frozen, as it gets no gradient).
        compile: Compile with the defaults above.
        **kwargs: `keras.Model` arguments (`name`, ...).

    Example:

    >>> model = AlbertTextClassifier.from_pretrained("albert_base", num_classes=2)  # doctest: +SKIP
    >>> model.fit(x=["a good film", "a bad film"], y=[1, 0], batch_size=2, epochs=3)  # doctest: +SKIP
    >>> model.predict(["good"]).argmax(-1)  # doctest: +SKIP
    array([1])
    >>> model.save("classifier.keras")  # doctest: +SKIP
    >>> model.export("serving", model_name="sentiment")  # doctest: +SKIP
    """

    recipe_task = RECIPE_CLASSIFICATION

    def __init__(self, encoder, preprocessor, num_classes: int, dropout: float = 0.1, pooling: str = "cls",
                 compile: bool = True, length_bucket: Optional[int] = DEFAULT_LENGTH_BUCKET, **kwargs):
        check_parts(encoder, preprocessor)
        # === Layers ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        self.task_model = AlbertClassifier(encoder, num_labels=num_classes, dropout=dropout, pooling=pooling,
                                           name="classifier")
        if pooling == "mean":
            # The head reads the token mean: the pooler gets no gradient.
            encoder.pooler.trainable = False

        # === Functional Model ===
        inputs = token_inputs()
        outputs = self.task_model(inputs)["logits"]
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.length_bucket = check_length_bucket(length_bucket)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
        self.pooling = pooling
        if compile:
            self.compile()

    @classmethod
    def from_pretrained(cls, path, num_classes: int, *, sequence_length: int = 128, pooling: Optional[str] = None,
                        dropout: float = 0.1, compile: bool = True, config=None, tokenizer=None,
                        lower_case: Optional[bool] = None, dtype=None, allow_vocab_mismatch: bool = False,
                        name: str = "albert_text_classifier") -> "AlbertTextClassifier":
        """A classifier on the pretrained encoder and tokenizer at `path` (any layout; see
        `resolve_pretrained`), with a new head.

        Args:
            path: The checkpoint file, prefix or directory.
            num_classes: Number of classes.
            sequence_length: Length of the packed inputs.
            pooling: "cls" or "mean"; default the recipe's for the model's size.
            dropout: Dropout before the head.
            compile: Compile with the recipe (see the class).
            config, tokenizer, lower_case, dtype, allow_vocab_mismatch: See `load_pretrained_backbone`.
            name: The model's name (also the served name `export` defaults to).
        """
        encoder, preprocessor, _ = load_pretrained_backbone(
            path, sequence_length=sequence_length, config=config, tokenizer=tokenizer, lower_case=lower_case,
            dtype=dtype, allow_vocab_mismatch=allow_vocab_mismatch,
        )
        pooling = resolve_pooling(pooling, encoder, cls.recipe_task)
        return cls(encoder, preprocessor, num_classes, dropout=dropout, pooling=pooling, compile=compile, name=name)

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def export(self, export_base, model_name: Optional[str] = None, version: Optional[int] = None, *,
               labels: Optional[Sequence[str]] = None, pair: bool = False, check: bool = True, **kwargs):
        """Writes the TF Serving SavedModel `<export_base>/<model_name>/<version>/`, as `albert-tf export`.

        Signatures: `serving_default` (raw `text`, and `text_b` with `pair=True`, in; `probabilities`,
        `logits`, `label_id`, `label` out), `tokens` (token ids in) and `classify` (TF Serving's
        Classify API); see `albert_tf.export.signatures`.

        Args:
            export_base: The TF Serving model base directory.
            model_name: The served name (default the model's name).
            version: The integer version (default the next free one).
            labels: Class names in id order (default "0", "1", ...).
            pair: The model takes text pairs (`text`, `text_b`).
            check: Run the TF Serving compatibility check (ops and a fresh-process reload).
            **kwargs: `export_saved_model` arguments (`batching`, `container_base`, `extra_assets`,
                `length_bucket`: default the model's;
                `tflite="dynamic-int8"` or `"float32"` for a `model.tflite` beside the SavedModel).

        Returns:
            The `ExportResult` (`result.path` is the version directory).
        """
        from albert_tf.export.saved_model import export_saved_model

        kwargs.setdefault("length_bucket", self.length_bucket)
        return export_saved_model(self.task_model, self.preprocessor, os.fspath(export_base), model_name or self.name,
                                  version, labels=labels, pair=pair, check=check, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "dropout": self.dropout, "pooling": self.pooling})
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextRegressor(AlbertTextTask):
    """Text (or text-pair) regression on raw strings: tokenizer -> `AlbertEncoder` -> `AlbertRegressor` head.

    Input as `AlbertTextClassifier`; output: one float per text, `[batch]`. Compiled by default with
    the recipe's bias-corrected AdamW, the mean squared error and the Pearson correlation
    (`pearson`).

    Args:
        encoder: An `AlbertEncoder`.
        preprocessor: The `AlbertTokenizerLayer` of the encoder's vocabulary.
        dropout: Dropout before the head.
        pooling: "cls" or "mean", as `AlbertTextClassifier`.
        compile: Compile with the defaults above.
        **kwargs: `keras.Model` arguments (`name`, ...).

    Example:

    >>> model = AlbertTextRegressor.from_pretrained("albert_base")  # doctest: +SKIP
    >>> model.fit(x=(["a man sings"] * 2, ["a man is singing", "a cat sleeps"]), y=[4.8, 0.2])  # doctest: +SKIP
    >>> model.predict((["a man sings"], ["someone sings"]))  # doctest: +SKIP
    """

    recipe_task = RECIPE_REGRESSION

    def __init__(self, encoder, preprocessor, dropout: float = 0.1, pooling: str = "cls", compile: bool = True,
                 length_bucket: Optional[int] = DEFAULT_LENGTH_BUCKET, **kwargs):
        check_parts(encoder, preprocessor)
        # === Layers ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        self.task_model = AlbertRegressor(encoder, dropout=dropout, pooling=pooling, name="regressor")
        if pooling == "mean":
            encoder.pooler.trainable = False

        # === Functional Model ===
        inputs = token_inputs()
        outputs = self.task_model(inputs)["predictions"]
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.length_bucket = check_length_bucket(length_bucket)

        # === Config ===
        self.dropout = dropout
        self.pooling = pooling
        if compile:
            self.compile()

    @classmethod
    def from_pretrained(cls, path, *, sequence_length: int = 128, pooling: Optional[str] = None,
                        dropout: float = 0.1, compile: bool = True, config=None, tokenizer=None,
                        lower_case: Optional[bool] = None, dtype=None, allow_vocab_mismatch: bool = False,
                        name: str = "albert_text_regressor") -> "AlbertTextRegressor":
        """A regressor on the pretrained encoder and tokenizer at `path`, with a new head
        (arguments as `AlbertTextClassifier.from_pretrained`)."""
        encoder, preprocessor, _ = load_pretrained_backbone(
            path, sequence_length=sequence_length, config=config, tokenizer=tokenizer, lower_case=lower_case,
            dtype=dtype, allow_vocab_mismatch=allow_vocab_mismatch,
        )
        pooling = resolve_pooling(pooling, encoder, cls.recipe_task)
        return cls(encoder, preprocessor, dropout=dropout, pooling=pooling, compile=compile, name=name)

    def default_loss(self):
        return keras.losses.MeanSquaredError()

    def default_metrics(self):
        return [keras.metrics.PearsonCorrelation(name="pearson")]

    def _labels_array(self, y):
        return np.asarray(y, dtype="float32")

    def export(self, export_base, model_name: Optional[str] = None, version: Optional[int] = None, *,
               pair: bool = False, check: bool = True, **kwargs):
        """Writes the TF Serving SavedModel, as `albert-tf export` does for a regressor: `serving_default`
        and `tokens` return `score`, `regress` is TF Serving's Regress API. Arguments as
        `AlbertTextClassifier.export` (without `labels`)."""
        from albert_tf.export.saved_model import export_saved_model

        kwargs.setdefault("length_bucket", self.length_bucket)
        return export_saved_model(self.task_model, self.preprocessor, os.fspath(export_base), model_name or self.name,
                                  version, pair=pair, check=check, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({"dropout": self.dropout, "pooling": self.pooling})
        return config


# --- token tagging ----------------------------------------------------------------------------------

def split_units(text: str, token_unit: str) -> List[Tuple[str, int, int]]:
    """The tagging units of `text` with their character spans `(unit, start, end)` (end exclusive):
    whitespace-separated words ("word") or the characters that are not whitespace ("char").

    `albert_tf.data.tagging.split_with_offsets` without its check of `token_unit` (any unit but
    "char" splits into words; `AlbertTextTagger` checks its unit when it is built)."""
    return split_with_offsets(text, token_unit, strict=False)


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedTokenAccuracy(keras.metrics.Mean):
    """Accuracy of per-token logits over the labelled tokens (labels >= 0; `IGNORE_LABEL` is -100)."""

    def __init__(self, name: str = "token_accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        from keras import ops

        labels = ops.cast(y_true, "int32")
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), labels), "float32")
        weights = ops.cast(ops.greater_equal(labels, 0), "float32")
        if sample_weight is not None:
            sample_weight = ops.cast(sample_weight, "float32")
            if len(sample_weight.shape) == 1:  # per example: the same weight on each of its tokens
                sample_weight = ops.expand_dims(sample_weight, -1)
            weights = weights * sample_weight
        return super().update_state(correct, sample_weight=weights)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextTagger(AlbertTextTask):
    """Token tagging (NER) on raw text: entities with their labels and character spans.

    The text is split into tagging units, whitespace-separated words (`token_unit="word"`, e.g.
    English CoNLL) or single characters (`"char"`, e.g. Chinese People's Daily), and encoded as
    `albert-tf finetune --task` tagging does (`albert_tf.tasks.tagging.encode_sentences`: each
    unit's tag on its first piece, the other pieces ignored); predictions are decoded per unit
    (`decode_predictions`) and grouped into BIO entities (`albert_tf.metrics.get_entities`). The
    head is `AlbertTokenClassifier` (`task_model`).

    Inputs: a list of texts. Labels for `fit` / `evaluate`: per text, either one tag per unit
    (`["B-PER", "I-PER", "O"]`) or its entities as `(start, end, label)` character spans (or
    dicts with those keys), end exclusive, which tag every unit they overlap (`B-` on the first).
    `predict` returns, per text, a list of `{"label", "start", "end", "text"}` dicts.

    Character spans are exact in the original text but cover whole units: with words, punctuation
    attached to a word (`"Paris,"`) is inside the span, as the tokenizer never sees the word
    without it; units whose pieces fall beyond `sequence_length` are tagged `O` (split long texts
    first). The tokenizer's own normalization (NFKD, lower-casing) does not move the spans, since
    they are taken from the units, not from the pieces.

    Compiled by default with the tagging recipe's bias-corrected AdamW, the cross-entropy over the
    labelled pieces (`SparseCategoricalCrossentropy(ignore_class=-100)`) and `token_accuracy`.

    Args:
        encoder: An `AlbertEncoder`.
        preprocessor: The `AlbertTokenizerLayer` of the encoder's vocabulary (its
            `sequence_length` is the model's).
        tags: The BIO tags in id order, "O" first (e.g. `["O", "B-PER", "I-PER"]`).
        dropout: Dropout before the head.
        token_unit: "word" or "char".
        compile: Compile with the defaults above.
        **kwargs: `keras.Model` arguments (`name`, ...).

    Example:

    >>> model = AlbertTextTagger.from_pretrained("albert_base", tags=["O", "B-PER", "I-PER"])  # doctest: +SKIP
    >>> model.fit(["Ada Lovelace wrote"], [[(0, 12, "PER")]], epochs=3)  # doctest: +SKIP
    >>> model.predict(["Ada Lovelace wrote"])  # doctest: +SKIP
    [[{'label': 'PER', 'start': 0, 'end': 12, 'text': 'Ada Lovelace'}]]
    """

    recipe_task = RECIPE_TAGGING

    def __init__(self, encoder, preprocessor, tags: Sequence[str], dropout: float = 0.1, token_unit: str = "word",
                 compile: bool = True, length_bucket: Optional[int] = DEFAULT_LENGTH_BUCKET, **kwargs):
        from albert_tf.data.tagging import TagVocab
        from albert_tf.tasks.tagging import AlbertTokenClassifier

        check_parts(encoder, preprocessor)
        if token_unit not in TOKEN_UNITS:
            raise ValueError(f"token_unit must be one of {', '.join(TOKEN_UNITS)}, got {token_unit!r}")
        tag_vocab = TagVocab(tags)
        # === Layers ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        self.task_model = AlbertTokenClassifier(encoder, num_labels=len(tag_vocab), dropout=dropout,
                                                name="token_classifier")

        # === Functional Model ===
        inputs = token_inputs()
        outputs = self.task_model(inputs)["logits"]
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.length_bucket = check_length_bucket(length_bucket)

        # === Config ===
        self.tags = list(tag_vocab.tags)
        self.tag_vocab = tag_vocab
        self.dropout = dropout
        self.token_unit = token_unit
        if compile:
            self.compile()

    @classmethod
    def from_pretrained(cls, path, tags: Sequence[str], *, token_unit: str = "word", sequence_length: int = 128,
                        dropout: float = 0.1, compile: bool = True, config=None, tokenizer=None,
                        lower_case: Optional[bool] = None, dtype=None, allow_vocab_mismatch: bool = False,
                        name: str = "albert_text_tagger") -> "AlbertTextTagger":
        """A tagger on the pretrained encoder and tokenizer at `path`, with a new head (other
        arguments as `AlbertTextClassifier.from_pretrained`)."""
        encoder, preprocessor, _ = load_pretrained_backbone(
            path, sequence_length=sequence_length, config=config, tokenizer=tokenizer, lower_case=lower_case,
            dtype=dtype, allow_vocab_mismatch=allow_vocab_mismatch,
        )
        return cls(encoder, preprocessor, tags, dropout=dropout, token_unit=token_unit, compile=compile, name=name)

    def default_loss(self):
        from albert_tf.tasks.tagging import IGNORE_LABEL

        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE_LABEL)

    def default_metrics(self):
        return [MaskedTokenAccuracy(name="token_accuracy")]

    # --- text <-> units <-> pieces -------------------------------------------------------------------

    def _unit_tags(self, units, labels, index: int) -> List[str]:
        """One tag per unit from a text's labels: tags as they are, or entity spans as BIO."""
        labels = list(labels)
        if all(isinstance(label, str) for label in labels) and (labels or not units):
            if len(labels) != len(units):
                raise ValueError(f"text {index}: {len(labels)} tags for {len(units)} {self.token_unit} units")
            return labels
        tags = ["O"] * len(units)
        for entity in labels:
            if isinstance(entity, dict):
                start, end, label = entity["start"], entity["end"], entity["label"]
            else:
                start, end, label = entity
            covered = [i for i, (_, a, b) in enumerate(units) if a < end and b > start]
            if not covered:
                raise ValueError(f"text {index}: the entity ({start}, {end}, {label!r}) covers no {self.token_unit}")
            for position, i in enumerate(covered):
                tags[i] = ("B-" if position == 0 else "I-") + str(label)
        return tags

    def encode(self, texts, y=None):
        """Encodes texts (and labels) as `encode_sentences` does for `albert-tf finetune`.

        Returns:
            `(features, units, encoded)`: the feature dict (with `labels` when `y` is given), the
            units of each text (`split_units`) and the `EncodedSentences` (word positions).
        """
        from albert_tf.data.tagging import TaggedSentence
        from albert_tf.tasks.tagging import encode_sentences

        if isinstance(texts, (str, bytes)) or isinstance(texts, (tf.data.Dataset, dict, tuple)):
            raise ValueError("the tagger takes a list of texts (str)")
        texts = [t.decode("utf-8") if isinstance(t, bytes) else t for t in list(texts)]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ValueError("the tagger takes a non-empty list of texts (str)")
        if y is not None and len(y) != len(texts):
            raise ValueError(f"{len(y)} label lists for {len(texts)} texts")
        units = [split_units(text, self.token_unit) for text in texts]
        sentences = []
        for i, text_units in enumerate(units):
            tokens = tuple(u[0] for u in text_units) or ("",)
            tags = tuple(self._unit_tags(text_units, y[i], i)) if y is not None else ("O",) * len(tokens)
            sentences.append(TaggedSentence(tokens, tags or ("O",), "<text>", i))
        encoded = encode_sentences(sentences, python_tokenizer(self.preprocessor),
                                   seq_length=self.preprocessor.sequence_length, tag_vocab=self.tag_vocab,
                                   with_labels=y is not None)
        return encoded.features, units, encoded

    def make_dataset(self, x, y=None, sample_weight=None, *, batch_size=None, shuffle=False):
        """The batched dataset of encoded texts (`encode`) and their per-piece labels."""
        features, _, _ = self.encode(x, y)
        labels = features.pop("labels", None)
        weights = None
        if sample_weight is not None:
            # Per token, as the loss is (Keras' masked loss does not broadcast per-example weights).
            per_text = np.asarray(sample_weight, dtype="float32").reshape(-1, 1)
            weights = np.broadcast_to(per_text, features["input_ids"].shape).copy()
        dataset = tf.data.Dataset.from_tensor_slices(keras.utils.pack_x_y_sample_weight(features, labels, weights))
        if shuffle:
            dataset = dataset.shuffle(len(features["input_ids"]), reshuffle_each_iteration=True)
        return dataset.batch(batch_size or DEFAULT_BATCH_SIZE).prefetch(tf.data.AUTOTUNE)

    def _validation_dataset(self, data, batch_size):
        if not isinstance(data, (tuple, list)) or len(data) not in (2, 3):
            raise ValueError("validation_data must be (texts, labels) or (texts, labels, sample_weight)")
        return self.make_dataset(*data, batch_size=batch_size)

    def predict(self, x, batch_size=None, **kwargs):
        """The entities of each text: a list (per text) of `{"label", "start", "end", "text"}`,
        character offsets into the text, end exclusive."""
        from albert_tf.metrics import get_entities
        from albert_tf.tasks.tagging import decode_predictions

        features, units, encoded = self.encode(x)
        dataset = tf.data.Dataset.from_tensor_slices(features).batch(batch_size or DEFAULT_BATCH_SIZE)
        if self.length_bucket is not None:
            dataset = dataset.map(lambda batch: _cut_to_bucket(batch, self.length_bucket))
        logits = keras.Model.predict(self, dataset, **kwargs)
        if self.length_bucket is not None:
            # Batches of different widths: `decode_predictions` reads the first pieces only.
            logits = _padded_concat(logits, self.preprocessor.sequence_length)
        tags = decode_predictions(logits, encoded.word_positions, self.tag_vocab)
        results = []
        for text, text_units, text_tags in zip(list(x), units, tags):
            text = text.decode("utf-8") if isinstance(text, bytes) else text
            entities = []
            for label, first, last in get_entities(text_tags[: len(text_units)]):
                start, end = text_units[first][1], text_units[last][2]
                entities.append({"label": label, "start": start, "end": end, "text": text[start:end]})
            results.append(entities)
        return results

    def export(self, export_base, model_name: Optional[str] = None, version: Optional[int] = None, **kwargs):
        """Writes the TF Serving SavedModel (`albert_tf.export.tagging`: text in, entities with
        character spans out, plus the `tokens` signature) through `export_saved_model`."""
        kwargs.setdefault("task_settings", {"token_unit": self.token_unit})
        return export_text_model(self, export_base, model_name, version, labels=self.tags, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({"tags": list(self.tags), "dropout": self.dropout, "token_unit": self.token_unit})
        return config


def _cut_to_bucket(features: Dict[str, tf.Tensor], length_bucket: int) -> Dict[str, tf.Tensor]:
    """Fixed-length features of a batch without the padding columns beyond its length bucket."""
    sequence_length = features["input_mask"].shape[-1]
    width = packed_width(tf.reduce_sum(features["input_mask"], axis=-1), sequence_length, length_bucket)
    return {k: v[..., :width] for k, v in features.items()}


def _padded_concat(values, length: int) -> np.ndarray:
    """Keras `predict`'s outputs of batches of different widths (axis 1; a `RaggedTensor` then)
    as one array padded with zeros to `length`."""
    if isinstance(values, tf.RaggedTensor):
        values = values.to_tensor()
    values = np.asarray(values)
    return np.pad(values, [(0, 0), (0, length - values.shape[1])] + [(0, 0)] * (values.ndim - 2))
