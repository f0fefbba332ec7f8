"""The kinds of a task, one vocabulary: each task folder names its kinds (`TaskSpec.kind`), and the
family, the raw-text model, the head, its serving class, the recipe and `export.json` all say
the same names. No list of tasks or kinds exists outside the folders."""

from __future__ import annotations

import os

import pytest

from albert_tf.tasks.family import families, task_family, task_kinds, task_names, text_model_class
from albert_tf.tasks.spec import TaskSpec

TOKENIZER = {"type": "sentencepiece", "file": "spiece.model", "lower_case": True}
TASKS_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "albert_tf", "tasks")


def test_every_task_folder_is_found_and_names_its_kinds():
    import albert_tf.tasks.classification as classification
    import albert_tf.tasks.multiple_choice as multiple_choice
    import albert_tf.tasks.squad as squad
    import albert_tf.tasks.tagging as tagging

    folders = sorted(d for d in os.listdir(TASKS_DIR) if os.path.isfile(os.path.join(TASKS_DIR, d, "family.py")))
    assert folders == ["classification", "multiple_choice", "squad", "tagging"]
    assert sorted(f.__module__.split(".")[2] for f in families()) == folders
    assert sorted(task_kinds()) == sorted([classification.CLASSIFICATION, classification.REGRESSION, tagging.TAGGING,
                                           squad.SQUAD, multiple_choice.MULTIPLE_CHOICE])
    assert len(set(task_names())) == len(task_names()) and len(set(task_kinds())) == len(task_kinds())
    for kind in task_kinds():
        assert type(task_family(TaskSpec("x", kind, None, 16, [], "", TOKENIZER))).kinds.count(kind) == 1


def test_the_old_vocabularies_are_gone():
    import importlib.util

    assert importlib.util.find_spec("albert_tf.kinds") is None
    assert importlib.util.find_spec("albert_tf.tasks.families") is None


@pytest.mark.parametrize("kind", ["classification", "regression", "tagging", "squad", "multiple_choice"])
def test_the_raw_text_model_is_the_task_and_reaches_its_family(kind):
    cls = text_model_class(kind)
    assert cls.kind == kind
    assert kind in cls.family.kinds and cls.family.text_model_class(kind) is cls
    # The model's folder is its family's.
    assert cls.__module__.rsplit(".", 1)[0] == cls.family.__module__.rsplit(".", 1)[0]


def test_a_family_fine_tunes_with_the_recipe_of_its_first_kind():
    from albert_tf.training.finetuning_config import resolve_finetuning_config
    from albert_tf.training.recipes import recommended_recipe

    class Config:
        hidden_size = 128

    for task in ("sst-2", "classification", "conll", "squad-v1", "race"):
        family = task_family(task)
        config = resolve_finetuning_config(family, Config, use_preset=False)
        assert config.recipe == recommended_recipe(Config, family.kinds[0]), task
    # The recipe differs only in the length of a tagging run.
    assert recommended_recipe(Config, "tagging").epochs == 10.0
    assert {recommended_recipe(Config, k).epochs for k in ("classification", "regression", "squad", "multiple_choice")} == {3.0}


def test_models_export_as_their_task_kind(tiny_encoder):
    from albert_tf.export.signatures import SERVING_CLASSES, model_kind
    from albert_tf.tasks.classification import build_task_model
    from albert_tf.tasks.multiple_choice import AlbertForMultipleChoice
    from albert_tf.tasks.squad import AlbertForSquadV1, AlbertForSquadV2
    from albert_tf.tasks.tagging import AlbertForTagging

    models = {
        "classification": build_task_model(tiny_encoder, 2),
        "regression": build_task_model(tiny_encoder, None),
        "tagging": AlbertForTagging(tiny_encoder, num_labels=3),
        "squad_v1": AlbertForSquadV1(tiny_encoder),
        "squad_v2": AlbertForSquadV2(tiny_encoder),
        "multiple_choice": AlbertForMultipleChoice(tiny_encoder),
    }
    for kind, model in models.items():
        assert model_kind(model) == model.export_kind == SERVING_CLASSES[kind].kind == kind
    # SQuAD's two versions serve different signatures: its kind with the version.
    assert {k for k in models if k not in task_kinds()} == {"squad_v1", "squad_v2"}
    assert model_kind(tiny_encoder) == "encoder"


def test_an_old_export_kind_reads_as_today(tmp_path):
    import json

    from albert_tf.weight_index import read_export_info

    for old, new in (("classifier", "classification"), ("regressor", "regression"), ("tagger", "tagging"),
                     ("squad_v2", "squad_v2"), ("encoder", "encoder")):
        (tmp_path / "assets").mkdir(exist_ok=True)
        (tmp_path / "assets" / "export.json").write_text(json.dumps({"kind": old}))
        assert read_export_info(str(tmp_path))["kind"] == new
