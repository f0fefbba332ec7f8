"""The deployment frontier: dev accuracy against batch-1 latency and batch-32 throughput, per way of
serving an ALBERT classifier, beside the runtimes a user would pick instead (PyTorch, ONNX Runtime,
OpenVINO).

Rows (each one a case timed in the same run, one request each in turn):

* the teacher exported with `albert_tf.export.export_saved_model` (raw text in, tokenized in the
  graph) in fp32 and bf16 (`precision="mixed_bfloat16"`), fixed-length (pads to the sequence
  length) and length-aware (`length_bucket=16`, where the export has it), as LiteRT dynamic-range
  int8 (`tflite="dynamic-int8"` + `albert_tf.export.tflite.TfliteModel`, where the export has it)
  and as OpenVINO IR int8 / bf16 / f32 (`openvino=...`, raw text in, served by
  `albert_tf.model_server.openvino_servable.OpenVinoServable` in a worker process of its own, as the
  peers run and as OpenVINO Model Server would, where the export has it; else a note);
* each student in fp32 (length-aware where available), LiteRT int8 and OpenVINO int8 (the fast paths);
* peers (`frontier_peers.py`, each runtime in a worker process of its own, `--threads` threads):
  PyTorch of every model (transformers' `AlbertModel` + the same head; fp32, bf16 autocast, dynamic
  int8); ONNX Runtime fp32 and dynamic int8 (after `quant_pre_process`) and OpenVINO f32, bf16 and
  NNCF int8 (calibrated on RT training texts) of the teacher, from its `torch.onnx.export`. They
  get the albert_tf weights (`albert_tf.checkpoints.huggingface.export_huggingface_weights`) where
  the encoder shares all its blocks (the only scheme Hugging Face has); otherwise random weights of
  the same shapes (latency only, said in the notes). Peers tokenize with transformers' ALBERT
  tokenizer built from the same SentencePiece model (the notes say on how many texts its ids equal
  albert_tf's) outside the timed call and pad each batch to its longest text.

Every table prints the precision each case actually ran in (TF: the SavedModel's variable dtypes;
OpenVINO: the compiled model's ops counted by `runtimePrecision`; ONNX Runtime: int8 and float
MatMuls; PyTorch: the autocast dtype and the quantized Linears), the CPU's ISA and every version.

Accuracy: with `--teacher DIR` / `--student DIR` (model directories written by `albert-tf
finetune` / `albert-tf distill`), every row's accuracy on `--dev` (default the Rotten Tomatoes dev
set) is measured through that row's own path (fp32, bf16, int8 each predicted, none copied).
Without them, `--shapes` builds random-weight classifiers (latency only, accuracy blank): by default
the ALBERT-base teacher (12 x 768, E 128) and the students `shared:6` (the one shared 768 block
applied 6 times), 6 x 384, 4 x 312 and 2 x 128 (heads of 64, 312 with 12 heads; feed-forward 4 x
hidden), with a SentencePiece model of `--vocab-size` (default 2,000) trained on the RT training texts.

Traffic: the RT dev texts, the Chinese reviews (zh/sentiment_{pos,neg}.txt) and full windows
(texts of 200+ words, cut to the sequence length), `--texts` of each. Batch 1: p50/p90 latency of a
request; batch 32: texts/s. All cases of one traffic set and batch size are interleaved (one request
each in turn, the order reversed every round, all on the same request) until each has at least
`--min-seconds` and `--min-requests`. Ratios: against the fixed-length fp32 teacher export and the
best peer case of the same traffic and batch size (any model; and the same model's).

Targets (issue 38; a block under the table, on the RT dev traffic, each a ratio of two rows of the
run: met / not met / not measured): (i) the bf16 SavedModel against PyTorch bf16, batch 1 >= 1.0x
and batch 32 >= 1.5x; (ii) our OpenVINO int8 against the OpenVINO int8 peer, batch 1 and 32 >=
1.0x, its dev accuracy within 0.5 point of fp32; (iii) the fastest of our rows at >= 97 % of the
teacher's fp32 dev accuracy against the OpenVINO int8 peer, batch 1 and 32 >= 1.0x.

Bad arguments or input files end with one `error:` line and exit status 2.

Writes `<out>.md` (header: CPU model, ISA flags, threads, versions; the table, the targets, the
precisions, notes and the command that reproduces it), `<out>.jsonl` (one record per row, traffic
and batch size) and `<out>.png` (accuracy against batch-1 p50 and batch-32 texts/s on the RT dev
traffic; the parameter count instead where accuracy is blank).

    PYTHONPATH=$PWD:$PWD/../torchsite python benchmarks/deployment_frontier.py --quick   # functional check, ~2 min
    PYTHONPATH=$PWD:$PWD/../torchsite python benchmarks/deployment_frontier.py --shapes --min-seconds 10
    PYTHONPATH=$PWD:$PWD/../torchsite python benchmarks/deployment_frontier.py --teacher rt/teacher \\
        --student rt/student_shared6 --student rt/student_6x384 --min-seconds 10

The peers are benchmark-only (never dependencies): install them beside the venv, leaving its numpy
and protobuf alone (`.venv/bin/pip install --target ../torchsite --no-deps torch==2.13.0+cpu
transformers==5.25.0 tokenizers huggingface_hub onnx==1.23.2 onnxruntime==1.32.0 sympy mpmath
networkx`, the CPU wheel from a local wheel directory or PyTorch's CPU index, see serving.py) and put
them on PYTHONPATH; openvino, nncf and openvino-tokenizers come from the project's `[openvino]`
extra (`pip install -e '.[openvino]'`). A runtime that is not importable has its rows skipped with
a note (the ONNX Runtime and OpenVINO peers also need torch: they start from its ONNX export).
"""

from __future__ import annotations

