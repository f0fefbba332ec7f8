"""Multiple choice (RACE): one score per choice from the pooled output, softmax over the choices.

`MultipleChoiceModel` is google-research/albert `race_utils.create_model`: the `[batch, choices,
seq]` inputs are run through the encoder as `[batch * choices, seq]`, the pooled output gets
dropout (0.1) and a dense layer of 1 unit, and the scores are reshaped to `[batch, choices]`; the
loss is the cross-entropy of the softmax over the choices and the metric the accuracy. The number
of choices is read from the inputs (4 for RACE).

`prepare_race_task` reads and converts the RACE files of a run for
`albert_tf.training.finetuning.run_finetuning` (whose default `eval_fn`, `model.evaluate`, gives
the dev `accuracy`); `predict_race` gives the choice probabilities and indices, and
`predict_race_examples` one record (option letter, probabilities) per question.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Optional, Sequence, Union

import keras
import numpy as np
from keras import ops

from albert_tf.kinds import KIND_MULTIPLE_CHOICE
from albert_tf.modeling import AlbertEncoder
from albert_tf.tasks.base import ENCODER_INPUTS, AlbertTaskModel


@keras.saving.register_keras_serializable(package="albert_tf")
class MultipleChoiceModel(AlbertTaskModel):
    """ALBERT for multiple choice: pooled output -> dropout -> dense 1 per choice -> softmax.

    Inputs: `input_ids`, `input_mask`, `segment_ids` [batch, choices, seq]; for training `labels`
    [batch] (the index of the right choice). Output: `logits` [batch, choices] float32.

    Args:
        encoder: The `AlbertEncoder`.
        dropout: Dropout on the pooled output (0.1 as the original).

    Example:

    >>> import numpy as np
    >>> from albert_tf import AlbertConfig, AlbertEncoder
    >>> encoder = AlbertEncoder.from_albert_config(AlbertConfig(
    ...     vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=32))
    >>> model = MultipleChoiceModel(encoder)
    >>> out = model({"input_ids": np.ones((2, 4, 6), "int32"), "input_mask": np.ones((2, 4, 6), "int32"),
    ...              "segment_ids": np.zeros((2, 4, 6), "int32")})
    >>> tuple(out["logits"].shape)
    (2, 4)
    """

    export_kind = KIND_MULTIPLE_CHOICE

    pooled_output_only = True

    def __init__(self, encoder: AlbertEncoder, dropout: float = 0.1, **kwargs):
        super().__init__(encoder, dropout=dropout, **kwargs)
        self.accuracy = keras.metrics.SparseCategoricalAccuracy(name="accuracy")

    def build_head(self) -> keras.layers.Layer:
        # Original variables: output_weights [1, H], output_bias [1].
        return keras.layers.Dense(
            1,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=self.encoder.initializer_range),
            dtype=self.encoder.embeddings.dtype_policy,
            name="choice_score",
        )

    def call(self, inputs, training=None):
        shape = ops.shape(inputs["input_ids"])
        if len(inputs["input_ids"].shape) != 3:
            raise ValueError(
                f"multiple-choice inputs must be [batch, choices, seq], got shape {tuple(inputs['input_ids'].shape)}"
            )
        flat = dict(inputs)
        for name in ENCODER_INPUTS:
            flat[name] = ops.reshape(inputs[name], (-1, shape[2]))
        flat["num_choices"] = shape[1]
        return super().call(flat, training=training)

    def call_head(self, encoder_outputs, inputs, training=None):
        pooled = self.head_dropout(encoder_outputs["pooled_output"], training=training)
        scores = ops.cast(self.head(pooled), "float32")
        return {"logits": ops.reshape(scores, (-1, inputs["num_choices"]))}

    def compute_task_loss(self, inputs, outputs):
        labels = ops.reshape(inputs["labels"], (-1,))
        return ops.mean(ops.sparse_categorical_crossentropy(labels, outputs["logits"], from_logits=True))

    def update_task_metrics(self, inputs, outputs):
        self.accuracy.update_state(ops.reshape(inputs["labels"], (-1,)), outputs["logits"])


def predict_race(model: MultipleChoiceModel, dataset, *, batch_size: int = 8, callbacks=None) -> Dict[str, np.ndarray]:
    """Choice probabilities [n, choices] and predicted indices [n] for a RACE dataset.

    Args:
        model: The fine-tuned `MultipleChoiceModel`.
        dataset: From `albert_tf.data.race.make_race_dataset` (batched or not; labels ignored).
        batch_size: Batch size when `dataset` is unbatched.
        callbacks: Keras callbacks for `model.predict` (progress).
    """
    spec = dataset.element_spec
    if not isinstance(spec, dict) or "input_ids" not in spec:
        raise ValueError("the dataset must yield dicts of RACE features (make_race_dataset)")
    if spec["input_ids"].shape.rank == 2:
        dataset = dataset.batch(batch_size)
    dataset = dataset.map(lambda x: {k: x[k] for k in ENCODER_INPUTS})
    logits = np.asarray(model.predict(dataset, verbose=0, callbacks=callbacks)["logits"])
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
    return {"probabilities": probabilities, "predictions": probabilities.argmax(axis=-1)}


def predict_race_examples(
    model: MultipleChoiceModel,
    tokenizer,
    examples: Sequence[Any],
    *,
    max_seq_length: int = 512,
    max_qa_length: int = 128,
    batch_size: int = 8,
    callbacks=None,
) -> List[Dict[str, Any]]:
    """One record per example: `id`, `question_index`, `prediction` (the option letter),
    `probabilities` (one per option) and, when the example has one, the gold `answer`
    (`callbacks` go to `model.predict`)."""
    from albert_tf.data import race

    features = race.convert_race_examples(examples, tokenizer, max_seq_length=max_seq_length, max_qa_length=max_qa_length)
    predicted = predict_race(model, race.make_race_dataset(features, require_labels=False), batch_size=batch_size, callbacks=callbacks)
    records = []
    for example, probabilities, choice in zip(examples, predicted["probabilities"], predicted["predictions"]):
        record = {
            "id": example.example_id,
            "question_index": example.question_index,
            "prediction": chr(ord("A") + int(choice)),
            "probabilities": [float(p) for p in probabilities],
        }
        if example.label is not None:
            record["answer"] = chr(ord("A") + example.label)
        records.append(record)
    return records


def race_accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    """The fraction of predictions equal to the labels.

    Raises:
        ValueError: different lengths, or no labels.
    """
    predictions, labels = np.asarray(predictions).reshape(-1), np.asarray(labels).reshape(-1)
    if predictions.shape != labels.shape:
        raise ValueError(f"{predictions.size} predictions for {labels.size} labels")
    if labels.size == 0:
        raise ValueError("no labels to score")
    return float(np.mean(predictions == labels))


@dataclasses.dataclass
class RaceTaskData:
    """What `run_finetuning` needs for a RACE run, from `prepare_race_task`.

    Attributes:
        train_dataset, eval_dataset: Unbatched feature datasets (labels inside), or None.
        best_metric: "accuracy" (reported by `model.evaluate`, the default `eval_fn`).
        train_examples, eval_examples: The examples read.
        settings: The conversion settings, for the run's metadata.
    """

    train_dataset: Any
    eval_dataset: Any
    best_metric: str
    train_examples: List[Any]
    eval_examples: List[Any]
    settings: Dict[str, Any]


def prepare_race_task(
    tokenizer,
    *,
    train_path: Optional[Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]] = None,
    eval_path: Optional[Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]] = None,
    max_seq_length: int = 512,
    max_qa_length: int = 128,
    levels: Sequence[str] = ("middle", "high"),
) -> RaceTaskData:
    """Reads and converts the RACE data of a fine-tuning run.

    Args:
        tokenizer: The model's tokenizer.
        train_path, eval_path: Split folders (e.g. `RACE/train`, `RACE/dev`), files or globs.
        max_seq_length, max_qa_length: Conversion (512 and 128 as the original).
        levels: RACE levels read from split folders.

    Raises:
        See `albert_tf.data.race.read_race_examples` and `convert_race_examples`.
    """
    from albert_tf.data import race

    if train_path is None and eval_path is None:
        raise ValueError("give a train_path, an eval_path or both")
    lengths = dict(max_seq_length=max_seq_length, max_qa_length=max_qa_length)
    train_dataset = eval_dataset = None
    train_examples: List[Any] = []
    eval_examples: List[Any] = []
    if train_path is not None:
        train_examples = race.read_race_examples(train_path, levels=levels)
        train_dataset = race.make_race_dataset(race.convert_race_examples(train_examples, tokenizer, **lengths))
    if eval_path is not None:
        eval_examples = race.read_race_examples(eval_path, levels=levels)
        eval_dataset = race.make_race_dataset(race.convert_race_examples(eval_examples, tokenizer, **lengths))
    return RaceTaskData(
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        best_metric="accuracy",
        train_examples=train_examples,
        eval_examples=eval_examples,
        settings=dict(lengths, levels=list(levels)),
    )
