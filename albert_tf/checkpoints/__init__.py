"""Checkpoint interop for ALBERT: original TF1, Hugging Face, KerasHub and TF Model Garden weights."""

from albert_tf.checkpoints.keras_hub import (
    KerasHubConversionError,
    config_from_keras_hub,
    encoder_from_keras_hub,
    load_keras_hub_backbone,
    save_to_keras_hub_backbone,
    to_keras_hub_backbone,
)
from albert_tf.checkpoints.tf_models import (
    TfModelsConversionError,
    config_from_official,
    encoder_from_official,
    load_official_encoder,
    save_to_official_encoder,
    to_official_encoder,
)
