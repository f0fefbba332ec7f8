"""`fit` traces the train step once: the optimizer's variables exist before Keras traces it.

Without a tf.distribute strategy on the model (none was given, or the pretraining loop hides it:
`keras_internals.strategy_hidden_from_build`), Keras 3's TensorFlow trainer builds the optimizer
inside the first trace of its train step. A `tf.function` that creates variables while it is
traced is traced a second time for the calls that follow, so every `fit` traced its step twice:
about a third of the CPU time of a short fine-tuning run of a small model. Building the optimizer
first (under the model's strategy, as Keras does when it builds it ahead) makes the same variables
with the same values, and leaves one trace.
"""

from __future__ import annotations


class BuildsOptimizerBeforeFit:
    """Mixin (before `keras.Model`): `fit` builds the compiled optimizer first (`build_optimizer`)."""

    def fit(self, *args, **kwargs):
        build_optimizer(self)
        return super().fit(*args, **kwargs)


def build_optimizer(model) -> None:
    """Builds `model.optimizer` for the model's trainable variables, where both exist and it is
    not built yet; a model that is not built yet is left to Keras (it builds both in the trace)."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or optimizer.built or not model.built:
        return
    with model.distribute_strategy.scope():
        optimizer.build(model.trainable_variables)
