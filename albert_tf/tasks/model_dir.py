"""The model directory: the one layout every producer writes and every loader reads whole.

A fine-tuned model directory (`albert-tf finetune`, `model.finetune`, the pipeline's Trainer, the
Distiller) holds::

    model.keras          the whole raw-text task model: tokenizer, encoder and head
                         (`keras.saving.load_model` reads it after `import albert_tf`)
    task.json            `TaskSpec`: kind, labels, sequence length, tokenizer, the model's record
                         (`model_record`) and the resolved training configuration
    spiece.model | vocab.txt, albert_config.json, eval_results.json, finetuning.json, COMPLETE

An export (`<base>/<name>/<version>/`) carries the same `task.json` in its assets, beside the weight
index that maps its variables back, so a served version is the same model again.

`restore_text_model` is the one reader behind every `from_pretrained`: it gives back the stored
model, head included, and makes a new (seeded) head only when asked. Directories written before
the whole model was kept (`model.keras` held the head) load through their head and `task.json`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import sys
from typing import Any, Dict, Optional

from albert_tf.tasks.spec import TASK_FILE, TaskSpec, TaskSpecError

MODEL_FILE = "model.keras"
# Seeds a new head when the caller gives none: two loads give the same model.
DEFAULT_HEAD_SEED = 0


def _text_model_class(kind: str) -> type:
    """`albert_tf.tasks.family.text_model_class`, an unknown kind a `TaskSpecError` of the file."""
    from albert_tf.tasks.errors import TaskError
    from albert_tf.tasks.family import text_model_class as family_text_model

    try:
        return family_text_model(kind)
    except TaskError as e:
        raise TaskSpecError(str(e)) from None


def model_record(model) -> Dict[str, Any]:
    """`{"class", "config"}` of a raw-text model: its class and plain constructor arguments (the
    encoder and the tokenizer layer left out), what `task.json` keeps to rebuild it."""
    config = model.get_config()
    for key in model.config_layers:
        config.pop(key, None)
    config.pop("trainable", None)
    return {"class": type(model).__name__, "config": json.loads(json.dumps(config))}


def head_weights(task_model) -> list:
    """The head's own weights: those of the id-level task model outside its encoder, in order."""
    encoder = {id(w) for w in task_model.encoder.weights}
    return [w for w in task_model.weights if id(w) not in encoder]


def copy_head_weights(source, target) -> None:
    """Assigns the head weights of the task model `source` to the task model `target` (same kind)."""
    src, dst = head_weights(source), head_weights(target)
    shapes = [tuple(w.shape) for w in src], [tuple(w.shape) for w in dst]
    if shapes[0] != shapes[1]:
        raise ValueError(f"the stored head ({shapes[0]}) does not fit the model's ({shapes[1]})")
    for s, d in zip(src, dst):
        d.assign(s)


def text_model_around(head, preprocessor, spec: TaskSpec):
    """The raw-text model of `spec` on `head`'s encoder and the tokenizer layer `preprocessor`,
    holding `head`'s weights: how a directory or a Distiller student kept as a head is made whole."""
    cls = _text_model_class(spec.kind)
    model = cls(head.encoder, preprocessor, compile=False, **cls.arguments_from_spec(spec, head.get_config()))
    copy_head_weights(head, model.task_model)
    return model


