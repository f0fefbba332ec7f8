"""Adding a task is adding one folder: a toy task defined only in this file (its head, raw-text
model, serving signatures and family, each from the package's template, as a folder of
`albert_tf/tasks/` would hold them) runs through `finetune`, the model directory,
`from_pretrained`, `evaluate`/`predict` and the export like the package's own tasks, with no
list of tasks or kinds edited anywhere. The README's "Adding a task" section describes it.

The toy task, "keyword": does a text contain the word "good"? One logit per text, a sigmoid.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest

KIND = "keyword"
ROWS = [("1", "the film was good fun"), ("0", "a dull and long film"), ("1", "good acting and a good plot"),
        ("0", "the plot was thin"), ("1", "a good film"), ("0", "dull")]


@contextlib.contextmanager
def _toy_task():
    """Defines the toy task's four classes (registering them, as importing a folder would) and
    removes them from the registries afterwards, so that other tests see the package's tasks."""
    import keras
    import tensorflow as tf
    from keras import ops

    from albert_tf.data.features import examples_dataset
    from albert_tf.data.tables import TextExample, find_split_file, read_table
    from albert_tf.evaluation import majority_class_baseline
    from albert_tf.export import signatures
    from albert_tf.tasks import family as family_module
    from albert_tf.tasks.base import AlbertTaskModel
    from albert_tf.tasks.classification.data import LabelVocab, encode_examples
    from albert_tf.tasks.classification.head import pooled_features
    from albert_tf.tasks.family import TableFamily
    from albert_tf.tasks.spec import TaskSpec
    from albert_tf.tasks.text_task import AlbertTextTask, check_parts, export_text_model, token_inputs

    # --- head.py: the head on token ids -------------------------------------------------------
    @keras.saving.register_keras_serializable(package="albert_tf_toy")
    class AlbertKeywordHead(AlbertTaskModel):
        export_kind = KIND
        reads_pooler = False

        def __init__(self, encoder, dropout=0.1, **kwargs):
            super().__init__(encoder, dropout=dropout, **kwargs)
            self.accuracy = keras.metrics.Mean(name="accuracy")

        def build_head(self):
            return keras.layers.Dense(1, dtype=self.encoder.embeddings.dtype_policy, name="keyword")

        def call_head(self, encoder_outputs, inputs, training=None):
            pooled = self.head_dropout(pooled_features("mean", encoder_outputs, inputs), training=training)
            return {"logits": ops.squeeze(self.head(pooled), -1)}

        def compute_task_loss(self, inputs, outputs):
            labels = ops.cast(ops.reshape(inputs["labels"], (-1,)), "float32")
            return ops.mean(keras.losses.binary_crossentropy(labels, outputs["logits"], from_logits=True))

        def update_task_metrics(self, inputs, outputs):
            labels = ops.cast(ops.reshape(inputs["labels"], (-1,)), "float32")
            self.accuracy.update_state(ops.cast(ops.equal(ops.cast(outputs["logits"] > 0, "float32"), labels), "float32"))

    # --- text_model.py: the task as a user holds it -------------------------------------------
    @keras.saving.register_keras_serializable(package="albert_tf_toy")
    class AlbertTextKeyword(AlbertTextTask):
        kind = KIND
        best_metric = "accuracy"
        default_name = "albert_text_keyword"

        def __init__(self, encoder, preprocessor, dropout=0.1, compile=True, length_bucket=16, task_model_name="keyword",
                     **kwargs):
            check_parts(encoder, preprocessor)
            self.encoder, self.preprocessor = encoder, preprocessor
            self.task_model = AlbertKeywordHead(encoder, dropout=dropout, name=task_model_name)
            inputs = token_inputs()
            super().__init__(inputs=inputs, outputs=self.task_model(inputs)["logits"], **kwargs)
            self.length_bucket, self.dropout = length_bucket, dropout
            if compile:
                self.compile()

        @classmethod
        def from_pretrained(cls, path, **kwargs):
            return cls._restore(path, {}, **kwargs)

        def spec_fields(self):
            return dict(task=KIND, kind=KIND, labels=["0", "1"], metrics=["accuracy"], best_metric="accuracy",
                        columns={"text": "text", "label": "label"})

        def default_loss(self):
            return keras.losses.BinaryCrossentropy(from_logits=True)

        def export(self, export_base, model_name=None, version=None, **kwargs):
            return export_text_model(self, export_base, model_name, version, **kwargs)

        def get_config(self):
            return {**super().get_config(), "dropout": self.dropout}

    # --- serving.py: what TF Serving calls ----------------------------------------------------
    @signatures.register_serving
    class KeywordServing(signatures.ServingModule):
        kind = KIND

        def _token_outputs(self, features):
            logits = tf.cast(self.model(features, training=False)["logits"], tf.float32)
            return {"probability": tf.sigmoid(logits)}

    # --- family.py: the task as `albert-tf finetune / evaluate / predict` run it --------------
    class KeywordFamily(TableFamily):
        tasks = (KIND,)
        kinds = (KIND,)
        text_models = {KIND: AlbertTextKeyword}
        spec_kind_when_reading = KIND
        vocab = LabelVocab(["0", "1"])

        def build_spec(self, settings, config, tokenizer_entry, train_examples):
            return TaskSpec(KIND, KIND, ["0", "1"], config.data.max_seq_length, ["accuracy"], "accuracy", tokenizer_entry,
                            {"text": "text", "label": "label"})

        def _features(self, spec, tokenizer, examples, with_labels=True):
            return encode_examples(examples, tokenizer, seq_length=spec.max_seq_length, label_vocab=self.vocab,
                                   with_labels=with_labels)

        def prepare_data(self, spec, tokenizer, train_examples, dev_examples, eval_batch_size):
            train, dev = self._features(spec, tokenizer, train_examples), self._features(spec, tokenizer, dev_examples)
            constant = majority_class_baseline(dev["labels"], ["accuracy"], label_names=self.vocab.labels)
            return examples_dataset(train), examples_dataset(dev), None, constant

        def build_task_model(self, encoder, spec, *, dropout, pooling=None):
            return AlbertKeywordHead(encoder, dropout=dropout)

        def build_model(self, encoder, preprocessor, spec, *, dropout, pooling=None):
            return AlbertTextKeyword(encoder, preprocessor, dropout=dropout, compile=False, task_model_name=None)

        def split_names(self, spec, data):
            return {"dev": ["dev"], "test": []}

        def read_split(self, spec, data, split, *, on_error="raise", cache=None, table_format=None):
            return read_table(find_split_file(data, split), text_column="text", label_column="label",
                              table_format="tsv", tsv_quoting="csv", on_error=on_error)

        def _probabilities(self, model, spec, tokenizer, examples, batch_size):
            features = self._features(spec, tokenizer, examples, with_labels=False)
            logits = model.predict(features, batch_size=batch_size, verbose=0)
            return 1 / (1 + np.exp(-np.asarray(logits["logits"] if isinstance(logits, dict) else logits, "float64")))

        def evaluate_examples(self, model, spec, tokenizer, examples, batch_size, label="evaluating"):
            p = self._probabilities(model, spec, tokenizer, examples, batch_size)
            return {"accuracy": float(np.mean((p > 0.5) == np.array([e.label == "1" for e in examples])))}

        def predict_examples(self, model, spec, tokenizer, examples, batch_size, label="predicting"):
            return [{"label": str(int(q > 0.5)), "probability": float(q)}
                    for q in self._probabilities(model, spec, tokenizer, examples, batch_size)]

        def prediction_row(self, spec, index, example, record):
            return str(index), record["label"]

        def examples_from_texts(self, spec, texts, texts_b):
            return [TextExample(text, None, None, "<command line>", i + 1, str(i)) for i, text in enumerate(texts)]

        def examples_from_file(self, spec, path):
            return read_table(path, text_column="text", table_format="tsv", tsv_quoting="csv")

    try:
        yield AlbertTextKeyword
    finally:
        family_module._FAMILIES.remove(KeywordFamily)
        signatures.SERVING_CLASSES.pop(KIND, None)


