"""`fit` traces the train step once (`albert_tf.train_step_trace`): the optimizer is built first,
so the step's first trace creates no variables and is the one that runs."""

import numpy as np
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertTextClassifier
from albert_tf.modeling import AlbertEncoder
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer
from albert_tf.train_step_trace import build_optimizer


def _classifier(tiny_spm_model):
    config = AlbertConfig(vocab_size=64, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                          intermediate_size=32, max_position_embeddings=32)
    preprocessor = AlbertTokenizerLayer.from_sentencepiece(tiny_spm_model, sequence_length=16)
    return AlbertTextClassifier(AlbertEncoder.from_albert_config(config), preprocessor, num_classes=2)


def _count_traces(model):
    traces = []
    step = model.train_step

    def counted(data):
        traces.append(tf.executing_eagerly())
        return step(data)

    model.train_step = counted
    return traces


def test_fit_traces_the_train_step_once_and_builds_the_optimizer_first(tiny_spm_model):
    texts, labels = ["a good film", "a bad film", "good", "bad"] * 2, np.array([1, 0, 1, 0] * 2)
    model = _classifier(tiny_spm_model)
    traces = _count_traces(model)
    assert not model.optimizer.built
    model.fit(texts, labels, batch_size=4, epochs=2, verbose=0)
    assert traces == [False] and model.optimizer.built
    assert int(model.optimizer.iterations.numpy()) == 4
    # Keras alone traces twice: its optimizer is built inside the first trace.
    keras_alone = _classifier(tiny_spm_model)
    traces = _count_traces(keras_alone)
    tf.keras.Model.fit(keras_alone, keras_alone.make_dataset(texts, labels, batch_size=4, shuffle=False), shuffle=False,
                       verbose=0)
    assert len(traces) == 2


def test_build_optimizer_leaves_unbuilt_models_and_built_optimizers_alone(tiny_spm_model):
    model = _classifier(tiny_spm_model)
    build_optimizer(model)
    variables = list(model.optimizer.variables)
    build_optimizer(model)
    assert model.optimizer.built and list(model.optimizer.variables) == variables
    unbuilt = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    unbuilt.compile(optimizer="adam", loss="mse")
    build_optimizer(unbuilt)  # not built yet: Keras builds both in its trace
    assert not unbuilt.optimizer.built
