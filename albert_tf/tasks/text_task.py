"""The raw-text task template: `AlbertTextTask`, a Keras model that takes strings, the keras-hub way.

Each task folder holds its own (`albert_tf.tasks.<task>.text_model`, all importable from
`albert_tf`): `AlbertTextClassifier` and `AlbertTextRegressor` (`classification`), `AlbertTextTagger`
(`tagging`), `AlbertMultipleChoice` (`multiple_choice`), `AlbertQuestionAnswerer` (`squad`: SQuAD
v1.1, or v2.0 with `version="v2"`). Each holds the three parts of a keras-hub task: the in-graph
tokenizer (`AlbertTokenizerLayer`, `model.preprocessor`), the `AlbertEncoder` (`model.encoder`,
keras-hub's backbone) and the id-level task model (`model.task_model`: an `AlbertForClassification`,
...). They are the models `albert-tf finetune`, the pipeline's Trainer and the benchmarks train, on
token features with the labels inside (`has_labels_inside`), on which a model trains as its head.

The Keras graph runs on token ids; `fit`, `evaluate` and `predict` take raw text and map the
tokenizer over the data in `tf.data`, as keras-hub's tasks do with their preprocessors:

* a `[batch]` string tensor, a list or array of `str`, or a pair `(texts_a, texts_b)` of them for
  sentence-pair tasks, with `y` (and `sample_weight`) as arrays, batched by `batch_size`
  (default 32) and shuffled for `fit` unless `shuffle=False`;
* a `tf.data.Dataset` of texts (or pairs), unbatched with `y` given as an array (zipped, then
  batched by `batch_size`), or yielding `(texts, labels)` itself, batched or not;
* a dict of token features (`input_ids`, `input_mask`, `segment_ids`) bypasses the tokenizer.

`fit` checks its inputs before training, each problem in one line: labels in arrays or lists are
read in the caller's terms (a classifier maps its label names to class ids; ids outside the task's
range, strings where numbers are due and missing labels are refused), a dataset's labels by their
type only (it is not read ahead); and it warns when the training texts are mostly pieces unknown to
the vocabulary (`unknown_warning=`, `AlbertTextTask.warn_unknown_pieces`).

`AlbertMultipleChoice` takes `(contexts, choices)` the same ways. The tagger and the question
answerer convert their labels in Python, as `albert-tf finetune` does, so they take lists; their
`predict` returns entities and answers with character spans rather than arrays.

`from_pretrained` (`from_preset`) restores a fine-tuned model whole from the one model directory
(`albert_tf.tasks.model_dir`) or an export, and puts a new seeded head on any other checkpoint
`resolve_pretrained` reads. With `compile=True` the model is compiled with the fine-tuning recipe
for its size (`albert_tf.training.recipes.recommended_recipe`): bias-corrected AdamW at the recipe's
learning rate, held constant as keras-hub's tasks compile, and the task's loss and metrics. In a
`.keras` file the vocabulary is an asset of the archive; `keras.saving.load_model` reloads the model
after `import albert_tf`. `model.export` writes what `albert-tf export` writes for the task.
"""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.keras_internals import forget_compiled_loss
from albert_tf.modeling import ENCODER_INPUTS, AlbertEncoder
from albert_tf.quantization import RefuseKerasQuantize
from albert_tf.serialization import NestedLayersConfig
from albert_tf.tasks.pretrained import check_sequence_length
from albert_tf.tokenization import resolve
from albert_tf.tokenization.in_graph import (
    SENTENCEPIECE_ASSET_FILE,
    WORDPIECE_ASSET_FILE,
    AlbertTokenizerLayer,
    check_length_bucket,
)
from albert_tf.tokenization.resolve import SENTENCEPIECE, WORDPIECE
from albert_tf.train_step_trace import BuildsOptimizerBeforeFit


DEFAULT_BATCH_SIZE = 32
# `fit` and `finetune` warn when more than this share of the training texts' pieces are unknown to
# the model's vocabulary (`unknown_warning=`), measured on at most `UNKNOWN_SAMPLE` texts.
UNKNOWN_WARNING = 0.05
UNKNOWN_SAMPLE = 2000


# --- raw inputs -> tf.data -------------------------------------------------------------------------


def _is_text_pair(x) -> bool:
    """A pair is a tuple (or 2-list) of two batches of texts; a list of `str` is one batch."""
    if isinstance(x, tuple):
        return len(x) == 2
    return (
        isinstance(x, list) and len(x) == 2 and all(not isinstance(v, (str, bytes)) and hasattr(v, "__len__") for v in x)
    )


def string_tensor(texts, what: str = "texts") -> tf.Tensor:
    if isinstance(texts, (str, bytes)):
        raise ValueError(f"{what} must be a batch of texts (a list of str), not one str: wrap it in a list")
    if not isinstance(texts, tf.Tensor):
        array = np.asarray(texts)
        if array.size == 0:
            # An empty list is float64 to NumPy: say what is wrong, not that it is not strings.
            raise ValueError(f"{what} must be a non-empty batch of texts, got an empty one")
        if array.dtype.kind not in "USO" or (
            array.dtype.kind == "O" and not all(isinstance(t, (str, bytes)) for t in array.reshape(-1))
        ):
            raise TypeError(f"{what} must be strings, got {array.dtype.name} values")
        texts = array.astype(object) if array.dtype.kind == "U" else array
    tensor = tf.convert_to_tensor(texts)
    if tensor.dtype != tf.string:
        raise TypeError(f"{what} must be strings, got dtype {tensor.dtype.name}")
    if tensor.shape.rank == 0 or tensor.shape[0] == 0:
        raise ValueError(f"{what} must be a non-empty batch of texts, got shape {tensor.shape}")
    return tensor