import argparse
import collections
import csv
import datetime
import importlib.util
import inspect
import json
import os
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bench_common  # noqa: E402
import frontier_peers  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
SAMPLE_RT = REPO / "albert_tf" / "resources" / "sample" / "rotten_tomatoes"
RESULTS = REPO / "benchmarks" / "results"
DEFAULT_SHAPES = "teacher=12x768,shared:6,6x384,4x312,2x128"
QUICK_SHAPES = "teacher=2x64,shared:1,1x32"
LENGTH_BUCKET = 16
EVAL_BATCH = 32
TRAFFIC = ("rt-dev", "zh-reviews", "full-128")


class InputError(ValueError):
    """Bad arguments or input files: one line on stderr, exit status 2."""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- traffic and dev data ------------------------------------------------------------------------


def read_labelled_tsv(path) -> list:
    """(label, text) rows of a `label<TAB>text` file with a header."""
    if not Path(path).is_file():
        raise InputError(f"no such file: {path}")
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        if not reader.fieldnames or not {"label", "text"} <= set(reader.fieldnames):
            raise InputError(f"{path}: expected a header with `label` and `text` columns")
        return [(row["label"], row["text"]) for row in reader if row["text"]]


def traffic_sets(dev_rows, count: int, zh_dir: Path, seed: int = 0) -> dict:
    """{name: texts}: the dev texts, the Chinese reviews (where the shared data has them) and full
    windows (consecutive dev texts joined to 200+ words, so every tokenizer fills its length)."""
    rng = random.Random(seed)
    dev_texts = [text for _, text in dev_rows]
    sets = {"rt-dev": rng.sample(dev_texts, min(count, len(dev_texts)))}
    zh = []
    for name in ("sentiment_pos.txt", "sentiment_neg.txt"):
        path = zh_dir / name
        if path.is_file():
            zh += [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if zh:
        sets["zh-reviews"] = rng.sample(zh, min(count, len(zh)))
    words = " ".join(dev_texts).split()
    # 200 words: more than 128 pieces for any English SentencePiece model (>= 1 piece a word).
    sets["full-128"] = [" ".join(words[(200 * n + i) % len(words)] for i in range(200)) for n in range(count)]
    return sets


def requests_of(texts, batch: int) -> list:
    """Consecutive `batch`-text requests over `texts` (wrapping around at the end)."""
    if batch == 1:
        return [[t] for t in texts]
    cycled = texts * (-(-batch // len(texts)) + 1)
    return [cycled[i:i + batch] for i in range(0, len(texts), batch)]


# --- models ----------------------------------------------------------------------------------------


class Source:
    """One model to deploy: the Keras classifier, its tokenizer and labels, where it came from."""

    def __init__(self, name, role, model, spm, lower_case, seq_len, labels, given):
        self.name, self.role, self.model, self.spm = name, role, model, spm
        self.lower_case, self.seq_len, self.labels, self.given = lower_case, seq_len, list(labels), given
        self.config = model.encoder.to_albert_config()
        self.params = int(model.count_params())

    @property
    def shape(self) -> str:
        c = self.config
        shared = " shared" if c.sharing == "all" and c.num_hidden_groups == 1 and c.num_hidden_layers > 1 else ""
        return f"{c.num_hidden_layers} x {c.hidden_size}{shared}, E {c.embedding_size}, vocab {c.vocab_size}"


def model_dir_source(path: str, role: str, name: str) -> Source:
    from albert_tf.tasks.classification import CLASSIFICATION
    from albert_tf.tasks.resources import load_model
    from albert_tf.tasks.spec import TaskSpec

    from albert_tf.tasks.errors import TaskError

    try:
        spec = TaskSpec.read(path)
    except (TaskError, OSError) as e:
        raise InputError(f"{path}: {e}") from None
    if spec.kind != CLASSIFICATION:
        raise InputError(f"{path}: a {spec.kind} model; the frontier compares classifiers")
    if spec.tokenizer["type"] != "sentencepiece":
        raise InputError(f"{path}: a {spec.tokenizer['type']} tokenizer; the benchmark (and its PyTorch peer) needs SentencePiece")
    try:
        model = load_model(path)
    except TaskError as e:
        raise InputError(str(e)) from None
    return Source(name, role, model, os.path.join(path, spec.tokenizer["file"]), spec.tokenizer["lower_case"],
                  spec.max_seq_length, spec.labels, given=True)


def parse_shape(text: str, teacher_config):
    """(name, AlbertConfig) of `LxH`, `name=LxH` or `shared:N` (the teacher's shared block N times)."""
    name, _, shape = text.rpartition("=")
    shape = shape.strip()
    if shape.startswith("shared:"):
        if teacher_config is None:
            raise InputError(f"--shapes: {text!r} needs a teacher shape before it")
        count = shape.split(":", 1)[1]
        if not count.isdigit() or int(count) < 1:
            raise InputError(f"--shapes: shared:N takes a positive layer count, got {text!r}")
        layers = int(count)
        return name or f"student {shape}", teacher_config.replace(num_hidden_layers=layers)
    try:
        layers, hidden = (int(v) for v in shape.lower().split("x"))
        if layers < 1 or hidden < 1:
            raise ValueError
    except ValueError:
        raise InputError(f"--shapes: expected LxH, name=LxH or shared:N, got {text!r}") from None
    heads = hidden // 64 if hidden % 64 == 0 else 12 if hidden % 12 == 0 else 1
    config = (teacher_config or _base_config()).replace(
        num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden,
        embedding_size=min(128, hidden))
    return name or f"student {layers}x{hidden}", config


def _base_config():
    from albert_tf import AlbertConfig

    return AlbertConfig.preset("base-v2")


def random_sources(shapes: str, spm: str, vocab_size: int, seq_len: int) -> list:
    import numpy as np

    from albert_tf import AlbertEncoder
    from albert_tf.tasks.classification import build_task_model

    sources, teacher = [], None
    for i, item in enumerate(s for s in shapes.split(",") if s):
        name, config = parse_shape(item, teacher)
        if i == 0:
            config = config.replace(vocab_size=vocab_size, max_position_embeddings=max(seq_len, 128))
            teacher, name = config, (name if "=" in item else "teacher")
        model = build_task_model(AlbertEncoder.from_albert_config(config), 2, dropout=0.0)
        model({k: np.zeros((1, seq_len), "int32") for k in ("input_ids", "input_mask", "segment_ids")})
        sources.append(Source(name, "teacher" if i == 0 else "student", model, spm, True, seq_len, ["0", "1"],
                              given=False))
    return sources


def train_traffic_spm(work: str, rows, vocab_size: int) -> str:
    """A SentencePiece model of about `vocab_size` pieces on the training texts (random-weight mode)."""
    from albert_tf.tokenization.sentencepiece_vocab import train_sentencepiece

    corpus = os.path.join(work, "spm_corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(text for _, text in rows) + "\n")
    return train_sentencepiece([corpus], os.path.join(work, "traffic"), vocab_size=vocab_size, seed=0,
                               hard_vocab_limit=False, num_threads=2).model_file


# --- albert_tf cases -------------------------------------------------------------------------------


def export_features() -> dict:
    """Which optional `export_saved_model` arguments this checkout has (`length_bucket`, `tflite`,
    `openvino` with its servable and `openvino` itself importable, `openvino_calibration`)."""
    from albert_tf.export.saved_model import export_saved_model

    parameters = inspect.signature(export_saved_model).parameters
    openvino = ("openvino" in parameters and importlib.util.find_spec("openvino") is not None
                and importlib.util.find_spec("albert_tf.model_server.openvino_servable") is not None)
    return {"length_bucket": "length_bucket" in parameters, "tflite": "tflite" in parameters,
            "openvino": openvino, "openvino_calibration": "openvino_calibration" in parameters}


def variable_dtypes(path: str) -> str:
    """`float32 25, bfloat16 3 variables`: what a SavedModel stores its weights in (its checkpoint)."""
    import tensorflow as tf

    dtypes = tf.train.load_checkpoint(os.path.join(path, "variables", "variables")).get_variable_to_dtype_map()
    counts = collections.Counter(dtype.name for name, dtype in dtypes.items() if name != "_CHECKPOINTABLE_OBJECT_GRAPH")
    return ", ".join(f"{dtype} {n}" for dtype, n in counts.most_common()) + " variables"


class SavedModelCase:
    """An exported SavedModel's `serving_default` called with raw texts (tokenized in the graph)."""

    runs_here = True

    def __init__(self, path: str):
        import tensorflow as tf

        self._tf = tf
        self.loaded = tf.saved_model.load(path)
        self.fn = self.loaded.signatures["serving_default"]
        self.precision = variable_dtypes(path)

    def predict(self, texts):
        return [int(i) for i in self.fn(text=self._tf.constant(texts))["label_id"].numpy()]


class TfliteCase:
    """A LiteRT model with the export's tokenizer layer in front; `TfliteModel` cuts each batch to
    its longest text rounded up to `LENGTH_BUCKET` (as the length-aware export pads)."""

    runs_here = True
    precision = "dynamic-range int8 weights, float32 activations (LiteRT)"

    def __init__(self, path: str, layer, threads: int):
        import tensorflow as tf

        from albert_tf.export.tflite import TfliteModel

        self._tf = tf
        # Eager calls of the tokenizer layer take ~60 ms each; traced once, a fraction of a ms.
        self.tokenize = tf.function(layer, input_signature=[tf.TensorSpec([None], tf.string)])
        self.model = TfliteModel(path, num_threads=threads, length_bucket=LENGTH_BUCKET)

    def predict(self, texts):
        features = {k: v.numpy() for k, v in self.tokenize(self._tf.constant(texts)).items()}
        return [int(i) for i in self.model(features)["logits"].argmax(-1)]


class OpenVinoCase(frontier_peers.PeerCase):
    """Our OpenVINO IR export (raw text in: openvino-tokenizers in the IR) through the model server's
    `OpenVinoServable`, fed as the server feeds it (an object array of UTF-8 bytes), in a worker
    process of its own (`frontier_peers.albert_tf_openvino_cases`), as the peers and OVMS run."""

    def __init__(self, version_dir: str, threads: int, work: str):
        worker = frontier_peers.PeerWorker("albert_tf_openvino", {"models": [{"name": "m", "ir": version_dir}],
                                                                  "threads": threads}, work)
        super().__init__(worker, "m/ir")
        self.precision = worker.precisions["m/ir"]


class ServedSavedModelCase(frontier_peers.PeerCase):
    """Our bf16 SavedModel export as `albert-tf serve` runs it: the model server's `SessionServable`
    in a worker process of its own, with oneDNN's frozen-weights mode set by the server's rule
    before TensorFlow runs (`frontier_peers.albert_tf_savedmodel_cases`); not in this process, whose
    TensorFlow has run the exports (the mode is read once and must never see weights change)."""

    def __init__(self, version_dir: str, precision: str, threads: int, work: str):
        worker = frontier_peers.PeerWorker("albert_tf_savedmodel", {
            "models": [{"name": "m", "path": version_dir, "precision": precision}], "threads": threads}, work)
        super().__init__(worker, "m/savedmodel")
        self.precision = worker.precisions["m/savedmodel"]


def albert_tf_cases(source: Source, base: str, features: dict, threads: int, calibration: list, notes: list,
                    quick: bool = False) -> list:
    """[(row fields, case)] of one model: the exports its role asks for, those this checkout can make
    (`quick`: of the OpenVINO exports only the teacher's int8, which the targets need; the teacher's
    SavedModels at fixed length only)."""
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    layer = AlbertTokenizerLayer.from_sentencepiece(source.spm, sequence_length=source.seq_len,
                                                    lower_case=source.lower_case)
    lengths = ["fixed"] + (["length-aware"] if features["length_bucket"] else [])
    if source.role == "teacher":
        # --quick: the teacher's SavedModels at fixed length only (the students' are length-aware).
        variants = [(precision, length) for length in lengths[:1 if quick else None] for precision in ("fp32", "bf16")]
    else:
        variants = [("fp32", lengths[-1])]
    cases = []
    slug = source.name.replace(" ", "_").replace(":", "").replace("/", "_")
    for precision, length in variants:
        # fp32 named, not the model's own: a model fine-tuned in mixed_bfloat16 exports bf16 by default.
        kwargs = {"precision": "mixed_bfloat16" if precision == "bf16" else "float32"}
        if features["length_bucket"]:
            kwargs["length_bucket"] = LENGTH_BUCKET if length == "length-aware" else None
        log(f"exporting {source.name} {precision} {length}")
        result = export_saved_model(source.model, layer, base, f"{slug}_{precision}_{length.replace('-', '')}",
                                    labels=source.labels, check=False, **kwargs)
        if precision == "bf16":  # served as `albert-tf serve` runs it (`ServedSavedModelCase`)
            case = ServedSavedModelCase(result.path, variable_dtypes(result.path), threads, base)
        else:
            case = SavedModelCase(result.path)
        cases.append((dict(impl="albert_tf SavedModel", precision=precision, length=length), case))
    length_kwargs = {"length_bucket": LENGTH_BUCKET} if features["length_bucket"] else {}
    if features["tflite"]:
        log(f"exporting {source.name} LiteRT dynamic-int8")
        result = export_saved_model(source.model, layer, base, f"{slug}_int8", labels=source.labels, check=False,
                                    tflite="dynamic-int8", **length_kwargs)
        from albert_tf.export.tflite import TFLITE_FILE

        path = os.path.join(result.path, TFLITE_FILE)
        if not os.path.isfile(path):
            notes.append(f"{source.name}: the export wrote no {TFLITE_FILE}; no LiteRT row")
        else:
            cases.append((dict(impl="albert_tf LiteRT", precision="int8", length="longest/16"),
                          TfliteCase(path, layer, threads)))
    else:
        notes.append(f"{source.name}: no LiteRT int8 row (this checkout's export_saved_model has no `tflite`)")
    if features["openvino"] and (source.role == "teacher" or not quick):
        kinds = ("int8",) if quick or source.role != "teacher" else ("int8", "bf16", "f32")
        cases += openvino_export_cases(source, layer, base, slug, kinds, features, threads, calibration, notes)
    return cases


def openvino_export_cases(source, layer, base, slug, kinds, features, threads, calibration, notes) -> list:
    """Our OpenVINO IR rows of `kinds` (int8, bf16 and f32 of the teacher; int8, the fast path, of a student)."""
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.model_server.servable import ServingError

    cases = []
    for kind in kinds:
        log(f"exporting {source.name} OpenVINO {kind}")
        kwargs = {"openvino_calibration": calibration} if features["openvino_calibration"] else {}
        try:
            result = export_saved_model(source.model, layer, base, f"{slug}_ov_{kind}", labels=source.labels,
                                        check=False, openvino=kind, **kwargs)
            case = OpenVinoCase(result.path, threads, base)
        except (ServingError, ValueError, OSError, RuntimeError) as e:
            # The export target is new: one refusal must not lose the other rows of the run.
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            notes.append(f"{source.name}: no OpenVINO {kind} row: {first}")
            continue
        cases.append((dict(impl="albert_tf OpenVINO", precision="fp32" if kind == "f32" else kind, length="longest"),
                      case))
    return cases


# --- measuring ---------------------------------------------------------------------------------------


def timed(case, texts) -> float:
    """Seconds of one request: a worker reports its own (the pipe's round trip is not the model's)."""
    if not case.runs_here:
        return case.time(texts)
    start = time.perf_counter()
    case.predict(texts)
    return time.perf_counter() - start


def interleave(cases: dict, requests, min_seconds: float, min_requests: int, warmup: int = 1) -> dict:
    """{case: per-request seconds}: every case on the same request in turn (the order reversed each
    round) until each has `min_requests` and `min_seconds`, after `warmup` untimed rounds."""
    order = list(cases)
    for i in range(warmup):
        for name in order:
            timed(cases[name], requests[i % len(requests)])
    times = {name: [] for name in order}
    index = 0
    while min(len(t) for t in times.values()) < min_requests or min(sum(t) for t in times.values()) < min_seconds:
        request = requests[index % len(requests)]
        for name in order:
            if len(times[name]) >= min_requests and sum(times[name]) >= min_seconds:
                continue  # done: no need to hold the others up
            times[name].append(timed(cases[name], request))
        order.reverse()
        index += 1
    return times


def percentile(values, q: float) -> float:
    import numpy as np

    return float(np.percentile(values, q))


def accuracy(case, dev_rows, labels) -> float:
    index = {label: i for i, label in enumerate(labels)}
    texts = [text for _, text in dev_rows]
    if case.runs_here:
        predicted = [p for i in range(0, len(texts), EVAL_BATCH) for p in case.predict(texts[i:i + EVAL_BATCH])]
    else:
        predicted = case.predict(texts)
    return sum(p == index.get(label, -1) for p, (label, _) in zip(predicted, dev_rows)) / len(dev_rows)


# --- reporting ---------------------------------------------------------------------------------------


def ratio(value, reference, higher_is_better: bool):
    if value is None or not reference:
        return None
    return value / reference if higher_is_better else reference / value


def is_peer(record: dict) -> bool:
    return not record["impl"].startswith("albert_tf")


def add_ratios(records: list) -> None:
    """Per traffic and batch size: against the fixed-length fp32 teacher export and the best peer
    case (PyTorch, ONNX Runtime, OpenVINO: any model, and the row's own model). Batch 1 compares p50
    latency (reference / row, so > 1 is faster), larger batches texts/s (row / reference)."""
    groups = {}
    for r in records:
        groups.setdefault((r["traffic"], r["batch"]), []).append(r)
    for rows in groups.values():
        key = "p50_ms" if rows[0]["batch"] == 1 else "texts_per_s"
        higher = key == "texts_per_s"
        pick = max if higher else min
        teacher = [r for r in rows if r["role"] == "teacher" and r["impl"] == "albert_tf SavedModel"
                   and r["precision"] == "fp32" and r["length"] == "fixed"]
        peers = [r for r in rows if is_peer(r)]
        best = pick((r[key] for r in peers), default=None)
        for r in rows:
            r["vs_teacher_fp32_fixed"] = ratio(r[key], teacher[0][key], higher) if teacher else None
            r["vs_best_peer"] = ratio(r[key], best, higher) if best else None
            own = pick((t[key] for t in peers if t["model"] == r["model"]), default=None)
            r["vs_best_peer_same_model"] = ratio(r[key], own, higher) if own else None


def _find(rows, **fields):
    """The row whose fields equal `fields`; a tuple value matches any of its items, the earlier preferred."""
    matches = [r for r in rows
               if all(r.get(k) in v if isinstance(v, tuple) else r.get(k) == v for k, v in fields.items())]
    return min(matches, key=lambda r: [v.index(r[k]) for k, v in fields.items() if isinstance(v, tuple)],
               default=None)


def _speed(ours, peer, batch):
    """(ours vs peer at `batch`: > 1 is faster, or None)."""
    if not ours or not peer or batch not in ours or batch not in peer:
        return None
    key = "p50_ms" if batch == 1 else "texts_per_s"
    return ratio(ours[batch].get(key), peer[batch].get(key), key == "texts_per_s")


def targets(records: list, traffic: str = "rt-dev") -> list:
    """Issue 38's targets on one traffic set, each a ratio of two rows of the same run:
    [{"target", "measured", "met"}] (`met` None where a row or an accuracy is missing)."""
    rows = [r for r in records if r["traffic"] == traffic]
    if not rows:
        return []
    big = max(r["batch"] for r in rows)
    by_case = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["batch"]] = r
    cases = [dict(next(iter(b.values())), by_batch=b) for b in by_case.values()]

    def pick(**fields):
        found = _find(cases, **fields)
        return (found["case"], found["by_batch"]) if found else (None, None)

    teacher = {"role": "teacher"}
    out = []

    def add(target, threshold, ours, peer, batch, extra_ok=True):
        value = _speed(ours[1], peer[1], batch)
        measured = "-" if value is None else f"{value:.2f}x ({ours[0]} vs {peer[0]})"
        met = None if value is None or extra_ok is None else bool(value >= threshold and extra_ok)
        out.append({"target": target, "measured": measured, "met": met})

    bf16 = pick(**teacher, impl="albert_tf SavedModel", precision="bf16", length=("length-aware", "fixed"))
    torch_bf16 = pick(**teacher, impl="PyTorch transformers", precision="bf16")
    add("(i) bf16 SavedModel vs PyTorch bf16, batch 1 >= 1.0x", 1.0, bf16, torch_bf16, 1)
    add(f"(i) bf16 SavedModel vs PyTorch bf16, batch {big} >= 1.5x", 1.5, bf16, torch_bf16, big)

    fp32 = pick(**teacher, impl="albert_tf SavedModel", precision="fp32", length=("fixed", "length-aware"))
    fp32_accuracy = next(iter(fp32[1].values())).get("accuracy") if fp32[1] else None
    ov_int8 = pick(**teacher, impl="albert_tf OpenVINO", precision="int8")
    ov_peer = pick(**teacher, impl="OpenVINO", precision="int8")
    int8_accuracy = next(iter(ov_int8[1].values())).get("accuracy") if ov_int8[1] else None
    close = None if fp32_accuracy is None or int8_accuracy is None else fp32_accuracy - int8_accuracy <= 0.005 + 1e-9
    add("(ii) our OpenVINO int8 vs OpenVINO int8 peer, batch 1 >= 1.0x", 1.0, ov_int8, ov_peer, 1)
    add(f"(ii) our OpenVINO int8 vs OpenVINO int8 peer, batch {big} >= 1.0x", 1.0, ov_int8, ov_peer, big)
    out.append({"target": "(ii) our OpenVINO int8 dev accuracy within 0.5 point of the fp32 SavedModel",
                "measured": "-" if close is None else f"{100 * int8_accuracy:.2f} vs {100 * fp32_accuracy:.2f}",
                "met": close})

    qualified = [c for c in cases if not is_peer(c) and fp32_accuracy is not None
                 and c.get("accuracy") is not None and c["accuracy"] >= 0.97 * fp32_accuracy]
    for batch, key, best in ((1, "p50_ms", min), (big, "texts_per_s", max)):
        timed = [c for c in qualified if batch in c["by_batch"]]
        point = best(timed, key=lambda c: c["by_batch"][batch][key]) if timed else None
        ours = (point["case"], point["by_batch"]) if point else (None, None)
        add(f"(iii) best point >= 97 % of the teacher's dev accuracy vs OpenVINO int8 peer, batch {batch} >= 1.0x",
            1.0, ours, ov_peer, batch)
    return out


def targets_markdown(rows: list, traffic: str) -> list:
    if not rows:
        return []
    status = {True: "met", False: "not met", None: "not measured"}
    lines = ["", f"### Targets ({traffic} traffic; each a ratio of two rows of this run)", "",
             "| target | measured | status |", "|---|---|---|"]
    return lines + [f"| {t['target']} | {t['measured']} | {status[t['met']]} |" for t in rows]


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else format(value, spec) + suffix


def markdown(header: list, records: list, notes: list, target_rows=(), footer=()) -> str:
    lines = list(header)
    rows = {}
    for r in records:
        rows.setdefault(r["traffic"], {}).setdefault(r["case"], {})[r["batch"]] = r
    for traffic, cases in rows.items():
        lines += ["", f"### {traffic}", "",
                  "| case | model | shape | dev accuracy | batch 1 p50 ms | batch 1 p90 ms | batch N texts/s "
                  "| b1 vs teacher fp32 fixed | bN vs teacher fp32 fixed | b1 vs best peer | bN vs best peer "
                  "| b1 vs own peer | bN vs own peer |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for case, by_batch in cases.items():
            one, big = by_batch.get(1, {}), by_batch.get(max(by_batch), {}) if max(by_batch) > 1 else {}
            first = one or big
            lines.append(
                f"| {case} | {first['model']} | {first['shape']} | {_fmt(first.get('accuracy'), '.4f')} "
                f"| {_fmt(one.get('p50_ms'), '.1f')} | {_fmt(one.get('p90_ms'), '.1f')} "
                f"| {_fmt(big.get('texts_per_s'), '.1f')} "
                f"| {_fmt(one.get('vs_teacher_fp32_fixed'), '.2f', 'x')} | {_fmt(big.get('vs_teacher_fp32_fixed'), '.2f', 'x')} "
                f"| {_fmt(one.get('vs_best_peer'), '.2f', 'x')} | {_fmt(big.get('vs_best_peer'), '.2f', 'x')} "
                f"| {_fmt(one.get('vs_best_peer_same_model'), '.2f', 'x')} "
                f"| {_fmt(big.get('vs_best_peer_same_model'), '.2f', 'x')} |")
    lines += list(target_rows)
    precisions = {r["case"]: r.get("runtime_precision") for r in records if r.get("runtime_precision")}
    if precisions:
        lines += ["", "Precision each case ran in (OpenVINO: compiled ops by runtimePrecision; ONNX Runtime: "
                      "MatMuls; PyTorch: autocast dtype / quantized Linears; TF: the SavedModel's variables):", ""]
        lines += [f"- {case}: {precision}" for case, precision in precisions.items()]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    lines += list(footer)
    return "\n".join(lines) + "\n"


def plot(records: list, path: str, title: str) -> None:
    """Two panels (batch-1 p50, largest batch's texts/s) of the RT dev traffic: colour = model,
    marker = way of serving."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    rows = [r for r in records if r["traffic"] == "rt-dev"] or records
    with_accuracy = any(r.get("accuracy") is not None for r in rows)
    y_of = (lambda r: r.get("accuracy")) if with_accuracy else (lambda r: r["params"] / 1e6)
    models = list(dict.fromkeys(r["model"] for r in rows))
    variants = list(dict.fromkeys(r["case"][len(r["model"]) + 1:] for r in rows))
    colours = {m: plt.cm.tab10(i % 10) for i, m in enumerate(models)}
    markers = {v: "osD^v<>pPX*hH"[i % 13] for i, v in enumerate(variants)}
    big = max(r["batch"] for r in rows)
    figure, axes = plt.subplots(1, 2, figsize=(14, 5.5))
    for ax, batch, key, xlabel in ((axes[0], 1, "p50_ms", "batch-1 p50 latency, ms (log; left is better)"),
                                   (axes[1], big, "texts_per_s", f"batch-{big} throughput, texts/s (log; right is better)")):
        for r in rows:
            if r["batch"] == batch and y_of(r) is not None:
                ax.scatter(r[key], y_of(r), color=colours[r["model"]], marker=markers[r["case"][len(r["model"]) + 1:]],
                           s=45, edgecolors="black", linewidths=0.4)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("dev accuracy" if with_accuracy else "parameters, M (random weights: no accuracy)")
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], color=colours[m], marker="o", linestyle="", label=m) for m in models]
    handles += [Line2D([], [], color="grey", marker=markers[v], linestyle="", label=v) for v in variants]
    figure.legend(handles=handles, loc="center right", fontsize=7, frameon=False)
    figure.suptitle(f"Deployment frontier, RT dev traffic: {title}", fontsize=10)
    figure.tight_layout(rect=(0, 0, 0.8, 1))
    figure.savefig(path, dpi=130)
    plt.close(figure)


# --- main --------------------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one `error:` line (exit 2), like the script's own."""

    def error(self, message):
        raise InputError(message)


def parser_of() -> Parser:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", help="the teacher's model directory (albert-tf finetune output)")
    parser.add_argument("--student", action="append", default=[],
                        help="a student's model directory, or NAME=DIR (repeatable; default name: the directory's)")
    parser.add_argument("--shapes", nargs="?", const=DEFAULT_SHAPES, default=None,
                        help=f"random-weight models of these shapes, the first the teacher (default {DEFAULT_SHAPES})")
    parser.add_argument("--data-root", default=str(SHARED),
                        help="the shared data (en/rotten_tomatoes, zh); default ../shared/data beside the repository")
    parser.add_argument("--dev", help="labelled dev TSV (label<TAB>text; default the RT dev set, else the shipped sample)")
    parser.add_argument("--max-dev", type=int, help="score only the first N dev rows")
    parser.add_argument("--texts", type=int, default=224, help="texts of each traffic set")
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--min-seconds", type=float, default=10.0, help="timed seconds per case and batch size, at least")
    parser.add_argument("--min-requests", type=int, default=3)
    parser.add_argument("--warmup-rounds", type=int, default=1,
                        help="untimed rounds of every case first, each on the next request (default 1); as many as "
                        "the requests of a batch size (7 of 32 RT dev texts) let every case see every shape first")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="intra-op threads of every runtime: TF, LiteRT, torch, ONNX Runtime, OpenVINO "
                             "(default: the usable cores)")
    parser.add_argument("--seq-len", type=int, default=128, help="sequence length of --shapes models")
    parser.add_argument("--vocab-size", type=int, default=2000, help="SentencePiece size of --shapes models")
    parser.add_argument("--calibration-texts", type=int, default=300,
                        help="RT training texts the int8 OpenVINO exports (ours and the NNCF peer) calibrate on")
    parser.add_argument("--traffic", help=f"comma-separated subset of {','.join(TRAFFIC)}")
    parser.add_argument("--no-peers", "--no-torch", dest="no_peers", action="store_true",
                        help="leave the peer rows out (PyTorch, ONNX Runtime, OpenVINO)")
    parser.add_argument("--out", help="output prefix (default benchmarks/results/deployment_frontier_<date>)")
    parser.add_argument("--quick", action="store_true",
                        help=f"functional check: {QUICK_SHAPES}, 16 texts, 0.05 s per case, batches 1 and 4")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser_of().parse_args(argv)
        check_args(args)
        return run(args, argv)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def check_args(args) -> None:
    """Refuses contradictory or out-of-range arguments (InputError) and applies `--quick`."""
    if args.teacher and args.shapes:
        raise InputError("give --teacher/--student model directories or --shapes, not both")
    if args.student and not args.teacher:
        raise InputError("--student needs --teacher")
    for name in ("texts", "min_requests", "threads", "seq_len", "vocab_size", "calibration_texts", "max_dev"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise InputError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.min_seconds < 0:
        raise InputError(f"--min-seconds must not be negative, got {args.min_seconds:g}")
    if args.warmup_rounds < 0:
        raise InputError(f"--warmup-rounds must not be negative, got {args.warmup_rounds}")
    batches = args.batches.split(",")
    if not all(b.strip().isdigit() and int(b) > 0 for b in batches):
        raise InputError(f"--batches takes positive integers separated by commas, got {args.batches!r}")
    if args.traffic and not set(args.traffic.split(",")) <= set(TRAFFIC):
        unknown = sorted(set(args.traffic.split(",")) - set(TRAFFIC))
        raise InputError(f"--traffic: unknown traffic set {', '.join(unknown)} (known: {', '.join(TRAFFIC)})")
    if args.quick:
        args.shapes = None if args.teacher else args.shapes or QUICK_SHAPES
        args.texts, args.min_seconds, args.min_requests, args.batches = min(args.texts, 16), 0.05, 2, "1,4"
        args.max_dev = args.max_dev or 32
        args.vocab_size = min(args.vocab_size, 400)
        args.calibration_texts = min(args.calibration_texts, 16)
    if not (args.teacher or args.shapes):
        args.shapes = DEFAULT_SHAPES


def load_sources(args, rt: Path, work: str, notes: list) -> list:
    if args.teacher:
        sources = [model_dir_source(args.teacher, "teacher", "teacher")]
        for item in args.student:
            name, _, path = item.rpartition("=") if "=" in item and not os.path.exists(item) else ("", "", item)
            sources.append(model_dir_source(path, "student", name or Path(path).name))
        return sources
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    train = rt / "train.tsv" if (rt / "train.tsv").is_file() else SAMPLE_RT / "train.tsv"
    log(f"training a {args.vocab_size}-piece SentencePiece model on {train}")
    spm = train_traffic_spm(work, read_labelled_tsv(train), args.vocab_size)
    pieces = AlbertTokenizerLayer.from_sentencepiece(spm, sequence_length=args.seq_len).vocab_size
    notes.append("random weights (--shapes): latency only, no accuracy")
    return random_sources(args.shapes, spm, pieces, args.seq_len)


def measure(cases: dict, meta: dict, traffic: dict, batches: list, dev_rows, args, date: str) -> list:
    """Each row's dev accuracy (through its own path; models with weights only), then the
    interleaved timing of every case per traffic set and batch size: the records."""
    accuracies = {}
    for name, case in cases.items():
        source = meta[name]["source"]
        random_peer = not meta[name]["impl"].startswith("albert_tf") and source.config.sharing != "all"
        if source.given and not random_peer:  # a peer of a model Hugging Face cannot hold has random weights
            log(f"dev accuracy: {name}")
            accuracies[name] = accuracy(case, dev_rows, source.labels)
    records = []
    for traffic_name, texts in traffic.items():
        for batch in batches:
            log(f"timing {len(cases)} cases on {traffic_name}, batch {batch}")
            times = interleave(cases, requests_of(texts, batch), args.min_seconds, args.min_requests,
                               warmup=args.warmup_rounds)
            for name, seconds in times.items():
                m = meta[name]
                records.append({
                    "date": date, "case": name, "model": m["model"], "role": m["source"].role,
                    "shape": m["source"].shape, "params": m["source"].params, "impl": m["impl"],
                    "precision": m["precision"], "length": m["length"], "runtime_precision": m["runtime_precision"],
                    "traffic": traffic_name, "batch": batch, "p50_ms": 1000 * percentile(seconds, 50),
                    "p90_ms": 1000 * percentile(seconds, 90), "texts_per_s": batch * len(seconds) / sum(seconds),
                    "requests": len(seconds), "timed_s": sum(seconds), "accuracy": accuracies.get(name),
                    "threads": args.threads, "quick": args.quick,
                })
    return records


def run(args, argv) -> int:
    load_start = os.getloadavg()
    rt, zh = Path(args.data_root) / "en" / "rotten_tomatoes", Path(args.data_root) / "zh"

    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)

    dev_path = Path(args.dev) if args.dev else (rt / "dev.tsv" if (rt / "dev.tsv").is_file() else SAMPLE_RT / "dev.tsv")
    dev_rows = read_labelled_tsv(dev_path)[: args.max_dev]
    train_path = rt / "train.tsv" if (rt / "train.tsv").is_file() else SAMPLE_RT / "train.tsv"
    calibration = [text for _, text in read_labelled_tsv(train_path)][: args.calibration_texts]
    traffic = traffic_sets(dev_rows, args.texts, zh)
    if args.traffic:
        traffic = {k: v for k, v in traffic.items() if k in args.traffic.split(",")}
    notes = []
    if "zh-reviews" not in traffic and not args.traffic:
        notes.append(f"no Chinese reviews under {zh}: that traffic set is left out")
    date = datetime.date.today().isoformat()
    out = args.out or str(RESULTS / f"deployment_frontier_{date}{'_quick' if args.quick else ''}")

    with tempfile.TemporaryDirectory(prefix="deployment-frontier-") as work:
        sources = load_sources(args, rt, work, notes)
        features = export_features()
        if not features["length_bucket"]:
            notes.append("this checkout's export_saved_model has no `length_bucket`: no length-aware rows "
                         "(students exported fixed-length)")
        if features["openvino"] and args.quick:
            notes.append("--quick: of our OpenVINO exports only the teacher's int8; the teacher's SavedModels at "
                         "fixed length only")
        if not features["openvino"]:
            notes.append("no albert_tf OpenVINO rows: this checkout's export_saved_model has no `openvino=` "
                         "(or openvino / albert_tf.model_server.openvino_servable is not importable)")
        cases, meta = {}, {}
        base = os.path.join(work, "exports")
        for source in sources:
            for fields, case in albert_tf_cases(source, base, features, args.threads, calibration, notes, args.quick):
                name = f"{source.name} {fields['precision']} {fields['impl'].split()[-1]} {fields['length']}"
                cases[name] = case
                meta[name] = dict(fields, model=source.name, source=source, runtime_precision=case.precision)
        workers = []
        if args.no_peers:
            notes.append("peer rows (PyTorch, ONNX Runtime, OpenVINO) left out (--no-peers)")
        else:
            workers, peers = frontier_peers.peer_cases(sources, work, args.threads, calibration, notes)
            for name, (fields, case) in peers.items():
                cases[name], meta[name] = case, fields
        try:
            if workers:
                notes.append(frontier_peers.tokenizer_agreement(workers[0], sources[0], traffic))
            batches = [int(b) for b in args.batches.split(",")]
            records = measure(cases, meta, traffic, batches, dev_rows, args, date)
        finally:
            for worker in workers + [case.worker for case in cases.values()
                                     if isinstance(case, (OpenVinoCase, ServedSavedModelCase))]:
                worker.close()
    report(args, argv, records, notes, sources, workers, traffic, dev_path, dev_rows, load_start, out, date)
    return 0


def report(args, argv, records, notes, sources, workers, traffic, dev_path, dev_rows, load_start, out, date) -> None:
    """Prints and writes the table (header, rows, targets, precisions, notes, the reproducing
    command), the JSON lines and the plot."""
    import keras
    import tensorflow as tf

    add_ratios(records)
    cores = len(os.sched_getaffinity(0))
    busiest = max(load_start[0], os.getloadavg()[0])
    if busiest > cores:
        notes.append(f"the machine was busy (load average up to {busiest:.1f} on {cores} usable cores): shared cores slow "
                     f"the peers' spin-waiting OpenMP threads most (2 threads measured ~10x slower than 1 here); "
                     f"rerun on an idle machine before reading the ratios")
    isa = bench_common.cpu_isa()
    versions = [f"TF {tf.__version__}", f"keras {keras.__version__}"]
    for module, label in (("ai_edge_litert", "ai-edge-litert"), ("openvino", "openvino (ours)")):
        if importlib.util.find_spec(module) is not None:
            versions.append(f"{label} {getattr(importlib.import_module(module), '__version__', '?')}")
    versions += [worker.versions for worker in workers]
    threads = "; ".join(f"{w.runtime} {w.threads}" for w in workers) or "no peers"
    header = [
        f"## Deployment frontier ({date}{', --quick' if args.quick else ''})", "",
        f"CPU: {isa['model']}; ISA: {', '.join(isa['flags']) or 'none of the listed'}"
        f" (not: {', '.join(isa['missing']) or '-'}); {cores} usable cores; load average "
        f"{' '.join(f'{v:.2f}' for v in load_start)} at the start, {' '.join(f'{v:.2f}' for v in os.getloadavg())} "
        f"at the end.",
        f"Threads: TF intra-op {args.threads}, inter-op {tf.config.threading.get_inter_op_parallelism_threads() or 'default'}; "
        f"LiteRT {args.threads}; peers (each in its own process): {threads}. Versions: {'; '.join(versions)}.",
        f"Models: {'; '.join(f'{s.name} ({s.shape}, {s.params / 1e6:.1f}M params)' for s in sources)}. "
        f"Dev: {dev_path} ({len(dev_rows)} rows).",
        f"Traffic: {', '.join(f'{k} ({len(v)} texts)' for k, v in traffic.items())}; batches {args.batches}; "
        f"cases interleaved, one request each in turn, each >= {args.min_seconds:g} s and >= {args.min_requests} "
        f"requests per traffic set and batch size. Ratios > 1: faster than the reference (batch 1: p50; batch N: "
        f"texts/s).",
    ]
    target_traffic = "rt-dev" if "rt-dev" in traffic else next(iter(traffic))
    footer = ["", "Reproduce (from the repository root; peers from ../torchsite):", "",
              f"    PYTHONPATH=$PWD:$PWD/../torchsite python benchmarks/deployment_frontier.py {shlex.join(argv)}".rstrip()]
    table = markdown(header, records, notes, targets_markdown(targets(records, target_traffic), target_traffic), footer)
    print(table)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    from albert_tf import file_io

    with file_io.open_atomic(out + ".md") as f:
        f.write(table)
    with file_io.open_atomic(out + ".jsonl") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))
    with file_io.atomic_output(out + ".png", suffix=".png") as tmp:
        plot(records, tmp, f"{isa['model']}, {args.threads} threads")
    log(f"wrote {out}.md, .jsonl, .png")


if __name__ == "__main__":
    sys.exit(main())