@contextlib.contextmanager
def seeded(seed: int):
    """Keras draws the seeds of new initializers and dropout layers from Python's `random`: seed it
    for what is built inside, and give the caller's state back afterwards."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


# --- reading a stored task ------------------------------------------------------------------------


@dataclasses.dataclass
class StoredTask:
    """What a path holds of a fine-tuned task model.

    Attributes:
        source: The path read.
        class_name: The raw-text model class.
        config: Its plain constructor arguments.
        spec: The `task.json` (None for a bare `.keras` file).
        whole: The loaded raw-text model (model directories and `.keras` files).
        head: The loaded head of a directory written before the whole model was kept.
        export: An export version whose head weights are read through its weight index.
        unknown: Constructor arguments an old export does not record: the caller must give them.
    """

    source: str
    class_name: str
    config: Dict[str, Any]
    spec: Optional[TaskSpec] = None
    whole: Any = None
    head: Any = None
    export: Optional[str] = None
    unknown: tuple = ()

    @property
    def sequence_length(self) -> Optional[int]:
        if self.whole is not None:
            return self.whole.preprocessor.sequence_length
        return self.spec.max_seq_length if self.spec is not None else None


def load_keras_file(path: str):
    """`keras.saving.load_model(path, compile=False)` with every albert_tf class findable."""
    import keras

    from albert_tf.checkpoints.any_format import register_saved_classes

    register_saved_classes()
    return keras.saving.load_model(path, compile=False)


def _is_text_model(obj) -> bool:
    """A raw-text model (`AlbertTextTask`: tokenizer layer and head), not a head alone; known by its
    parts, as `albert_tf.tasks.text_task` builds on this module."""
    return hasattr(obj, "preprocessor") and hasattr(obj, "task_model") and hasattr(obj, "adopt_spec")


def _from_spec(source: str, spec: TaskSpec, head_config: Dict[str, Any], **parts) -> StoredTask:
    if spec.model is not None:
        return StoredTask(source, spec.model["class"], dict(spec.model["config"]), spec, **parts)
    cls = _text_model_class(spec.kind)
    return StoredTask(source, cls.__name__, cls.arguments_from_spec(spec, head_config), spec, **parts)


def _export_task(version_dir: str) -> Optional[StoredTask]:
    path = os.path.join(version_dir, "assets", TASK_FILE)
    if not os.path.isfile(path):
        return None  # an encoder or pretrainer export, or one without its task: read as an encoder
    from albert_tf.tasks.pretrained import PretrainedNotFoundError
    from albert_tf.weight_index import ExportWeightsError, read_weight_index

    spec = TaskSpec.from_file(path)
    try:
        index = read_weight_index(version_dir)
    except ExportWeightsError as e:
        raise PretrainedNotFoundError(f"{version_dir} is an albert-tf TF Serving export, but {e}") from None
    head = [entry["path"] for entry in index["variables"] if entry.get("encoder") is None and entry.get("path")]
    stored = _from_spec(version_dir, spec, {"name": head[0].split("/")[0] if head else None}, export=version_dir)
    if spec.model is None and "pooling" in stored.config:
        # An export older than the model record: the head's pooling is in no file of it.
        stored.config.pop("pooling")
        stored.unknown = ("pooling",)
    return stored


def read_stored_task(path) -> Optional[StoredTask]:
    """The fine-tuned task model stored at `path` (a model directory, its `model.keras`, a `.keras`
    file of a raw-text model, or an export / pushed version), None where `path` holds no head (a
    pretraining output, a release checkpoint, an encoder export).

    Raises:
        TaskSpecError: A model directory or export whose `task.json` is unreadable.
    """
    from albert_tf.weight_index import is_export

    path = os.fspath(path)
    if os.path.isfile(path) and path.endswith(".keras"):
        directory = os.path.dirname(path) or "."
        if os.path.basename(path) == MODEL_FILE and os.path.isfile(os.path.join(directory, TASK_FILE)):
            return read_stored_task(directory)
        obj = load_keras_file(path)
        return StoredTask(path, type(obj).__name__, model_record(obj)["config"], whole=obj) if _is_text_model(obj) else None
    if not os.path.isdir(path):
        return None
    if is_export(path):
        return _export_task(path)
    if not (os.path.isfile(os.path.join(path, TASK_FILE)) and os.path.isfile(os.path.join(path, MODEL_FILE))):
        return None
    spec = TaskSpec.read(path)
    obj = load_keras_file(os.path.join(path, MODEL_FILE))
    if _is_text_model(obj):
        obj.adopt_spec(spec)
        return StoredTask(path, type(obj).__name__, model_record(obj)["config"], spec, whole=obj)
    return _from_spec(path, spec, obj.get_config(), head=obj)


def say(message: str) -> None:
    """One line on stderr: what a loader decided that the caller did not ask for in so many words."""
    print(f"albert_tf: {message}", file=sys.stderr, flush=True)


# --- from_pretrained ------------------------------------------------------------------------------


def _resized(preprocessor, sequence_length: int):
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    if sequence_length == preprocessor.sequence_length:
        return preprocessor
    return AlbertTokenizerLayer.from_config({**preprocessor.get_config(), "sequence_length": sequence_length})


def _parts_of(whole, sequence_length: int, dtype):
    """The encoder and tokenizer layer of a loaded raw-text model, in `dtype` and packed to
    `sequence_length` where those differ."""
    from albert_tf.checkpoints.any_format import copy_encoder_weights
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tasks.pretrained import check_sequence_length

    encoder = whole.encoder
    check_sequence_length(sequence_length, encoder.max_position_embeddings)
    if dtype is not None and str(getattr(dtype, "name", dtype)) != encoder.dtype_policy.name:
        source = encoder
        encoder = AlbertEncoder.from_albert_config(source.to_albert_config(), dtype=dtype, name=source.name)
        copy_encoder_weights(source, encoder)
    return encoder, _resized(whole.preprocessor, sequence_length)


def _unchanged(stored: StoredTask, given: Dict[str, Any], sequence_length, dtype, name) -> bool:
    whole = stored.whole
    return (
        all(stored.config.get(k) == v for k, v in given.items())
        and sequence_length in (None, whole.preprocessor.sequence_length)
        and (dtype is None or str(getattr(dtype, "name", dtype)) == whole.encoder.dtype_policy.name)
        and name in (None, whole.name)
    )


def _model_config(cls, config: Dict[str, Any], encoder, preprocessor) -> Dict[str, Any]:
    """The config `cls.from_config` takes: `config` completed by the recipe, on these parts, uncompiled."""
    config = {**cls.complete_arguments(config, encoder), "encoder": encoder, "preprocessor": preprocessor,
              "compile": False}
    config["name"] = config.get("name") or cls.default_name
    return config


def new_head_model(cls, encoder, preprocessor, config: Dict[str, Any], *, seed: Optional[int], why: str, source: str):
    """`cls` on `encoder` and `preprocessor` with a new head built under `seed` (default
    `DEFAULT_HEAD_SEED`), said in one line on stderr."""
    head_seed = DEFAULT_HEAD_SEED if seed is None else seed
    with seeded(head_seed):
        model = cls.from_config(_model_config(cls, config, encoder, preprocessor))
    say(f"{cls.__name__} with a new head (seed {head_seed}; {why}) on the encoder of {source}")
    return model


def _stored_head_model(cls, stored: StoredTask, encoder, preprocessor, config: Dict[str, Any]):
    """`cls` on `encoder` and `preprocessor` holding the stored head's weights."""
    from albert_tf.weight_index import HEAD, load_export_weights

    model = cls.from_config(_model_config(cls, config, encoder, preprocessor))
    if stored.export is not None:
        load_export_weights(stored.export, model.task_model, part=HEAD)
    else:
        copy_head_weights(stored.whole.task_model if stored.whole is not None else stored.head, model.task_model)
    return model


