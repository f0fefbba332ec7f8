"""Shared tiny fixtures of the export / serving tests: a tiny SentencePiece model, tiny task
models, and one export base (`cls` classifier, checked; `reg` pair regressor) built once per
pytest session and reused by test_export, test_compatibility, test_local_server and test_client."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np

SEQ = 16
LABELS = ["neg", "pos"]
WORDS = "the nation of and to congress people states year law it's in good bad 1,000".split()


def toy_texts(n, seed):
    """`n` texts of random filler words with one sentiment word, and their labels (an array): 1
    for "good", 0 for "bad"; a task a tiny classifier learns in a few epochs."""
    rng = np.random.default_rng(seed)
    filler = [w for w in WORDS if w not in ("good", "bad")]
    texts, labels = [], []
    for _ in range(n):
        words = list(rng.choice(filler, size=int(rng.integers(3, 9))))
        label = int(rng.integers(0, 2))
        words.insert(int(rng.integers(0, len(words) + 1)), "good" if label else "bad")
        texts.append(" ".join(words))
        labels.append(label)
    return texts, np.array(labels)


def tiny_spm(directory: Path) -> str:
    from albert_tf.tokenization import sentencepiece_vocab

    model = directory / "tiny.model"
    if not model.exists():
        rng = random.Random(0)
        corpus = directory / "corpus.txt"
        corpus.write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(300)), encoding="utf-8")
        sentencepiece_vocab.train_sentencepiece([corpus], directory / "tiny", vocab_size=48, seed=0)
    return str(model)


def tiny_encoder(seed: int = 0):
    import keras

    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder

    keras.utils.set_random_seed(seed)
    config = AlbertConfig(vocab_size=48, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=SEQ)
    return AlbertEncoder.from_albert_config(config)


def features(batch: int = 1):
    return {k: np.zeros((batch, SEQ), "int32") for k in ("input_ids", "input_mask", "segment_ids")}


def tiny_classifier(seed: int = 0):
    from albert_tf.tasks.classification import AlbertForClassification

    model = AlbertForClassification(tiny_encoder(seed), num_labels=2)
    model(features())
    return model


def tiny_regressor(seed: int = 1):
    from albert_tf.tasks.classification import AlbertForRegression

    model = AlbertForRegression(tiny_encoder(seed))
    model(features())
    return model


def tokenizer_layer(spm: str):
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    return AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=SEQ)


def export_base(tmp_path_factory) -> Path:
    """The session's shared export base (built on first use): `cls/1` (checked) and `reg/1`."""
    root = tmp_path_factory.getbasetemp() / "albert_serving_shared"
    base = root / "base"
    if (root / "DONE").exists():
        return base
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.export.serving_config import BatchingConfig

    spm = tiny_spm(root)
    batching = BatchingConfig(max_batch_size=8, batch_timeout_micros=5000, num_batch_threads=2)
    export_saved_model(tiny_classifier(), tokenizer_layer(spm), str(base), "cls", labels=LABELS, batching=batching)
    export_saved_model(tiny_regressor(), tokenizer_layer(spm), str(base), "reg", pair=True, check=False, batching=batching)
    (root / "DONE").write_text("ok")
    return base


def spm_file(tmp_path_factory) -> str:
    export_base(tmp_path_factory)
    return str(tmp_path_factory.getbasetemp() / "albert_serving_shared" / "tiny.model")


_SERVER = {}


def shared_server(tmp_path_factory):
    """One `LocalModelServer` per session over a private copy of the export base (the server
    tests add and break versions in it); stopped at interpreter exit."""
    import atexit

    from albert_tf.model_server.server import LocalModelServer

    if "server" not in _SERVER:
        copy = tmp_path_factory.getbasetemp() / "albert_serving_server" / "base"
        shutil.rmtree(copy.parent, ignore_errors=True)
        shutil.copytree(export_base(tmp_path_factory), copy)
        server = LocalModelServer(str(copy), poll_interval_s=0.3, version_labels={"cls": {"stable": 1}}).start()
        atexit.register(server.stop)
        _SERVER.update(server=server, base=copy)
    return _SERVER["server"], _SERVER["base"]
