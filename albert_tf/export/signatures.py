"""The serving signatures of an exported model: a `tf.Module` whose `tf.function`s TF Serving calls.

`ServingModule(model, tokenizer_layer, labels=...)` builds the subclass that exports the model's
kind (`SERVING_CLASSES`, kind -> class): each kind's class owns its inputs, outputs, extra
signatures and settings; the base class holds what they share. A task's serving class lives in
its task folder (`albert_tf.tasks.<task>.serving`) and registers itself (`register_serving`)
when the folder is imported; the encoder's and the pretrainer's are here. It wraps one of

* an `AlbertForClassification` (outputs `logits`; `ClassifierServing`, in
  `albert_tf.tasks.classification.serving`): `serving_default` takes raw text and returns
  `probabilities`, `logits`, `label_id` and `label`; `tokens` the same from token ids;
  `classify` takes serialized `tf.Example`s (`inputs`) and returns `classes` and `scores` (TF
  Serving's Classify API);
* an `AlbertForRegression` (outputs `predictions`; `RegressorServing`, in
  `albert_tf.tasks.classification.serving`): `serving_default` / `tokens` return `score`;
  `regress` takes serialized `tf.Example`s and returns `outputs` (TF Serving's Regress API);
* an `AlbertEncoder` or an `AlbertPretrainer` (`EncoderServing`, `PretrainerServing`):
  `serving_default` returns `pooled_output`, `sequence_output` (and the `input_mask`), `tokens`
  the same from token ids (the TF-Hub module's signature), and for a pretrainer also `sop`
  (`sop_logits`, `sop_probabilities`) and `mlm` (`mlm_logits` at `mlm_positions`, as the
  original hub module's `mlm` signature);
* an `AlbertForSquadV1` / `AlbertForSquadV2` (extractive QA; `SquadV1Serving` / `SquadV2Serving` in
  `albert_tf.tasks.squad.serving`): `serving_default` takes `question` and `context` and returns
  `answer_text`, `start_char`, `end_char` (character offsets into the context, end exclusive),
  `score`, `has_answer`, `num_windows` (doc-stride windows used) and for v2 `null_score`;
  `tokens` returns the head's outputs for token ids (v1: `start_logits`, `end_logits`; v2 also
  takes `p_mask` and returns the beam `start_top_log_probs`, `start_top_index`,
  `end_top_log_probs`, `end_top_index` and `cls_logits`);
* an `AlbertForTagging` (NER; `TaggerServing`, in `albert_tf.tasks.tagging.serving`):
  `serving_default` takes `text` and returns the entities of each text, padded to the batch's
  largest count: `entity_labels`, `entity_texts` (string `[-1, E]`), `entity_starts`,
  `entity_ends` (int32 code-point offsets into the text, end exclusive, -1 padding),
  `entity_scores` (float), `num_entities` (int32 `[-1]`), and the tagged units `words`,
  `word_tags` (string `[-1, W]`), `num_words`; `tokens` returns per token `logits`,
  `probabilities` (`[-1, seq, tags]`), `tag_id` (int32) and `tag` (string);
* an `AlbertForMultipleChoice` (RACE; `MultipleChoiceServing` in `albert_tf.tasks.multiple_choice.serving`):
  `serving_default` takes `text` (the article / context) and `question` string `[-1]` and
  `choices` string `[-1, -1]` (any number of choices) and returns `logits`, `scores` (softmax
  over the choices) float `[-1, choices]` and `predicted_choice` int32 `[-1]`; `tokens` the same
  from token ids `[-1, choices, seq]`.

Length-aware packing (`length_bucket=N`, the default 16): every text signature pads a batch to
its longest packed row (`[CLS]`/`[SEP]` included; for SQuAD the longest doc-stride window, for
multiple choice the longest choice) rounded up to a multiple of N, at most `sequence_length`,
instead of always to `sequence_length`; the answers are those of the fixed-length graph (padded
positions are masked out of attention), only cheaper for short texts. Outputs with a sequence
axis (`sequence_output`, `input_mask`) are then that wide. The `tokens` signatures take ids of
any length up to `sequence_length` (`[-1, -1]`; longer fails with INVALID_ARGUMENT), and mask
out a trailing run of `[CLS]` ids: TF Serving's batcher (`pad_variable_length_inputs`) pads a
shorter request with its first element, so a request merged with a longer one gets the longer
one's width in its sequence outputs (read its own length) and the same values.
`length_bucket=None` is the fixed-length export (token specs `[-1, sequence_length]`).

Length-sorted chunks (`length_chunk`, for the length-aware classifier and regressor, whose
outputs have no sequence axis): the text signatures (`serving_default`, `classify`, `regress`)
sort a batch by length, run the model on chunks of N rows, each padded to its own longest row
rounded up to `CHUNK_LENGTH_BUCKET` (8; `length_bucket` if finer), and answer in the request's
order. A batch of 32 random Rotten Tomatoes texts pads to about twice its real length at once; in
chunks of 8 it does about 0.6 of that work. TF Serving's batcher, which merges raw-text requests
of any lengths, cannot do this for the graph. The answers are those of the whole batch (the model's rows
are independent). Each chunk pays the model's per-call cost again (about 1 ms of op dispatch on 2
cores), so `"auto"` (the default) chunks by 8 only a model with at least
`CHUNK_MIN_MACS_PER_TOKEN` multiply-adds per token: ALBERT-base and `shared:N` (1.46x at batch
32 in bf16, 1.43x in fp32), 4 x 312 (1.27x), not 2 x 128 (0.83x: its whole batch costs less than
the extra calls; `benchmarks/length_chunks.py`, served, 2 cores). The
`tokens` signatures compute the ids as given.

Raw text is tokenized in the graph by the `AlbertTokenizerLayer` (the training preprocessing);
the `tf.Example` signatures read the text from the features `text` (and `text_b` for pairs).
Every output is dense, has a batch dimension of -1 and a JSON-mappable dtype.
"""