def restore_text_model(cls, path, given: Dict[str, Any], *, new_head: bool = False, seed: Optional[int] = None,
                       compile: bool = True, name: Optional[str] = None, sequence_length: Optional[int] = None,
                       dtype=None, **backbone):
    """The raw-text model `cls` of the checkpoint at `path`: what every `from_pretrained` returns.

    A fine-tuned model (a model directory, its export or pushed version, a `.keras` file of a
    raw-text model) comes back whole: its head, labels, sequence length and settings as stored,
    with `given` (the caller's non-None constructor arguments) on top. A new head is made, seeded
    (`seed`, default `DEFAULT_HEAD_SEED`) and said in one line on stderr, only for a checkpoint
    without one (a pretrained encoder) or with another task's head (`cls` is another class), with
    `new_head=True`, or when `given` changes what the head's weights mean (`cls.head_fields`, e.g.
    another `num_classes`).

    Args:
        backbone: `load_pretrained_backbone`'s `config`, `tokenizer`, `lower_case` and
            `allow_vocab_mismatch`, for checkpoints read through it (not for a whole stored model).
    """
    from albert_tf.tasks.pretrained import load_pretrained_backbone

    path = os.fspath(path)
    given = {k: v for k, v in given.items() if v is not None}
    stored = read_stored_task(path)
    other = stored.class_name if stored is not None and stored.class_name != cls.__name__ else None
    if other is not None:
        # Another task's model: its encoder starts this one, under a new head.
        stored = dataclasses.replace(stored, class_name=cls.__name__, config={}, unknown=())
    changed = [k for k in cls.head_fields if stored is not None and k in given and given[k] != stored.config.get(k)]
    fresh = stored is None or new_head or bool(changed) or other is not None
    missing = [k for k in (stored.unknown if stored is not None and not fresh else ()) if k not in given]
    if missing:
        raise ValueError(
            f"{path} was exported before albert_tf recorded the whole model in assets/task.json, and its "
            f"{', '.join(missing)} is in no file of it: pass {', '.join(f'{k}=' for k in missing)} as it was trained "
            "(the run's summary.json or output says), or export it again from its model directory"
        )
    if not fresh and stored.whole is not None and _unchanged(stored, given, sequence_length, dtype, name):
        model = stored.whole
    else:
        length = sequence_length or (stored.sequence_length if stored is not None else None) or 128
        if stored is not None and stored.whole is not None:
            encoder, preprocessor = _parts_of(stored.whole, length, dtype)
        else:
            encoder, preprocessor, _ = load_pretrained_backbone(path, sequence_length=length, dtype=dtype, **backbone)
        config = {**(stored.config if stored is not None else {}), **given}
        if name:
            config["name"] = name
        if fresh:
            why = (f"the checkpoint holds a fine-tuned {other}" if other
                   else f"{', '.join(changed)} differs from the stored head's" if changed
                   else "new_head=True" if stored is not None else "the checkpoint has no task head")
            model = new_head_model(cls, encoder, preprocessor, config, seed=seed, why=why, source=path)
        else:
            model = _stored_head_model(cls, stored, encoder, preprocessor, config)
    if stored is not None and stored.spec is not None and not fresh:
        model.adopt_spec(stored.spec)
    if compile:
        model.compile()
    return model


