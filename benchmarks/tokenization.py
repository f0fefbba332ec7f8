"""Benchmark: ALBERT tokenization on the full shared corpora, parity with tf-models-official and speed.

English (``../shared/data/en/sotu``, one address per line): trains a SentencePiece model with the
ALBERT recipe on the whole corpus, then compares token ids of

* official: ``FullSentencePieceTokenizer.tokenize(preprocess_text(line, lower=True))``,
* python: :class:`albert_tf.tokenization.SentencePieceTokenizer`,
* graph: :class:`albert_tf.tokenization.AlbertTokenizerLayer` (``tokenize``),

on every line and on every sentence (lines split after ``.``/``!``/``?``). Graph/python differences
on whole lines are counted as "kernel" when the two SentencePiece implementations already disagree
on the preprocessed line itself (``sentencepiece.EncodeAsIds`` vs tensorflow-text's
``FastSentencepieceTokenizer``), i.e. not caused by our code.

Chinese (``../shared/data/zh``, tags of the People's Daily file stripped): builds a 21128-token
WordPiece vocabulary from all lines, then compares official ``FullTokenizer``, the Python
:class:`WordPieceTokenizer` and the graph layer on every line.

Speeds are single-process wall-clock throughput (MB of UTF-8 input per second); the graph layer is
measured in a ``tf.function`` over batches of 256 texts, with and without packing to 128 tokens.
Run as ``python benchmarks/tokenization.py`` (several minutes on 2 cores); prints a JSON report.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _read_lines(paths):
    lines = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines.extend(line.rstrip("\n") for line in f)
    return lines


def _mb(texts):
    return sum(len(t.encode("utf-8")) for t in texts) / 1e6


def _timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def _graph_ids(layer, texts, batch_size=256):
    import tensorflow as tf

    tokenize = tf.function(layer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    tokenize(tf.constant(texts[:2]))  # trace outside the timing
    start = time.perf_counter()
    ids = []
    for i in range(0, len(texts), batch_size):
        ids.extend(tokenize(tf.constant(texts[i : i + batch_size])).to_list())
    return ids, time.perf_counter() - start


def _graph_pack_seconds(layer, texts, batch_size=256):
    import tensorflow as tf

    call = tf.function(layer.call, input_signature=[tf.TensorSpec([None], tf.string)])
    call(tf.constant(texts[:2]))
    start = time.perf_counter()
    for i in range(0, len(texts), batch_size):
        call(tf.constant(texts[i : i + batch_size]))["input_ids"].numpy()
    return time.perf_counter() - start


def _agreement(a, b):
    same = sum(x == y for x, y in zip(a, b))
    return {"agree": same, "total": len(a), "percent": round(100.0 * same / max(len(a), 1), 4)}


def english(work: Path, vocab_size: int) -> dict:
    import sentencepiece as spm
    import tensorflow as tf
    import tensorflow_text as tf_text
    from official.nlp.tools import tokenization as official

    from albert_tf.tokenization import AlbertTokenizerLayer, SentencePieceTokenizer, train_sentencepiece
    from albert_tf.tokenization.text import preprocess_text

    files = sorted((DATA / "en" / "sotu").glob("*.txt"))
    trained, train_seconds = _timed(
        lambda: train_sentencepiece(files, work / "sotu", vocab_size=vocab_size, input_sentence_size=0, seed=0)
    )
    lines = [line for line in _read_lines(files) if line.strip()]
    sentences = [s for line in lines for s in re.split(r"(?<=[.!?]) ", line.strip())]
    reference = official.FullSentencePieceTokenizer(trained.model_file)
    ours = SentencePieceTokenizer(trained.model_file)
    layer = AlbertTokenizerLayer.from_sentencepiece(trained.model_file, sequence_length=128)

    def official_ids(texts):
        return [
            reference.convert_tokens_to_ids(reference.tokenize(official.preprocess_text(t, lower=True)))
            for t in texts
        ]

    report = {"train_seconds": round(train_seconds, 1), "vocab_size": trained.vocab_size, "lines": len(lines),
              "sentences": len(sentences), "megabytes": round(_mb(lines), 2)}
    for name, texts in (("lines", lines), ("sentences", sentences)):
        ref_ids, ref_s = _timed(official_ids, texts)
        py_ids, py_s = _timed(lambda ts: [ours.encode(t) for t in ts], texts)
        graph_ids, graph_s = _graph_ids(layer, texts)
        entry = {
            "python_vs_official": _agreement(py_ids, ref_ids),
            "graph_vs_python": _agreement(graph_ids, py_ids),
            "MB_per_s": {"official": round(_mb(texts) / ref_s, 3), "python": round(_mb(texts) / py_s, 3),
                         "graph": round(_mb(texts) / graph_s, 3)},
        }
        if name == "lines":
            sp = spm.SentencePieceProcessor(model_file=trained.model_file)
            kernel = tf_text.FastSentencepieceTokenizer(open(trained.model_file, "rb").read())
            differing = [i for i in range(len(texts)) if graph_ids[i] != py_ids[i]]
            preprocessed = {i: preprocess_text(texts[i]) for i in differing}
            explained = sum(
                sp.EncodeAsIds(text) != kernel.tokenize(tf.constant([text]))[0].numpy().tolist()
                for text in preprocessed.values()
            )
            entry["graph_vs_python_differences_from_the_sentencepiece_kernels"] = f"{explained}/{len(differing)}"
            entry["graph_pack128_MB_per_s"] = round(_mb(texts) / _graph_pack_seconds(layer, texts), 3)
        report[name] = entry
    return report


def chinese(work: Path, vocab_size: int) -> dict:
    from official.nlp.tools import tokenization as official

    from albert_tf.tokenization import AlbertTokenizerLayer, WordPieceTokenizer, build_wordpiece_vocab

    lines = []
    for name in ("sentiment_pos.txt", "sentiment_neg.txt", "peoples_daily_199801_pos_tagged.txt"):
        part = _read_lines([DATA / "zh" / name])
        if "tagged" in name:
            part = [re.sub(r"/[A-Za-z]+", "", line) for line in part]
        lines.extend(part)
    corpus = work / "zh.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    built, build_seconds = _timed(lambda: build_wordpiece_vocab([corpus], work / "vocab.txt", vocab_size))
    reference = official.FullTokenizer(built.vocab_file, do_lower_case=True)
    ours = WordPieceTokenizer(built.vocab_file, max_input_chars_per_word=400)  # official's limit
    layer = AlbertTokenizerLayer.from_wordpiece(built.vocab_file, max_input_chars_per_word=400, sequence_length=128)
    ref_ids, ref_s = _timed(lambda: [reference.convert_tokens_to_ids(reference.tokenize(t)) for t in lines])
    py_ids, py_s = _timed(lambda: [ours.encode(t) for t in lines])
    graph_ids, graph_s = _graph_ids(layer, lines)
    mb = _mb(lines)
    return {
        "build_seconds": round(build_seconds, 1), "vocab_size": built.vocab_size, "lines": len(lines),
        "megabytes": round(mb, 2),
        "python_vs_official": _agreement(py_ids, ref_ids),
        "graph_vs_python": _agreement(graph_ids, py_ids),
        "MB_per_s": {"official": round(mb / ref_s, 3), "python": round(mb / py_s, 3), "graph": round(mb / graph_s, 3),
                     "graph_pack128": round(mb / _graph_pack_seconds(layer, lines), 3)},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentencepiece-vocab-size", type=int, default=8000)
    parser.add_argument("--wordpiece-vocab-size", type=int, default=21128)
    parser.add_argument("--only", choices=("english", "chinese"), default=None)
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        print(f"shared data not found at {DATA}", file=sys.stderr)
        return 2
    report = {}
    with tempfile.TemporaryDirectory(prefix="tokenization-bench-") as tmp:
        if args.only in (None, "english"):
            report["english_sentencepiece"] = english(Path(tmp), args.sentencepiece_vocab_size)
        if args.only in (None, "chinese"):
            report["chinese_wordpiece"] = chinese(Path(tmp), args.wordpiece_vocab_size)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