from __future__ import annotations

import abc
from typing import Dict, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from albert_tf import keras_internals

from albert_tf.tokenization.in_graph import DEFAULT_LENGTH_BUCKET, check_length_bucket, packed_width

# The rows of a batch computed at once by the length-aware text signatures of a classifier or
# regressor (module docstring). Smaller chunks pad less but run smaller matmuls and pay the per-call
# cost more often: 8 was the fastest on RT dev batches of 32 (ALBERT-base bf16, 2 cores; 16: 0.94x of it).
DEFAULT_LENGTH_CHUNK = 8
AUTO = "auto"
# `length_chunk="auto"` chunks a model from this much matmul work per token (multiply-adds over its
# layers): 4 x 312 has 4.7 M and gains 1.27x at batch 32, 2 x 128 has 0.39 M and loses (0.83x).
CHUNK_MIN_MACS_PER_TOKEN = 2_000_000
# A chunk's width is its longest row rounded up to this (or to `length_bucket` where that is finer).
# Sorted rows are close in length, so the packing's coarser rounding (16, which keeps the batcher's
# length buckets few) would be most of a chunk's padding: 8 served RT dev batches of 32 1.05x faster
# than 16 and single texts in 0.96x the time (a trained ALBERT-base, bf16, 2 cores;
# `benchmarks/length_chunks.py --chunk-widths`); 4 was no faster at batch 32 and doubles the shapes
# oneDNN keeps a primitive for.
CHUNK_LENGTH_BUCKET = 8


def auto_length_chunk(config) -> Optional[int]:
    """`DEFAULT_LENGTH_CHUNK` for an encoder (`AlbertConfig`) with at least `CHUNK_MIN_MACS_PER_TOKEN`
    multiply-adds per token in its layers, else None."""
    hidden, inner = config.hidden_size, config.intermediate_size
    macs = config.num_hidden_layers * config.inner_group_num * (4 * hidden * hidden + 2 * hidden * inner)
    return DEFAULT_LENGTH_CHUNK if macs >= CHUNK_MIN_MACS_PER_TOKEN else None

