"""`AlbertQuestionAnswerer`: extractive question answering on raw text, the keras-hub way
(question and context in, the answer and its character span out), SQuAD v1.1 or v2.0, on the
heads of `albert_tf.tasks.squad.head`.

Training converts the texts as `albert-tf finetune --task squad-v1` / `squad-v2` does
(`albert_tf.tasks.squad.data`); `predict` runs the export's in-graph pipeline
(`albert_tf.tasks.squad.serving.QaGraph`), so that it answers what the served model answers.
`fit`, `from_pretrained` and `.keras` saving are those of `albert_tf.tasks.text_task.AlbertTextTask`.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from albert_tf.tasks.squad import SQUAD
from albert_tf.modeling import ENCODER_INPUTS
from albert_tf.tasks.squad.data import SquadExample, convert_examples_to_features, features_to_arrays
from albert_tf.tasks.squad.head import build_squad_model
from albert_tf.tasks.squad.serving import QaGraph, qa_settings
from albert_tf.tasks.text_task import (
    DEFAULT_BATCH_SIZE,
    AlbertTextTask,
    check_parts,
    export_text_model,
    python_tokenizer,
    token_inputs,
)
from albert_tf.tokenization.in_graph import DEFAULT_LENGTH_BUCKET, check_length_bucket


def _is_unanswerable(answer) -> bool:
    """A SQuAD v2 label without an answer: None, or a dict whose `is_impossible` is true (SQuAD's field)."""
    return answer is None or (isinstance(answer, dict) and bool(answer.get("is_impossible", False)))


def _answer_of(answer, context: str, index: int) -> Tuple[str, int]:
    if _is_unanswerable(answer):
        raise ValueError(f"answer {index} is unanswerable: unanswerable questions need version='v2'")
    if isinstance(answer, dict):
        text, start = answer.get("text"), answer.get("answer_start", answer.get("start"))
    elif isinstance(answer, (tuple, list)) and len(answer) == 2:
        text, start = answer
    else:
        text = start = None
    if not isinstance(text, str) or not text or isinstance(start, bool) or not isinstance(start, (int, np.integer)):
        raise ValueError(f"answer {index} must be (text, start) or {{'text', 'answer_start'}}, got {answer!r}")
    if context[int(start): int(start) + len(text)] != text:
        raise ValueError(f"answer {index}: {text!r} is not at character {start} of its context")
    return text, int(start)


def _decoded(values) -> List[str]:
    if isinstance(values, (str, bytes)) or isinstance(values, (tf.data.Dataset, dict)):
        raise ValueError("questions and contexts must be lists of texts")
    out = [v.decode("utf-8") if isinstance(v, bytes) else v for v in list(values)]
    if not out or not all(isinstance(v, str) for v in out):
        raise ValueError("questions and contexts must be non-empty lists of texts (str)")
    return out


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertQuestionAnswerer(AlbertTextTask):
    """Extractive question answering on raw text: question + context in, the answer and its span out.

    `version="v1"` (default) is SQuAD v1.1: every question has an answer in its context. The head
    is the original v1.1 one (`AlbertForSquadV1`, `task_model`): start and end logits for every
    piece. `version="v2"` is SQuAD v2.0, whose questions may have no answer: the head is the
    original v2.0 one (`AlbertForSquadV2`: start, start-conditioned end, and an answerability logit
    that gives each question a null score), as `albert-tf finetune --task squad-v2` trains.
    Training converts `(question, context, answer)` the original way
    (`albert_tf.tasks.squad.data.convert_examples_to_features`: doc-stride windows, labels on the
    answer's pieces, `[CLS]` for windows without it and, for v2, `is_impossible` for them and
    for unanswerable questions). `predict` runs the in-graph QA pipeline of the export
    (`albert_tf.tasks.squad.serving.QaGraph`: the same windows, the answer selection of
    `albert_tf.tasks.squad.spans`, which the Python evaluation calls too (v2: the head's start x
    end beam), answers mapped
    back to the original characters; v2: no answer when the null score, the lowest answerability
    logit over the question's windows, exceeds `null_score_diff_threshold`), so it answers
    exactly what the exported SavedModel serves. SentencePiece vocabularies only (the SQuAD
    conversion is SentencePiece's).

    Inputs: a pair `(questions, contexts)` of equally long lists of texts. Labels for `fit` /
    `evaluate`: one answer per question, `(text, start)` with `start` its character offset in
    the context, or a dict `{"text", "answer_start"}` (SQuAD's fields); for v2 also `None` or
    `{"is_impossible": True}` for a question without an answer. `predict` returns, per
    question, `{"text", "start", "end", "score"}`: the answer and its character span in the
    context (end exclusive; "" and -1 when no legal span was found or, v2, when the question is
    judged unanswerable, as the export's `answer_text` "" with `has_answer` 0; `score` is the
    best span's start + end score either way).

    Compiled by default with the recipe's bias-corrected AdamW and the original loss. v1: the
    mean of the start and end cross-entropies and the accuracy of each (reported as
    `start_logits_accuracy` and `end_logits_accuracy`). v2: `AlbertForSquadV2`'s loss, half the sum
    of the start and end negative log-likelihoods (the end teacher-forced on the gold start)
    plus half the answerability cross-entropy, and the accuracies `start_log_probs_accuracy`,
    `end_log_probs_accuracy` and `cls_logits_accuracy` (answerability). The Keras graph of v2 is
    this training graph: it takes `p_mask` and the gold `start_positions` beside the token ids
    (`make_dataset` supplies them); answers come from `predict`.

    Args:
        encoder: An `AlbertEncoder`.
        preprocessor: The `AlbertTokenizerLayer` (SentencePiece) of the encoder's vocabulary;
            its `sequence_length` is the window length.
        dropout: v1: dropout before the head (0, as the original); v2: dropout of the
            answerability branch (0.1, the original's). None: the version's default.
        doc_stride: Context pieces between the starts of consecutive windows.
        max_query_length: Question pieces kept.
        n_best_size: Start and end candidates searched per window (v1).
        max_answer_length: Longest answer, in pieces.
        compile: Compile with the defaults above.
        length_bucket: See `AlbertTextTask`.
        version: "v1" (SQuAD v1.1) or "v2" (SQuAD v2.0, unanswerable questions), as the CLI's
            `squad-v1` / `squad-v2` tasks and their `task.json` settings name it.
        null_score_diff_threshold: v2: a question has no answer when its null score is greater
            than this (default 0, the export's; `albert-tf finetune` tunes it on dev). Settable
            later as the attribute of the same name. Not for v1.
        **kwargs: `keras.Model` arguments (`name`, ...).

    Example:

    >>> model = AlbertQuestionAnswerer.from_pretrained("albert_base", sequence_length=384)  # doctest: +SKIP
    >>> model.fit((["Who wrote it?"], ["Ada wrote it."]), [("Ada", 0)], epochs=2)  # doctest: +SKIP
    >>> model.predict((["Who wrote it?"], ["Ada wrote it."]))  # doctest: +SKIP
    [{'text': 'Ada', 'start': 0, 'end': 3, 'score': 7.2}]
    >>> v2 = AlbertQuestionAnswerer.from_pretrained("albert_base", sequence_length=384, version="v2")  # doctest: +SKIP
    >>> v2.fit((["Who wrote it?", "Who read it?"], ["Ada wrote it."] * 2), [("Ada", 0), None])  # doctest: +SKIP
    >>> v2.predict((["Who read it?"], ["Ada wrote it."]))  # doctest: +SKIP
    [{'text': '', 'start': -1, 'end': -1, 'score': -0.4}]
    """

    kind = SQUAD

    def __init__(self, encoder, preprocessor, dropout: Optional[float] = None, doc_stride: int = 128,
                 max_query_length: int = 64, n_best_size: int = 20, max_answer_length: int = 30, compile: bool = True,
                 length_bucket: Optional[int] = DEFAULT_LENGTH_BUCKET, version: str = "v1",
                 null_score_diff_threshold: Optional[float] = None, task_model_name: Optional[str] = "squad", **kwargs):
        check_parts(encoder, preprocessor)
        if version == "v1" and null_score_diff_threshold is not None:
            raise ValueError("null_score_diff_threshold is for version='v2' (unanswerable questions)")
        if dropout is None:
            dropout = 0.1 if version == "v2" else 0.0
        settings = qa_settings(dict(doc_stride=doc_stride, max_query_length=max_query_length, n_best_size=n_best_size,
                                    max_answer_length=max_answer_length,
                                    null_score_diff_threshold=null_score_diff_threshold), version)
        if max_query_length + 3 >= preprocessor.sequence_length:
            raise ValueError(
                f"sequence_length {preprocessor.sequence_length} must exceed max_query_length + 3 ({max_query_length + 3})"
            )
        # === Layers ===
        self.encoder = encoder
        self.preprocessor = preprocessor
        # The CLI's head for the version (`AlbertForSquadV1` / `AlbertForSquadV2`; unknown versions raise).
        self.task_model = build_squad_model(encoder, version, dropout=dropout, name=task_model_name)
        # The head reads the sequence output: the pooler gets no gradient.
        encoder.pooler.trainable = False

        # === Functional Model ===
        inputs = token_inputs()
        if version == "v1":
            outputs = self.task_model(inputs)
            outputs = {"start_logits": outputs["start_logits"], "end_logits": outputs["end_logits"]}
        else:
            # The v2 training graph: the end head is teacher-forced on the gold start.
            inputs["p_mask"] = keras.Input(shape=(None,), dtype="int32", name="p_mask")
            inputs["start_positions"] = keras.Input(shape=(), dtype="int32", name="start_positions")
            outputs = self.task_model(inputs)
            outputs = {
                "start_log_probs": outputs["start_log_probs"], "end_log_probs": outputs["end_log_probs"],
                # [batch, 1]: Keras' binary cross-entropy averages over the last axis.
                "cls_logits": keras.ops.expand_dims(outputs["cls_logits"], -1),
            }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.length_bucket = check_length_bucket(length_bucket)

        # === Config ===
        self.version = version
        self.dropout = dropout
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.n_best_size = n_best_size
        self.max_answer_length = max_answer_length
        self.qa_settings = settings
        if compile:
            self.compile()

    @property
    def null_score_diff_threshold(self) -> Optional[float]:
        """v2: the null score above which `predict` and `export` answer nothing (None for v1)."""
        return self.qa_settings["null_score_diff_threshold"] if self.version == "v2" else None

    @null_score_diff_threshold.setter
    def null_score_diff_threshold(self, value: float) -> None:
        if self.version != "v2":
            raise ValueError("null_score_diff_threshold is for version='v2' (unanswerable questions)")
        self.qa_settings = qa_settings(dict(self.qa_settings, null_score_diff_threshold=value), self.version)

    head_fields = ("version",)
    default_name = "albert_question_answerer"

    @classmethod
    def from_pretrained(cls, path, *, sequence_length: Optional[int] = None, dropout: Optional[float] = None,
                        doc_stride: Optional[int] = None, max_query_length: Optional[int] = None,
                        n_best_size: Optional[int] = None, max_answer_length: Optional[int] = None,
                        version: Optional[str] = None, null_score_diff_threshold: Optional[float] = None,
                        new_head: bool = False, seed: Optional[int] = None, compile: bool = True, config=None,
                        tokenizer=None, lower_case: Optional[bool] = None, dtype=None,
                        allow_vocab_mismatch: bool = False, name: Optional[str] = None) -> "AlbertQuestionAnswerer":
        """The QA model stored at `path`, whole (its SQuAD version, settings and tuned v2
        threshold), or a new one on the pretrained encoder there; another `version` than the
        stored one makes a new head (the QA settings and `version` as the class; other arguments as
        `AlbertTextClassifier.from_pretrained`)."""
        given = dict(dropout=dropout, doc_stride=doc_stride, max_query_length=max_query_length,
                     n_best_size=n_best_size, max_answer_length=max_answer_length, version=version,
                     null_score_diff_threshold=null_score_diff_threshold)
        return cls._restore(
            path, given, new_head=new_head, seed=seed, compile=compile, name=name, sequence_length=sequence_length,
            dtype=dtype, config=config, tokenizer=tokenizer, lower_case=lower_case,
            allow_vocab_mismatch=allow_vocab_mismatch,
        )

    @classmethod
    def arguments_from_spec(cls, spec, head_config):
        settings = spec.settings or {}
        version = settings.get("version", "v1")
        reading = {k: settings[k] for k in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length")
                   if settings.get(k) is not None}
        if version == "v2" and settings.get("null_score_diff_threshold") is not None:
            reading["null_score_diff_threshold"] = settings["null_score_diff_threshold"]
        return {**super().arguments_from_spec(spec, head_config), "version": version, **reading}

    @classmethod
    def complete_arguments(cls, config, encoder):
        if config.get("version", "v1") == "v1":
            config = {k: v for k, v in config.items() if k != "null_score_diff_threshold"}
        return config

    def adopt_spec(self, spec) -> None:
        super().adopt_spec(spec)
        threshold = (spec.settings or {}).get("null_score_diff_threshold")
        if self.version == "v2" and threshold is not None:
            self.null_score_diff_threshold = threshold

    def spec_fields(self):
        settings = {"version": self.version, **dict(self.qa_settings)}
        if self.version == "v1":
            settings.pop("null_score_diff_threshold", None)
        metrics = ["exact_match", "f1"] if self.version == "v1" else ["best_f1", "best_exact", "f1", "exact"]
        return dict(task=f"squad-{self.version}", kind=SQUAD, labels=None, metrics=metrics,
                    best_metric="f1" if self.version == "v1" else "best_f1", settings=settings)

    def compile(self, optimizer="auto", loss="auto", *, metrics="auto", **kwargs):
        """As `AlbertTextTask.compile`; the default loss weighs each output by 0.5 (v1: start and
        end; v2: start, end and answerability, `AlbertForSquadV2`'s loss)."""
        if isinstance(loss, str) and loss == "auto":
            kwargs.setdefault("loss_weights", {name: 0.5 for name in self.default_loss()})
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def default_loss(self):
        if self.version == "v1":
            return {
                "start_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "end_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            }
        # The cross-entropy of log-probabilities read as logits is their negative log-likelihood.
        return {
            "start_log_probs": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "end_log_probs": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "cls_logits": keras.losses.BinaryCrossentropy(from_logits=True),
        }

    def default_metrics(self):
        if self.version == "v1":
            return {
                "start_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                "end_logits": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            }
        return {
            "start_log_probs": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            "end_log_probs": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            "cls_logits": [keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0)],
        }

    def _pairs(self, x) -> Tuple[List[str], List[str]]:
        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise ValueError("question answering takes a pair (questions, contexts)")
        questions, contexts = _decoded(x[0]), _decoded(x[1])
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
        return questions, contexts

    def encode(self, x, y=None):
        """The SQuAD features of `(questions, contexts)` (and answers), converted as `albert-tf
        finetune --task squad` (v2: `squad-v2`) does; returns `(arrays, features)`
        (`features_to_arrays`, and the `SquadFeature`s with their `example_index`)."""
        questions, contexts = self._pairs(x)
        if y is not None and len(y) != len(questions):
            raise ValueError(f"{len(y)} answers for {len(questions)} questions")
        examples = []
        for i, (question, context) in enumerate(zip(questions, contexts)):
            if y is not None and self.version == "v2" and _is_unanswerable(y[i]):
                # As `read_squad_examples` reads an `is_impossible` question for training.
                examples.append(SquadExample(str(i), question, context, "", -1, True))
                continue
            text, start = _answer_of(y[i], context, i) if y is not None else (None, None)
            examples.append(SquadExample(str(i), question, context, text, start, False, (text,) if text else ()))
        settings = self.qa_settings
        features, skipped = convert_examples_to_features(
            examples, python_tokenizer(self.preprocessor), is_training=y is not None,
            max_seq_length=self.preprocessor.sequence_length, doc_stride=settings["doc_stride"],
            max_query_length=settings["max_query_length"],
        )
        if skipped:
            raise ValueError(f"question {skipped[0].qas_id}: {skipped[0].reason}")
        return features_to_arrays(features, is_training=y is not None), features

    def make_dataset(self, x, y=None, sample_weight=None, *, batch_size=None, shuffle=False):
        """The batched dataset of the windows of `(questions, contexts)` and their answer
        positions (v2: `p_mask` and the gold start among the inputs, `is_impossible` a label)."""
        arrays, features = self.encode(x, y)
        inputs = {k: arrays[k] for k in ENCODER_INPUTS}
        labels = None
        if self.version == "v2":
            inputs["p_mask"] = arrays["p_mask"]
            if y is not None:
                inputs["start_positions"] = arrays["start_positions"]
                labels = {"start_log_probs": arrays["start_positions"], "end_log_probs": arrays["end_positions"],
                          "cls_logits": arrays["is_impossible"][:, None]}
        elif y is not None:
            labels = {"start_logits": arrays["start_positions"], "end_logits": arrays["end_positions"]}
        weights = None
        if sample_weight is not None:
            per_example = np.asarray(sample_weight, dtype="float32")
            weights = per_example[[f.example_index for f in features]]
        dataset = tf.data.Dataset.from_tensor_slices(keras.utils.pack_x_y_sample_weight(inputs, labels, weights))
        if shuffle:
            dataset = dataset.shuffle(len(features), reshuffle_each_iteration=True)
        return dataset.batch(batch_size or DEFAULT_BATCH_SIZE).prefetch(tf.data.AUTOTUNE)

    def _validation_dataset(self, data, batch_size):
        if not isinstance(data, (tuple, list)) or len(data) not in (2, 3):
            raise ValueError("validation_data must be ((questions, contexts), answers)")
        return self.make_dataset(*data, batch_size=batch_size)

    def predict(self, x, batch_size=None, **kwargs):
        """The answer to each question: `{"text", "start", "end", "score"}` per question, the span
        in characters of its context (end exclusive), found by the export's in-graph pipeline
        (v2: "" and -1 when the null score exceeds `null_score_diff_threshold`).
        Keras `predict` arguments other than `batch_size` are not used."""
        questions, contexts = self._pairs(x)
        answer = self._answer_function()
        size = batch_size or DEFAULT_BATCH_SIZE
        results = []
        for begin in range(0, len(questions), size):
            out = answer(tf.constant(questions[begin: begin + size]), tf.constant(contexts[begin: begin + size]))
            for text, start, end, score in zip(out["answer_text"].numpy(), out["start_char"].numpy(),
                                               out["end_char"].numpy(), out["score"].numpy()):
                results.append({"text": text.decode("utf-8"), "start": int(start), "end": int(end), "score": float(score)})
        return results

    def _answer_function(self):
        """`predict`'s traced `QaGraph`, kept while the head, the tokenizer layer, the settings and
        the bucket stay the same (tracing it was most of a `predict` on a few questions)."""
        settings = (sorted(self.qa_settings.items()), self.length_bucket)
        # Kept out of Keras' attribute tracking: a cache, not a part of the model.
        cached = self.__dict__.get("_answer_cache")
        if cached is None or cached[0] is not self.task_model or cached[1] is not self.preprocessor or cached[2] != settings:
            graph = QaGraph(self.task_model, self.preprocessor, self.qa_settings, length_bucket=self.length_bucket)
            # Without AutoGraph, as in the exported signature (`serving_function`).
            answer = tf.function(graph.__call__, reduce_retracing=True, autograph=False)
            cached = (self.task_model, self.preprocessor, settings, answer)
            object.__setattr__(self, "_answer_cache", cached)
        return cached[3]

    def export(self, export_base, model_name: Optional[str] = None, version: Optional[int] = None, *,
               check: bool = True, **kwargs):
        """Writes the TF Serving SavedModel as `albert-tf export` does for a SQuAD v1 model
        (export kind `squad_v1`) or, with `version="v2"`, a SQuAD v2 model (`squad_v2`, with
        this model's `null_score_diff_threshold`): `serving_default` takes `question` and
        `context` and returns `answer_text`, `start_char`, `end_char`, `score`, `has_answer`,
        `num_windows` (v2 also `null_score`); `tokens` the head's outputs for token ids.
        Arguments as `AlbertTextClassifier.export` (without `labels` and `pair`; `version` is the
        served version number, the SQuAD version being the model's)."""
        return export_text_model(self, export_base, model_name, version, qa_settings=dict(self.qa_settings),
                                 check=check, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({
            "dropout": self.dropout, "doc_stride": self.doc_stride, "max_query_length": self.max_query_length,
            "n_best_size": self.n_best_size, "max_answer_length": self.max_answer_length,
            # A config saved without these is a v1 model's.
            "version": self.version, "null_score_diff_threshold": self.null_score_diff_threshold,
        })
        return config