def preset_text_model(cls, preset: str, given: Dict[str, Any], *, tokenizer, seed: Optional[int] = None,
                      compile: bool = True, name: Optional[str] = None, sequence_length: Optional[int] = None,
                      lower_case: Optional[bool] = None, dtype=None):
    """`cls` on a randomly initialised encoder of the architecture preset `preset`
    (`albert_tf.config.PRESETS`), its vocabulary the size of `tokenizer`'s (a SentencePiece
    `.model` or WordPiece `vocab.txt`), with a new seeded head: what `from_preset` gives for a
    preset name, said so in one line (albert_tf ships no weights)."""
    from albert_tf.config import load_config
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.tokenization import resolve

    if tokenizer is None:
        raise ValueError(
            f"{preset!r} is an architecture preset without a vocabulary (albert_tf ships no weights): pass tokenizer= "
            "(a SentencePiece .model or a WordPiece vocab.txt), or a model directory or checkpoint path"
        )
    tokenizer = os.fspath(tokenizer)
    preprocessor = resolve.tokenizer_layer(
        resolve.kind_of_file(tokenizer), tokenizer, sequence_length=sequence_length or 128,
        lower_case=True if lower_case is None else lower_case, name="preprocessor",
    )
    config = load_config(preset, vocab_size=preprocessor.vocab_size)
    with seeded(DEFAULT_HEAD_SEED if seed is None else seed):
        encoder = AlbertEncoder.from_albert_config(config, dtype=dtype, name="encoder")
    given = {k: v for k, v in given.items() if v is not None}
    if name:
        given["name"] = name
    model = new_head_model(cls, encoder, preprocessor, given, seed=seed, source=f"the preset {preset!r}",
                           why="randomly initialised: an architecture preset holds no weights")
    if compile:
        model.compile()
    return model


def write_text_model_assets(directory: str, model, training: Optional[Dict[str, Any]] = None, *,
                            pair: bool = False) -> None:
    """The files beside `model.keras` of a raw-text model that was not trained from data files
    (`model.finetune`): its tokenizer file, `albert_config.json` and `task.json` (`pair`: it
    reads text pairs)."""
    from albert_tf.tasks.spec import CONFIG_FILE
    from albert_tf.tokenization.in_graph import SENTENCEPIECE_ASSET_FILE, WORDPIECE_ASSET_FILE

    model.preprocessor.save_assets(directory)
    model.encoder.to_albert_config().to_json_file(os.path.join(directory, CONFIG_FILE))
    name = SENTENCEPIECE_ASSET_FILE if model.preprocessor.is_sentencepiece else WORDPIECE_ASSET_FILE
    model.task_spec(name, training, pair=pair).write(directory)
