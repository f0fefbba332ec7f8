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
from albert_tf.checkpoints.original import (
    CheckpointError,
    LoadReport,
    config_from_original_checkpoint,
    load_original_checkpoint,
    read_original_variables,
    save_original_checkpoint,
)
from albert_tf.checkpoints.huggingface import (
    config_from_huggingface,
    export_huggingface_weights,
    load_huggingface_weights,
    save_huggingface_safetensors,
)
