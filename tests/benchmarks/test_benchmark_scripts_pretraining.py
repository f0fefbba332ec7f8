"""The pretraining benchmark scripts run end to end at a tiny size on tiny data written here.

`benchmarks/pretrain_sotu.py` (vocabulary, Beam records with held-out files, unigram baseline,
pretraining with the held-out curve, plot and table; then `--compare-sharing` on two modes) runs
in-process on a few generated "addresses" with a two-layer model for a few steps.
`benchmarks/training_throughput.py` runs its subprocess cases (albert_tf and keras-hub, float32,
no XLA) at the "tiny" shape. The tests check the exit status, the printed tables and the files
written. The scripts are not part of the package: where they are absent (a Bazel sandbox), the
tests skip.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_script(name: str):
    path = BENCHMARKS / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"{path} is not here (the benchmarks are not part of the package)")
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_corpus(directory: Path, files: int = 5, paragraphs: int = 12) -> None:
    """Files of the SOTU layout: a few long lines (paragraphs) of sentences each."""
    rng = random.Random(0)
    words = (
        "the congress nation people government states year country public war peace law must shall "
        "our great new world time made upon national united american power treaty trade labor policy "
        "act commerce revenue army navy foreign duty citizens freedom economy budget tax"
    ).split()
    directory.mkdir()
    for i in range(files):
        lines = []
        for _ in range(paragraphs):
            sentences = [
                " ".join(rng.choice(words) for _ in range(rng.randint(6, 14))).capitalize() + "."
                for _ in range(rng.randint(3, 6))
            ]
            lines.append(" ".join(sentences))
        # A stray control character, as one real address has: the script must clean it.
        text = "\n".join(lines) + ("\x02 end.\n" if i == 0 else "\n")
        (directory / f"{1900 + i}_someone_x.txt").write_text(text, encoding="utf-8")


TINY_MODEL = [
    "--vocab-size", "70", "--seq", "32", "--predictions", "5", "--dupe-factor", "1",
    "--embedding-size", "16", "--hidden-size", "32", "--layers", "2", "--heads", "2",
    "--intermediate-size", "64", "--batch-size", "4", "--eval-files", "1", "--points", "2",
    "--curve-batches", "1",
]  # fmt: skip


def test_pretrain_sotu_tiny(tmp_path, capsys):
    script = load_script("pretrain_sotu")
    write_corpus(tmp_path / "corpus")
    out, results = tmp_path / "run", tmp_path / "results"
    common = ["--corpus", str(tmp_path / "corpus"), "--out", str(out), "--results", str(results)] + TINY_MODEL

    assert script.main(common + ["--steps", "4"]) == 0
    printed = capsys.readouterr().out
    assert "| step | train loss | train MLM acc |" in printed
    assert "final, all held-out records" in printed and "Unigram baseline" in printed
    for name in ("spm.model", "tf1/model.ckpt.index", "tf1/albert_config.json", "encoder.keras", "eval_final.json"):
        assert (out / name).exists(), name
    assert len((out / "eval_curve.jsonl").read_text().splitlines()) == 2
    assert (results / "pretrain_sotu_curves.png").stat().st_size > 1000
    report = json.loads((results / "pretrain_sotu.json").read_text())
    assert 0 < report["baseline"]["accuracy"] <= 1
    assert report["summary"]["steps"] == 4
    # Committed results name no machine's folders: every path is relative to the repository.
    assert not re.search(r'"/[^"]', (results / "pretrain_sotu.json").read_text())
    assert report["args"]["out"] == os.path.relpath(out, BENCHMARKS.parent)

    # The sharing ablation reuses the vocabulary and records made above.
    assert script.main(common + ["--compare-sharing", "--sharing-steps", "2", "--sharing-modes", "all,none"]) == 0
    printed = capsys.readouterr().out
    assert "| sharing | encoder params |" in printed
    assert "| all |" in printed and "| none |" in printed
    assert "reusing vocabulary" in printed
    assert (results / "pretrain_sharing.png").exists()


def test_pretrain_sotu_skips_without_corpus(tmp_path, capsys):
    script = load_script("pretrain_sotu")
    assert script.main(["--corpus", str(tmp_path / "absent"), "--out", str(tmp_path / "run")]) == 0
    assert "SKIPPED" in capsys.readouterr().out


def test_training_throughput_tiny(tmp_path, capsys):
    pytest.importorskip("keras_hub")
    script = load_script("training_throughput")
    out = tmp_path / "throughput.json"
    # One subprocess with both implementations alternating (the own-process cases run the same
    # code through `model.fit`, checked in-process below without another TensorFlow start-up).
    argv = ["--shapes", "tiny", "--batch", "4", "--seq", "32", "--predictions", "5", "--steps", "2",
            "--precisions", "float32", "--xla", "off", "--interleave", "--min-seconds", "0",
            "--json", str(out)]  # fmt: skip
    assert script.main(argv) == 0
    printed = capsys.readouterr().out
    assert "| shape | implementation | precision | XLA | seq/s |" in printed
    assert "| tiny | keras_hub | float32 | off |" in printed
    assert "| tiny | albert_tf | float32 | off |" in printed
    results = json.loads(out.read_text())
    assert {r["impl"] for r in results} == {"keras_hub", "albert_tf"}
    assert all(r["seq_per_s"] > 0 and r["peak_rss_mb"] > 0 and r["interleaved"] for r in results)
    assert all(r["method"] == "train_on_batch" and r["timed_steps"] >= 2 for r in results)
    assert "interleaved, train_on_batch" in printed

    for impl in ("albert_tf", "keras_hub"):
        result = script.run_case(impl, "float32", False, "tiny", 4, 32, 5, steps=2, warmup=1)
        assert result["timed_steps"] == 2 and result["seq_per_s"] > 0, result
        assert result["method"] == "model.fit" and result["s_per_step_min"] <= result["s_per_step"], result
    # --min-seconds: steps go on until that much time is timed.
    result = script.run_case("albert_tf", "float32", False, "tiny", 4, 32, 5, steps=1, warmup=1, min_seconds=0.5)
    assert result["timed_s"] >= 0.5 and result["timed_steps"] >= 1, result
    assert "|" in script.table(results + [result])


def test_encoder_inference_and_profile_tiny(capsys):
    """The inference benchmark's interleaved timing and the profile script, at a tiny size, float32
    (the global dtype policy stays the default)."""
    pytest.importorskip("keras_hub")
    script = load_script("encoder_inference")
    results = script.run_interleaved(["keras_hub", "albert_tf"], "float32", False, "tiny", 2, 16, iters=2, warmup=1)
    assert [r["impl"] for r in results] == ["keras_hub", "albert_tf"]
    assert all(r["interleaved"] and r["batches"] >= 2 and r["ms_min"] <= r["ms_per_batch"] for r in results)

    profile = load_script("profile_encoder")
    argv = ["--preset", "tiny", "--precision", "float32", "--batch", "2", "--seq", "16", "--min-seconds", "0",
            "--warmup", "1", "--trace-calls", "1"]  # fmt: skip
    assert profile.main(argv) == 0
    printed = capsys.readouterr().out
    assert "| albert_tf encoder |" in printed and "| plain matmuls of its shapes |" in printed
    assert "encoder: op time per call by group" in printed
    assert re.search(r"\| _Mkl\w*MatMul\w* \[\+bias\] \| matmul \|", printed) or "| MatMul | matmul |" in printed
    assert profile.classify("enc/layer_0_attention_1/Softmax", "_MklSoftmax") == ("_MklSoftmax", "softmax")
    assert profile.classify("enc/layer_0_ffn_1/Gelu/mul_3", "_MklNativeFusedMatMul")[0].endswith("[+bias+GELU]")
