"""Moved to `albert_tf.tasks.squad.data`; its names resolve from here on first use (the data layer imports no task module)."""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

_NAMES = (
    "PathLike", "DEFAULT_MAX_SEQ_LENGTH", "DEFAULT_DOC_STRIDE", "DEFAULT_MAX_QUERY_LENGTH", "FIRST_UNIQUE_ID",
    "MODEL_INPUTS", "TRAINING_LABELS", "SquadDataError", "SquadExample", "SkippedQuestion", "SquadFeature",
    "load_squad_json", "read_squad_examples", "convert_examples_to_features", "answer_text_of_feature",
    "features_to_arrays", "make_squad_dataset", "write_squad_tfrecord", "read_squad_tfrecord",
)

__all__ = list(_NAMES)
__getattr__, __dir__ = _lazy_attributes(__name__, {name: "albert_tf.tasks.squad.data" for name in _NAMES}, globals())
