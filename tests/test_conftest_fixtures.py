"""The shared fixtures of conftest.py and its `slow` marking."""

import types

import numpy as np
import pytest

import conftest


def test_tiny_spm_model_fits_the_tiny_config(tiny_spm_model, tiny_config):
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer
    from albert_tf.tokenization.tokenizers import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(tiny_spm_model)
    assert tokenizer.vocab_size == tiny_config.vocab_size == 64
    text = "A good dog, 1,000 cats."
    ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
    layer = AlbertTokenizerLayer.from_sentencepiece(tiny_spm_model, sequence_length=64)
    packed = layer(np.array([text], dtype=object))
    row = packed["input_ids"].numpy()[0]
    assert len(ids) < 62 and row[1:1 + len(ids)].tolist() == ids  # [CLS] first, then the Python ids


def test_tiny_encoder_is_built(tiny_encoder, tiny_config):
    ids = np.ones((2, 5), np.int32)
    out = tiny_encoder({"input_ids": ids, "input_mask": ids, "segment_ids": np.zeros_like(ids)}, training=False)
    assert tuple(out["sequence_output"].shape) == (2, 5, tiny_config.hidden_size)
    assert tuple(out["pooled_output"].shape) == (2, tiny_config.hidden_size)


def _item(module_name, function):
    item = types.SimpleNamespace(module=types.SimpleNamespace(__name__=f"tests.{module_name}"), function=function, markers=[])
    item.add_marker = item.markers.append
    return item


def test_slow_marking():
    def starts_python():
        import subprocess
        import sys

        subprocess.run([sys.executable, "-c", "pass"], check=True)

    def quick():
        assert 1 + 1 == 2

    items = [_item("test_config", quick), _item("test_config", starts_python), _item("test_pipeline_e2e", quick)]
    conftest.pytest_collection_modifyitems(None, items)
    assert [len(i.markers) for i in items] == [0, 1, 1]
    assert all(m.name == "slow" for i in items for m in i.markers)


def test_the_marker_is_registered(pytestconfig):
    assert any(line.startswith("slow:") for line in pytestconfig.getini("markers"))


def test_the_modules_that_share_models_are_one_unit_of_work_under_xdist():
    """`-n`: the shared pipeline run's modules are one unit, the task families' (`task_family`)
    another, so that one worker makes each of them once; any other module is its own unit."""
    pytest.importorskip("xdist")

    class Config:
        rootpath = conftest.REPO
        option = types.SimpleNamespace(dist="load", tx=["popen"] * 2, numprocesses=2, maxschedchunk=None)

        def getvalue(self, name):
            return getattr(self.option, name, None)

        def getoption(self, name, default=None):
            return getattr(self.option, name, default)

    scheduler = conftest.pytest_xdist_make_scheduler(Config(), None)
    unit = scheduler._split_scope
    assert unit("tests/tasks/test_round_trip.py::test_a[classifier]") == unit("tests/tasks/test_task_battery.py::test_b") \
        == conftest.TASK_FAMILY_GROUP
    assert unit("tests/pipeline_steps/test_pipeline_distill.py::test_c") == conftest.SHARED_RUN_GROUP
    assert unit("tests/tasks/test_text_models.py::test_d") == "tests/tasks/test_text_models.py"
    assert conftest._heavy(Config(), conftest.TASK_FAMILY_GROUP)
