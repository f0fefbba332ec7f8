"""The kinds of a task, one vocabulary (`albert_tf.kinds`): the task families, the recipes, the
export and the distillation speak it, and its maps between task, recipe and export kinds hold
for the models each family builds."""

from __future__ import annotations

import pytest

from albert_tf import kinds
from albert_tf.tasks.families import FAMILIES, TASKS, model_export_kind, task_family
from albert_tf.tasks.spec import TaskSpec

TOKENIZER = {"type": "sentencepiece", "file": "spiece.model", "lower_case": True}


def test_the_vocabularies_are_distinct_and_the_maps_cover_them():
    for vocabulary in (kinds.KINDS, kinds.SPEC_KINDS, kinds.RECIPE_KINDS):
        assert len(set(vocabulary)) == len(vocabulary)
    assert set(kinds.QA_KINDS) <= set(kinds.KINDS)
    assert set(kinds.SPEC_TO_RECIPE) == set(kinds.SPEC_KINDS) == set(kinds.SPEC_TO_EXPORT)
    assert set(kinds.SPEC_TO_RECIPE.values()) == set(kinds.RECIPE_KINDS)
    exported = {kind for targets in kinds.SPEC_TO_EXPORT.values() for kind in targets}
    # Every export kind but the task-less encoder and pretrainer is some task kind's.
    assert exported == set(kinds.KINDS) - {kinds.KIND_ENCODER, kinds.KIND_PRETRAINER}


def test_the_old_homes_re_export_the_same_values():
    from albert_tf.distillation.settings import DISTILLABLE_KINDS
    from albert_tf.export import signatures
    from albert_tf.export.saved_model import EXPORTABLE_TASK_KINDS
    from albert_tf.export.tflite import TFLITE_KINDS
    from albert_tf.training.recipes import TASK_KINDS

    assert signatures.KINDS == kinds.KINDS == (
        "classifier", "regressor", "encoder", "pretrainer", "squad_v1", "squad_v2", "tagger", "multiple_choice")
    assert signatures.QA_KINDS == ("squad_v1", "squad_v2")
    # A task's serving class registers when its head is imported (the registry of the families
    # imports no head, to stay light).
    import albert_tf.tasks.classification.head  # noqa: F401
    import albert_tf.tasks.multiple_choice.head  # noqa: F401
    import albert_tf.tasks.squad.head  # noqa: F401
    import albert_tf.tasks.tagging.head  # noqa: F401

    assert set(signatures.SERVING_CLASSES) == set(kinds.KINDS)
    assert {cls.kind for cls in signatures.SERVING_CLASSES.values()} == set(kinds.KINDS)
    assert EXPORTABLE_TASK_KINDS == ("classification", "regression", "squad", "tagging", "multiple_choice")
    assert TASK_KINDS == kinds.RECIPE_KINDS == ("classification", "regression", "tagging")
    assert set(DISTILLABLE_KINDS) <= set(kinds.SPEC_KINDS)
    assert set(TFLITE_KINDS) <= set(kinds.KINDS)


def test_every_task_kind_has_one_family_and_every_task_a_known_kind():
    by_kind = {kind: family for family in FAMILIES for kind in family.kinds}
    assert sorted(kind for family in FAMILIES for kind in family.kinds) == sorted(kinds.SPEC_KINDS)
    for kind in kinds.SPEC_KINDS:
        assert type(task_family(TaskSpec("x", kind, None, 16, [], "", TOKENIZER))) is by_kind[kind]
    for task in TASKS:
        assert set(type(task_family(task)).kinds) <= set(kinds.SPEC_KINDS)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_family_fine_tunes_with_the_recipe_of_its_kinds(family):
    from albert_tf.training.recipes import recommended_recipe

    class Config:
        hidden_size = 128

    assert family.recipe_kind in kinds.RECIPE_KINDS
    for kind in family.kinds:
        # Classification and regression share a family (and a recipe): compare what the recipes are.
        assert recommended_recipe(Config, family.recipe_kind) == recommended_recipe(Config, kinds.SPEC_TO_RECIPE[kind])


def test_text_models_fine_tune_with_their_task_kind_recipe():
    import albert_tf as text_models

    expected = {
        "AlbertTextClassifier": kinds.SPEC_CLASSIFICATION, "AlbertTextRegressor": kinds.SPEC_REGRESSION,
        "AlbertTextTagger": kinds.SPEC_TAGGING, "AlbertMultipleChoice": kinds.SPEC_MULTIPLE_CHOICE,
        "AlbertQuestionAnswerer": kinds.SPEC_SQUAD,
    }
    for name, kind in expected.items():
        assert getattr(text_models, name).recipe_task == kinds.SPEC_TO_RECIPE[kind], name


def test_each_family_exports_its_models_as_its_kinds_map_says(tiny_encoder):
    from albert_tf.export.signatures import model_kind
    from albert_tf.tasks.classification import build_task_model
    from albert_tf.tasks.multiple_choice import MultipleChoiceModel
    from albert_tf.tasks.squad import SquadV1Model, SquadV2Model
    from albert_tf.tasks.tagging import AlbertTokenClassifier

    models = {
        kinds.SPEC_CLASSIFICATION: [build_task_model(tiny_encoder, 2)],
        kinds.SPEC_REGRESSION: [build_task_model(tiny_encoder, None)],
        kinds.SPEC_TAGGING: [AlbertTokenClassifier(tiny_encoder, num_labels=3)],
        kinds.SPEC_SQUAD: [SquadV1Model(tiny_encoder), SquadV2Model(tiny_encoder)],
        kinds.SPEC_MULTIPLE_CHOICE: [MultipleChoiceModel(tiny_encoder)],
    }
    assert set(models) == set(kinds.SPEC_KINDS)
    for spec_kind, built in models.items():
        family = type(task_family(TaskSpec("x", spec_kind, None, 16, [], "", TOKENIZER)))
        found = [family.export_kind(model) for model in built]
        assert found == [model_export_kind(model) for model in built] == [model_kind(model) for model in built]
        assert tuple(found) == kinds.SPEC_TO_EXPORT[spec_kind], spec_kind
        assert set(found) <= set(kinds.KINDS)
    assert model_kind(tiny_encoder) == kinds.KIND_ENCODER and model_export_kind(tiny_encoder) is None
