"""The kinds of a task, in one vocabulary: every module names a kind by these constants.

What a task is has four names:

* the task name (`--task`, `albert_tf.tasks.families.TASKS`): `cola`, `conll`, `squad-v1`,
  `race`, ... -- many per kind; each family lists its own (the generic table tasks
  `classification` / `regression` are named after their task kind). Not defined here.
* the task kind (`TaskSpec.kind`, stored in `task.json`; `SPEC_KINDS`): what a fine-tuned
  model directory holds; it picks the task family (`TaskFamily.kinds`).
* the recipe kind (`albert_tf.training.recipes.recommended_recipe`'s `task`, a family's
  `recipe_kind`, a text model's `recipe_task`; `RECIPE_KINDS`): the shape of the training
  target. SQuAD and RACE fine-tune with the classification recipe (`SPEC_TO_RECIPE`).
* the export kind (`export.json`'s `kind`, a serving module's `kind`; `KINDS`): which serving
  signatures a SavedModel has. A task kind exports as one export kind, SQuAD as one per version
  (`SPEC_TO_EXPORT`); an encoder and a pretrainer export without any task.

This module imports nothing of `albert_tf`, so that any module may import it.
"""

# --- export kinds: `export.json`'s "kind" (`albert_tf.export.signatures.SERVING_CLASSES`) ---------

KIND_CLASSIFIER = "classifier"
KIND_REGRESSOR = "regressor"
KIND_ENCODER = "encoder"
KIND_PRETRAINER = "pretrainer"
KIND_SQUAD_V1 = "squad_v1"
KIND_SQUAD_V2 = "squad_v2"
KIND_TAGGER = "tagger"
KIND_MULTIPLE_CHOICE = "multiple_choice"
KINDS = (KIND_CLASSIFIER, KIND_REGRESSOR, KIND_ENCODER, KIND_PRETRAINER, KIND_SQUAD_V1, KIND_SQUAD_V2, KIND_TAGGER,
         KIND_MULTIPLE_CHOICE)
QA_KINDS = (KIND_SQUAD_V1, KIND_SQUAD_V2)

# --- task kinds: `TaskSpec.kind` in `task.json` ----------------------------------------------------

SPEC_CLASSIFICATION = "classification"
SPEC_REGRESSION = "regression"
SPEC_SQUAD = "squad"
SPEC_TAGGING = "tagging"
SPEC_MULTIPLE_CHOICE = "multiple_choice"
SPEC_KINDS = (SPEC_CLASSIFICATION, SPEC_REGRESSION, SPEC_SQUAD, SPEC_TAGGING, SPEC_MULTIPLE_CHOICE)

# --- recipe kinds: `recommended_recipe(config, task)` ----------------------------------------------

RECIPE_CLASSIFICATION = "classification"
RECIPE_REGRESSION = "regression"
RECIPE_TAGGING = "tagging"
RECIPE_KINDS = (RECIPE_CLASSIFICATION, RECIPE_REGRESSION, RECIPE_TAGGING)

# --- how they map ---------------------------------------------------------------------------------

# A task kind -> the recipe kind its models fine-tune with.
SPEC_TO_RECIPE = {
    SPEC_CLASSIFICATION: RECIPE_CLASSIFICATION,
    SPEC_REGRESSION: RECIPE_REGRESSION,
    SPEC_SQUAD: RECIPE_CLASSIFICATION,
    SPEC_TAGGING: RECIPE_TAGGING,
    SPEC_MULTIPLE_CHOICE: RECIPE_CLASSIFICATION,
}

# A task kind -> the export kinds its models export as.
SPEC_TO_EXPORT = {
    SPEC_CLASSIFICATION: (KIND_CLASSIFIER,),
    SPEC_REGRESSION: (KIND_REGRESSOR,),
    SPEC_SQUAD: QA_KINDS,
    SPEC_TAGGING: (KIND_TAGGER,),
    SPEC_MULTIPLE_CHOICE: (KIND_MULTIPLE_CHOICE,),
}
