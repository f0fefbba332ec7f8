"""The raw-text task template: `AlbertTextTask`, a Keras model that takes strings.

The in-graph tokenizer (`AlbertTokenizerLayer`) runs in `tf.data`, the `AlbertEncoder` and the
task's token-level head in the Keras graph; each task folder's `text_model.py` subclasses it
(`albert_tf.tasks.text_models` lists them and says how they take their inputs). The helpers here
are what the subclasses share: turning raw inputs into string tensors, checking the parts,
the token inputs of the graph, the pooling the recipe picks and the export.
"""

from __future__ import annotations

import os
from typing import Dict, Optional

import keras
import numpy as np
import tensorflow as tf

from albert_tf.keras_internals import forget_compiled_loss
from albert_tf.kinds import RECIPE_CLASSIFICATION
from albert_tf.modeling import ENCODER_INPUTS, AlbertEncoder
from albert_tf.quantization import RefuseKerasQuantize
from albert_tf.serialization import NestedLayersConfig
from albert_tf.tasks.pretrained import check_sequence_length
from albert_tf.tokenization import resolve
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer, check_length_bucket
from albert_tf.tokenization.resolve import SENTENCEPIECE, WORDPIECE


DEFAULT_BATCH_SIZE = 32


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


class AlbertTextTask(RefuseKerasQuantize, NestedLayersConfig, keras.Model):
    """The raw-text template: tokenizer in `tf.data`, encoder + head in the Keras graph.

    Subclasses build their token-level task model and the functional graph on the token ids, and
    define `preprocess_texts` (raw input batch -> token features) when it is not the tokenizer
    layer's, `compile`'s defaults (`default_loss`, `default_metrics`) and `export`.
    Not instantiated directly.

    Every subclass takes `length_bucket` (default 16; in its config, and configs saved without
    it load with the default): `predict` pads each batch only to its longest text rounded up to
    a multiple of it (the same answers as fixed-length packing, padding being masked out, for
    less work on short texts), and `export` writes length-aware signatures with it; None packs
    to `sequence_length` everywhere. `fit` and `evaluate` always pack to `sequence_length`.

    Every subclass also takes `task_model_name`, the name of its head (`task_model`; default the
    class's own, e.g. "classifier"; None: Keras' name for the head's class, as `albert-tf
    finetune` names it, so that the command's exports keep their bytes).
    """

    # The `recommended_recipe` task kind this model fine-tunes with.
    recipe_task = RECIPE_CLASSIFICATION
    # The dev metric `finetune` keeps the best weights by (a name `evaluate` returns).
    best_metric = "loss"
    # `get_config` / `from_config` (`NestedLayersConfig`): the encoder and the tokenizer layer
    # nested, then these; subclasses add their own arguments in `get_config`.
    config_layers = ("encoder", "preprocessor")
    config_fields = ("length_bucket", "task_model_name")

    # --- the shared machinery ---------------------------------------------------------------------

    @property
    def task_model_name(self) -> str:
        return self.task_model.name

    @property
    def recipe(self):
        """The `FinetuningRecipe` for this model's size (`recommended_recipe`): learning rate,
        batch size, epochs and pooling that learn at this size."""
        return self.hyperparameters().recipe

    def hyperparameters(self, **user):
        """The fine-tuning hyper-parameters for this model, resolved as `albert-tf finetune`
        resolves them (`albert_tf.tasks.hyperparameters.resolve_hyperparameters`): the recipe for
        the model's size (a raw-text model has no task preset), then `user`'s values."""
        from albert_tf.tasks.hyperparameters import resolve_hyperparameters

        return resolve_hyperparameters(self.recipe_task, self.encoder.to_albert_config(), **user)

    def recommended_optimizer(self, **user):
        """A fresh `AdamWeightDecayOptimizer` (constant rate) with the resolved hyper-parameters:
        bias-corrected at the recipe's learning rate for the model's size, unless `user` (e.g.
        `learning_rate=`, `bias_correction=`) says otherwise."""
        from albert_tf.training.optimizers import AdamWeightDecayOptimizer

        hyper = self.hyperparameters(**user)
        return AdamWeightDecayOptimizer(
            learning_rate=hyper.learning_rate,
            weight_decay_rate=hyper.recipe.weight_decay,
            bias_correction=hyper.bias_correction,
            global_clipnorm=1.0,
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

        Raises:
            ValueError: Inconsistent arguments (labels twice, a batch size for a batched
                dataset, texts of different lengths).
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
            labels = None if y is None else self._labels_array(y)
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
            function = tf.function(lambda *args: self._preprocess_element(*args, length_bucket=length_bucket))
            functions[length_bucket] = (self.preprocessor, function)
        return function

    def _labels_array(self, y):
        return np.asarray(y)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, *, sample_weight=None, validation_data=None,
            shuffle=True, validation_split=None, **kwargs):
        """`keras.Model.fit` on raw text (see the module docstring for the accepted inputs).

        `validation_data` takes the same forms as `x`: `(texts, labels)`, `((texts_a, texts_b),
        labels)` or a dataset. `validation_split` is not supported (pass `validation_data`).
        """
        if validation_split:
            raise ValueError("validation_split is not supported for raw text; pass validation_data=(texts, labels)")
        if _is_encoded(x):
            return super().fit(x, epochs=epochs, validation_data=validation_data, shuffle=False, **kwargs)
        dataset = self.make_dataset(x, y, sample_weight, batch_size=batch_size, shuffle=shuffle)
        if validation_data is not None and not _is_encoded(validation_data):
            validation_data = self._validation_dataset(validation_data, batch_size)
        # Array inputs were shuffled in `make_dataset`; Keras must not try again on the dataset.
        return super().fit(dataset, epochs=epochs, validation_data=validation_data, shuffle=False, **kwargs)

    def finetune(self, x, y=None, *, validation_data, model_dir: str, best_metric: Optional[str] = None,
                 constant_baseline="auto", seed: Optional[int] = None, overwrite: bool = False,
                 verbose="auto", callbacks=None, **hyperparameters):
        """Fine-tunes on raw text with the driver of `albert-tf finetune` and the pipeline's Trainer
        (`albert_tf.training.finetuning.run_finetuning`), where `fit` is plain Keras.

        The run has the hyper-parameters `albert-tf finetune` would resolve (`hyperparameters`):
        the recipe's learning rate with linear warmup and decay, bias-corrected AdamW, its batch
        size and 3 epochs (taggers: the recipe's 10); it evaluates `validation_data` after every
        pass, keeps the best weights by `best_metric`, warns when they are no better than the
        best constant answer, and writes `model_dir` as the command does (`model.keras`,
        `finetuning.json`, checkpoints to resume from); an interrupted run resumes.

        Args:
            x, y: The training inputs and labels, as `fit` takes them.
            validation_data: The dev data, as `fit` takes it.
            model_dir: The output directory.
            best_metric: The dev metric that selects the kept weights (default: the task's
                `best_metric`).
            constant_baseline: The best constant answer on the dev data (a
                `albert_tf.evaluation.baselines.ConstantBaseline`), None for no collapse check;
                "auto": the majority class for a classifier given arrays, else None.
            seed: Seeds the shuffling and the dropout.
            overwrite: Replace an existing, non-empty `model_dir`.
            verbose: As `FinetuningRunConfig.verbose`.
            callbacks: Extra Keras callbacks.
            **hyperparameters: The user's values (`albert_tf.tasks.hyperparameters.USER_VALUES`:
                `learning_rate`, `batch_size`, `num_epochs`, `num_train_steps`, ...).

        Returns:
            The `FinetuningResult`; this model holds the best weights.
        """
        from albert_tf.training.finetuning import FinetuningRunConfig, run_finetuning

        hyper = self.hyperparameters(**hyperparameters)
        if seed is not None:
            keras.utils.set_random_seed(seed)  # before the datasets: their shuffling draws from it
        train = self.make_dataset(x, y, batch_size=hyper.batch_size, shuffle=True)
        dev = self._validation_dataset(validation_data, hyper.eval_batch_size)
        # What the schedule counts: the encoded examples (SQuAD: the windows of its contexts).
        num_train = int(train.reduce(np.int64(0), lambda n, *batch: n + tf.cast(
            tf.shape(tf.nest.flatten(batch)[0])[0], tf.int64)))
        num_train_steps, warmup_steps = hyper.schedule(num_train)
        if isinstance(constant_baseline, str) and constant_baseline == "auto":
            constant_baseline = self.constant_baseline(validation_data)
        best_metric = best_metric or self.best_metric
        config = FinetuningRunConfig(
            num_train_steps=num_train_steps, warmup_steps=warmup_steps, learning_rate=hyper.learning_rate,
            model_dir=model_dir, best_metric=best_metric, batch_size=None,
            gradient_accumulation_steps=hyper.gradient_accumulation_steps,
            # `jit_compile` is the device's default: tokenizing runs in `tf.data`, the graph XLA
            # would compile sees token ids only.
            seed=seed, metadata={"model": type(self).__name__}, overwrite=overwrite, verbose=verbose,
            bias_correction=hyper.bias_correction, weight_decay=hyper.recipe.weight_decay,
            collapse_metric=best_metric if constant_baseline is not None else None,
        )
        return run_finetuning(self, train, dev, config, callbacks=callbacks, constant_baseline=constant_baseline)

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
        length-aware with the model's `length_bucket`)."""
        return super().predict(self.make_dataset(x, batch_size=batch_size, length_bucket=self.length_bucket), **kwargs)

    # --- serialization --------------------------------------------------------------------------

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
    from albert_tf.tasks.hyperparameters import resolve_hyperparameters

    return resolve_hyperparameters(task, encoder.to_albert_config(), pooling=pooling).pooling


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


def export_text_model(model, export_base, model_name, version, **kwargs):
    """`export_saved_model` of a raw-text model's task model and tokenizer, length-aware by default."""
    from albert_tf.export.saved_model import export_saved_model

    kwargs.setdefault("length_bucket", model.length_bucket)
    return export_saved_model(model.task_model, model.preprocessor, os.fspath(export_base), model_name or model.name,
                              version, **kwargs)