# The export kinds of the models that are no task: a task model exports as its task kind
# (`AlbertTaskModel.export_kind`, its folder's constant), registered by its serving class.
ENCODER = "encoder"
PRETRAINER = "pretrainer"

TEXT_KEY = "text"
TEXT_B_KEY = "text_b"
TOKEN_KEYS = ("input_ids", "input_mask", "segment_ids")
MLM_POSITIONS_KEY = "mlm_positions"

# TF Serving's method names (tensorflow_serving/.../signature_constants); TF2 writes "predict" for all.
PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
METHOD_NAMES = {"classify": CLASSIFY_METHOD, "regress": REGRESS_METHOD}


def model_kind(model) -> str:
    """The export kind of a supported model (a registered task model's, `encoder` or
    `pretrainer`), else TypeError."""
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.pretrainer import AlbertPretrainer

    # A fine-tuned task model says its kind (`AlbertTaskModel.export_kind`): the export imports
    # no task module.
    kind = getattr(model, "export_kind", None)
    if kind in SERVING_CLASSES:
        return kind
    if isinstance(model, AlbertPretrainer):
        return PRETRAINER
    if isinstance(model, AlbertEncoder):
        return ENCODER
    raise TypeError(
        f"export supports an AlbertEncoder, an AlbertPretrainer and the task models of {', '.join(sorted(SERVING_CLASSES))}, "
        f"got {type(model).__name__}"
    )


def _token_specs(sequence_length: Optional[int]) -> Dict[str, tf.TensorSpec]:
    return {k: tf.TensorSpec([None, sequence_length], tf.int32, name=k) for k in TOKEN_KEYS}


def serving_function(fn, input_signature) -> tf.types.experimental.PolymorphicFunction:
    """`fn` as a signature's `tf.function`, traced without AutoGraph: the serving code has no Python
    control flow on tensors, and converting the tokenizer's and the model's Python (about 90
    functions) cost each process that exports about 4 CPU-s of its 6.6 (tiny classifier)."""
    return tf.function(fn, input_signature=input_signature, autograph=False)


def string_spec(name: str) -> tf.TensorSpec:
    """The spec of a string input `[batch]` named `name` (a text signature's input)."""
    return tf.TensorSpec([None], tf.string, name=name)


class _Untracked:
    """A plain attribute holder: `tf.Module` does not track what is inside it."""

    def __init__(self, **values):
        self.__dict__.update(values)


def find_resources(obj, depth: int = 3) -> list:
    """The `TrackableResource`s (lookup tables) among `obj`'s attributes, `depth` levels down."""
    from tensorflow.python.trackable.resource import TrackableResource

    found, seen = [], set()

    def walk(value, level):
        if id(value) in seen or level > depth:
            return
        seen.add(id(value))
        if isinstance(value, TrackableResource):
            found.append(value)
            return
        if isinstance(value, (list, tuple)):
            for item in value:
                walk(item, level + 1)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item, level + 1)
        elif hasattr(value, "__dict__") and not isinstance(value, (tf.Tensor, tf.Variable, type)):
            for item in vars(value).values():
                walk(item, level + 1)

    walk(obj, 0)
    return found


# Export kind -> the class that exports it: the only place a kind picks its behaviour. Each
# serving class registers itself (`register_serving`), so this module imports no task module: a
# task's serving class is registered when its task package is imported, which every task model's
# module does.
SERVING_CLASSES: Dict[str, type] = {}


def register_serving(cls: type) -> type:
    """Class decorator: `cls` exports the models of kind `cls.kind` (one class per kind)."""
    if not isinstance(cls.kind, str) or not cls.kind:
        raise ValueError(f"{cls.__name__} names no export kind")
    registered = SERVING_CLASSES.get(cls.kind)
    if registered is not None and registered.__qualname__ != cls.__qualname__:
        raise ValueError(f"export kind {cls.kind!r} is already served by {registered.__name__}")
    SERVING_CLASSES[cls.kind] = cls
    return cls