def _is_encoded(x) -> bool:
    """Whether `x` is a dataset of batches `make_dataset` made: token features (a dict), not text."""
    if not isinstance(x, tf.data.Dataset):
        return False
    spec = x.element_spec
    return isinstance(spec[0] if isinstance(spec, tuple) else spec, dict)


def _is_string(value) -> bool:
    return isinstance(value, (tf.Tensor, tf.TensorSpec)) and value.dtype == tf.string


def _split_element(args):
    """`(x, y, sample_weight)` of one dataset element given as `map`'s positional arguments.

    A tuple of two string tensors is one input (a text pair, or contexts and choices), the
    others follow Keras: `x`, `(x,)`, `(x, y)`, `(x, y, sample_weight)`.
    """
    if len(args) == 2 and all(_is_string(a) for a in args):
        return (args[0], args[1]), None, None
    x = args[0]
    y = args[1] if len(args) > 1 else None
    sample_weight = args[2] if len(args) > 2 else None
    return x, y, sample_weight


# --- labels: what the loss reads, checked in the caller's terms ----------------------------------


def _listing(names: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(str(n) for n in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _text_value(value):
    """A label value as a `str` where it is text (`bytes` from a string tensor decoded), else None."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value) if isinstance(value, str) else None


def class_ids(y, count: Optional[int], *, names: Optional[Sequence[str]] = None, ids: str = "class ids",
              no_names: str = "the model has no label names") -> np.ndarray:
    """Labels `y` as the integer ids the loss reads: ids as `np.asarray` gives them (unchanged),
    names mapped through `names` (their position) into int64 ids.

    Refused in one line (`ValueError`): names without `names` (`no_names` says how to pass them),
    an unknown name, names and ids mixed, a value that is no integer, an id outside
    `0..count-1` (`count` None: a negative id). `ids` names the ids in messages ("class ids",
    "choice indices").
    """
    array = np.asarray(y)
    values = array.reshape(-1)
    if array.dtype.kind in "USO" and array.size:
        texts = [_text_value(v) for v in values]
        if all(t is not None for t in texts):
            if names is None:
                raise ValueError(f"labels are strings ({texts[0]!r}, ...) but {no_names}")
            index = {str(name): i for i, name in enumerate(names)}
            unknown = next((t for t in texts if t not in index), None)
            if unknown is not None:
                raise ValueError(f"label {unknown!r} is not one of the model's labels: {_listing(names)}")
            return np.asarray([index[t] for t in texts]).reshape(array.shape)
        odd = [v for v, t in zip(values, texts) if t is None and not _is_number(v)]
        if odd:
            raise ValueError(f"label {odd[0]!r} is not one of the {ids}{_range(count)}")
        if any(t is not None for t in texts):
            raise ValueError(f"labels mix names and ids: give all of them as {ids} or all as names")
        values = np.asarray(values.tolist())  # numbers held as objects: checked as numbers, passed on as given
    if values.dtype.kind not in "biuf":
        if values.size:
            raise ValueError(f"labels must be {ids}{_range(count)}, got {values.dtype.name} values")
        return array
    if values.dtype.kind == "f":
        odd = ~np.isfinite(values) | (values != np.round(values))
        if odd.any():
            raise ValueError(f"label {values[odd.argmax()].item()!r} is not one of the {ids}{_range(count)}")
    outside = values < 0 if count is None else (values < 0) | (values >= count)
    if outside.any():
        value = values[outside.argmax()].item()
        raise ValueError(f"label {int(value)} is out of range: {ids} are "
                         + (f"0..{count - 1}" if count is not None else "0 or more"))
    return array


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _range(count: Optional[int]) -> str:
    return f" 0..{count - 1}" if count is not None else ""


def _label_spec(spec):
    """The labels' part of a dataset's element spec (None where its elements hold no labels)."""
    return _split_element(spec if isinstance(spec, tuple) else (spec,))[1]


def unknown_rate(preprocessor: AlbertTokenizerLayer, texts: Sequence[tf.Tensor]):
    """`(rate, sampled, total)`: the share of the pieces of `texts` (1-D string tensors) that the
    tokenizer layer maps to its unknown id, measured on at most `UNKNOWN_SAMPLE` texts of each,
    evenly spaced (no random draw: training's random state is left as it was)."""
    unknown = pieces = sampled = total = 0
    for batch in texts:
        count = int(batch.shape[0])
        total += count
        if count > UNKNOWN_SAMPLE:
            batch = tf.gather(batch, np.linspace(0, count - 1, UNKNOWN_SAMPLE).round().astype("int64"))
        sampled += int(batch.shape[0])
        ids = preprocessor.tokenize(batch).flat_values
        unknown += int(tf.reduce_sum(tf.cast(tf.equal(ids, preprocessor.unk_id), tf.int64)))
        pieces += int(tf.size(ids))
    return (unknown / pieces if pieces else 0.0), sampled, total


def check_unknown_warning(unknown_warning) -> Optional[float]:
    """`unknown_warning` as a rate (None or False: no check)."""
    if unknown_warning is None or unknown_warning is False:
        return None
    if not _is_number(unknown_warning) or not 0 <= unknown_warning <= 1:
        raise ValueError(f"unknown_warning must be a rate between 0 and 1 (or None: no check), got {unknown_warning!r}")
    return float(unknown_warning)


class _FamilyOfKind:
    """`AlbertTextTask.family`: the `TaskFamily` subclass registered for the class's `kind`
    (`albert_tf.tasks.family.task_family`), looked up on use: the family builds the model."""

    def __get__(self, instance, owner):
        from albert_tf.tasks.family import families

        return next((family for family in families() if owner.kind in family.kinds), None)


# Texts tokenized at once by `length_order` (bounds its memory on a long list).
_LENGTH_ORDER_CHUNK = 8192


class AlbertTextTask(RefuseKerasQuantize, NestedLayersConfig, BuildsOptimizerBeforeFit, keras.Model):
    """The raw-text template: tokenizer in `tf.data`, encoder + head in the Keras graph.

    Subclasses build their token-level task model and the functional graph on the token ids, and
    define `preprocess_texts` (raw input batch -> token features) when it is not the tokenizer
    layer's, `compile`'s defaults (`default_loss`, `default_metrics`) and `export`.
    Not instantiated directly.

    Every subclass takes `length_bucket` (default 16; in its config, and configs saved without
    it load with the default): `predict` pads each batch only to its longest text rounded up to
    a multiple of it (the same answers as fixed-length packing, padding being masked out, for
    less work on short texts), scoring a list of texts by piece count where the subclass has
    `predict_by_length` (the classifier and the regressor), and `export` writes length-aware signatures with it; None packs
    to `sequence_length` everywhere. `fit` and `evaluate` always pack to `sequence_length`.

    Every subclass also takes `task_model_name`, the name of its head (`task_model`; default the
    class's own, e.g. "classifier"; None: Keras' name for the head's class, as `albert-tf
    finetune` names it, so that the command's exports keep their bytes).
    """

    # The task kind (`TaskSpec.kind`) of the subclass, and its folder's `TaskFamily` subclass
    # (`albert_tf.tasks.family`): how `albert-tf finetune`, `evaluate` and `predict` run the task.
    kind: Optional[str] = None
    family = _FamilyOfKind()
    # The dev metric `finetune` keeps the best weights by (a name `evaluate` returns).
    best_metric = "loss"
    # Whether `predict` scores raw texts in the order of their piece count: the subclasses whose
    # inputs are texts (or text pairs) that `preprocessor` alone packs into one row each.
    predict_by_length = False
    # `get_config` / `from_config` (`NestedLayersConfig`): the encoder and the tokenizer layer
    # nested, then these; subclasses add their own arguments in `get_config`.
    config_layers = ("encoder", "preprocessor")
    config_fields = ("length_bucket", "task_model_name")

    # --- the stored task: what `from_pretrained` restores and every model directory records ----

    # Constructor arguments whose change makes a stored head's weights meaningless: given with
    # another value than the stored one, `from_pretrained` builds a new head.
    head_fields = ()
    # The model's name when neither the caller nor the stored model names it.
    default_name = "albert_text_task"

    @classmethod
    def _restore(cls, path, given, **kwargs):
        """What every `from_pretrained` does (`albert_tf.tasks.model_dir`): an architecture preset
        name gives a randomly initialised encoder, anything else is read from disk."""
        from albert_tf.config import PRESETS
        from albert_tf.tasks.model_dir import preset_text_model, restore_text_model

        if isinstance(path, str) and path in PRESETS and not os.path.exists(path):
            options = {k: kwargs.get(k) for k in ("tokenizer", "seed", "compile", "name", "sequence_length",
                                                  "lower_case", "dtype")}
            return preset_text_model(cls, path, given, **options)
        return restore_text_model(cls, path, given, **kwargs)

    @classmethod
    def from_preset(cls, preset, *args, **kwargs):
        """keras-hub's name for `from_pretrained`, which takes the same forms: a local model
        directory, export, `.keras` file or checkpoint of any layout it reads, or an architecture
        preset of `albert_tf.config.PRESETS` ("tiny", "small", "base-v2", ...) as a randomly
        initialised encoder for the vocabulary `tokenizer=` (albert_tf ships no weights and
        downloads nothing)."""
        return cls.from_pretrained(preset, *args, **kwargs)

    @classmethod
    def arguments_from_spec(cls, spec, head_config) -> Dict:
        """The constructor arguments of a directory written before the whole model was kept, from
        its `task.json` and the config of its head (`model.keras` then held the head)."""
        arguments = {"task_model_name": head_config.get("name")}
        if head_config.get("dropout") is not None:
            arguments["dropout"] = head_config["dropout"]
        return arguments

    @classmethod
    def complete_arguments(cls, config: Dict, encoder) -> Dict:
        """`config` with the recipe's choices for the arguments it lacks (the pooling for the
        model's size, where the class takes one)."""
        return config

    def adopt_spec(self, spec) -> None:
        """Takes from a model directory's or export's `task.json` what is not in the Keras model:
        the resolved configuration it was trained with (`training_config`), and what the run
        decided after the model was saved (SQuAD v2: the tuned no-answer threshold)."""
        # Kept out of Keras' attribute tracking: a record, not a part of the model.
        object.__setattr__(self, "_training_config", spec.training)

    @property
    def training_config(self):
        """The resolved `FinetuningConfig` the model was trained with (its task, optimization,
        data and runtime sections, the preset and the recipe), as its `task.json` records it; None
        for a model not read from a model directory or export, nor fine-tuned here."""
        from albert_tf.training.finetuning_config import FinetuningConfig

        recorded = self.__dict__.get("_training_config")
        return None if recorded is None else FinetuningConfig.from_dict(recorded)

    def task_spec(self, tokenizer_file: str, training: Optional[Dict] = None, *, pair: bool = False):
        """The `task.json` (`TaskSpec`) of this model, for a directory or an export that holds it
        (`training`: default the model's `training_config`; `pair`: it reads text pairs, which
        `albert-tf predict` then asks for)."""
        from albert_tf.tasks.model_dir import model_record
        from albert_tf.tasks.spec import TaskSpec

        fields = self.spec_fields()
        if training is None:
            training = self.__dict__.get("_training_config")
        if pair:
            fields["columns"] = {**fields.get("columns", {}), "text": "text", "text_b": "text_b", "label": "label"}
        tokenizer = {"type": SENTENCEPIECE if self.preprocessor.is_sentencepiece else WORDPIECE,
                     "file": tokenizer_file, "lower_case": self.preprocessor.lower_case}
        return TaskSpec(fields.pop("task"), fields.pop("kind"), fields.pop("labels", None),
                        self.preprocessor.sequence_length, tokenizer=tokenizer, model=model_record(self),
                        training=training, **fields)

    def spec_fields(self) -> Dict:
        """The task-specific `TaskSpec` fields: task, kind, labels, metrics, best_metric, ..."""
        raise TypeError(f"{type(self).__name__} defines no spec_fields")

    # --- the shared machinery ---------------------------------------------------------------------

    @property
    def task_model_name(self) -> str:
        return self.task_model.name

    @property
    def recipe(self):
        """The `FinetuningRecipe` for this model's size (`recommended_recipe`): learning rate,
        batch size, epochs and pooling that learn at this size."""
        return self.finetuning_config().recipe

    def finetuning_config(self, **user):
        """The `FinetuningConfig` of a run of this model, resolved as `albert-tf finetune`
        resolves it (`albert_tf.training.finetuning_config.resolve_finetuning_config`): the recipe
        for the model's size (a raw-text model has no task preset), then `user`'s values."""
        from albert_tf.training.finetuning_config import resolve_finetuning_config

        return resolve_finetuning_config(self.kind, self.encoder.to_albert_config(), **user)

    def recommended_optimizer(self, **user):
        """A fresh `AdamWeightDecayOptimizer` (constant rate) with the resolved hyper-parameters:
        bias-corrected at the recipe's learning rate for the model's size, unless `user` (e.g.
        `learning_rate=`, `bias_correction=`) says otherwise."""
        from albert_tf.training.optimizers import AdamWeightDecayOptimizer

        o = self.finetuning_config(**user).optimization
        return AdamWeightDecayOptimizer(
            learning_rate=o.learning_rate, weight_decay_rate=o.weight_decay, bias_correction=o.bias_correction,
            global_clipnorm=o.clipnorm,
        )

    def default_loss(self):
        raise TypeError(f"{type(self).__name__} defines no default loss")

    def default_metrics(self):
        return []

    def compile(self, optimizer="auto", loss="auto", *, metrics="auto", **kwargs):
        """Configures training; `"auto"` takes the package's recipe for this model.

        Args:
            optimizer: `"auto"`: `recommended_optimizer()`, bias-corrected AdamW at the recipe's
                learning rate for the model's size; or any Keras optimizer.
            loss: `"auto"`: the task's loss (see the class); or any Keras loss; None: the head's
                own loss and metrics, for token features with the labels inside (see
                `has_labels_inside`), which is how `albert-tf finetune` trains the model.
            metrics: `"auto"`: the task's metrics (see the class; with `loss=None`, the head's own);
                or a list of Keras metrics.
            **kwargs: Other `keras.Model.compile` arguments.
        """
        if isinstance(optimizer, str) and optimizer == "auto":
            optimizer = self.recommended_optimizer()
        if isinstance(loss, str) and loss == "auto":
            loss = self.default_loss()
        if isinstance(metrics, str) and metrics == "auto":
            metrics = None if loss is None else self.default_metrics()
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)
        if loss is None and metrics is None:
            # Keras would keep an earlier compile's loss and metrics: the head's are wanted here.
            forget_compiled_loss(self)

    # --- token features with the labels inside: how `albert-tf finetune` trains the model ---------

    def has_labels_inside(self, x) -> bool:
        """Whether `x` (a batch, or a dataset's element spec) is a dict of token features that
        also holds the head's labels (`labels`, `start_positions`, ...): keys beyond the model's
        inputs, the form `albert-tf finetune`, the pipeline's Trainer and `run_finetuning` feed.

        On such dicts the model is its head (`task_model`): `call` returns the head's output dict
        and, compiled with `loss=None`, the model minimises the head's `compute_task_loss` and
        reports the head's metrics under the head's names. The result is the head's training, bit
        for bit."""
        return isinstance(x, dict) and not set(x) <= {t.name for t in self.inputs}

    def call(self, inputs, training=None, mask=None, **kwargs):
        if self.has_labels_inside(inputs):
            return self.task_model(inputs, training=training)
        return super().call(inputs, training=training, mask=mask, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if y is None and self.loss is None and self.has_labels_inside(x):
            return self.task_model.compute_loss(x, None, y_pred, sample_weight, training=training)
        return super().compute_loss(x, y, y_pred, sample_weight, training=training)

    @property
    def metrics(self):
        metrics = super().metrics
        if self.compiled and self.loss is None:
            # Keras leaves out the metrics of a nested model; compiled without a loss, the model
            # trains as its head and reports the head's.
            metrics = metrics + [m for m in self.task_model.metrics if all(m is not n for n in metrics)]
        return metrics

    def preprocess_texts(self, x, length_bucket: Optional[int] = None):
        """Token features for one batch of raw inputs (`tf.data` map function; graph mode),
        length-aware with `length_bucket`."""
        return self.preprocessor.tokenize_and_pack(x, length_bucket=length_bucket)

    def _preprocess_element(self, *args, length_bucket: Optional[int] = None):
        x, y, sample_weight = _split_element(args)
        if not isinstance(x, dict):
            x = self.preprocess_texts(x, length_bucket)
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def _texts_to_tensors(self, x):
        """Raw array-like inputs as string tensors (a pair as a tuple of two)."""
        if _is_text_pair(x):
            a, b = string_tensor(x[0], "texts_a"), string_tensor(x[1], "texts_b")
            if a.shape[0] != b.shape[0]:
                raise ValueError(f"texts_a and texts_b must be equally long, got {a.shape[0]} and {b.shape[0]}")
            return a, b
        return string_tensor(x)

    def make_dataset(self, x, y=None, sample_weight=None, *, batch_size=None, shuffle=False,
                     length_bucket: Optional[int] = None):
        """The batched `tf.data.Dataset` of token features (and labels) for raw inputs `x`.

        Args:
            x: Texts (see the module docstring), a pair of them, a `tf.data.Dataset`, or a dict
                of token features.
            y: Labels, as an array (not with a dataset that yields them).
            sample_weight: Per-example weights, as an array.
            batch_size: Batch size for array inputs and unbatched datasets (default 32).
            shuffle: Shuffle array inputs (once per epoch).
            length_bucket: Pack each batch length-aware (see the class); None: to `sequence_length`.

        Labels given as arrays are checked here, before any training (`_labels_array`: the
        classifier maps label names to ids and refuses ids outside its classes, in one line). A
        dataset that yields its labels is not read ahead (its first batch would leave the order
        training sees): only their type is checked, from its element spec.

        Raises:
            ValueError: Inconsistent arguments (labels twice, a batch size for a batched
                dataset, texts of different lengths) or labels the task cannot read.
        """
        if isinstance(x, tf.data.Dataset):
            if sample_weight is not None:
                raise ValueError("with a tf.data.Dataset, put the sample weights in its elements")
            first = tf.nest.flatten(x.element_spec)[0]
            unbatched = first.shape.rank == 0
            if y is not None:
                if not unbatched:
                    raise ValueError(
                        "y goes with an unbatched dataset of texts; a batched dataset must yield (texts, labels) itself"
                    )
                x = tf.data.Dataset.zip((x, tf.data.Dataset.from_tensor_slices(self._labels_array(y))))
            else:
                self._check_dataset_labels(_label_spec(x.element_spec))
            if unbatched:
                x = x.batch(batch_size or DEFAULT_BATCH_SIZE)
            elif batch_size is not None:
                raise ValueError("batch_size is for arrays and unbatched datasets; this dataset is batched")
            dataset = x
        else:
            if isinstance(x, dict):
                features = {k: np.asarray(v) for k, v in x.items()}
            else:
                features = self._texts_to_tensors(x)
            labels = None if y is None else self._labels_array(y, features)
            weights = None if sample_weight is None else np.asarray(sample_weight, dtype="float32")
            count = int(tf.nest.flatten(features)[0].shape[0])
            # Checked here: `from_tensor_slices` would only say "Dimensions 2 and 1 are not compatible".
            for name, values in (("labels", labels), ("sample weights", weights)):
                if values is not None and (values.ndim == 0 or len(values) != count):
                    given = "a scalar" if values.ndim == 0 else f"{len(values)} {name}"
                    raise ValueError(f"{given} for {count} inputs: give one per input")
            data = keras.utils.pack_x_y_sample_weight(features, labels, weights)
            dataset = tf.data.Dataset.from_tensor_slices(data)
            if shuffle:
                dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
            dataset = dataset.batch(batch_size or DEFAULT_BATCH_SIZE)
        preprocess = self._preprocess_function(check_length_bucket(length_bucket))
        return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def _preprocess_function(self, length_bucket: Optional[int]):
        """The `tf.function` `make_dataset` maps, kept per tokenizer layer and bucket: traced once
        per element structure, not once per dataset (tracing the tokenizer's graph was most of a
        `predict` on a few texts)."""
        # Kept out of Keras' attribute tracking: a cache, not a part of the model.
        functions = self.__dict__.get("_preprocess_functions")
        if functions is None:
            functions = {}
            object.__setattr__(self, "_preprocess_functions", functions)
        preprocessor, function = functions.get(length_bucket, (None, None))
        if preprocessor is not self.preprocessor:
            # Without AutoGraph, as the export's signatures (`serving_function`): nothing to convert.
            function = tf.function(lambda *args: self._preprocess_element(*args, length_bucket=length_bucket),
                                   autograph=False)
            functions[length_bucket] = (self.preprocessor, function)
        return function

    def _labels_array(self, y, features=None):
        """Labels `y` (an array-like) as the array the loss reads, checked against the task in one
        line (`features`: the inputs' tensors, where the check needs them); as given by default."""
        return np.asarray(y)

    def _check_dataset_labels(self, spec) -> None:
        """Refuses, in one line, labels of a dataset's element `spec` that the task cannot read
        (their values are not read: see `make_dataset`). String labels by default."""
        if spec is not None and any(_is_string(s) for s in tf.nest.flatten(spec)):
            raise ValueError(f"the dataset's labels are strings: {type(self).__name__} takes numbers there")

    def _check_has_labels(self, x, y) -> None:
        """Refuses, in one line, raw-text training inputs without labels (Keras would say "None
        values not supported"): `y` None with texts, or a dataset whose elements hold no labels."""
        if isinstance(x, dict):
            return  # token features, which may hold the head's labels
        if isinstance(x, tf.data.Dataset):
            if y is None and _label_spec(x.element_spec) is None:
                spec = x.element_spec
                pair = isinstance(spec, tuple) and len(spec) == 2
                raise ValueError("the dataset yields no labels" + (
                    " (its elements are two strings, which the model reads as its two text inputs)"
                    if pair else "") + ": yield (texts, labels) with the labels as numbers, or pass y=")
        elif y is None:
            raise ValueError("training needs labels: pass y= (one label per input)")

    def _training_texts(self, x) -> Optional[List[tf.Tensor]]:
        """The texts of training inputs `x` (checked by `make_dataset`) as 1-D string tensors, whose
        pieces `fit` measures against the vocabulary; None where it does not (a dataset, token
        features)."""
        if isinstance(x, (tf.data.Dataset, dict)):
            return None
        return [tf.reshape(texts, [-1]) for texts in tf.nest.flatten(self._texts_to_tensors(x))]

    def warn_unknown_pieces(self, x, unknown_warning=UNKNOWN_WARNING) -> Optional[float]:
        """Says in one line on stderr when more than `unknown_warning` of the pieces of the training
        texts `x` are unknown to the model's vocabulary (its tokenizer layer's unknown id): the
        model then trains on text it cannot read, e.g. Chinese on an English vocabulary.

        Measured on at most `UNKNOWN_SAMPLE` texts (evenly spaced) of arrays and lists; a
        `tf.data.Dataset` is not read ahead, and not measured. Returns the rate (None: not
        measured)."""
        threshold = check_unknown_warning(unknown_warning)
        texts = None if threshold is None else self._training_texts(x)
        if not texts:
            return None
        rate, sampled, total = unknown_rate(self.preprocessor, texts)
        if rate > threshold:
            which = ("the training texts' pieces" if sampled == total
                     else f"the pieces of {sampled} of the {total} training texts")
            vocabulary = (f"{SENTENCEPIECE_ASSET_FILE}, {self.preprocessor.vocab_size} pieces"
                          if self.preprocessor.is_sentencepiece
                          else f"{WORDPIECE_ASSET_FILE}, {self.preprocessor.vocab_size} tokens")
            print(f"warning: {100 * rate:.1f}% of {which} are unknown to this model's vocabulary ({vocabulary}): "
                  f"it reads each as its one unknown token; use a model whose vocabulary covers the text's language "
                  f"(unknown_warning=None: no check)", file=sys.stderr, flush=True)
        return rate

    def fit(self, x=None, y=None, batch_size=None, epochs=1, *, sample_weight=None, validation_data=None,
            shuffle=True, validation_split=None, unknown_warning=UNKNOWN_WARNING, **kwargs):
        """`keras.Model.fit` on raw text (see the module docstring for the accepted inputs).

        `validation_data` takes the same forms as `x`: `(texts, labels)`, `((texts_a, texts_b),
        labels)` or a dataset. `validation_split` is not supported (pass `validation_data`).

        The inputs are checked before training starts, each problem in one line: labels given as
        arrays or lists (names mapped to ids where the model has label names; ids outside the
        task's range refused), a dataset's label type (its values are not read ahead). When more
        than `unknown_warning` (default 0.05) of the training texts' pieces are unknown to the
        model's vocabulary, a one-line warning says so on stderr (`warn_unknown_pieces`: arrays
        and lists, at most 2000 texts; None: no check).
        """
        if validation_split:
            raise ValueError("validation_split is not supported for raw text; pass validation_data=(texts, labels)")
        check_unknown_warning(unknown_warning)
        if _is_encoded(x):
            return super().fit(x, epochs=epochs, validation_data=validation_data, shuffle=False, **kwargs)
        dataset = self.make_dataset(x, y, sample_weight, batch_size=batch_size, shuffle=shuffle)
        self._check_has_labels(x, y)
        if validation_data is not None and not _is_encoded(validation_data):
            validation_data = self._validation_dataset(validation_data, batch_size)
        self.warn_unknown_pieces(x, unknown_warning)
        # Array inputs were shuffled in `make_dataset`; Keras must not try again on the dataset.
        return super().fit(dataset, epochs=epochs, validation_data=validation_data, shuffle=False, **kwargs)

    def finetune(self, x, y=None, *, validation_data, model_dir: str, best_metric: Optional[str] = None,
                 constant_baseline="auto", seed: Optional[int] = None, overwrite: bool = False,
                 verbose="auto", callbacks=None, epochs: Optional[float] = None, unknown_warning=UNKNOWN_WARNING,
                 **hyperparameters):
        """Fine-tunes on raw text with the engine of `albert-tf finetune` and the pipeline's Trainer
        (`albert_tf.training.finetuning.run_finetuning`), where `fit` is plain Keras.

        The run's `FinetuningConfig` is resolved as `albert-tf finetune` resolves it
        (`finetuning_config(**hyperparameters)`, printed first unless `verbose=0`): the recipe's
        learning rate with linear warmup and decay, bias-corrected AdamW, its batch size and 3
        epochs (taggers: the recipe's 10), at the model's precision; it evaluates `validation_data` after every
        pass, keeps the best weights by `best_metric`, warns when they are no better than the
        best constant answer, and writes `model_dir` in the layout of every fine-tuned model
        (`albert_tf.tasks.model_dir`: the whole model, `task.json` with the resolved configuration,
        the tokenizer file, `finetuning.json`), which `from_pretrained`, `albert-tf predict` and
        `albert-tf export` read; an interrupted run resumes.

        Args:
            x, y: The training inputs and labels, as `fit` takes them.
            validation_data: The dev data, as `fit` takes it.
            model_dir: The output directory.
            best_metric: The dev metric that selects the kept weights (default: the task's
                `best_metric`).
            constant_baseline: The best constant answer on the dev data (a
                `albert_tf.evaluation.baselines.ConstantBaseline`), None for no collapse check;
                "auto": the majority class for a classifier given arrays, else None.
            seed: Seeds the shuffling and the dropout (default: the configuration's, 12345).
            overwrite: Replace an existing, non-empty `model_dir`.
            verbose: As `FinetuningRunConfig.verbose`.
            callbacks: Extra Keras callbacks.
            epochs: Passes over the training data, Keras' name for `num_epochs`.
            unknown_warning: Warn when more than this share of the training texts' pieces are
                unknown to the vocabulary, as `fit` does (None: no check).
            **hyperparameters: The user's values of the run's `FinetuningConfig`
                (`albert_tf.training.finetuning_config.USER_NAMES`: `learning_rate`, `batch_size`,
                `num_epochs`, `num_train_steps`, `precision`, ...).

        Returns:
            The `FinetuningResult`; this model holds the best weights.
        """
        from albert_tf.export.precision import model_precision
        from albert_tf.tasks.model_dir import write_text_model_assets
        from albert_tf.training.finetuning import FinetuningRunConfig, run_finetuning

        if epochs is not None:
            if hyperparameters.get("num_epochs") not in (None, epochs):
                raise ValueError(f"epochs={epochs} and num_epochs={hyperparameters['num_epochs']}: give one of them")
            hyperparameters["num_epochs"] = epochs
        # The model is built: it trains at the precision it was built with.
        config = self.finetuning_config(seed=seed, **{"precision": model_precision(self), **hyperparameters})
        check_unknown_warning(unknown_warning)
        keras.utils.set_random_seed(config.runtime.seed)  # before the datasets: their shuffling draws from it
        train = self.make_dataset(x, y, batch_size=config.data.batch_size, shuffle=True)
        self._check_has_labels(x, y)
        dev = self._validation_dataset(validation_data, config.data.eval_batch_size)
        self.warn_unknown_pieces(x, unknown_warning)
        # What the schedule counts: the encoded examples (SQuAD: the windows of its contexts).
        num_train = int(train.reduce(np.int64(0), lambda n, *batch: n + tf.cast(
            tf.shape(tf.nest.flatten(batch)[0])[0], tf.int64)))
        if isinstance(constant_baseline, str) and constant_baseline == "auto":
            constant_baseline = self.constant_baseline(validation_data)
        best_metric = best_metric or self.best_metric
        if verbose:
            for line in config.describe(num_train):
                print(line, flush=True)
        # The datasets are batched here (`batch_size=None`): tokenizing runs in `tf.data`, and the
        # graph XLA would compile sees token ids only.
        run_config = FinetuningRunConfig.from_config(
            config, num_train, model_dir, batch_size=None, eval_batch_size=None, best_metric=best_metric,
            metadata={"model": type(self).__name__}, overwrite=overwrite, verbose=verbose,
            collapse_metric=best_metric if constant_baseline is not None else None,
        )
        object.__setattr__(self, "_training_config", config.to_dict())
        return run_finetuning(
            self, train, dev, run_config, callbacks=callbacks, constant_baseline=constant_baseline,
            save_assets=lambda directory, model: write_text_model_assets(directory, model, pair=_is_text_pair(x)),
        )

    def constant_baseline(self, validation_data):
        """The best constant answer on `validation_data` for `finetune`'s collapse check, or None
        where the task has none that `evaluate`'s metrics can be compared with."""
        return None

    def _validation_dataset(self, data, batch_size):
        if isinstance(data, tf.data.Dataset):
            return self.make_dataset(data, batch_size=None if tf.nest.flatten(data.element_spec)[0].shape.rank else batch_size)
        if not isinstance(data, (tuple, list)) or len(data) not in (2, 3):
            raise ValueError("validation_data must be (texts, labels), (texts, labels, sample_weight) or a dataset")
        return self.make_dataset(*data, batch_size=batch_size)

    def evaluate(self, x=None, y=None, batch_size=None, *, sample_weight=None, **kwargs):
        """`keras.Model.evaluate` on raw text (the loss and the task's metrics)."""
        if _is_encoded(x):
            return super().evaluate(x, **kwargs)
        return super().evaluate(self.make_dataset(x, y, sample_weight, batch_size=batch_size), **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """`keras.Model.predict` on raw text: the task's outputs as NumPy arrays (packed
        length-aware with the model's `length_bucket`).

        With `predict_by_length`, texts given as a list, array or tensor (or a pair of them) are
        scored from the fewest pieces to the most (`length_order`), so that a batch holds texts
        of similar length and is packed to its own longest, not to the longest of whatever came
        beside it; the outputs come back in input order. A dataset is scored in its own order.
        """
        if self.predict_by_length and self.length_bucket is not None and not isinstance(x, (tf.data.Dataset, dict)):
            texts = self._texts_to_tensors(x)
            order = self.length_order(texts)
            ordered = tf.nest.map_structure(lambda t: tf.gather(t, order), texts)
            outputs = super().predict(
                self.make_dataset(ordered, batch_size=batch_size, length_bucket=self.length_bucket), **kwargs)
            inverse = np.empty_like(order)
            inverse[order] = np.arange(len(order))
            return keras.tree.map_structure(lambda o: np.asarray(o)[inverse], outputs)
        return super().predict(self.make_dataset(x, batch_size=batch_size, length_bucket=self.length_bucket), **kwargs)

    def length_order(self, texts) -> np.ndarray:
        """The indices of raw texts (a `[n]` string tensor, or a pair of them) from the fewest
        pieces to the most (stable: equal counts keep their order), counted by the model's own
        tokenizer, a chunk at a time."""
        parts = texts if isinstance(texts, tuple) else (texts,)
        count = int(parts[0].shape[0])
        lengths = np.zeros(count, np.int64)
        for start in range(0, count, _LENGTH_ORDER_CHUNK):
            for part in parts:
                ids = self.preprocessor.tokenize(part[start:start + _LENGTH_ORDER_CHUNK])
                lengths[start:start + _LENGTH_ORDER_CHUNK] += ids.row_lengths().numpy()
        return np.argsort(lengths, kind="stable")

    # --- serialization --------------------------------------------------------------------------

    @classmethod
    def from_config(cls, config):
        """As Keras: a model from its config comes uncompiled (`load_model` then compiles it with
        the saved compile config, or leaves it so with `compile=False`)."""
        return super().from_config({"compile": False, **config})

    def compile_from_config(self, config):
        """Compiles with the compile config of a saved model (Keras calls this when loading), and
        builds the optimizer so that its saved state loads."""
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)


def check_parts(encoder, preprocessor) -> None:
    if not isinstance(encoder, AlbertEncoder):
        raise TypeError(f"encoder must be an AlbertEncoder, got {type(encoder).__name__}")
    if not isinstance(preprocessor, AlbertTokenizerLayer):
        raise TypeError(f"preprocessor must be an AlbertTokenizerLayer, got {type(preprocessor).__name__}")
    check_sequence_length(preprocessor.sequence_length, encoder.max_position_embeddings)
    if preprocessor.vocabulary_loaded and preprocessor.vocab_size > encoder.vocab_size:
        raise ValueError(
            f"the tokenizer has {preprocessor.vocab_size} tokens but the encoder's vocab_size is {encoder.vocab_size}"
        )


def token_inputs() -> Dict[str, keras.KerasTensor]:
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in ENCODER_INPUTS}


def resolve_pooling(pooling: Optional[str], encoder: AlbertEncoder, task: str) -> str:
    from albert_tf.training.finetuning_config import resolve_finetuning_config

    return resolve_finetuning_config(task, encoder.to_albert_config(), pooling=pooling).task.pooling


def python_tokenizer(preprocessor: AlbertTokenizerLayer):
    """The Python tokenizer (`albert_tf.tokenization.tokenizers`) of the layer's vocabulary and
    settings: the same token ids, for the conversions that run in Python (tagging, SQuAD)."""
    preprocessor.check_vocabulary_loaded()
    if preprocessor.is_sentencepiece:
        return resolve.python_tokenizer(
            SENTENCEPIECE, model_proto=preprocessor.model_proto, lower_case=preprocessor.lower_case,
            keep_accents=preprocessor.keep_accents, normalize_quotes=preprocessor.normalize_quotes,
        )
    vocab = {token: i for i, token in enumerate(preprocessor.wordpiece_tokens)}
    return resolve.python_tokenizer(WORDPIECE, vocab=vocab, lower_case=preprocessor.lower_case,
                                    max_input_chars_per_word=preprocessor.max_input_chars_per_word)


def export_text_model(model, export_base, model_name, version, *, format: Optional[str] = None, **kwargs):
    """`export_saved_model` of a raw-text model's task model and tokenizer, length-aware by default,
    with the model's `task.json` in the assets (what `from_pretrained` rebuilds it from).

    The TF Serving layout `<export_base>/<model_name>/<version>/` by default; with
    `format="tf_saved_model"` (Keras 3's `export`), the SavedModel itself at `export_base`.
    """
    import dataclasses

    from albert_tf.export.saved_model import SENTENCEPIECE_ASSET, WORDPIECE_ASSET, export_saved_model

    kwargs.setdefault("length_bucket", model.length_bucket)
    if not any(os.path.basename(p) == "task.json" for p in kwargs.get("extra_assets", ())):
        vocabulary = SENTENCEPIECE_ASSET if model.preprocessor.is_sentencepiece else WORDPIECE_ASSET
        spec = model.task_spec(vocabulary, pair=bool(kwargs.get("pair")))
        if kwargs.get("labels") is not None and "labels" in spec.model["config"]:
            # The names the export serves are the model's from now on.
            spec.labels = spec.model["config"]["labels"] = [str(label) for label in kwargs["labels"]]
        kwargs.setdefault("task_spec", dataclasses.asdict(spec))
    if format is None:
        return export_saved_model(model.task_model, model.preprocessor, os.fspath(export_base),
                                  model_name or model.name, version, **kwargs)
    return _export_at(model, os.fspath(export_base), format, model_name, version, **kwargs)


def _export_at(model, path: str, format: str, model_name, version, **kwargs):
    """Keras' `export(path, format="tf_saved_model")`: the SavedModel (signatures, assets, warmup)
    at `path`, written beside it and moved in whole."""
    import dataclasses
    import shutil
    import tempfile

    from albert_tf.export.saved_model import export_saved_model

    if format != "tf_saved_model":
        raise ValueError(f"format must be 'tf_saved_model', got {format!r} (LiteRT: tflite='dynamic-int8' or 'float32')")
    if model_name is not None or version is not None:
        raise ValueError("format='tf_saved_model' writes the SavedModel at the path given: model_name and version "
                         "are for the TF Serving layout (leave format out)")
    if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
        raise ValueError(f"{path} exists and is not an empty folder: a SavedModel is never written over")
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=parent) as staging:
        result = export_saved_model(model.task_model, model.preprocessor, staging, "model", 1, **kwargs)
        if os.path.isdir(path):
            os.rmdir(path)
        shutil.move(result.path, path)
    return dataclasses.replace(result, path=path, serving_configs={})
