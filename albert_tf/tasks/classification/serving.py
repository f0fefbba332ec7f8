"""The serving modules of a classifier and a regressor (export kinds `classification`, `regression`).

`ClassifierServing`: `serving_default` takes raw `text` (and `text_b` for pairs) and returns
`probabilities`, `logits`, `label_id` and `label`; `tokens` the same from token ids; `classify`
takes serialized `tf.Example`s (`inputs`) and returns `classes` and `scores` (TF Serving's
Classify API). `RegressorServing`: `serving_default` / `tokens` return `score`; `regress` takes
serialized `tf.Example`s and returns `outputs` (TF Serving's Regress API). Both register
themselves with `albert_tf.export.signatures.register_serving`.
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.export.signatures import CLASSIFY_METHOD, REGRESS_METHOD, ServingModule, register_serving, serving_function, string_spec
from albert_tf.tasks.classification import CLASSIFICATION, REGRESSION


@register_serving
class ClassifierServing(ServingModule):
    """An `AlbertForClassification`: class probabilities and labels, plus TF Serving's Classify API."""

    kind = CLASSIFICATION
    extra_signatures = {"classify": CLASSIFY_METHOD}

    def _check_labels(self, labels):
        num_labels = int(self.model.num_labels)
        labels = [str(i) for i in range(num_labels)] if labels is None else [str(l) for l in labels]
        if len(labels) != num_labels:
            raise ValueError(f"{len(labels)} labels for a classifier of {num_labels} classes")
        if len(set(labels)) != len(labels):
            raise ValueError(f"labels must be distinct, got {labels}")
        return labels

    def row_outputs(self):
        classes = [None, int(self.model.num_labels)]
        return {"probabilities": tf.TensorSpec(classes, tf.float32), "logits": tf.TensorSpec(classes, tf.float32),
                "label_id": tf.TensorSpec([None], tf.int32), "label": tf.TensorSpec([None], tf.string)}

    def _token_outputs(self, features):
        logits = tf.cast(self.model(features, training=False)["logits"], tf.float32)
        label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "logits": logits,
            "label_id": label_id,
            "label": tf.gather(self._label_table, label_id),
        }

    def _build_functions(self):
        super()._build_functions()
        self.serve_classify = serving_function(self._classify, input_signature=[string_spec("inputs")])

    def _classify(self, inputs):
        outputs = self._from_text(*self._parse_examples(inputs))
        batch = tf.shape(inputs)[0]
        classes = tf.tile(self._label_table[None, :], tf.stack([batch, 1]))
        return {"classes": classes, "scores": outputs["probabilities"]}


@register_serving
class RegressorServing(ServingModule):
    """An `AlbertForRegression`: one `score` per input, plus TF Serving's Regress API."""

    kind = REGRESSION
    extra_signatures = {"regress": REGRESS_METHOD}

    def row_outputs(self):
        return {"score": tf.TensorSpec([None], tf.float32)}

    def _token_outputs(self, features):
        score = tf.cast(self.model(features, training=False)["predictions"], tf.float32)
        return {"score": tf.reshape(score, [-1])}

    def _build_functions(self):
        super()._build_functions()
        self.serve_regress = serving_function(self._regress, input_signature=[string_spec("inputs")])

    def _regress(self, inputs):
        return {"outputs": self._from_text(*self._parse_examples(inputs))["score"]}
