"""Files saved before a class was renamed still load: the old names, read as the new ones.

A `.keras` file names a class twice: its registered name in `config.json`
("albert_tf>AlbertClassifier", which `albert_tf.keras_registry` reads as the new class) and, where
the object sits in a list (a Functional model's `layers`: `AlbertTextClassifier.task_model`), the
class name in snake case in its weights' paths ("layers/albert_classifier/head/vars/0"). Keras
offers no per-class hook for the second, so `install` makes Keras' weight stores look a path up
under its old form when the new one is missing (reading only; files are written with today's
names). An export's weight index (`albert_tf.weight_index`) records the Keras names of a head built
without a name, which also followed its class: `current_layer_path` reads them as today's.
"""

from __future__ import annotations

import functools
import re
from typing import List

# The id-level task models took one pattern (`AlbertFor<Task>`, Hugging Face's), away from
# keras-hub's `AlbertClassifier`, a raw-text model there: old name -> new name.
RENAMED = {
    "AlbertClassifier": "AlbertForClassification",
    "AlbertRegressor": "AlbertForRegression",
    "AlbertTokenClassifier": "AlbertForTagging",
    "SquadV1Model": "AlbertForSquadV1",
    "SquadV2Model": "AlbertForSquadV2",
    "MultipleChoiceModel": "AlbertForMultipleChoice",
}


def snake_case(name: str) -> str:
    """Keras' `naming.to_snake_case`: a class's name in weight paths and default layer names."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


_OLD_SEGMENT = {snake_case(new): snake_case(old) for old, new in RENAMED.items()}
_NEW_SEGMENT = {old: new for new, old in _OLD_SEGMENT.items()}


def legacy_weight_paths(path: str) -> List[str]:
    """The path the weights at `path` had before the rename (each renamed class's snake-case
    segment, with Keras' `_1`, `_2` for repeats, in its old form); [] when nothing was renamed."""
    changed, segments = False, []
    for segment in path.split("/"):
        base, _, number = segment.rpartition("_")
        if segment in _OLD_SEGMENT:
            segment, changed = _OLD_SEGMENT[segment], True
        elif base in _OLD_SEGMENT and number.isdigit():
            segment, changed = f"{_OLD_SEGMENT[base]}_{number}", True
        segments.append(segment)
    return ["/".join(segments)] if changed else []


def current_layer_path(path: str) -> str:
    """`path` (a variable path without Keras' `_1` suffixes) with the default names of renamed
    classes' instances ("albert_classifier/classifier/kernel") in today's form."""
    return "/".join(_NEW_SEGMENT.get(segment, segment) for segment in path.split("/"))


def _read_legacy_paths(store_class) -> None:
    get, has_path = store_class.__dict__["get"], store_class.__dict__["has_path"]
    if getattr(get, "reads_legacy_paths", False):
        return

    def resolve(store, path):
        if path and not has_path(store, path):
            for legacy in legacy_weight_paths(path):
                if has_path(store, legacy):
                    return legacy
        return path

    def get_(self, path):
        return get(self, resolve(self, path))

    def has_path_(self, path):
        return has_path(self, resolve(self, path))

    get_.reads_legacy_paths = True
    store_class.get, store_class.has_path = functools.wraps(get)(get_), functools.wraps(has_path)(has_path_)


def install() -> None:
    """Keras' `.keras` / `.weights.h5` readers find weights saved under the old names (idempotent)."""
    from keras.src.saving import saving_lib

    from albert_tf.keras_internals import WEIGHT_STORES

    for name in WEIGHT_STORES:
        _read_legacy_paths(getattr(saving_lib, name))
