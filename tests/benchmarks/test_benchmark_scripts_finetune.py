"""The fine-tuning benchmark scripts run end to end at a tiny size on tiny data written here.

`benchmarks/finetune_sentiment.py` (Rotten Tomatoes layout) and
`benchmarks/finetune_chinese_sentiment.py` (WordPiece vocabulary, Beam records, pretraining,
fine-tuning from the pretrained encoder and from random weights) each run in-process on a few
lines with a one-layer model for a few steps; the test checks the exit status and the printed
accuracy lines. The scripts are not part of the package: where they are absent (a Bazel
sandbox), the tests skip.
"""

from __future__ import annotations

import csv
import importlib.util
import json
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


def write_tsv(path: Path, rows) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["label", "text"])
        writer.writerows(rows)


def test_finetune_sentiment_tiny(tmp_path, capsys):
    script = load_script("finetune_sentiment")
    rng = random.Random(0)
    words = "the film is a of and story acting plot it with this movie".split()

    def rows(n):
        out = []
        for i in range(n):
            label = i % 2
            text = " ".join(rng.choice(words) for _ in range(6)) + (" great fun" if label else " dull mess")
            out.append((str(label), text))
        return out

    data = tmp_path / "rt"
    data.mkdir()
    write_tsv(data / "train.tsv", rows(48))
    write_tsv(data / "dev.tsv", rows(8))
    write_tsv(data / "test.tsv", rows(8))
    config = tmp_path / "albert_config.json"
    config.write_text(json.dumps({
        "vocab_size": 40, "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 16,
    }), encoding="utf-8")
    code = script.main([
        "--data", str(data), "--config", str(config), "--max-seq-length", "16", "--batch-size", "8",
        "--epochs", "1", "--max-train-examples", "16", "--model-dir", str(tmp_path / "model"), "--quiet",
    ])
    out = capsys.readouterr().out
    assert code == 0
    for split in ("dev", "test"):
        assert re.search(rf"^\| {split} \| [01]\.\d{{4}} \|", out, flags=re.M), out
    assert "init: random" in out


def test_finetune_sentiment_reports_missing_data(tmp_path, capsys):
    script = load_script("finetune_sentiment")
    assert script.main(["--data", str(tmp_path)]) == 2
    assert "no Rotten Tomatoes data" in capsys.readouterr().err


def test_chinese_split_is_fixed_and_by_text(tmp_path):
    script = load_script("finetune_chinese_sentiment")
    (tmp_path / script.POS_FILE).write_text("".join(f"好书{i}，很好。\n" for i in range(40)), encoding="utf-8")
    (tmp_path / script.NEG_FILE).write_text("".join(f"差评{i}，太差。\n" for i in range(40)) + "\n", encoding="utf-8")
    first = script.write_splits(tmp_path, tmp_path / "a")
    second = script.write_splits(tmp_path, tmp_path / "b")
    assert first == second and sum(c["examples"] for c in first.values()) == 80
    texts = {}
    for split in ("train", "dev", "test"):
        assert (tmp_path / "a" / f"{split}.tsv").read_bytes() == (tmp_path / "b" / f"{split}.tsv").read_bytes()
        with open(tmp_path / "a" / f"{split}.tsv", encoding="utf-8", newline="") as f:
            texts[split] = {row["text"] for row in csv.DictReader(f, delimiter="\t")}
    assert not (texts["train"] & texts["dev"]) and not (texts["train"] & texts["test"]) and not (texts["dev"] & texts["test"])
    assert script.strip_tags("19980101-01-001-001/m  迈向/v  [中国/ns  政府/n]nt  。/w") == "迈向中国政府。"


def test_finetune_chinese_sentiment_tiny(tmp_path, capsys):
    script = load_script("finetune_chinese_sentiment")
    rng = random.Random(0)
    filler = "我们 这 本 书 内容 作者 时间 孩子 故事 读 买 看".split()
    data = tmp_path / "zh"
    data.mkdir()
    (data / script.POS_FILE).write_text(
        "".join("".join(rng.choice(filler) for _ in range(6)) + "很好，喜欢！\n" for _ in range(30)), encoding="utf-8"
    )
    (data / script.NEG_FILE).write_text(
        "".join("".join(rng.choice(filler) for _ in range(6)) + "太差，失望。\n" for _ in range(30)), encoding="utf-8"
    )
    pd_words = "中国/ns 人民/n 发展/v 经济/n 新/a 世纪/n 改革/v 开放/v 建设/v 政府/n 北京/ns 工作/vn".split()
    lines = []
    for _ in range(40):
        sentences = [" ".join(rng.choice(pd_words) for _ in range(rng.randint(3, 8))) + " 。/w" for _ in range(3)]
        lines.append("  ".join(sentences))
    (data / script.CORPUS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    work = tmp_path / "work"
    code = script.main([
        "--data", str(data), "--work-dir", str(work), "--vocab-size", "200", "--max-unique-chars", "80",
        "--pretrain-seq-length", "32", "--max-predictions-per-seq", "4", "--dupe-factor", "1",
        "--embedding-size", "8", "--hidden-size", "16", "--num-layers", "1", "--num-heads", "2",
        "--intermediate-size", "32", "--pretrain-steps", "3", "--pretrain-batch-size", "4",
        "--max-seq-length", "32", "--batch-size", "8", "--max-train-examples", "16", "--quiet",
    ])
    out = capsys.readouterr().out
    assert code == 0
    for name in ("pretrained", "random"):
        assert re.search(rf"^{name}: test accuracy [01]\.\d{{4}} \(dev [01]\.\d{{4}}\)$", out, flags=re.M), out
    summary = json.loads((work / "summary.json").read_text(encoding="utf-8"))
    assert set(summary["runs"]) == {"pretrained", "random"}
    assert (work / "pretrain" / "encoder.keras").is_file()
    splits = summary["splits"]
    assert sum(s["examples"] for s in splits.values()) == 60
