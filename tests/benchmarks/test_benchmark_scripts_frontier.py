"""`benchmarks/deployment_frontier.py --quick` runs end to end and writes its table, JSON lines and plot.

Two runs, each in a subprocess, writing under tmp_path (never into the repository): random-weight
models of tiny shapes (latency only; the peer rows of each runtime importable here: PyTorch, ONNX
Runtime, OpenVINO; else the skip note; the targets block, the precisions and the reproducing
command), and a tiny fine-tuned model directory given as teacher and student (accuracy
measured per row; the fp32 export must score what `predict_model_dir` predicts). No timing is
asserted. Skips where the script is absent (the benchmarks are not part of the package).

    .venv/bin/python -m pytest -q tests/benchmarks/test_benchmark_scripts_frontier.py
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "deployment_frontier.py"
SAMPLE = REPO / "albert_tf" / "resources" / "sample" / "rotten_tomatoes"


def _run(tmp_path, *args):
    if not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT} is not here (the benchmarks are not part of the package)")
    out = tmp_path / "frontier"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--threads", "1", "--data-root", str(tmp_path / "no-shared-data"),
         "--out", str(out), *args],
        capture_output=True, text=True, env=env, timeout=600, cwd=str(REPO),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in (out.with_suffix(".jsonl")).read_text().splitlines()]
    table = out.with_suffix(".md").read_text()
    assert table in proc.stdout
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return records, table


def _check_timing(records, traffic, batches):
    assert {(r["traffic"], r["batch"]) for r in records} == {(t, b) for t in traffic for b in batches}
    for r in records:
        assert r["requests"] >= 2 and r["timed_s"] > 0
        assert 0 < r["p50_ms"] <= r["p90_ms"]
        assert r["threads"] == 1 and r["quick"]
    reference = [r for r in records if r["case"] == "teacher fp32 SavedModel fixed"]
    assert len(reference) == len(traffic) * len(batches)
    assert all(r["vs_teacher_fp32_fixed"] == pytest.approx(1.0) for r in reference)


def _importable(*names) -> bool:
    return all(importlib.util.find_spec(name) is not None for name in names)


def _torch_importable() -> bool:
    return _importable("torch", "transformers")


@pytest.mark.slow
def test_quick_random_shapes_time_every_case_on_every_traffic_set(tmp_path):
    records, table = _run(tmp_path)
    assert "CPU: " in table and "; ISA: " in table and "Threads: TF intra-op 1" in table
    assert "random weights (--shapes): latency only, no accuracy" in table
    # Without ../shared/data: the shipped RT sample, no Chinese reviews (said in the notes).
    assert "no Chinese reviews under" in table
    _check_timing(records, ["rt-dev", "full-128"], [1, 4])
    assert {r["model"] for r in records} == {"teacher", "student shared:1", "student 1x32"}
    assert all(r["accuracy"] is None for r in records)
    cases = {r["case"] for r in records}
    assert {"teacher fp32 SavedModel fixed", "teacher bf16 SavedModel fixed"} <= cases
    params = {r["model"]: r["params"] for r in records}
    shape = {r["model"]: r["shape"] for r in records}
    # shared:1 reruns the teacher's one shared block fewer times: the same weights, a shorter pass.
    assert shape["teacher"].startswith("2 x 64 shared") and shape["student shared:1"].startswith("1 x 64")
    assert params["student shared:1"] == params["teacher"] > params["student 1x32"]
    assert "### Targets (rt-dev traffic" in table and "(i) bf16 SavedModel vs PyTorch bf16, batch 4 >= 1.5x" in table
    assert "benchmarks/deployment_frontier.py --quick --threads 1" in table  # the reproducing command
    assert "- teacher fp32 SavedModel fixed: float32 " in table  # the precision it ran in
    # The bf16 SavedModel runs as `albert-tf serve` runs it: its own process, oneDNN's frozen weights on.
    assert "- teacher bf16 SavedModel fixed: float32 13, bfloat16 12 variables; " in table
    assert "oneDNN frozen weights: on (every SavedModel served (1) is a bf16 export)" in table
    if _torch_importable():
        torch_cases = {c for c in cases if c.endswith("PyTorch")}
        assert "teacher int8 quantize_dynamic PyTorch" in torch_cases and len(torch_cases) == 9
        assert "the same ids as albert_tf's for 16 of 16 rt-dev" in table
        for r in records:
            assert r["vs_best_peer"] is not None and r["vs_best_peer_same_model"] is not None
        if _importable("onnxruntime", "onnx"):
            assert {"teacher fp32 ONNX Runtime", "teacher int8 dynamic ONNX Runtime"} <= cases
            assert "- teacher int8 dynamic ONNX Runtime: " in table
        if _importable("openvino", "nncf", "onnx"):
            assert {"teacher f32 OpenVINO", "teacher bf16 OpenVINO", "teacher int8 NNCF OpenVINO"} <= cases
            assert "- teacher int8 NNCF OpenVINO: hint " in table
    else:
        assert "PyTorch rows skipped: torch / transformers are not importable" in table


@pytest.mark.slow
def test_quick_model_dirs_measure_each_rows_accuracy(tmp_path, tiny_spm_model, tiny_config):
    from albert_tf.tasks import FinetuneSettings, finetune, predict_model_dir

    config = tmp_path / "albert_config.json"
    tiny_config.to_json_file(str(config))
    model_dir = tmp_path / "teacher"
    finetune(FinetuneSettings(
        task="classification", data=str(SAMPLE), model_dir=str(model_dir), text_column="text", label_column="label",
        config=str(config), spm_model=tiny_spm_model, max_seq_length=16, batch_size=4, num_train_steps=2,
        max_eval_examples=8, quiet=True,
    ))
    records, table = _run(tmp_path, "--teacher", str(model_dir), "--student", f"copy={model_dir}", "--no-torch",
                          "--traffic", "rt-dev")
    assert "peer rows (PyTorch, ONNX Runtime, OpenVINO) left out (--no-peers)" in table
    _check_timing(records, ["rt-dev"], [1, 4])
    cases = {r["case"] for r in records}
    assert {"teacher fp32 SavedModel fixed", "teacher bf16 SavedModel fixed"} <= cases
    assert any(c.startswith("copy fp32 SavedModel") for c in cases)
    for r in records:
        assert 0.0 <= r["accuracy"] <= 1.0
    with open(SAMPLE / "dev.tsv", encoding="utf-8", newline="") as f:
        dev = [row for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if row["text"]][:32]
    predicted = predict_model_dir(str(model_dir), texts=[row["text"] for row in dev]).records
    expected = sum(p["label"] == row["label"] for p, row in zip(predicted, dev)) / len(dev)
    fp32 = [r for r in records if r["case"] == "teacher fp32 SavedModel fixed"]
    assert fp32[0]["accuracy"] == pytest.approx(expected)


def _script():
    if not SCRIPT.is_file():
        pytest.skip(f"{SCRIPT} is not here (the benchmarks are not part of the package)")
    spec = importlib.util.spec_from_file_location("deployment_frontier", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ratios_are_against_the_fixed_fp32_teacher_and_the_best_peer_case():
    frontier = _script()

    def row(case, model, impl, precision, length, batch, value):
        key = "p50_ms" if batch == 1 else "texts_per_s"
        return {"case": case, "model": model, "role": "teacher" if model == "t" else "student", "impl": impl,
                "precision": precision, "length": length, "traffic": "rt-dev", "batch": batch, key: value}

    records = [
        row("t fp32", "t", "albert_tf SavedModel", "fp32", "fixed", 1, 100.0),
        row("t int8", "t", "albert_tf LiteRT", "int8", "longest/16", 1, 25.0),
        row("t torch", "t", "PyTorch transformers", "int8", "longest", 1, 50.0),
        row("s torch", "s", "PyTorch transformers", "fp32", "longest", 1, 20.0),
        row("t fp32", "t", "albert_tf SavedModel", "fp32", "fixed", 32, 10.0),
        row("t torch", "t", "PyTorch transformers", "bf16", "longest", 32, 20.0),
    ]
    frontier.add_ratios(records)
    one = {r["case"]: r for r in records if r["batch"] == 1}
    # Batch 1: reference p50 / row p50 (> 1 is faster).
    assert one["t int8"]["vs_teacher_fp32_fixed"] == pytest.approx(4.0)
    assert one["t int8"]["vs_best_peer"] == pytest.approx(20.0 / 25.0)
    assert one["t int8"]["vs_best_peer_same_model"] == pytest.approx(2.0)
    assert one["s torch"]["vs_best_peer"] == pytest.approx(1.0)
    big = {r["case"]: r for r in records if r["batch"] == 32}
    # Batch 32: row texts/s / reference texts/s.
    assert big["t fp32"]["vs_best_peer"] == pytest.approx(0.5)
    assert big["t torch"]["vs_teacher_fp32_fixed"] == pytest.approx(2.0)


def test_shapes_and_cpu_flags(tmp_path):
    frontier = _script()
    from albert_tf import AlbertConfig

    teacher = AlbertConfig.preset("base-v2", vocab_size=2000)
    name, shared = frontier.parse_shape("shared:6", teacher)
    assert name == "student shared:6" and shared == teacher.replace(num_hidden_layers=6)
    name, small = frontier.parse_shape("tiny=4x312", teacher)
    assert name == "tiny" and (small.num_hidden_layers, small.hidden_size, small.num_attention_heads,
                               small.intermediate_size, small.embedding_size) == (4, 312, 12, 1248, 128)
    assert frontier.parse_shape("6x384", teacher)[1].num_attention_heads == 6
    for bad in ("shared:0", "6y384", "0x64"):
        with pytest.raises(frontier.InputError):
            frontier.parse_shape(bad, teacher)
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu avx2 avx512f avx512_vnni avx512_bf16\n")
    isa = frontier.bench_common.cpu_isa(str(cpuinfo))
    assert isa["model"] == "Some CPU"
    assert isa["flags"] == ["AVX2", "AVX-512", "AVX512-VNNI", "AVX512-BF16"]
    assert "AMX" in isa["missing"] and "AVX-VNNI" in isa["missing"]
    assert frontier.bench_common.cpu_isa(str(tmp_path / "absent"))["model"] == "unknown"
    # Untimed rounds first (every case on the next request): a count, never negative.
    args = frontier.parser_of().parse_args(["--shapes", "--warmup-rounds", "7"])
    assert args.warmup_rounds == 7
    args.warmup_rounds = -1
    with pytest.raises(frontier.InputError, match="--warmup-rounds"):
        frontier.check_args(args)
    calls = []

    class Case:
        runs_here = True

        def predict(self, texts):
            calls.append(texts)

    frontier.interleave({"a": Case()}, ["r0", "r1", "r2"], min_seconds=0, min_requests=1, warmup=3)
    assert calls == ["r0", "r1", "r2", "r0"]  # three untimed rounds, then the timed one
