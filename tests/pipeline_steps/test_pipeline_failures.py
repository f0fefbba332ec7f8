"""A failed pipeline step reaches the user as one line naming the step and the cause (no kfp JSON,
no traceback), with the run's log file; the exit status says what kind of failure it was. And the
settings and messages around the run tell the truth: every suggested setting exists, `compile`
refuses this machine's paths, the sample request is the task's own text, every command has help."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from _pipeline_helpers import tiny_settings, write_corpus, write_task  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _albert_tf(*args, cwd):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "albert_tf", *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def _config(tmp_path, **values):
    values.setdefault("corpus", write_corpus(tmp_path / "corpus"))
    values.setdefault("task_data", str(tmp_path / "task"))
    values.setdefault("serving_base", str(tmp_path / "serving"))
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    return path


def _failed_run(tmp_path, config, code):
    """Runs `albert-tf pipeline run`; checks the exit status and that the error is one line on
    stderr with no kfp JSON or traceback anywhere on the terminal; returns (that line, stdout)."""
    proc = _albert_tf("pipeline", "run", "--config", config, "--pipeline-root", tmp_path / "runs", cwd=tmp_path)
    terminal = proc.stdout + proc.stderr
    assert proc.returncode == code, terminal[-4000:]
    for noise in ("Traceback", "executor_input", '"parameterValues"', "Inner task failed", "ALBERT-TF STEP FAILURE"):
        assert noise not in terminal, terminal[-4000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("albert-tf pipeline: error: ")
    return lines[0], proc.stdout


def _log_of(line):
    match = re.search(r"\(full log: (?P<path>[^)]+)\)$", line)
    assert match, line
    with open(match.group("path"), encoding="utf-8") as f:
        return f.read()


def test_a_wrong_column_is_one_line_naming_the_step_the_file_and_the_columns(tmp_path):
    write_task(tmp_path / "task", [("1", "good film"), ("0", "bad film")], [("1", "fine"), ("0", "dull")],
               header="label\treview")
    line, out = _failed_run(tmp_path, _config(tmp_path), 4)
    train = tmp_path / "task" / "train.tsv"
    assert f"ExampleGen: {train}:1: no column 'text' (the file has: label, review)" in line
    assert "  example-gen      FAILURE (" in out
    log = _log_of(line)  # the full story stays in the log file
    assert "Traceback" in log and "MissingColumnError" in log and "executor_input" in log


def test_a_gbk_file_is_one_line_with_its_line(tmp_path):
    write_task(tmp_path / "task", [("1", "good"), ("0", "bad")], [("1", "fine"), ("0", "dull")])
    (tmp_path / "task" / "train.tsv").write_bytes("label\ttext\n1\t好电影\n0\t坏电影\n".encode("gbk"))
    line, _ = _failed_run(tmp_path, _config(tmp_path), 4)
    assert f"ExampleGen: {tmp_path / 'task' / 'train.tsv'}:2: not valid UTF-8" in line


def test_an_empty_text_column_is_one_line_with_its_line(tmp_path):
    # A bad row is counted for the ExampleValidator (tests/pipeline_steps/test_bad_rows.py); a split
    # without one usable row stops ExampleGen, naming the first.
    write_task(tmp_path / "task", [("1", ""), ("0", "")], [("1", "fine"), ("0", "dull")])
    line, _ = _failed_run(tmp_path, _config(tmp_path), 4)
    assert f"ExampleGen: {tmp_path / 'task' / 'dev.tsv'}" not in line
    assert f"{tmp_path / 'task' / 'train.tsv'}:2: empty text in column 'text'" in line


def test_a_bad_corpus_glob_is_one_line_before_any_step(tmp_path):
    write_task(tmp_path / "task", [("1", "good"), ("0", "bad")], [("1", "fine"), ("0", "dull")])
    line, out = _failed_run(tmp_path, _config(tmp_path, corpus=str(tmp_path / "nothere" / "*.txt")), 4)
    assert f"the corpus pattern '{tmp_path / 'nothere' / '*.txt'}' matches no file" in line
    assert "example-gen" not in out


def test_a_new_label_stopped_by_the_example_validator_is_one_line(tmp_path):
    """The eval split holds a label the train split (the inferred schema) does not know: the run
    stops at the ExampleValidator, exit 4, with the anomaly in the line."""
    settings = tiny_settings(tmp_path)
    dev = tmp_path / "task" / "dev.tsv"
    rows = dev.read_text(encoding="utf-8").splitlines()
    rows = [rows[0]] + [("2\t" + r.split("\t", 1)[1]) if i % 5 == 0 else r for i, r in enumerate(rows[1:])]
    dev.write_text("\n".join(rows) + "\n", encoding="utf-8")
    config = tmp_path / "settings.json"
    config.write_text(json.dumps(settings.to_dict()), encoding="utf-8")
    line, out = _failed_run(tmp_path, config, 4)
    assert "ExampleValidator: " in line and "anomaly of error severity" in line
    assert "eval: label: expected values in {'0', '1'}, found '2'" in line
    assert "transform        SUCCESS" not in out and not os.path.exists(settings.serving_base)


def test_failure_kinds_and_lines():
    from albert_tf.data.tables import DataFormatError
    from albert_tf.pipeline_steps import failures

    def raised(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the point
            return e
        raise AssertionError("did not raise")

    from albert_tf.pipeline_steps.example_gen import expand_corpus

    assert failures.failure_kind(raised(lambda: expand_corpus("/nothere/*.x"))) == failures.REFUSED
    assert failures.failure_kind(DataFormatError("bad row", "f.tsv", 3)) == failures.REFUSED
    # A ValueError raised outside the package (a bug, a library's internals) is an internal error.
    assert failures.failure_kind(raised(lambda: int("x"))) == failures.INTERNAL
    assert failures.failure_kind(raised(lambda: {}["key"])) == failures.INTERNAL
    assert failures.one_line("span 2: 1 anomaly (report: r):\ntrain: a\neval: b") == "span 2: 1 anomaly (report: r): train: a; eval: b"
    marker = failures.STEP_FAILURE_MARKER + json.dumps({"kind": "refused", "message": "f.tsv:1: no column 'x'"})
    assert failures.parse_marker("    " + marker) == {"kind": "refused", "message": "f.tsv:1: no column 'x'"}
    assert failures.parse_marker("an ordinary line") is None
    refused = failures.StepFailure("example-gen", failures.REFUSED, "f.tsv:1: bad")
    assert refused.line("/l.log") == "ExampleGen: f.tsv:1: bad (full log: /l.log)" and refused.exit_code == 4
    internal = failures.StepFailure("trainer", failures.INTERNAL, "boom")
    assert internal.exit_code == 1 and internal.line("/l.log").startswith("Trainer failed (internal error): boom")
    # A step that left no marker (killed, an import error): the last exception line of its log.
    log = ["Traceback (most recent call last):", '  File "x.py", line 1', "ModuleNotFoundError: No module named 'y'", ""]
    assert failures.cause_from_log(log) == "No module named 'y'"
    assert failures.cause_from_log(["something", "Killed"]) == "Killed"
    codes = [code for code, _ in failures.EXIT_CODES]
    assert len(set(codes)) == len(codes) and {1, 2, 3, 4} <= set(codes)


def test_a_step_failure_marker_is_printed_and_the_error_goes_on(capsys):
    from albert_tf.data.tables import DataFormatError
    from albert_tf.pipeline_steps import failures

    with pytest.raises(DataFormatError):
        with failures.reported_failure():
            raise DataFormatError("empty text in column 'text'", "t.tsv", 3)
    [line] = capsys.readouterr().out.splitlines()
    assert failures.parse_marker(line) == {"kind": "refused", "message": "t.tsv:3: empty text in column 'text'"}


def test_every_component_reports_its_failure():
    import inspect

    from pipelines.components import STEPS

    from albert_tf.pipeline_steps.failures import STEP_NAMES

    for step in STEPS:
        assert "with reported_failure():" in inspect.getsource(step), step.__name__
        # Its failure line names it as the pipeline's summary does (kfp's task name: dashes).
        assert step.__name__.replace("_", "-") in STEP_NAMES, step.__name__


def test_the_kfp_output_shows_a_failed_step_as_its_status_only(tmp_path, capsys):
    """What a failing step prints (JSON, traceback, the marker) stays in the log; the run keeps its cause."""
    import io

    from albert_tf.pipeline_steps import failures
    from pipelines.albert_pipeline import KfpOutput

    log = io.StringIO()
    output = KfpOutput(sys.stdout, log)
    marker = failures.STEP_FAILURE_MARKER + json.dumps({"kind": "refused", "message": "t.tsv:1: no column 'text'"})
    output.write("Executing task 'example-gen'\n    Got executor_input:\n    {\"inputs\": {}}\n    Traceback (most recent call last):\n"
                 f"    {marker}\n    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
                 "Task 'example-gen' finished with status FAILURE\n")
    out = capsys.readouterr().out
    assert out.startswith("  example-gen      FAILURE (") and len(out.splitlines()) == 1, out
    assert "Got executor_input" in log.getvalue() and "Traceback" in log.getvalue()
    assert output.failure == failures.StepFailure("example-gen", "refused", "t.tsv:1: no column 'text'")


def test_tensorflow_startup_notices_go_to_the_log_file(tmp_path, capfd):
    from albert_tf.runtime_env import TENSORFLOW_STARTUP_NOTICES, native_notices_dropped

    log = tmp_path / "run.log"
    with native_notices_dropped(TENSORFLOW_STARTUP_NOTICES, kept_in=str(log)):
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
        os.write(2, b"I0000 00:00:1.2 1 mlir_graph_optimization_pass.cc:437] MLIR V1 optimization pass is not enabled\n")
        os.write(2, b"a real error\n")
    err = capfd.readouterr().err
    assert err == "a real error\n"
    assert "absl::InitializeLog" in log.read_text() and "MLIR V1" in log.read_text()


def _vocab_inputs(tmp_path, rows):
    from albert_tf.pipeline_steps.example_gen import run_example_gen

    write_task(tmp_path / "task", rows, rows[:2])
    run_example_gen(write_corpus(tmp_path / "corpus", count=2), str(tmp_path / "task"), str(tmp_path / "corpus_splits"),
                    str(tmp_path / "examples"))
    return str(tmp_path / "corpus_splits"), str(tmp_path / "examples")


def test_vocab_gen_suggests_only_settings_that_exist(tmp_path):
    """Chinese text with many rare characters: the message suggests a larger vocab_size or a lower
    character_coverage, both pipeline settings, and the lower coverage then makes the vocabulary."""
    from albert_tf.pipeline_steps.settings import PipelineSettings
    from albert_tf.pipeline_steps.vocab_gen import run_vocab_gen

    # 50 common characters, and 100 rare ones (1.6 % of the text) each once.
    common, rare = [chr(0x4E00 + i) for i in range(50)], [chr(0x5E00 + i) for i in range(100)]
    rows = [(str(i % 2), "".join(common[(i * 7 + j * 3) % 50] for j in range(60)) + rare[i]) for i in range(100)]
    corpus, examples = _vocab_inputs(tmp_path, rows)
    with pytest.raises(ValueError) as raised:
        run_vocab_gen(corpus, examples, str(tmp_path / "vocab"), vocab_size=120, seed=1)
    message = str(raised.value)
    assert "Use a larger vocab_size or a lower character_coverage" in message
    suggested = re.findall(r"(?:larger|lower|smaller) ([a-z_]+)", message)
    fields = {f.name for f in dataclasses.fields(PipelineSettings)}
    assert suggested and set(suggested) <= fields
    summary = run_vocab_gen(corpus, examples, str(tmp_path / "vocab"), vocab_size=120, seed=1, character_coverage=0.98)
    assert summary["vocab_size"] == 120
    # The settings take it and refuse a bad one; the pipeline passes it to VocabGen.
    from pipelines.albert_pipeline import pipeline_arguments

    settings = PipelineSettings(character_coverage=0.995, hard_vocab_limit=False)
    assert pipeline_arguments(settings)["character_coverage"] == 0.995
    assert pipeline_arguments(settings)["hard_vocab_limit"] is False
    from albert_tf.pipeline_steps.settings import SettingsError

    for bad in (1.5, 0.9):  # SentencePiece takes [0.98, 1]
        with pytest.raises(SettingsError, match=r"character_coverage must be in \[0.98, 1\]"):
            PipelineSettings(character_coverage=bad)


def test_the_sample_request_is_a_text_of_the_eval_split(tmp_path):
    from albert_tf.pipeline_steps.sample_request import sample_text

    rows = [("1", "一部好电影"), ("0", "很无聊的电影"), ("1", "third")]
    _, examples = _vocab_inputs(tmp_path, rows)
    assert sample_text(examples) == ("一部好电影", None)  # dev.tsv's first row, not a fixed English sentence


def test_compile_refuses_this_machines_paths(tmp_path, capsys):
    from albert_tf.cli import main

    out = tmp_path / "p.yaml"
    assert main(["pipeline", "compile", "--output", str(out)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "paths on this machine" in line and "corpus " in line and "serving_base " in line and "task_data " in line
    assert "--allow-local-paths" in line and not out.exists()
    assert main(["pipeline", "compile", "--output", str(out), "--allow-local-paths"]) == 0 and out.exists()
    config = tmp_path / "cloud.yaml"
    config.write_text("corpus: gs://b/corpus/*.txt\ntask_data: gs://b/task\nserving_base: /gcs/b/serving\n", encoding="utf-8")
    assert main(["pipeline", "compile", "--config", str(config), "--output", str(out), "--image", "r/albert-tf:1"]) == 0
    assert "r/albert-tf:1" in out.read_text()


def test_version_and_every_command_has_a_description(capsys):
    import argparse

    from albert_tf import __version__
    from albert_tf.cli import build_parser, main

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.strip() == f"albert-tf {__version__}"

    def commands(parser, name):
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from commands(sub, f"{name} {sub_name}")

    found = list(commands(build_parser(), "albert-tf"))
    assert any(name == "albert-tf pipeline run" for name, _ in found)
    for name, parser in found:
        assert parser.description and parser.description.strip(), f"`{name} --help` has no description"
    run = dict(found)["albert-tf pipeline run"]
    assert "exit status" in run.epilog and "  4  the data or a setting was refused" in run.epilog
