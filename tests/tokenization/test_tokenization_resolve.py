"""Tests of albert_tf.tokenization.resolve: the one search for a checkpoint's tokenizer, and the
tokenizer of each kind.

Every layout keeps a (fake: the search reads no file) tokenizer where that layout keeps it; the
one `find_tokenizer` finds each from every path a caller may give, and the three entry points
kept for their callers (`tasks.pretrained.find_tokenizer_file`, `tasks.resources.resolve_tokenizer_file`,
`training.pretraining_tokenizer.tokenizer_of_run`) answer what it answers with their search order.
"""

import json
import os
import shutil

import pytest

from albert_tf.tasks import pretrained, resources
from albert_tf.tasks.errors import TaskError
from albert_tf.tokenization import resolve
from albert_tf.tokenization.resolve import (
    ASSETS_FILES,
    EXPORT_JSON,
    KERAS_HUB,
    NAMED_FILES,
    RUN_SEARCH,
    SENTENCEPIECE,
    TASK_JSON,
    TOKENIZER_JSON,
    WORDPIECE,
    StoredTokenizer,
    TokenizerSearch,
    find_tokenizer,
)
from albert_tf.training import pretraining_tokenizer

VOCAB = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ngood\nbad\n"


def _touch(path, text="x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _json(path, value):
    return _touch(path, json.dumps(value))


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """Each layout's directory, with its tokenizer where the layout keeps it (and weights named
    as the layout names them, for the paths given as a file or prefix)."""
    root = tmp_path_factory.mktemp("layouts")
    d = {name: root / name for name in (
        "tf1", "tfhub", "hf", "keras_hub", "pretraining", "finetuning", "export", "chinese", "wordpiece_run",
    )}
    _touch(d["tf1"] / "model.ckpt-best.index")
    _touch(d["tf1"] / "30k-clean.model")
    _touch(d["tfhub"] / "variables" / "variables.index")
    _touch(d["tfhub"] / "assets" / "30k-clean.model")
    _touch(d["hf"] / "spiece.model")
    _json(d["hf"] / "tokenizer_config.json", {"do_lower_case": False})
    _touch(d["keras_hub"] / "assets" / "tokenizer" / "vocabulary.spm")
    _touch(d["keras_hub"] / "model.weights.h5")
    # albert-tf pretrain: the run and its tf1/ each with spm.model and tokenizer.json; checkpoints/ without.
    for where in (d["pretraining"], d["pretraining"] / "tf1"):
        _touch(where / "spm.model")
        _json(where / "tokenizer.json", {"type": "sentencepiece", "file": "spm.model", "lower_case": False})
    _touch(d["pretraining"] / "tf1" / "model.ckpt.index")
    _touch(d["pretraining"] / "checkpoints" / "ckpt-2.index")
    _touch(d["finetuning"] / "sentiment.model")
    _touch(d["finetuning"] / "model.keras")
    _json(d["finetuning"] / "task.json", {"task": "sst-2", "tokenizer": {
        "type": "sentencepiece", "file": "sentiment.model", "lower_case": False}})
    _touch(d["export"] / "assets" / "vocab.txt", VOCAB)
    _json(d["export"] / "assets" / "export.json", {"tokenizer": {"type": "wordpiece", "file": "vocab.txt", "lower_case": True}})
    _touch(d["export"] / "variables" / "variables.index")
    _touch(d["chinese"] / "vocab_chinese.txt", VOCAB)
    _touch(d["chinese"] / "model.ckpt-best.index")
    # A run described without its casing.
    _touch(d["wordpiece_run"] / "vocab.txt", VOCAB)
    _json(d["wordpiece_run"] / "tokenizer.json", {"type": "wordpiece", "file": "vocab.txt"})
    return d


# (layout, path in it, kind, file relative to the layout, recorded casing, the layout found by).
EVERY_CASE = [
    ("tf1", "", SENTENCEPIECE, "30k-clean.model", None, NAMED_FILES),
    ("tf1", "model.ckpt-best", SENTENCEPIECE, "30k-clean.model", None, NAMED_FILES),
    ("tfhub", "", SENTENCEPIECE, "assets/30k-clean.model", None, ASSETS_FILES),
    ("tfhub", "variables", SENTENCEPIECE, "assets/30k-clean.model", None, ASSETS_FILES),
    ("tfhub", "variables/variables", SENTENCEPIECE, "assets/30k-clean.model", None, ASSETS_FILES),
    ("hf", "", SENTENCEPIECE, "spiece.model", None, NAMED_FILES),
    ("keras_hub", "", SENTENCEPIECE, "assets/tokenizer/vocabulary.spm", None, KERAS_HUB),
    ("pretraining", "", SENTENCEPIECE, "spm.model", False, TOKENIZER_JSON),
    ("pretraining", "tf1", SENTENCEPIECE, "tf1/spm.model", False, TOKENIZER_JSON),
    ("pretraining", "tf1/model.ckpt", SENTENCEPIECE, "tf1/spm.model", False, TOKENIZER_JSON),
    ("pretraining", "checkpoints", SENTENCEPIECE, "spm.model", False, TOKENIZER_JSON),
    ("pretraining", "checkpoints/ckpt-2", SENTENCEPIECE, "spm.model", False, TOKENIZER_JSON),
    ("finetuning", "", SENTENCEPIECE, "sentiment.model", False, TASK_JSON),
    ("finetuning", "model.keras", SENTENCEPIECE, "sentiment.model", False, TASK_JSON),
    ("export", "", WORDPIECE, "assets/vocab.txt", True, EXPORT_JSON),
    ("export", "variables", WORDPIECE, "assets/vocab.txt", True, EXPORT_JSON),
    ("chinese", "model.ckpt-best", WORDPIECE, "vocab_chinese.txt", None, NAMED_FILES),
    ("wordpiece_run", "", WORDPIECE, "vocab.txt", None, TOKENIZER_JSON),
]


@pytest.mark.parametrize("layout, path, kind, file, lower_case, found_by", EVERY_CASE)
def test_one_finder_reads_every_layout_and_the_old_entry_points_agree(layouts, layout, path, kind, file, lower_case,
                                                                      found_by):
    target = str(layouts[layout] / path) if path else str(layouts[layout])
    expected = StoredTokenizer(kind, str(layouts[layout] / file), lower_case, found_by)
    assert find_tokenizer(target) == expected
    if os.path.isdir(target):
        assert find_tokenizer(target + "/") == expected
    # from_pretrained's finder: every layout.
    assert pretrained.find_tokenizer_file(target) == (kind, expected.file, lower_case)

    # finetune --init's finder is from_pretrained's: every layout, keras-hub presets, exports and TF-Hub too.
    assert resources.resolve_tokenizer_file(None, None, target) == (kind, expected.file, lower_case)

    # The pretraining run's finder: its tokenizer.json only, lower-cased where it records no casing.
    by_run = pretraining_tokenizer.tokenizer_of_run(target)
    if found_by == TOKENIZER_JSON:
        assert find_tokenizer(target, RUN_SEARCH) == expected
        assert (by_run.kind, by_run.path, by_run.lower_case) == (kind, expected.file, True if lower_case is None else lower_case)
    else:
        assert by_run is None and find_tokenizer(target, RUN_SEARCH) is None


def test_explicit_files_win_and_nothing_found_keeps_each_error(layouts, tmp_path):
    assert resources.resolve_tokenizer_file("a.model", None, str(layouts["tf1"])) == (SENTENCEPIECE, "a.model", None)
    assert resources.resolve_tokenizer_file(None, "v.txt", None) == (WORDPIECE, "v.txt", None)
    with pytest.raises(TaskError, match="not both"):
        resources.resolve_tokenizer_file("a.model", "v.txt", None)
    bare = tmp_path / "bare" / "tf1"
    _touch(bare / "model.ckpt.index")
    assert find_tokenizer(str(bare / "model.ckpt")) is None
    assert resolve.search_directories(str(bare / "model.ckpt")) == [str(bare), str(bare.parent)]
    with pytest.raises(pretrained.TokenizerNotFoundError) as error:
        pretrained.find_tokenizer_file(str(bare / "model.ckpt"))
    message = str(error.value)
    assert message.startswith(f"no tokenizer found for {bare / 'model.ckpt'}: looked for task.json's tokenizer")
    assert f"in {bare} and {bare.parent}; pass tokenizer=" in message
    with pytest.raises(TaskError, match="no tokenizer: pass"):
        resources.resolve_tokenizer_file(None, None, str(bare / "model.ckpt"))
    assert pretraining_tokenizer.tokenizer_of_run(str(bare / "model.ckpt")) is None


def test_what_the_search_orders_differ_in(tmp_path, caplog):
    # Several SentencePiece models: the known names first, for from_pretrained and --init alike.
    many = tmp_path / "many"
    for name in ("a.model", "spm.model", "spiece.model"):
        _touch(many / name)
    assert find_tokenizer(str(many)).file == str(many / "spiece.model")
    assert resources.resolve_tokenizer_file(None, None, str(many))[1] == str(many / "spiece.model")
    # A file in tf1/ without a description, the run's tokenizer.json one level up: the file beside
    # the checkpoint comes first.
    run = tmp_path / "run"
    _touch(run / "vocab.txt", VOCAB)
    _json(run / "tokenizer.json", {"type": "wordpiece", "file": "vocab.txt", "lower_case": False})
    _touch(run / "tf1" / "30k-clean.model")
    assert find_tokenizer(str(run / "tf1")) == StoredTokenizer(SENTENCEPIECE, str(run / "tf1" / "30k-clean.model"), None, NAMED_FILES)
    # An unreadable description is skipped with a warning naming it.
    broken = tmp_path / "broken"
    _touch(broken / "tokenizer.json", "{not json")
    _touch(broken / "spm.model")
    assert find_tokenizer(str(broken)).layout == NAMED_FILES
    assert pretraining_tokenizer.tokenizer_of_run(str(broken)) is None
    assert str(broken / "tokenizer.json") in caplog.text and "unreadable" in caplog.text
    with pytest.raises(ValueError, match="unknown tokenizer layouts"):
        TokenizerSearch(steps=(("nowhere", False),), nested=())


def test_loaders_build_the_tokenizer_of_each_kind(layouts, tiny_spm_model, tmp_path):
    from albert_tf.tokenization import SentencePieceTokenizer, WordPieceTokenizer

    vocab = layouts["export"] / "assets" / "vocab.txt"
    sp = resolve.python_tokenizer(SENTENCEPIECE, tiny_spm_model, lower_case=False)
    wp = resolve.python_tokenizer(WORDPIECE, str(vocab))
    assert isinstance(sp, SentencePieceTokenizer) and not sp.lower_case
    assert isinstance(wp, WordPieceTokenizer) and wp.tokenize("The good") == ["the", "good"]
    with pytest.raises(ValueError, match="unknown tokenizer type 'bpe'"):
        resolve.python_tokenizer("bpe", str(vocab))
    assert resolve.kind_of_file("vocab.txt") == WORDPIECE and resolve.kind_of_file("vocabulary.spm") == SENTENCEPIECE

    layer = resolve.tokenizer_layer(SENTENCEPIECE, tiny_spm_model, sequence_length=8, lower_case=False)
    assert layer.is_sentencepiece and layer.sequence_length == 8 and not layer.lower_case
    assert layer(["a b"])["input_ids"].shape == (1, 8)
    layer = resolve.tokenizer_layer(WORDPIECE, str(vocab), sequence_length=6)
    assert not layer.is_sentencepiece and layer(["the good"])["input_ids"].numpy().tolist() == [[2, 5, 6, 3, 0, 0]]
    with pytest.raises(ValueError, match="unknown tokenizer type"):
        resolve.tokenizer_layer("bpe", str(vocab), sequence_length=6)
    # resources' loader keeps its one-line task errors.
    with pytest.raises(TaskError, match="unknown tokenizer type 'bpe'"):
        resources.load_tokenizer("bpe", str(vocab), True)
    missing = tmp_path / "missing.model"
    with pytest.raises(TaskError, match="tokenizer file not found"):
        resources.load_tokenizer(SENTENCEPIECE, str(missing), True)
    shutil.copyfile(tiny_spm_model, tmp_path / "copy.model")
    assert resources.load_tokenizer(SENTENCEPIECE, str(tmp_path / "copy.model"), True).vocab_size == sp.vocab_size
