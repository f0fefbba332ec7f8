"""`NestedLayersConfig`: the one `get_config` / `from_config` of the models built around sub-layers.

`AlbertPretrainer`, the id-level task models (`AlbertTaskModel`) and the raw-text models
(`AlbertTextTask`) take their encoder (and, for raw text, the tokenizer layer) as constructor
arguments. Their config holds each such sub-layer as a nested Keras object
(`keras.saving.serialize_keras_object`), then the plain constructor arguments, then `name` and
`trainable`; `from_config` deserializes the nested ones and calls the constructor. Arguments a
config lacks take the constructor's defaults (configs saved before an argument existed, such as
`length_bucket` of the raw-text models, load with it); a sub-layer that is already an object, not
a dict, is passed on as it is.

Only Keras is imported here, so any model module can mix it in without an import cycle.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import keras


class NestedLayersConfig:
    """Mixin (before `keras.Model`): `get_config` / `from_config` from two class attributes.

    Attributes:
        config_layers: The constructor arguments that are Keras layers, kept in the config as
            nested serialized objects (in this order, first in the config).
        config_fields: The plain constructor arguments, read from the attributes of the same name
            (after the layers, before `name` and `trainable`). Subclasses with more arguments extend
            `get_config` (`super().get_config()` then their own keys).
    """

    config_layers: Tuple[str, ...] = ("encoder",)
    config_fields: Tuple[str, ...] = ()

    def get_config(self) -> Dict[str, Any]:
        config = {key: keras.saving.serialize_keras_object(getattr(self, key)) for key in self.config_layers}
        config.update((key, getattr(self, key)) for key in self.config_fields)
        config["name"] = self.name
        config["trainable"] = self.trainable
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in cls.config_layers:
            if isinstance(config.get(key), dict):
                config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)
