"""Loss helpers shared by the pretraining model and the task models."""

from __future__ import annotations

import tensorflow as tf


def scale_loss_for_replicas(loss):
    """Divides by the replica count: tf.distribute sums replicas' gradients, so the sum becomes the mean."""
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return loss / replicas if replicas > 1 else loss
