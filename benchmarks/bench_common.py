"""Helpers shared by the benchmark scripts (not part of the package).

* `time_calls`: per-call wall times of a case, timed for at least `min_seconds` after warm-up, and
  `spread`: their median and range, for the tables;
* `cpu_isa`: the CPU model and its vector / matrix extensions (AVX2 ... AMX), for table headers;
* `sentence_files` and `train_sample_spm`: the State of the Union addresses as one sentence per line
  and the small (4k-piece) SentencePiece model the pretraining-data benchmarks train on them.

The scripts import this module by file location (`import bench_common` after putting
`benchmarks/` on `sys.path`), so they work both as `python benchmarks/X.py` and when a test loads
them with `importlib`.
"""

from __future__ import annotations

import time
from pathlib import Path

SOTU = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "en" / "sotu"


def time_calls(call, min_seconds: float = 10.0, min_iters: int = 3, warmup: int = 1, max_iters: int = 100_000):
    """Runs `call()` `warmup` times untimed, then until both `min_iters` calls and `min_seconds` of
    timed calls are done (at most `max_iters`); returns the per-call seconds in call order."""
    for _ in range(warmup):
        call()
    times = []
    while len(times) < max_iters and (len(times) < min_iters or sum(times) < min_seconds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def spread(times) -> dict:
    """Median, min, max and count of per-call seconds (the tables print the median and the range)."""
    ordered = sorted(times)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
    return {"median_s": median, "min_s": ordered[0], "max_s": ordered[-1], "calls": n, "total_s": sum(ordered)}


ISA_FLAGS = (  # /proc/cpuinfo flag -> the name the tables print
    ("avx2", "AVX2"),
    ("avx512f", "AVX-512"),
    ("avx512_vnni", "AVX512-VNNI"),
    ("avx_vnni", "AVX-VNNI"),
    ("avx512_bf16", "AVX512-BF16"),
    ("amx_tile", "AMX"),
    ("amx_bf16", "AMX-BF16"),
    ("amx_int8", "AMX-INT8"),
)


def cpu_isa(cpuinfo: str = "/proc/cpuinfo") -> dict:
    """The CPU model and which of `ISA_FLAGS` it has: int8 and bf16 speed-ups move with these
    (VNNI, AVX512-BF16, AMX), so every latency table prints them. Empty where the file is absent."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return {"model": "unknown", "flags": [], "missing": [name for _, name in ISA_FLAGS]}
    model, flags = "unknown", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown":
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return {"model": model, "flags": [name for flag, name in ISA_FLAGS if flag in flags],
            "missing": [name for flag, name in ISA_FLAGS if flag not in flags]}


def sentence_files(work: Path, sources, folder: str = "sentences"):
    """Every source address (one paragraph per line) written as one sentence per line with a blank
    line between documents (the original `create_pretraining_data.py` input format); the paths."""
    from albert_tf.data.documents import read_documents

    target = Path(work) / folder
    target.mkdir()
    paths = []
    for source in sources:
        path = target / Path(source).name
        with open(path, "w", encoding="utf-8") as f:
            for document in read_documents(str(source), "paragraphs"):
                f.write("\n".join(document.sentences) + "\n\n")
        paths.append(str(path))
    return paths


def train_sample_spm(work: Path, paths, vocab_size: int = 4000) -> str:
    """The pretraining-data benchmarks' SentencePiece model (unigram, ALBERT's special pieces) on
    `paths`; returns the `.model` path."""
    import sentencepiece as spm

    prefix = Path(work) / "sp"
    spm.SentencePieceTrainer.train(
        input=",".join(str(p) for p in paths),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        minloglevel=2,
        num_threads=2,
    )
    return f"{prefix}.model"