def serving_class(kind: str) -> type:
    """The registered serving class of an export kind, else TypeError naming what is registered."""
    try:
        return SERVING_CLASSES[kind]
    except KeyError:
        raise TypeError(
            f"no serving module is registered for export kind {kind!r} (registered: {', '.join(sorted(SERVING_CLASSES))}); "
            "import the task's package (albert_tf.tasks) first"
        ) from None


class ServingModule(tf.Module, metaclass=abc.ABCMeta):
    """The exported object: the model, the tokenizer layer and the signature functions.

    `ServingModule(model, ...)` returns an instance of the subclass for the model's kind
    (`SERVING_CLASSES`), so callers need not know the kind; a subclass can also be built
    directly. The base class holds what every kind shares (validation, the token-id checks,
    the text and token signatures of a single-text model, variable and resource tracking);
    a subclass overrides only what its kind does differently.

    Args:
      model: an `AlbertForClassification`, `AlbertForRegression`, `AlbertEncoder`, `AlbertPretrainer`,
        `AlbertForSquadV1`, `AlbertForSquadV2`, `AlbertForTagging` or `AlbertForMultipleChoice`.
      tokenizer_layer: the `AlbertTokenizerLayer` of the model's vocabulary and sequence length.
      labels: class labels in id order (classifier; default "0", "1", ...); for a token
        classifier its tags in id order (required).
      pair: the text signatures take a second text `text_b` (sentence-pair tasks).
      qa_settings: SQuAD models: `doc_stride`, `max_query_length`, `n_best_size`,
        `max_answer_length`, `null_score_diff_threshold` (v2) — task.json's `settings`;
        defaults `albert_tf.tasks.squad.serving.DEFAULT_QA_SETTINGS`.
      task_settings: token classifier: `token_unit` ("word" or "char", task.json's
        `token_unit`; default "word"); multiple choice: `max_qa_length` (task.json's
        `settings`; default 128, at most `sequence_length - 3`).
      length_bucket: the text signatures pad to the batch's longest row rounded up to a
        multiple of this (see the module docstring); None pads to `sequence_length`.
      length_chunk: a length-aware classifier's or regressor's text signatures compute a batch
        in length-sorted chunks of this many rows (module docstring); None: the batch at once;
        "auto" (default): `auto_length_chunk` of the encoder. None for the fixed-length graphs
        and the other kinds, whatever is passed.

    Raises:
      TypeError: an unsupported model, or a model of another kind than the subclass exports.
      ValueError: labels that do not match the classifier, labels for a model without any,
        settings for another kind of model, or invalid settings.
    """

    # The export kind of the subclass (`register_serving`); the base class has none.
    kind: Optional[str] = None
    # Signatures beyond `serving_default` and `tokens`, key -> TF Serving method name; the
    # function of key `k` is the attribute `serve_<k>`.
    extra_signatures: Dict[str, str] = {}
    # Why the `tokens` computation has no TFLite model (`albert_tf.export.tflite`), None: it has.
    no_tflite: Optional[str] = None
    # The token-id inputs of `tokens`, in signature order.
    token_keys: Tuple[str, ...] = TOKEN_KEYS

    def __new__(cls, model=None, *args, **kwargs):
        if cls is ServingModule:
            # The one place a kind picks its class; `model_kind` raises for unsupported models.
            cls = serving_class(model_kind(model))
        return super().__new__(cls)

    def __init__(self, model, tokenizer_layer, labels: Optional[Sequence[str]] = None, pair: bool = False,
                 qa_settings: Optional[Dict] = None, task_settings: Optional[Dict] = None,
                 length_bucket: Optional[int] = DEFAULT_LENGTH_BUCKET,
                 length_chunk: Union[int, str, None] = AUTO):
        super().__init__(name="albert_serving")
        kind = model_kind(model)
        if kind != self.kind:
            raise TypeError(
                f"{type(self).__name__} exports {self.kind} models, got a {type(model).__name__} (kind {kind})"
            )
        # The Keras objects stay untracked (a plain holder): what the SavedModel checkpoints is
        # the tf.Variables the functions read and the tokenizer's tables (see `track_resources`).
        # Tracking a Keras 3 model directly writes a second copy of every variable that the
        # TF1 loader (TF Serving's) restores while the functions read the uninitialized first.
        self._objects = _Untracked(model=model, tokenizer=tokenizer_layer)
        self.pair = bool(pair)
        self.sequence_length = int(tokenizer_layer.sequence_length)
        self.length_bucket = check_length_bucket(length_bucket)
        if length_chunk is not None and length_chunk != AUTO and (
                isinstance(length_chunk, bool) or not isinstance(length_chunk, int) or length_chunk < 1):
            raise ValueError(f"length_chunk must be a positive integer, None or {AUTO!r}, got {length_chunk!r}")
        if length_chunk == AUTO:
            length_chunk = auto_length_chunk(self.encoder.to_albert_config())
        chunks = self.length_bucket is not None and self.row_outputs() is not None
        self.length_chunk: Optional[int] = length_chunk if chunks else None
        # Checked in this order (labels, QA settings, task settings) so the first error reported
        # for a call with several problems stays the same.
        self.labels: Optional[List[str]] = self._check_labels(labels)
        if self.labels is not None:
            self._label_table = tf.constant(self.labels, tf.string)
        self.qa_settings: Optional[Dict] = self._check_qa_settings(qa_settings)
        self.task_settings: Optional[Dict] = self._check_task_settings(task_settings)
        self.vocab_size = int(self.encoder.vocab_size)
        if tokenizer_layer.vocab_size > self.vocab_size:
            raise ValueError(
                f"the tokenizer has {tokenizer_layer.vocab_size} tokens but the model's vocab_size is {self.vocab_size}"
            )
        self._build_functions()
        self.track_resources()

    @property
    def model(self):
        return self._objects.model

    @property
    def tokenizer(self):
        return self._objects.tokenizer

    # --- per-kind settings (the defaults reject what a kind does not take) -------------------------

    def _check_labels(self, labels: Optional[Sequence[str]]) -> Optional[List[str]]:
        """The labels in id order, or None for a kind without labels."""
        if labels is not None:
            raise ValueError(f"labels are for classifiers; a {self.kind} has none")
        return None

    def _check_qa_settings(self, qa_settings: Optional[Dict]) -> Optional[Dict]:
        """The SQuAD settings (and the QA graph built from them), or None for other kinds."""
        if qa_settings is not None:
            raise ValueError(f"qa_settings are for SQuAD models; a {self.kind} has none")
        return None

    def _check_task_settings(self, task_settings: Optional[Dict]) -> Optional[Dict]:
        """The task settings (and the task graph built from them), or None for other kinds."""
        if task_settings is not None:
            raise ValueError(f"task_settings are for token classifiers and multiple-choice models; a {self.kind} has none")
        return None

    def _reject_pair(self) -> None:
        """For kinds whose text inputs are fixed by the task."""
        if self.pair:
            raise ValueError(f"a {self.kind} export takes no pair=True (its inputs are fixed)")

    def _extra_resources(self) -> list:
        """Lookup-table resources outside the tokenizer layer that the functions read."""
        return []

    def track_resources(self) -> None:
        """Tracks the variables of every signature and the tokenizer's lookup tables (call last)."""
        functions = self.signatures().values()
        seen, variables = set(), []
        for function in functions:
            for v in function.variables:
                if id(v) not in seen:
                    seen.add(id(v))
                    variables.append(v)
        # The captures' order can differ between processes; by name it does not, so the same
        # weights exported twice give the same checkpoint (and the Pusher sees no change). Names
        # repeat (a SQuAD v2 head has five `albert_for_squad_v2/bias:0`): the Keras paths of the weights
        # settle the ties.
        paths = {id(weight.value): weight.path for weight in self.model.weights}
        self.exported_variables = sorted(variables, key=lambda v: (v.name, paths.get(id(v), "")))
        self.tokenizer_resources = find_resources(self.tokenizer) + self._extra_resources()

    # --- the model on token ids -----------------------------------------------------------------

    @property
    def encoder(self):
        """The `AlbertEncoder` inside the model (the model itself for an encoder export)."""
        return self.model.encoder

    @property
    def static_length(self) -> Optional[int]:
        """The sequence dimension of the token inputs: `sequence_length`, None when length-aware."""
        return self.sequence_length if self.length_bucket is None else None

    def _from_tokens(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        features = {k: tf.cast(features[k], tf.int32) for k in self.token_keys}
        # Keras's `take` wraps a negative id to the end of the table (and on GPU an id past the
        # table reads zeros): under TF Serving these asserts make such requests INVALID_ARGUMENT.
        # `Assert` with the message alone keeps the client's error short (no tensor dumps).
        ids = features["input_ids"]
        checks = [
            tf.debugging.Assert(tf.reduce_all(ids >= 0), ["input_ids must be >= 0"]),
            tf.debugging.Assert(tf.reduce_all(ids < self.vocab_size), [f"input_ids must be < the vocabulary size {self.vocab_size}"]),
            tf.debugging.Assert(tf.reduce_all(features["segment_ids"] >= 0), ["segment_ids must be >= 0"]),
        ]
        if self.length_bucket is not None:
            # Variable-length ids: longer than the position table would fail deep in the
            # embeddings with an unreadable shape error; the inputs must also agree in shape.
            checks.append(tf.debugging.Assert(
                tf.shape(ids)[-1] <= self.sequence_length,
                [f"token inputs must have at most sequence_length = {self.sequence_length} positions"],
            ))
            for key in self.token_keys[1:]:
                checks.append(tf.debugging.Assert(
                    tf.reduce_all(tf.equal(tf.shape(features[key]), tf.shape(ids))),
                    [f"{key} must have the shape of input_ids"],
                ))
            # Run the checks before the model, so a bad request reports them and not a shape error.
            with tf.control_dependencies(checks):
                features = {k: tf.identity(v) for k, v in features.items()}
            features = self._unpad_batched(features)
        return self._token_outputs(features)

    def _unpad_batched(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        """Masks out what TF Serving's batcher appended to a shorter request.

        With `pad_variable_length_inputs` it pads every input with the request's first element:
        `[CLS]` ids with mask 1, which would be attended to. A packed row ends with `[SEP]` and
        pad ids, never with `[CLS]`, so a trailing run of `[CLS]` after position 0 is such
        padding: mask and segment 0 there (`p_mask` 1).
        """
        ids = features["input_ids"]
        positions = tf.range(tf.shape(ids)[-1])
        # The trailing run starts after the last position that is no `[CLS]`. A max, not a
        # reversed cumulative product: OpenVINO's converter has no Cumprod (and OVMS loads this
        # SavedModel through it).
        last_other = tf.reduce_max(tf.where(tf.equal(ids, self.tokenizer.cls_id), -1, positions), axis=-1, keepdims=True)
        padding = tf.logical_and(positions > last_other, positions > 0)
        result = dict(features)
        for key in ("input_mask", "segment_ids"):
            result[key] = tf.where(padding, 0, features[key])
        if "p_mask" in features:
            result["p_mask"] = tf.where(padding, 1, features["p_mask"])
        return result

    @abc.abstractmethod
    def _token_outputs(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        """The `tokens` signature's outputs for checked int32 `features` (`token_keys`)."""

    def _tokenize(self, text: tf.Tensor, text_b: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
        inputs = (text, text_b) if text_b is not None else text
        return self.tokenizer.tokenize_and_pack(inputs, length_bucket=self.length_bucket)

    def text_input_mask(self, **inputs: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        """`(input_mask [rows, width], request row of each row)` of the model rows that the
        `serving_default` inputs `inputs` give (warmup requests pick their lengths with it)."""
        features = self._tokenize(inputs[TEXT_KEY], inputs.get(TEXT_B_KEY))
        mask = features["input_mask"]
        return mask, tf.range(tf.shape(mask)[0])

    def _from_text(self, text, text_b=None) -> Dict[str, tf.Tensor]:
        features = self._tokenize(text, text_b)
        if self.length_chunk is None:
            return self._from_tokens(features)
        return self._in_length_chunks(features)

    def _in_length_chunks(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        """`_from_tokens` of the packed `features`, computed in length-sorted chunks of
        `length_chunk` rows, each cut to its own packed width; the outputs in the rows' order."""
        chunk = self.length_chunk
        rows = tf.shape(features["input_ids"])[0]
        lengths = tf.reduce_sum(tf.cast(features["input_mask"], tf.int32), axis=-1)
        order = tf.argsort(lengths, stable=True)
        ordered = {key: tf.gather(value, order) for key, value in features.items()}
        ordered_lengths = tf.gather(lengths, order)
        count = (rows + chunk - 1) // chunk
        bucket = self.width_step

        specs = self.row_outputs()

        def body(index, arrays):
            start = index * chunk
            end = tf.minimum(start + chunk, rows)
            width = packed_width(ordered_lengths[start:end], self.sequence_length, bucket)
            outputs = self._from_tokens({key: value[start:end, :width] for key, value in ordered.items()})
            return index + 1, [array.write(index, outputs[name]) for name, array in zip(specs, arrays)]

        # The element shapes let an empty batch concatenate to empty outputs.
        arrays = [tf.TensorArray(spec.dtype, size=count, infer_shape=False, element_shape=spec.shape)
                  for spec in specs.values()]
        # One chunk at a time: they share the intra-op threads, and at once they would only compete.
        _, arrays = tf.while_loop(lambda index, _: index < count, body, [tf.constant(0), arrays], parallel_iterations=1)
        back = tf.math.invert_permutation(order)
        return {name: tf.gather(array.concat(), back) for name, array in zip(specs, arrays)}

    @property
    def width_step(self) -> Optional[int]:
        """What the text signatures round the model's padded width up to: `length_bucket`, or in
        length-sorted chunks `CHUNK_LENGTH_BUCKET` where that is finer; None at fixed length."""
        if self.length_chunk is None:
            return self.length_bucket
        return min(self.length_bucket, CHUNK_LENGTH_BUCKET)

    def row_outputs(self) -> Optional[Dict[str, tf.TensorSpec]]:
        """The `tokens` outputs as specs `[rows, ...]` when each is one value or vector per row
        (the text signatures may then run in length-sorted chunks); None (here): some output has a
        sequence axis."""
        return None

    def _parse_examples(self, serialized: tf.Tensor):
        spec = {TEXT_KEY: tf.io.FixedLenFeature([], tf.string)}
        if self.pair:
            spec[TEXT_B_KEY] = tf.io.FixedLenFeature([], tf.string)
        parsed = tf.io.parse_example(serialized, spec)
        return parsed[TEXT_KEY], parsed.get(TEXT_B_KEY)

    # --- the tf.functions ---------------------------------------------------------------------------

    def _build_functions(self) -> None:
        """Sets `serve_text`, `serve_tokens` and a `serve_<key>` per `extra_signatures` key."""
        self.serve_text = self._text_function()
        self.serve_tokens = self._tokens_function()

    def _text_function(self) -> tf.types.experimental.PolymorphicFunction:
        """`serving_default`: raw `text` (and `text_b` for pairs) through `_from_text`."""
        if self.pair:
            return serving_function(lambda text, text_b: self._from_text(text, text_b),
                                    input_signature=[string_spec(TEXT_KEY), string_spec(TEXT_B_KEY)])
        return serving_function(lambda text: self._from_text(text), input_signature=[string_spec(TEXT_KEY)])

    def _tokens_function(self) -> tf.types.experimental.PolymorphicFunction:
        """`tokens`: `input_ids`, `input_mask`, `segment_ids` through `_from_tokens`."""
        return serving_function(
            lambda input_ids, input_mask, segment_ids: self._from_tokens(
                {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
            ),
            input_signature=self._token_input_signature(),
        )

    def _token_input_signature(self) -> List[tf.TensorSpec]:
        specs = _token_specs(self.static_length)
        return [specs[k] for k in TOKEN_KEYS]

    def signatures(self) -> Dict[str, tf.types.experimental.ConcreteFunction]:
        """Signature key -> concrete function, for `tf.saved_model.save(..., signatures=...)`.

        Traced as the save traces them (`keras_internals.traced_as_saved`): the save then reuses
        these traces instead of tracing every function again and storing it twice."""
        with keras_internals.traced_as_saved():
            result = {
                "serving_default": self.serve_text.get_concrete_function(),
                "tokens": self.serve_tokens.get_concrete_function(),
            }
            for key in self.extra_signatures:
                result[key] = getattr(self, f"serve_{key}").get_concrete_function()
        return result

    def method_names(self) -> Dict[str, str]:
        """Signature key -> TF Serving method name, for those that are not `predict`."""
        return {k: v for k, v in self.extra_signatures.items() if v != PREDICT_METHOD}

    def signatures_keys(self) -> List[str]:
        return ["serving_default", "tokens"] + list(self.extra_signatures)


class _EncoderOutputsServing(ServingModule):
    """The TF-Hub module's outputs (`pooled_output`, `sequence_output`) of an encoder."""

    def _token_outputs(self, features):
        outputs = self.encoder(features, training=False)
        return {
            "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
            "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
        }

    def _from_text(self, text, text_b=None):
        features = self._tokenize(text, text_b)
        outputs = self._from_tokens(features)
        # Which sequence positions are real tokens: needed to read `sequence_output`.
        outputs["input_mask"] = features["input_mask"]
        return outputs


@register_serving
class EncoderServing(_EncoderOutputsServing):
    """A bare `AlbertEncoder` (the TF-Hub module's signatures)."""

    kind = ENCODER

    @property
    def encoder(self):
        return self.model


@register_serving
class PretrainerServing(_EncoderOutputsServing):
    """An `AlbertPretrainer`: the encoder's signatures plus its `sop` and `mlm` heads."""

    kind = PRETRAINER
    extra_signatures = {"sop": PREDICT_METHOD, "mlm": PREDICT_METHOD}

    def _build_functions(self):
        super()._build_functions()
        token_signature = self._token_input_signature()
        self.serve_sop = serving_function(self._sop, input_signature=token_signature)
        self.serve_mlm = serving_function(
            self._mlm,
            input_signature=token_signature + [tf.TensorSpec([None, None], tf.int32, name=MLM_POSITIONS_KEY)],
        )

    def _sop(self, input_ids, input_mask, segment_ids):
        features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        pooled = self.model.encoder(features, training=False)["pooled_output"]
        logits = tf.cast(self.model.sentence_head(pooled), tf.float32)
        return {"sop_logits": logits, "sop_probabilities": tf.nn.softmax(logits, axis=-1)}

    def _mlm(self, input_ids, input_mask, segment_ids, mlm_positions):
        # Out-of-range positions would read garbage silently on some devices: reject them, before
        # the gather of the head can fail with its own message.
        checks = [
            tf.debugging.assert_less(mlm_positions, tf.shape(input_ids)[1], message="mlm_positions must be < sequence length"),
            tf.debugging.assert_non_negative(mlm_positions, message="mlm_positions must be >= 0"),
        ]
        with tf.control_dependencies([check for check in checks if check is not None]):
            mlm_positions = tf.identity(mlm_positions)
        features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        sequence = self.model.encoder(features, training=False)["sequence_output"]
        logits = self.model.mlm_head(sequence, self.model.encoder.embeddings.word_embeddings, mlm_positions)
        return {"mlm_logits": tf.cast(logits, tf.float32)}
