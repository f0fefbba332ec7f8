"""The per-task battery (tests/_task_battery.py) applied to every raw-text task model.

One `TaskCase` per family: `AlbertTextClassifier`, `AlbertTextRegressor` (text pairs),
`AlbertTextTagger`, `AlbertMultipleChoice` and `AlbertQuestionAnswerer` (SQuAD v1 and v2), on the
session's tiny config and SentencePiece model. Each family's model is trained and exported once
for the session (conftest.py's `task_family`, shared with tests/tasks/test_round_trip.py) and
shared by its checks; a module-scoped fixture parametrized by family makes pytest run one family's
checks after another.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _task_battery as battery  # noqa: E402
from _task_cases import BAD_INPUTS, CASES  # noqa: E402


# --- one trained model (and export) per family, shared by the checks -----------------------------------


@pytest.fixture(scope="module", params=list(CASES))
def trained(request, task_family):
    return task_family(request.param)


@pytest.fixture(scope="module")
def exported(trained):
    return battery.load_export(trained)


@pytest.mark.slow
def test_fit_on_raw_strings_lowers_the_loss(trained):
    battery.check_fit_lowers_the_loss(trained)


@pytest.mark.slow
def test_keras_round_trip_answers_identically(trained, tmp_path):
    battery.check_keras_round_trip(trained, tmp_path)


@pytest.mark.slow
def test_export_writes_serving_default(exported):
    battery.check_export(exported)


@pytest.mark.slow
def test_served_answers_equal_predict(exported):
    battery.check_served_answers_equal_predict(exported)


@pytest.mark.slow
def test_the_compiled_loss_is_the_heads(trained):
    battery.check_loss_is_the_heads(trained)


@pytest.mark.parametrize("name", sorted(CASES))
def test_it_trains_as_its_head_on_features_with_the_labels_inside(name, tiny_config, tiny_spm_model):
    battery.check_trains_as_its_head(CASES[name], tiny_config, tiny_spm_model)


# Module scope: `trained` keeps its one instance per family (a function-scoped parameter would retrain it).
@pytest.mark.parametrize("trained, bad", BAD_INPUTS, indirect=["trained"], scope="module")
@pytest.mark.slow
def test_bad_input_is_one_clear_error(trained, bad):
    battery.check_bad_input(trained, bad)


# The template's datasets (the classifier), the tagger's and SQuAD v2's (several outputs): the other
# families read their data as the classifier does.
@pytest.mark.parametrize("name", ["classifier", "tagger", "squad_v2"])
@pytest.mark.slow
def test_finetune_runs_the_cli_driver(name, tiny_config, tiny_spm_model, tmp_path):
    battery.check_finetune_runs_the_driver(CASES[name], tiny_config, tiny_spm_model, tmp_path / "run")
