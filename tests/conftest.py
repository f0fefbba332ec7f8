"""Shared test set-up: the `slow` marker, pytest-xdist's scheduling and session fixtures (a tiny
config, encoder and tokenizer, one tiny pipeline run).

`pytest -n auto -m "not slow"` is the fast loop (about a minute and a half on 2 cores); CI runs
everything. A test is slow when it is marked `@pytest.mark.slow` (it trains a model to see it
learn, exports and serves a SavedModel, or reads a fixture that does: more than about 2 s on one
core), lives in one of `SLOW_MODULES` (end-to-end and benchmark-script tests), starts another
Python process (its source mentions `subprocess` or `sys.executable`: it pays TensorFlow's import
again and usually trains something), or reads the shared pipeline run (the first such test runs
the whole pipeline).
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
# The helper modules (`_cli_helpers`, ...) live here, beside the test folders that import them.
for path in (REPO, TESTS):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist workers share the cores: each gets its share of TensorFlow's op threads (set
    # before TensorFlow loads; the processes tests start inherit it), where each would otherwise
    # start a thread per core and they would preempt one another.
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(max(1, _cores() // _workers)))

# OpenVINO's converter sends usage telemetry unless CI is set, each event from a fork of the
# process (of a TensorFlow process: dozens of forks a conversion, about half of the OpenVINO
# tests' CPU, all failing offline anyway); NNCF sends none under pytest. Set before any test
# converts, and inherited by the processes tests start (the frontier benchmark's exports).
os.environ.setdefault("CI", "true")

# A 64-piece SentencePiece model (unigram, lower-cased, trained with seed 0 on the sentences of
# `TINY_SPM_CORPUS`), committed so that tests need not train one.
TINY_SPM_MODEL = TESTS / "fixtures" / "tiny_spm.model"
TINY_SPM_CORPUS = TESTS / "fixtures" / "tiny_spm_corpus.txt"
# Two more, made by tests/fixtures/make_test_models.py: `squad_spm.model` (114 pieces of the SQuAD / RACE
# test sentences, so their answers are whole pieces) and `numbers_spm.model` (90 pieces with
# digit-comma pieces such as "0,", for the tokenizers' digit-comma rule).
SQUAD_SPM_MODEL = TESTS / "fixtures" / "squad_spm.model"
NUMBERS_SPM_MODEL = TESTS / "fixtures" / "numbers_spm.model"

SLOW_MODULES = {
    "test_pipeline_e2e",
    "test_benchmark_scripts_finetune",
    "test_benchmark_scripts_pretraining",
    "test_benchmark_scripts_recipes",
}
_PROCESS_WORDS = ("subprocess", "sys.executable")
# `-n auto` (`pytest_xdist_auto_num_workers`): the memory a worker may need, and a cap (past it the
# shared pipeline run, which one worker makes, is the longest path).
WORKER_MEMORY_GIB = 4
MAX_WORKERS = 8
# The modules whose tests read the shared pipeline run, and those that must run beside them
# (tests/test_first_hour_main_job.py: the user's next steps on the run's models): one worker's work under -n.
SHARED_RUN_MODULES = {
    "test_pipeline_e2e", "test_pipeline_warm_start", "test_pipeline_distill", "test_pipeline_reproducible",
    "test_first_hour_main_job",
}
SHARED_RUN_GROUP = "shared pipeline run"
# The modules that read the task families' shared models (the `task_family` fixture): one unit of
# work under -n, so that one worker trains and exports each family once for both.
TASK_FAMILY_MODULES = {"test_task_battery", "test_round_trip", "test_export_precision"}
TASK_FAMILY_GROUP = "task families"
# Units of work made of several modules, each module's by its name.
_GROUPS = {**{module: SHARED_RUN_GROUP for module in SHARED_RUN_MODULES},
           **{module: TASK_FAMILY_GROUP for module in TASK_FAMILY_MODULES}}


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: end-to-end, subprocess or benchmark-script test (deselect with -m 'not slow')")


def _mentions_a_process(source: str) -> bool:
    return any(word in source for word in _PROCESS_WORDS)


def _starts_a_process(function) -> bool:
    try:
        return _mentions_a_process(inspect.getsource(function))
    except (OSError, TypeError):
        return False


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if getattr(item, "module", None) else ""
        function = getattr(item, "function", None)
        shares_the_run = "shared_pipeline_run" in getattr(item, "fixturenames", ())
        if module in SLOW_MODULES or shares_the_run or (function is not None and _starts_a_process(function)):
            item.add_marker(pytest.mark.slow)
        if shares_the_run and module not in SHARED_RUN_MODULES:
            raise pytest.UsageError(f"{item.nodeid} reads the shared pipeline run: add {module} to SHARED_RUN_MODULES "
                                    f"in tests/conftest.py (its worker makes the run)")
        if "task_family" in getattr(item, "fixturenames", ()) and module not in TASK_FAMILY_MODULES:
            raise pytest.UsageError(f"{item.nodeid} reads the task families' models: add {module} to "
                                    f"TASK_FAMILY_MODULES in tests/conftest.py (one worker makes them)")


def _heavy(config, scope: str) -> bool:
    """Whether the test module `scope` (a path from the root) is in `SLOW_MODULES` or starts
    processes; a group of modules (`_GROUPS`) is."""
    if scope in _GROUPS.values():
        return True
    path = config.rootpath / scope
    if path.stem in SLOW_MODULES:
        return True
    try:
        return _mentions_a_process(path.read_text(encoding="utf-8"))
    except OSError:
        return False


def pytest_xdist_make_scheduler(config, log):
    """`-n` with the default `--dist load`: each test module is one unit of work, so a module-scoped
    fixture (a trained tiny model, its export) is built by one worker, not by each worker that gets
    one of its tests. The modules of `SHARED_RUN_MODULES` are one unit, so one worker makes the
    shared run and runs everything that reads it (the run's tests rename its serving base for a
    while: they must not overlap); so are those of `TASK_FAMILY_MODULES`, so that one worker
    makes the task families' models (`task_family`) for both. The shared run's unit goes out
    first, then the task families' and the modules that start processes or run benchmark scripts,
    then the others, most tests first, while the other workers share out the rest.

    (pytest-xdist's own `--dist loadgroup` renames the tests' node ids, which pytest 9.2 ignores.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedRunScheduling(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return _GROUPS.get(path.rsplit("/", 1)[-1].removesuffix(".py"), path)

        def _assign_work_unit(self, node):
            if not self.ordered:
                # xdist's queue has the units with the most tests first. The few-test modules that
                # start processes or run benchmark scripts are among the longest: ahead of the
                # rest, so that no worker is left with one of them at the end.
                order = sorted(self.workqueue, key=lambda scope: (scope != SHARED_RUN_GROUP, not _heavy(config, scope)))
                self.workqueue = type(self.workqueue)((scope, self.workqueue[scope]) for scope in order)
                self.ordered = True
            super()._assign_work_unit(node)

    return SharedRunScheduling(config, log)


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the cores, as many as the memory holds (a worker that trains
    and exports the tiny models peaks near 3 GiB). The extra worker runs while the others wait on
    the processes, servers and sockets their tests start (about a sixth of a 2-core run: 14 min
    59 s with 3 workers against 15 min 48 s with 2)."""
    cores = _cores()
    try:
        import psutil

        memory_workers = int(psutil.virtual_memory().available // (WORKER_MEMORY_GIB * 2**30))
    except ImportError:
        memory_workers = cores
    return max(1, min(cores + 1, memory_workers, MAX_WORKERS))


@pytest.fixture(autouse=True)
def _onednn_frozen_weights_untouched():
    """No test may leave oneDNN's frozen-weights mode set in its worker (`albert_tf.export.onednn_weights`):
    TensorFlow reads it once, and the later tests that train or assign weights would get stale answers."""
    before = os.environ.get("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS")
    yield
    after = os.environ.get("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS")
    assert after == before, f"the test left TF_ONEDNN_ASSUME_FROZEN_WEIGHTS={after!r} in this process (was {before!r})"


@pytest.fixture(scope="session")
def tiny_spm_model() -> str:
    """Path of the committed tiny SentencePiece model (64 pieces, lower-cased)."""
    return str(TINY_SPM_MODEL)


@pytest.fixture(scope="session")
def squad_spm_model() -> str:
    """Path of the committed SentencePiece model of the SQuAD / RACE test sentences (tests/fixtures/squad_spm_corpus.txt)."""
    return str(SQUAD_SPM_MODEL)


@pytest.fixture(scope="session")
def numbers_spm_model() -> str:
    """Path of the committed 90-piece SentencePiece model with digit-comma pieces ("1971,", "$5,000,000,")."""
    return str(NUMBERS_SPM_MODEL)


@pytest.fixture(scope="session")
def tiny_config():
    """A tiny `AlbertConfig` whose vocabulary is the tiny SentencePiece model's."""
    from albert_tf.config import AlbertConfig

    return AlbertConfig(vocab_size=64, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)


@pytest.fixture(scope="session")
def tiny_encoder(tiny_config):
    """A built `AlbertEncoder` of `tiny_config` with fixed random weights (do not train it in place)."""
    import keras

    from albert_tf.modeling import AlbertEncoder

    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder.from_albert_config(tiny_config)
    ids = keras.ops.ones((1, 8), dtype="int32")
    encoder({"input_ids": ids, "input_mask": ids, "segment_ids": keras.ops.zeros_like(ids)})
    return encoder



@pytest.fixture(scope="session")
def task_family(tiny_config, tiny_spm_model, tmp_path_factory):
    """`task_family(name)`: the task family `name`'s model (tests/_task_cases.py), fit, fine-tuned
    a few more updates, saved and exported once for the session (`_task_battery.produce`), for the
    task battery and the round-trip matrix (`TASK_FAMILY_MODULES`). Read it; do not train it."""
    from _task_battery import Producers
    from _task_cases import CASES

    return Producers(CASES, tiny_config, tiny_spm_model, tmp_path_factory)


@pytest.fixture(scope="session")
def shared_pipeline_run(tmp_path_factory):
    """The tiny pipeline run once for the session, version 1 pushed (`_pipeline_helpers.run_shared_pipeline`):
    read it; copy what a test would change."""
    from _pipeline_helpers import run_shared_pipeline

    return run_shared_pipeline(tmp_path_factory.mktemp("shared_pipeline"))