def _write(path, rows):
    path.write_text("label\ttext\n" + "".join(f"{label}\t{text}\n" for label, text in rows), encoding="utf-8")


@pytest.mark.slow
def test_a_task_defined_outside_the_package_runs_end_to_end(tmp_path, tiny_spm_model, tiny_config):
    from albert_tf.export.saved_model import read_export_info
    from albert_tf.tasks import FinetuneSettings, evaluate_model_dir, finetune, predict_model_dir
    from albert_tf.tasks.family import task_kinds, task_names, text_model_class

    data = tmp_path / "data"
    data.mkdir()
    _write(data / "train.tsv", ROWS * 4)
    _write(data / "dev.tsv", ROWS)
    config = tmp_path / "albert_config.json"
    tiny_config.to_json_file(str(config))
    texts = ["a good film", "dull plot"]

    with _toy_task() as AlbertTextKeyword:
        # Defining the family registered the task: the run, the lookup and the loader know it.
        assert KIND in task_names() and KIND in task_kinds() and text_model_class(KIND) is AlbertTextKeyword
        assert AlbertTextKeyword.family.tasks == (KIND,)
        outcome = finetune(FinetuneSettings(
            task=KIND, data=str(data), model_dir=str(tmp_path / "model"), config=str(config), spm_model=tiny_spm_model,
            max_seq_length=16, batch_size=4, num_train_steps=60, quiet=True))
        model_dir = outcome.model_dir
        assert outcome.spec.kind == KIND and {"COMPLETE", "model.keras", "task.json"} <= set(os.listdir(model_dir))

        # from_pretrained restores the whole model; predict / evaluate read the same directory.
        model = AlbertTextKeyword.from_pretrained(model_dir)
        again = AlbertTextKeyword.from_pretrained(model_dir)
        answers = 1 / (1 + np.exp(-model.predict(texts, verbose=0).astype("float64")))
        np.testing.assert_array_equal(answers, 1 / (1 + np.exp(-again.predict(texts, verbose=0).astype("float64"))))
        records = predict_model_dir(model_dir, texts=texts).records
        np.testing.assert_allclose([r["probability"] for r in records], answers, atol=1e-5)
        # It learned the keyword: better than the best constant answer (half the dev texts).
        assert evaluate_model_dir(model_dir, str(data), splits=["dev"])["dev"]["accuracy"] > 0.5

        # The export serves the same answers under the task's own kind.
        result = model.export(str(tmp_path / "serving"), model_name="keyword", check=False)
        assert read_export_info(result.path)["kind"] == KIND
        import tensorflow as tf

        served = tf.saved_model.load(result.path).signatures["serving_default"](text=tf.constant(texts))
        np.testing.assert_allclose(served["probability"].numpy(), answers, atol=1e-5)

    # Gone again with its definitions: the package's own tasks are what is left.
    assert KIND not in task_names()
