"""`AlbertMultipleChoice`: multiple choice on raw text, the keras-hub way (strings in, one score
per choice out), on the RACE head (`albert_tf.tasks.multiple_choice.head.AlbertForMultipleChoice`).

It packs each choice with its context in the graph as the export does
(`albert_tf.tasks.multiple_choice.serving.MultipleChoiceGraph`), so that `predict` answers what
the served model answers; `fit`, `predict`, `from_pretrained`, `.keras` saving and `export` are
those of `albert_tf.tasks.text_task.AlbertTextTask`.
"""

from __future__ import annotations

from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from albert_tf.tasks.multiple_choice import MULTIPLE_CHOICE
from albert_tf.modeling import ENCODER_INPUTS
from albert_tf.tasks.multiple_choice.head import AlbertForMultipleChoice
from albert_tf.tasks.multiple_choice.serving import MultipleChoiceGraph, multiple_choice_settings
from albert_tf.tasks.text_task import AlbertTextTask, check_parts, class_ids, export_text_model, string_tensor
from albert_tf.tokenization.in_graph import DEFAULT_LENGTH_BUCKET, check_length_bucket


def _string_matrix(values, what: str) -> tf.Tensor:
    if isinstance(values, tf.Tensor):
        tensor = values
    else:
        try:
            array = np.asarray(values)
        except ValueError:
            array = np.asarray(values, dtype=object)
        if array.ndim != 2:
            raise ValueError(f"{what} must be a [batch, choices] rectangle of texts (as many choices for every context)")
        tensor = tf.convert_to_tensor(array.astype(object) if array.dtype.kind == "U" else array)
    if tensor.dtype != tf.string:
        raise TypeError(f"{what} must be strings, got dtype {tensor.dtype.name}")
    if tensor.shape.rank != 2 or tensor.shape[1] < 2:
        raise ValueError(f"{what} must be [batch, choices] texts with at least 2 choices, got shape {tensor.shape}")
    return tensor


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(AlbertTextTask):
    """Multiple choice on raw text: a context and its choices in, one score per choice out.

    Input: a pair `(contexts, choices)`, `contexts` a batch of texts and `choices` as many
    choices for each (a `[batch, choices]` list of lists or string tensor). Each choice is packed
    with its context, `[CLS] context [SEP] choice [SEP]` (the tokenizer's pair packing: the longer
    segment loses its end first), and the head is RACE's (`AlbertForMultipleChoice`: dense 1 on the
    pooled output of each row, softmax over the choices). For RACE-style questions put the question
    into each choice (`albert_tf.tasks.multiple_choice.data.choice_texts` fills "_" with the option, else appends
    it); note that the RACE conversion keeps the end of the question and option and cuts the
    article, where the pair packing cuts the longer segment. Output: scores (logits)
    `[batch, choices]`; labels are the index of the right choice.

    Compiled by default with the recipe's bias-corrected AdamW, sparse categorical cross-entropy
    over the choices and `accuracy`.

    Args:
        encoder: An `AlbertEncoder`.
        preprocessor: The `AlbertTokenizerLayer` of the encoder's vocabulary.
        dropout: Dropout before the head.
        compile: Compile with the defaults above.
        **kwargs: `keras.Model` arguments (`name`, ...).

    Example:

    >>> model = AlbertMultipleChoice.from_pretrained("albert_base")  # doctest: +SKIP
    >>> model.fit((["The sky is blue."], [["blue", "green", "red"]]), [0], epochs=2)  # doctest: +SKIP
    >>> model.predict((["Grass is green."], [["blue", "green", "red"]])).argmax(-1)  # doctest: +SKIP
    array([1])
    """

    kind = MULTIPLE_CHOICE

    def __init__(self, encoder, preprocessor, dropout: float = 0.1, compile: bool = True,
                 length_bucket: Optional[int] = DEFAULT_LENGTH_BUCKET, task_model_name: Optional[str] = "multiple_choice",
                 **kwargs):
        check_parts(encoder, preprocessor)
        # === Layers ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        self.task_model = AlbertForMultipleChoice(encoder, dropout=dropout, name=task_model_name)

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None, preprocessor.sequence_length), dtype="int32", name=name)
            for name in ENCODER_INPUTS
        }
        outputs = self.task_model(inputs)["logits"]
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.length_bucket = check_length_bucket(length_bucket)

        # === Config ===
        self.dropout = dropout
        if compile:
            self.compile()

    default_name = "albert_multiple_choice"

    @classmethod
    def from_pretrained(cls, path, *, sequence_length: Optional[int] = None, dropout: Optional[float] = None,
                        new_head: bool = False, seed: Optional[int] = None, compile: bool = True, config=None,
                        tokenizer=None, lower_case: Optional[bool] = None, dtype=None,
                        allow_vocab_mismatch: bool = False, name: Optional[str] = None) -> "AlbertMultipleChoice":
        """The multiple-choice model stored at `path`, whole, or a new one on the pretrained encoder
        there (arguments as `AlbertTextClassifier.from_pretrained`)."""
        return cls._restore(
            path, dict(dropout=dropout), new_head=new_head, seed=seed, compile=compile, name=name,
            sequence_length=sequence_length, dtype=dtype, config=config, tokenizer=tokenizer, lower_case=lower_case,
            allow_vocab_mismatch=allow_vocab_mismatch,
        )

    def spec_fields(self):
        settings = multiple_choice_settings(None, self.preprocessor.sequence_length)
        return dict(task="race", kind=MULTIPLE_CHOICE, labels=["A", "B", "C", "D"], metrics=["accuracy"],
                    best_metric="accuracy", settings=settings)

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    best_metric = "accuracy"

    def _labels_array(self, y, features=None):
        """The index of the right choice of each context, 0..choices-1 (`features`: the contexts
        and choices, which give the range; without them only negative indices are refused)."""
        choices = None if not isinstance(features, tuple) else features[1].shape[1]
        return class_ids(y, choices, ids="choice indices",
                         no_names="multiple choice takes the index of the right choice (0 for the first), not its text")

    def _check_dataset_labels(self, spec):
        if spec is not None and any(s.dtype == tf.string for s in tf.nest.flatten(spec)):
            raise ValueError("the dataset's labels are strings: the labels are the index of the right choice "
                             "(0 for the first), not its text")

    def _texts_to_tensors(self, x):
        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise ValueError("multiple choice takes a pair (contexts, choices)")
        contexts, choices = string_tensor(x[0], "contexts"), _string_matrix(x[1], "choices")
        if contexts.shape[0] != choices.shape[0]:
            raise ValueError(f"{contexts.shape[0]} contexts but {choices.shape[0]} rows of choices")
        return contexts, choices

    def preprocess_texts(self, x, length_bucket: Optional[int] = None):
        """`[batch, choices, sequence_length]` features: each choice packed with its context
        (`[batch, choices, width]` with `length_bucket`, see `AlbertTextTask`).

        The packing is the export's (`albert_tf.tasks.multiple_choice.serving`, RACE's rule: the choice
        keeps its last `max_qa_length` pieces, the context is cut to fit), with an empty question,
        so that the served model answers exactly what `predict` does.
        """
        contexts, choices = x
        settings = multiple_choice_settings(None, self.preprocessor.sequence_length)
        packer = MultipleChoiceGraph(None, self.preprocessor, settings, length_bucket=length_bucket)
        return packer.features(contexts, tf.fill(tf.shape(contexts), ""), choices)

    def export(self, export_base, model_name: Optional[str] = None, version: Optional[int] = None, **kwargs):
        """Writes the TF Serving SavedModel (`MultipleChoiceServing`: `text`, `question`,
        `choices` in, choice scores out, plus the `tokens` signature) through `export_saved_model`."""
        return export_text_model(self, export_base, model_name, version, **kwargs)

    def get_config(self):
        config = super().get_config()
        config["dropout"] = self.dropout
        return config
