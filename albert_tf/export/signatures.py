"""The serving signatures of an exported model: a `tf.Module` whose `tf.function`s TF Serving calls.

`ServingModule(model, tokenizer_layer, labels=...)` wraps one of

* an `AlbertClassifier` (outputs `logits`): `serving_default` takes raw text and returns
  `probabilities`, `logits`, `label_id` and `label`; `tokens` the same from token ids; `classify`
  takes serialized `tf.Example`s (`inputs`) and returns `classes` and `scores` (TF Serving's
  Classify API);
* an `AlbertRegressor` (outputs `predictions`): `serving_default` / `tokens` return `score`;
  `regress` takes serialized `tf.Example`s and returns `outputs` (TF Serving's Regress API);
* an `AlbertEncoder` or an `AlbertPretrainer`: `serving_default` returns `pooled_output`,
  `sequence_output` (and the `input_mask`), `tokens` the same from token ids (the TF-Hub
  module's signature), and for a pretrainer also `sop` (`sop_logits`, `sop_probabilities`) and
  `mlm` (`mlm_logits` at `mlm_positions`, as the original hub module's `mlm` signature);
* a `SquadV1Model` / `SquadV2Model` (extractive QA, `albert_tf.export.qa`): `serving_default`
  takes `question` and `context` and returns `answer_text`, `start_char`, `end_char` (character
  offsets into the context, end exclusive), `score`, `has_answer`, `num_windows` (doc-stride
  windows used) and for v2 `null_score`; `tokens` returns the head's outputs for token ids
  (v1: `start_logits`, `end_logits`; v2 also takes `p_mask` and returns the beam
  `start_top_log_probs`, `start_top_index`, `end_top_log_probs`, `end_top_index` and
  `cls_logits`);
* an `AlbertTokenClassifier` (NER, `albert_tf.export.tagging`): `serving_default` takes `text`
  and returns the entities of each text, padded to the batch's largest count: `entity_labels`,
  `entity_texts` (string `[-1, E]`), `entity_starts`, `entity_ends` (int32 code-point offsets into
  the text, end exclusive, -1 padding), `entity_scores` (float), `num_entities` (int32 `[-1]`),
  and the tagged units `words`, `word_tags` (string `[-1, W]`), `num_words`; `tokens` returns
  per token `logits`, `probabilities` (`[-1, seq, tags]`), `tag_id` (int32) and `tag` (string);
* a `MultipleChoiceModel` (RACE, `albert_tf.export.multiple_choice`): `serving_default` takes
  `text` (the article / context) and `question` string `[-1]` and `choices` string `[-1, -1]`
  (any number of choices) and returns `logits`, `scores` (softmax over the choices) float
  `[-1, choices]` and `predicted_choice` int32 `[-1]`; `tokens` the same from token ids
  `[-1, choices, seq]`.

Raw text is tokenized in the graph by the `AlbertTokenizerLayer` (the training preprocessing);
the `tf.Example` signatures read the text from the features `text` (and `text_b` for pairs).
Every output is dense, has a batch dimension of -1 and a JSON-mappable dtype.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import tensorflow as tf

TEXT_KEY = "text"
TEXT_B_KEY = "text_b"
TOKEN_KEYS = ("input_ids", "input_mask", "segment_ids")
MLM_POSITIONS_KEY = "mlm_positions"

KIND_CLASSIFIER = "classifier"
KIND_REGRESSOR = "regressor"
KIND_ENCODER = "encoder"
KIND_PRETRAINER = "pretrainer"
KIND_SQUAD_V1 = "squad_v1"
KIND_SQUAD_V2 = "squad_v2"
KIND_TAGGER = "tagger"
KIND_MULTIPLE_CHOICE = "multiple_choice"
KINDS = (KIND_CLASSIFIER, KIND_REGRESSOR, KIND_ENCODER, KIND_PRETRAINER, KIND_SQUAD_V1, KIND_SQUAD_V2, KIND_TAGGER,
         KIND_MULTIPLE_CHOICE)
QA_KINDS = (KIND_SQUAD_V1, KIND_SQUAD_V2)

# TF Serving's method names (tensorflow_serving/.../signature_constants); TF2 writes "predict" for all.
PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"
REGRESS_METHOD = "tensorflow/serving/regress"
METHOD_NAMES = {"classify": CLASSIFY_METHOD, "regress": REGRESS_METHOD}


def model_kind(model) -> str:
    """The export kind (one of `KINDS`) of a supported model, else TypeError."""
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.pretrainer import AlbertPretrainer
    from albert_tf.tasks.families import model_export_kind

    # A fine-tuned task model's kind is its family's (`albert_tf.tasks.families`).
    kind = model_export_kind(model)
    if kind is not None:
        return kind
    if isinstance(model, AlbertPretrainer):
        return KIND_PRETRAINER
    if isinstance(model, AlbertEncoder):
        return KIND_ENCODER
    raise TypeError(
        "export supports AlbertClassifier, AlbertRegressor, AlbertEncoder, AlbertPretrainer, SquadV1Model, SquadV2Model, "
        "AlbertTokenClassifier and MultipleChoiceModel, "
        f"got {type(model).__name__}"
    )


def _token_specs(sequence_length: int) -> Dict[str, tf.TensorSpec]:
    return {k: tf.TensorSpec([None, sequence_length], tf.int32, name=k) for k in TOKEN_KEYS}


class _Untracked:
    """A plain attribute holder: `tf.Module` does not track what is inside it."""

    def __init__(self, **values):
        self.__dict__.update(values)


def _find_resources(obj, depth: int = 3) -> list:
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


class ServingModule(tf.Module):
    """The exported object: the model, the tokenizer layer and the signature functions.

    Args:
      model: an `AlbertClassifier`, `AlbertRegressor`, `AlbertEncoder`, `AlbertPretrainer`,
        `SquadV1Model`, `SquadV2Model`, `AlbertTokenClassifier` or `MultipleChoiceModel`.
      tokenizer_layer: the `AlbertTokenizerLayer` of the model's vocabulary and sequence length.
      labels: class labels in id order (classifier; default "0", "1", ...); for a token
        classifier its tags in id order (required).
      pair: the text signatures take a second text `text_b` (sentence-pair tasks).
      qa_settings: SQuAD models: `doc_stride`, `max_query_length`, `n_best_size`,
        `max_answer_length`, `null_score_diff_threshold` (v2) — task.json's `settings`;
        defaults `albert_tf.export.qa.DEFAULT_QA_SETTINGS`.
      task_settings: token classifier: `token_unit` ("word" or "char", task.json's
        `token_unit`; default "word"); multiple choice: `max_qa_length` (task.json's
        `settings`; default 128, at most `sequence_length - 3`).

    Raises:
      TypeError: an unsupported model.
      ValueError: labels that do not match the classifier, labels for a model without any,
        settings for another kind of model, or invalid settings.
    """

    def __init__(self, model, tokenizer_layer, labels: Optional[Sequence[str]] = None, pair: bool = False,
                 qa_settings: Optional[Dict] = None, task_settings: Optional[Dict] = None):
        super().__init__(name="albert_serving")
        self.kind = model_kind(model)
        # The Keras objects stay untracked (a plain holder): what the SavedModel checkpoints is
        # the tf.Variables the functions read and the tokenizer's tables (see `track_resources`).
        # Tracking a Keras 3 model directly writes a second copy of every variable that the
        # TF1 loader (TF Serving's) restores while the functions read the uninitialized first.
        self._objects = _Untracked(model=model, tokenizer=tokenizer_layer)
        self.pair = bool(pair)
        self.sequence_length = int(tokenizer_layer.sequence_length)
        if self.kind == KIND_CLASSIFIER:
            num_labels = int(model.num_labels)
            labels = [str(i) for i in range(num_labels)] if labels is None else [str(l) for l in labels]
            if len(labels) != num_labels:
                raise ValueError(f"{len(labels)} labels for a classifier of {num_labels} classes")
            if len(set(labels)) != len(labels):
                raise ValueError(f"labels must be distinct, got {labels}")
            self.labels: Optional[List[str]] = labels
            self._label_table = tf.constant(labels, tf.string)
        elif self.kind == KIND_TAGGER:
            if labels is None:
                raise ValueError("a token classifier export needs its tags in id order (labels=task.json's labels)")
            self.labels = [str(l) for l in labels]
            self._label_table = tf.constant(self.labels, tf.string)
        elif labels is not None:
            raise ValueError(f"labels are for classifiers; a {self.kind} has none")
        else:
            self.labels = None
        self.qa_settings: Optional[Dict] = None
        if self.kind in QA_KINDS:
            from albert_tf.export import qa

            if pair:
                raise ValueError("a SQuAD model takes question and context, not pair=True")
            self.qa_settings = qa.qa_settings(qa_settings, "v1" if self.kind == KIND_SQUAD_V1 else "v2")
            self._objects.qa = qa.QaGraph(model, tokenizer_layer, self.qa_settings)
        elif qa_settings is not None:
            raise ValueError(f"qa_settings are for SQuAD models; a {self.kind} has none")
        self.task_settings: Optional[Dict] = None
        if self.kind in (KIND_TAGGER, KIND_MULTIPLE_CHOICE):
            if pair:
                raise ValueError(f"a {self.kind} export takes no pair=True (its inputs are fixed)")
            if self.kind == KIND_TAGGER:
                from albert_tf.export import tagging

                self.task_settings = tagging.tagging_settings(task_settings, self.labels)
                self._objects.task = tagging.TaggingGraph(model, tokenizer_layer, self.labels, self.task_settings)
            else:
                from albert_tf.export import multiple_choice

                self.task_settings = multiple_choice.multiple_choice_settings(task_settings, self.sequence_length)
                self._objects.task = multiple_choice.MultipleChoiceGraph(model, tokenizer_layer, self.task_settings)
        elif task_settings is not None:
            raise ValueError(f"task_settings are for token classifiers and multiple-choice models; a {self.kind} has none")
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
        # weights exported twice give the same checkpoint (and the Pusher sees no change).
        self.exported_variables = sorted(variables, key=lambda v: v.name)
        self.tokenizer_resources = _find_resources(self.tokenizer)
        if self.kind in QA_KINDS:
            # The offsets tokenizer of the QA graph holds its own SentencePiece model resource.
            self.tokenizer_resources += _find_resources(self._objects.qa._sp_offsets)

    # --- the model on token ids -----------------------------------------------------------------

    @property
    def encoder(self):
        """The `AlbertEncoder` inside the model (the model itself for an encoder export)."""
        return self.model if self.kind == KIND_ENCODER else self.model.encoder

    def _from_tokens(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        keys = TOKEN_KEYS + (("p_mask",) if self.kind == KIND_SQUAD_V2 else ())
        features = {k: tf.cast(features[k], tf.int32) for k in keys}
        # Keras's `take` wraps a negative id to the end of the table (and on GPU an id past the
        # table reads zeros): under TF Serving these asserts make such requests INVALID_ARGUMENT.
        # `Assert` with the message alone keeps the client's error short (no tensor dumps).
        ids = features["input_ids"]
        tf.debugging.Assert(tf.reduce_all(ids >= 0), ["input_ids must be >= 0"])
        tf.debugging.Assert(tf.reduce_all(ids < self.vocab_size), [f"input_ids must be < the vocabulary size {self.vocab_size}"])
        tf.debugging.Assert(tf.reduce_all(features["segment_ids"] >= 0), ["segment_ids must be >= 0"])
        if self.kind in QA_KINDS:
            outputs = self.model(features, training=False)
            return {k: (tf.cast(v, tf.float32) if v.dtype.is_floating else tf.cast(v, tf.int32))
                    for k, v in outputs.items() if k != "unique_ids"}
        if self.kind == KIND_TAGGER:
            logits = tf.cast(self.model(features, training=False)["logits"], tf.float32)
            tag_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
            return {
                "logits": logits,
                "probabilities": tf.nn.softmax(logits, axis=-1),
                "tag_id": tag_id,
                "tag": tf.gather(self._label_table, tag_id),
            }
        if self.kind == KIND_MULTIPLE_CHOICE:
            return self._objects.task.scores(features)
        if self.kind == KIND_CLASSIFIER:
            logits = tf.cast(self.model(features, training=False)["logits"], tf.float32)
            label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
            return {
                "probabilities": tf.nn.softmax(logits, axis=-1),
                "logits": logits,
                "label_id": label_id,
                "label": tf.gather(self._label_table, label_id),
            }
        if self.kind == KIND_REGRESSOR:
            score = tf.cast(self.model(features, training=False)["predictions"], tf.float32)
            return {"score": tf.reshape(score, [-1])}
        outputs = self.encoder(features, training=False)
        return {
            "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
            "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
        }

    def _tokenize(self, text: tf.Tensor, text_b: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
        return self.tokenizer((text, text_b) if text_b is not None else text)

    def _from_text(self, text, text_b=None) -> Dict[str, tf.Tensor]:
        features = self._tokenize(text, text_b)
        outputs = self._from_tokens(features)
        if self.kind in (KIND_ENCODER, KIND_PRETRAINER):
            # Which sequence positions are real tokens: needed to read `sequence_output`.
            outputs["input_mask"] = features["input_mask"]
        return outputs

    def _parse_examples(self, serialized: tf.Tensor):
        spec = {TEXT_KEY: tf.io.FixedLenFeature([], tf.string)}
        if self.pair:
            spec[TEXT_B_KEY] = tf.io.FixedLenFeature([], tf.string)
        parsed = tf.io.parse_example(serialized, spec)
        return parsed[TEXT_KEY], parsed.get(TEXT_B_KEY)

    # --- the tf.functions ---------------------------------------------------------------------------

    def _build_functions(self) -> None:
        text_spec = tf.TensorSpec([None], tf.string, name=TEXT_KEY)
        text_b_spec = tf.TensorSpec([None], tf.string, name=TEXT_B_KEY)
        specs = _token_specs(self.sequence_length)
        if self.kind in QA_KINDS:
            from albert_tf.export.qa import CONTEXT_KEY, QUESTION_KEY

            self.serve_text = tf.function(
                lambda question, context: self._objects.qa(question, context),
                input_signature=[tf.TensorSpec([None], tf.string, name=QUESTION_KEY),
                                 tf.TensorSpec([None], tf.string, name=CONTEXT_KEY)],
            )
            token_specs = [specs[k] for k in TOKEN_KEYS]
            if self.kind == KIND_SQUAD_V2:
                self.serve_tokens = tf.function(
                    lambda input_ids, input_mask, segment_ids, p_mask: self._from_tokens(
                        {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids, "p_mask": p_mask}
                    ),
                    input_signature=token_specs + [tf.TensorSpec([None, self.sequence_length], tf.int32, name="p_mask")],
                )
            else:
                self.serve_tokens = tf.function(
                    lambda input_ids, input_mask, segment_ids: self._from_tokens(
                        {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
                    ),
                    input_signature=token_specs,
                )
            return
        if self.kind == KIND_TAGGER:
            self.serve_text = tf.function(lambda text: self._objects.task(text), input_signature=[text_spec])
            self.serve_tokens = tf.function(
                lambda input_ids, input_mask, segment_ids: self._from_tokens(
                    {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
                ),
                input_signature=[specs[k] for k in TOKEN_KEYS],
            )
            return
        if self.kind == KIND_MULTIPLE_CHOICE:
            from albert_tf.export.multiple_choice import CHOICES_KEY, QUESTION_KEY

            self.serve_text = tf.function(
                lambda text, question, choices: self._objects.task(text, question, choices),
                input_signature=[text_spec, tf.TensorSpec([None], tf.string, name=QUESTION_KEY),
                                 tf.TensorSpec([None, None], tf.string, name=CHOICES_KEY)],
            )
            choice_specs = [tf.TensorSpec([None, None, self.sequence_length], tf.int32, name=k) for k in TOKEN_KEYS]
            self.serve_tokens = tf.function(
                lambda input_ids, input_mask, segment_ids: self._from_tokens(
                    {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
                ),
                input_signature=choice_specs,
            )
            return
        if self.pair:
            self.serve_text = tf.function(lambda text, text_b: self._from_text(text, text_b), input_signature=[text_spec, text_b_spec])
        else:
            self.serve_text = tf.function(lambda text: self._from_text(text), input_signature=[text_spec])
        self.serve_tokens = tf.function(
            lambda input_ids, input_mask, segment_ids: self._from_tokens(
                {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
            ),
            input_signature=[specs[k] for k in TOKEN_KEYS],
        )
        examples_spec = [tf.TensorSpec([None], tf.string, name="inputs")]
        if self.kind == KIND_CLASSIFIER:
            self.serve_classify = tf.function(self._classify, input_signature=examples_spec)
        if self.kind == KIND_REGRESSOR:
            self.serve_regress = tf.function(self._regress, input_signature=examples_spec)
        if self.kind == KIND_PRETRAINER:
            self.serve_sop = tf.function(self._sop, input_signature=[specs[k] for k in TOKEN_KEYS])
            self.serve_mlm = tf.function(
                self._mlm,
                input_signature=[specs[k] for k in TOKEN_KEYS]
                + [tf.TensorSpec([None, None], tf.int32, name=MLM_POSITIONS_KEY)],
            )

    def _classify(self, inputs):
        outputs = self._from_text(*self._parse_examples(inputs))
        batch = tf.shape(inputs)[0]
        classes = tf.tile(self._label_table[None, :], tf.stack([batch, 1]))
        return {"classes": classes, "scores": outputs["probabilities"]}

    def _regress(self, inputs):
        return {"outputs": self._from_text(*self._parse_examples(inputs))["score"]}

    def _sop(self, input_ids, input_mask, segment_ids):
        features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        pooled = self.model.encoder(features, training=False)["pooled_output"]
        logits = tf.cast(self.model.sentence_head(pooled), tf.float32)
        return {"sop_logits": logits, "sop_probabilities": tf.nn.softmax(logits, axis=-1)}

    def _mlm(self, input_ids, input_mask, segment_ids, mlm_positions):
        features = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        sequence = self.model.encoder(features, training=False)["sequence_output"]
        # Out-of-range positions would read garbage silently on some devices: reject them.
        tf.debugging.assert_less(mlm_positions, tf.shape(input_ids)[1], message="mlm_positions must be < sequence length")
        tf.debugging.assert_non_negative(mlm_positions, message="mlm_positions must be >= 0")
        logits = self.model.mlm_head(sequence, self.model.encoder.embeddings.word_embeddings, mlm_positions)
        return {"mlm_logits": tf.cast(logits, tf.float32)}

    def signatures(self) -> Dict[str, tf.types.experimental.ConcreteFunction]:
        """Signature key -> concrete function, for `tf.saved_model.save(..., signatures=...)`."""
        result = {
            "serving_default": self.serve_text.get_concrete_function(),
            "tokens": self.serve_tokens.get_concrete_function(),
        }
        if self.kind == KIND_CLASSIFIER:
            result["classify"] = self.serve_classify.get_concrete_function()
        if self.kind == KIND_REGRESSOR:
            result["regress"] = self.serve_regress.get_concrete_function()
        if self.kind == KIND_PRETRAINER:
            result["sop"] = self.serve_sop.get_concrete_function()
            result["mlm"] = self.serve_mlm.get_concrete_function()
        return result

    def method_names(self) -> Dict[str, str]:
        """Signature key -> TF Serving method name, for those that are not `predict`."""
        return {k: v for k, v in METHOD_NAMES.items() if k in self.signatures_keys()}

    def signatures_keys(self) -> List[str]:
        keys = ["serving_default", "tokens"]
        keys += {KIND_CLASSIFIER: ["classify"], KIND_REGRESSOR: ["regress"], KIND_PRETRAINER: ["sop", "mlm"]}.get(self.kind, [])
        return keys
