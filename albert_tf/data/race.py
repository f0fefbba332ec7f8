"""Moved to `albert_tf.tasks.multiple_choice.data`; its names resolve from here on first use (the data layer imports no task module)."""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

_NAMES = (
    "PathLike", "DEFAULT_MAX_SEQ_LENGTH", "DEFAULT_MAX_QA_LENGTH", "DEFAULT_NUM_CHOICES", "LEVELS", "CHOICE_INPUTS",
    "RaceDataError", "RaceExample", "RaceFeature", "read_race_examples", "choice_texts", "convert_race_example",
    "convert_race_examples", "race_features_to_arrays", "make_race_dataset",
)

__all__ = list(_NAMES)
__getattr__, __dir__ = _lazy_attributes(
    __name__, {name: "albert_tf.tasks.multiple_choice.data" for name in _NAMES}, globals()
)
