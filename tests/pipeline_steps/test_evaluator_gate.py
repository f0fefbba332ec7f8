"""A model that answers the same for every input, exported as the Trainer exports it, goes through
the Evaluator and the Pusher: refused, not pushed, with the full report written to disk."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from albert_tf.pipeline_steps import evaluator, example_gen, pusher, vocab_gen

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _pipeline_helpers import write_corpus, write_task  # noqa: E402

POSITIVE, NEGATIVE = "good great wonderful moving".split(), "bad awful dull boring".split()
FILLER = "the film plot actor scene story music people year".split()


def rows(count, seed):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        label = int(i % 3 != 0)  # two thirds positive: a clear majority class
        words = [rng.choice(POSITIVE if label else NEGATIVE)] + [rng.choice(FILLER) for _ in range(5)]
        rng.shuffle(words)
        out.append((str(label), " ".join(words)))
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    corpus = write_corpus(root / "corpus")
    task = write_task(root / "task", rows(60, 0), rows(90, 1))
    example_gen.run_example_gen(corpus, str(task), str(root / "c"), str(root / "e"))
    vocab_gen.run_vocab_gen(str(root / "c"), str(root / "e"), str(root / "v"), vocab_size=40)
    return root


def export_classifier(root, name, *, kernel=None, bias=None):
    """A tiny classifier exported with the pipeline's tokenizer; head weights as given. Without the
    export's TF Serving check (the same files; a fresh process to reload them): the export's own
    tests check that, these the Evaluator and the Pusher."""
    from albert_tf.config import AlbertConfig
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.pipeline_steps.staging import read_summary
    from albert_tf.tasks.classification import AlbertForClassification

    vocab_size = read_summary(str(root / "v"))["vocab_size"]
    config = AlbertConfig(vocab_size=vocab_size, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
    model = AlbertForClassification(AlbertEncoder.from_albert_config(config), num_labels=2, pooling="mean")
    features = {"input_ids": np.array([[2, 5, 3]], "int32"), "input_mask": np.ones((1, 3), "int32"),
                "segment_ids": np.zeros((1, 3), "int32")}
    model(features)
    if kernel is not None:
        model.head.kernel.assign(kernel)
        model.head.bias.assign(bias)
    exported = export_saved_model(model, vocab_gen.tokenizer_layer(str(root / "v"), 16), str(root / name), "m",
                                  version=1, labels=["0", "1"], pair=False, check=False)
    return exported.path


@pytest.mark.slow
def test_a_constant_model_is_refused_and_not_pushed(setup):
    root = setup
    # Zero kernel, biased towards "1": P(1) is the same for every text.
    candidate = export_classifier(root, "constant", kernel=np.zeros((16, 2), "float32"), bias=np.array([0.0, 2.0], "float32"))
    base = root / "serving"
    summary = evaluator.run_evaluator(
        str(root / "e"), candidate, str(base / "m"), str(root / "blessing"), threshold=0.0,
        report_dir=str(root / "evaluation"),
    )
    assert not summary["blessed"]
    assert summary["reason"].startswith("beats the constant answer failed")
    assert summary["candidate"]["metrics"]["accuracy"] == pytest.approx(summary["constant_baseline"]["metrics"]["accuracy"])
    assert summary["candidate"]["metrics"]["mcc"] == 0.0
    assert os.path.isfile(root / "blessing" / evaluator.NOT_BLESSED_FILE)
    assert not os.path.exists(root / "blessing" / evaluator.BLESSED_FILE)

    # The report is a real artifact: metrics, baseline, slices by label, confusion matrix.
    report = json.load(open(root / "evaluation" / evaluator.EVALUATION_FILE))
    assert report["predicted_classes"] == 1
    assert report["slices"]["0"]["accuracy"] == 0.0 and report["slices"]["1"]["accuracy"] == 1.0
    assert report["confusion_matrix"]["matrix"][0][0] == 0 and report["confusion_matrix"]["matrix"][1][0] == 0
    assert report["constant_baseline"]["kind"] == "majority_class"
    assert [c["name"] for c in report["checks"] if not c["passed"]][:1] == ["beats the constant answer"]
    assert "true \\ predicted" in open(root / "evaluation" / evaluator.CONFUSION_FILE).read()

    result = pusher.run_pusher(candidate, evaluator.is_blessed(str(root / "blessing")), True, str(base), "m",
                               str(root / "pushed"))
    assert not result["pushed"] and "Evaluator" in result["reason"]
    assert not os.path.exists(base / "m" / "1")


@pytest.mark.slow
def test_every_check_is_recorded(setup):
    """Whatever a random tiny model scores, the decision follows the checks and all are on disk."""
    from albert_tf.pipeline_steps.staging import read_summary

    root = setup
    candidate = export_classifier(root, "random")
    base = root / "serving2"
    summary = evaluator.run_evaluator(str(root / "e"), candidate, str(base / "m"), str(root / "blessing2"))
    assert {c["name"] for c in summary["checks"]} >= {"beats the constant answer", "accuracy beats chance", "value threshold"}
    assert summary["blessed"] == all(c["passed"] for c in summary["checks"])
    assert read_summary(str(root / "blessing2"))["reason"] == summary["reason"]
