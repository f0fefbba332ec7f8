"""The deployment frontier's peers: the runtimes a user would pick instead of albert_tf, each in a
worker process of its own (their thread pools and TF's slow each other down in one process).

* `torch`: transformers' `AlbertModel` + the same head as ours, with our weights
  (`albert_tf.checkpoints.huggingface.export_huggingface_weights`) where the encoder shares all its
  blocks (the only scheme Hugging Face has), else random weights of the same shapes; fp32,
  `torch.autocast("cpu", torch.bfloat16)` and `torch.ao.quantization.quantize_dynamic` int8. It
  also writes the ONNX file the other two run (`torch.onnx.export`'s TorchScript exporter, which
  needs no onnxscript; dynamic batch and length axes).
* `onnxruntime`: fp32, and dynamic int8 after `quant_pre_process(..., skip_symbolic_shape=True)`
  (without it only a few of ALBERT's MatMuls quantize: the shared block's weights reach them
  through shape-dependent nodes).
* `openvino`: the ONNX model compiled with `INFERENCE_PRECISION_HINT` f32 and bf16, and NNCF int8
  (`nncf.quantize`, transformer model type, calibrated on training texts).
* `albert_tf_openvino`: not a peer but our own OpenVINO IR exports (text in), through the model
  server's `OpenVinoServable`, placed as the peers are (`deployment_frontier.OpenVinoCase`).
* `albert_tf_savedmodel`: our bf16 SavedModel exports (text in) as `albert-tf serve` runs them,
  oneDNN's frozen-weights mode set by its rule (`deployment_frontier.ServedSavedModelCase`).

Every peer tokenizes with transformers' ALBERT tokenizer built from the same SentencePiece model,
pads each batch to its longest text, outside the timed call. Each worker reports the precision
it actually ran in (`precisions`) and its versions.

The worker side runs as `python benchmarks/frontier_peers.py RUNTIME SPEC_JSON_FILE` and speaks one
JSON line per request on stdin/stdout (`time`, `predict`, `ids`, `onnx`); the benchmark's side is
`peer_cases` (starts the workers a checkout can run, says in the notes which it cannot),
`PeerWorker` and `PeerCase`.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time

EVAL_BATCH = 32
NEEDS = {  # runtime -> modules its worker imports (the ONNX peers start from the PyTorch model)
    "torch": ("torch", "transformers"),
    "onnxruntime": ("torch", "transformers", "onnx", "onnxruntime"),
    "openvino": ("torch", "transformers", "onnx", "openvino", "nncf"),
}
# runtime -> [(variant, impl, precision, case label)]: the rows each worker serves per model.
ROWS = {
    "torch": [("fp32", "PyTorch transformers", "fp32", "fp32 PyTorch"),
              ("bf16", "PyTorch transformers", "bf16", "bf16 autocast PyTorch"),
              ("int8", "PyTorch transformers", "int8", "int8 quantize_dynamic PyTorch")],
    "onnxruntime": [("fp32", "ONNX Runtime", "fp32", "fp32 ONNX Runtime"),
                    ("int8", "ONNX Runtime", "int8", "int8 dynamic ONNX Runtime")],
    "openvino": [("f32", "OpenVINO", "fp32", "f32 OpenVINO"),
                 ("bf16", "OpenVINO", "bf16", "bf16 OpenVINO"),
                 ("int8", "OpenVINO", "int8", "int8 NNCF OpenVINO")],
}
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def missing_modules(runtime: str) -> list:
    """The modules `runtime`'s worker needs that are not importable here (empty: it can run)."""
    return [name for name in NEEDS[runtime] if importlib.util.find_spec(name) is None]


# --- the benchmark's side ----------------------------------------------------------------------------


def torch_spec(source, work: str, notes: list) -> dict:
    """What a worker needs for one model: the Hugging Face config, the converted weights (or None:
    random init of the same shapes), the head and the tokenizer."""
    import numpy as np

    from albert_tf.checkpoints.huggingface import config_to_huggingface, export_huggingface_weights

    config = source.config
    hf_config = config_to_huggingface(config.replace(sharing="all"))
    hf_config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    weights = None
    if config.sharing == "all":
        tensors = export_huggingface_weights(source.model.encoder)
        if "encoder.embedding_hidden_mapping_in.weight" not in tensors:
            # E == H: albert_tf has no projection, Hugging Face always one; the identity is exact.
            tensors["encoder.embedding_hidden_mapping_in.weight"] = np.eye(config.hidden_size, dtype=np.float32)
            tensors["encoder.embedding_hidden_mapping_in.bias"] = np.zeros(config.hidden_size, np.float32)
        kernel, bias = (np.asarray(w) for w in source.model.head.get_weights())
        tensors["classifier.weight"], tensors["classifier.bias"] = np.ascontiguousarray(kernel.T), bias
        weights = os.path.join(work, f"torch_{len(os.listdir(work))}.npz")
        np.savez(weights, **tensors)
    else:
        hf_config.update(num_hidden_groups=config.num_hidden_layers)
        notes.append(f"{source.name}: sharing={config.sharing!r} has no Hugging Face form; its peers have "
                     f"random weights of the same shapes (latency only)")
    return {"name": source.name, "config": hf_config, "weights": weights, "pooling": source.model.pooling,
            "num_labels": source.model.num_labels, "spm": source.spm, "lower_case": source.lower_case,
            "max_length": source.seq_len}


class PeerWorker:
    """One runtime's worker process; `ask` sends a request and returns its reply."""

    def __init__(self, runtime: str, spec: dict, work: str):
        path = os.path.join(work, f"{runtime}_spec.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        self.runtime = runtime
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), runtime, path],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        try:
            ready = json.loads(line)
        except ValueError:
            self.process.kill()
            self.process.wait(timeout=60)
            raise RuntimeError(f"the {runtime} worker did not start (see its error above)") from None
        self.cases, self.versions, self.threads = ready["cases"], ready["versions"], ready["threads"]
        self.precisions, self.notes = ready["precisions"], ready.get("notes", [])

    def ask(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.runtime} worker stopped")
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=120)


class PeerCase:
    runs_here = False

    def __init__(self, worker: PeerWorker, case: str):
        self.worker, self.case = worker, case

    def time(self, texts) -> float:
        return self.worker.ask({"op": "time", "case": self.case, "texts": texts})["s"]

    def predict(self, texts):
        return self.worker.ask({"op": "predict", "case": self.case, "texts": list(texts)})["pred"]


def peer_cases(sources, work: str, threads: int, calibration: list, notes: list) -> tuple:
    """(workers, {name: (row fields, case)}): PyTorch for every model; ONNX Runtime and OpenVINO on
    the teacher's ONNX export (the peers a user of the teacher would pick). Each runtime missing
    here is said in the notes."""
    missing = {runtime: missing_modules(runtime) for runtime in NEEDS}
    if missing["torch"]:
        notes.append("PyTorch rows skipped: torch / transformers are not importable (install them beside the venv "
                     "and put them on PYTHONPATH, see the docstring); so are the ONNX Runtime and OpenVINO peers, "
                     "which start from the PyTorch model")
        return [], {}
    specs = [torch_spec(source, work, notes) for source in sources]
    log("starting the PyTorch worker")
    workers = [PeerWorker("torch", {"models": specs, "threads": threads}, work)]
    try:
        onnx = os.path.join(work, "teacher.onnx")
        if not (missing["onnxruntime"] and missing["openvino"]):
            log("exporting the teacher's PyTorch peer to ONNX")
            workers[0].ask({"op": "onnx", "model": specs[0]["name"], "path": onnx})
        for runtime in ("onnxruntime", "openvino"):
            if missing[runtime]:
                notes.append(f"{runtime} peers skipped: {', '.join(missing[runtime])} not importable")
                continue
            log(f"starting the {runtime} worker (quantizing)")
            spec = {"models": [dict(specs[0], onnx=onnx)], "threads": threads, "calibration_texts": calibration}
            try:
                workers.append(PeerWorker(runtime, spec, work))
            except RuntimeError as e:  # one runtime failing must not lose the others' rows
                notes.append(f"{runtime} peers skipped: {e}")
    except BaseException:
        for worker in workers:
            worker.close()
        raise
    by_source = {source.name: source for source in sources}
    cases = {}
    for worker in workers:
        notes.extend(worker.notes)
        rows = {row[0]: row for row in ROWS[worker.runtime]}
        for case in worker.cases:
            model, variant = case.rsplit("/", 1)
            _, impl, precision, label = rows[variant]
            fields = dict(impl=impl, precision=precision, length="longest", model=model, source=by_source[model],
                          runtime_precision=worker.precisions[case])
            cases[f"{model} {label}"] = (fields, PeerCase(worker, case))
    return workers, cases


def tokenizer_agreement(worker, source, traffic: dict) -> str:
    """The note on how many texts the peers' (transformers) ids equal albert_tf's."""
    import tensorflow as tf

    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    layer = AlbertTokenizerLayer.from_sentencepiece(source.spm, sequence_length=source.seq_len,
                                                    lower_case=source.lower_case)
    agreement = []
    for traffic_name, texts in traffic.items():
        hf_ids = worker.ask({"op": "ids", "model": source.name, "texts": texts})["ids"]
        ours = layer(tf.constant(texts))
        same = sum(list(ids) == [int(i) for i, m in zip(row, mask) if m]
                   for ids, row, mask in zip(hf_ids, ours["input_ids"].numpy(), ours["input_mask"].numpy()))
        agreement.append(f"{same} of {len(texts)} {traffic_name}")
    return ("the peers tokenize with transformers' ALBERT tokenizer built from the same SentencePiece model "
            f"(ids outside the timed call, each batch padded to its longest text): the same ids as albert_tf's "
            f"for {', '.join(agreement)} texts")


# --- the workers' side: tokenizer and PyTorch --------------------------------------------------------


def hf_tokenizer(spm: str, lower_case: bool):
    """transformers' (Rust) ALBERT tokenizer of a SentencePiece file. transformers 5 no longer reads
    the `.model` file itself (`vocab_file=` gives every piece as `<unk>`): it takes the pieces and
    scores, read here with `sentencepiece`."""
    import sentencepiece
    import transformers

    processor = sentencepiece.SentencePieceProcessor(model_file=spm)
    vocab = [(processor.id_to_piece(i), processor.get_score(i)) for i in range(processor.get_piece_size())]
    if int(transformers.__version__.split(".")[0]) < 5:
        return transformers.AlbertTokenizerFast(vocab_file=spm, do_lower_case=lower_case)
    return transformers.AlbertTokenizer(vocab=vocab, do_lower_case=lower_case)


class Encoder:
    """Texts -> numpy int64 feeds padded to the batch's longest text (the peers' input)."""

    def __init__(self, model_spec: dict):
        self.tokenizer = hf_tokenizer(model_spec["spm"], model_spec["lower_case"])
        self.max_length = model_spec["max_length"]

    def __call__(self, texts) -> dict:
        encoded = self.tokenizer(list(texts), padding="longest", truncation=True, max_length=self.max_length,
                                 return_tensors="np", return_token_type_ids=True)
        return {name: encoded[name].astype("int64") for name in ONNX_INPUTS}

    def ids(self, texts) -> list:
        return self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]


def torch_classifier(spec: dict):
    """transformers' AlbertModel + our head (the `[CLS]` pooler or the masked mean) with the spec's weights."""
    import numpy as np
    import torch
    import transformers

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.albert = transformers.AlbertModel(transformers.AlbertConfig(**spec["config"]), add_pooling_layer=True)
            self.classifier = torch.nn.Linear(spec["config"]["hidden_size"], spec["num_labels"])

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.albert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            if spec["pooling"] == "mean":
                mask = attention_mask.unsqueeze(-1).to(out.last_hidden_state.dtype)
                pooled = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1)
            else:
                pooled = out.pooler_output
            return self.classifier(pooled)

    model = Classifier().eval()
    if spec["weights"]:
        state = {k: torch.from_numpy(v) for k, v in np.load(spec["weights"]).items()}
        state = {(k if k.startswith("classifier.") else "albert." + k): v for k, v in state.items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [m for m in missing if not m.endswith("position_ids")]
        if missing or unexpected:
            raise RuntimeError(f"weights do not fit the PyTorch model: missing {missing}, unexpected {unexpected}")
    return model


def export_onnx(model, path: str) -> None:
    """The fp32 classifier as ONNX (opset 17) with dynamic batch and length axes. The example batch
    has padding so the traced mask arithmetic is the general one."""
    import torch

    ids = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 14, 3, 0, 0, 0]], dtype=torch.long)
    mask = (ids != 0).long()
    axes = {name: {0: "batch", 1: "length"} for name in ONNX_INPUTS}
    axes["logits"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask, torch.zeros_like(ids)), path, dynamo=False, opset_version=17,
                          input_names=list(ONNX_INPUTS), output_names=["logits"], dynamic_axes=axes)


def torch_cases(spec: dict, threads: int):
    """({case: forward(feeds) -> logits}, {case: precision}, notes, versions) of the torch worker."""
    import torch
    import transformers

    torch.set_num_threads(threads)
    cases, precisions = {}, {}
    for model_spec in spec["models"]:
        model = torch_classifier(model_spec)
        int8 = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
        quantized = sum(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in int8.modules())
        name = model_spec["name"]
        for variant, module, bf16 in (("fp32", model, False), ("bf16", model, True), ("int8", int8, False)):
            cases[f"{name}/{variant}"] = _torch_forward(module, bf16)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            autocast_dtype = torch.get_autocast_dtype("cpu")
        precisions[f"{name}/fp32"] = "float32 (no autocast)"
        precisions[f"{name}/bf16"] = f"autocast {str(autocast_dtype).replace('torch.', '')} (Linear/MatMul; float32 weights)"
        precisions[f"{name}/int8"] = f"{quantized} of {linear} Linear layers dynamic qint8, the rest float32"
    return cases, precisions, [], f"torch {torch.__version__}, transformers {transformers.__version__}"


def _torch_forward(module, bf16: bool):
    import torch

    def forward(feeds):
        tensors = [torch.from_numpy(feeds[name]) for name in ONNX_INPUTS]
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with torch.inference_mode(), autocast:
            return module(*tensors).float().numpy()

    return forward


# --- the workers' side: ONNX Runtime and OpenVINO ----------------------------------------------------


def onnx_matmul_counts(path: str) -> dict:
    """{"quantized": int8 MatMuls (MatMulInteger, DynamicQuantizeMatMul, QLinearMatMul), "float": MatMul}."""
    import onnx

    ops = collections.Counter(node.op_type for node in onnx.load(path).graph.node)
    quantized = ops["MatMulInteger"] + ops["DynamicQuantizeMatMul"] + ops["QLinearMatMul"]
    return {"quantized": quantized, "float": ops["MatMul"]}


def onnxruntime_cases(spec: dict, threads: int):
    import onnxruntime
    from onnxruntime.quantization import QuantType, quant_pre_process, quantize_dynamic

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    cases, precisions, notes = {}, {}, []
    for model_spec in spec["models"]:
        fp32 = model_spec["onnx"]
        prepared, int8 = fp32.replace(".onnx", "_pre.onnx"), fp32.replace(".onnx", "_int8.onnx")
        quant_pre_process(fp32, prepared, skip_symbolic_shape=True)
        quantize_dynamic(prepared, int8, weight_type=QuantType.QInt8)
        name = model_spec["name"]
        for variant, path in (("fp32", fp32), ("int8", int8)):
            session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            cases[f"{name}/{variant}"] = lambda feeds, s=session: s.run(["logits"], feeds)[0]
            counts = onnx_matmul_counts(path)
            total = counts["quantized"] + counts["float"]
            precisions[f"{name}/{variant}"] = (f"{counts['quantized']} of {total} MatMuls int8 (MatMulInteger), "
                                               f"{counts['float']} float32")
        notes.append(f"ONNX Runtime int8 of {name}: {precisions[f'{name}/int8']} after quant_pre_process "
                     f"(the float ones multiply two activations: attention scores and context)")
    return cases, precisions, notes, f"onnxruntime {onnxruntime.__version__}"


def openvino_precisions(compiled) -> str:
    """`runtimePrecision` of every op of a compiled model's runtime graph, counted: what it really ran in."""
    counts = collections.Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if "runtimePrecision" in info:
            counts[str(info["runtimePrecision"].value)] += 1
    return ", ".join(f"{precision} {n}" for precision, n in counts.most_common()) + " ops"


def openvino_cases(spec: dict, threads: int):
    import nncf
    import openvino as ov
    import openvino.properties as props
    import openvino.properties.hint as hints

    core = ov.Core()
    cases, precisions, notes = {}, {}, []
    for model_spec in spec["models"]:
        model = core.read_model(model_spec["onnx"])
        encode = Encoder(model_spec)
        texts = spec["calibration_texts"]
        calibration = [encode(texts[i:i + 8]) for i in range(0, len(texts), 8)]
        int8 = nncf.quantize(model, nncf.Dataset(calibration), model_type=nncf.ModelType.TRANSFORMER,
                             subset_size=len(calibration))
        name = model_spec["name"]
        base = {props.inference_num_threads: threads, hints.performance_mode: hints.PerformanceMode.LATENCY}
        for variant, graph, hint in (("f32", model, ov.Type.f32), ("bf16", model, ov.Type.bf16), ("int8", int8, None)):
            config = dict(base, **({hints.inference_precision: hint} if hint is not None else {}))
            compiled = core.compile_model(graph, "CPU", config)
            cases[f"{name}/{variant}"] = _openvino_forward(compiled)
            precisions[f"{name}/{variant}"] = (f"hint {compiled.get_property(hints.inference_precision).get_type_name()}: "
                                               f"{openvino_precisions(compiled)}")
        notes.append(f"OpenVINO int8 of {name}: NNCF on {len(texts)} training texts ({len(calibration)} batches of 8), "
                     f"model_type TRANSFORMER")
    return cases, precisions, notes, f"openvino {ov.__version__}, nncf {nncf.__version__}"


def _openvino_forward(compiled):
    request = compiled.create_infer_request()

    def forward(feeds):
        request.infer(feeds)
        return request.get_output_tensor(0).data.copy()

    return forward


def albert_tf_openvino_cases(spec: dict, threads: int):
    """Our OpenVINO IR exports (text in), each through the model server's `OpenVinoServable`, in a
    worker of their own as the peers are (and as OpenVINO Model Server runs them): not beside the
    benchmark's TensorFlow thread pools."""
    from albert_tf.model_server.openvino_servable import OpenVinoServable

    import numpy as np

    cases, precisions = {}, {}
    for model_spec in spec["models"]:
        servable = OpenVinoServable(model_spec["ir"], num_threads=threads)
        hint = servable.compiled.get_property("INFERENCE_PRECISION_HINT")
        hint = hint.get_type_name() if hasattr(hint, "get_type_name") else hint
        name = f"{model_spec['name']}/ir"
        cases[name] = _servable_forward(servable, np)
        precisions[name] = f"hint {hint}: {openvino_precisions(servable.compiled)}"
    return cases, precisions, [], "albert_tf OpenVINO servable"


def albert_tf_savedmodel_cases(spec: dict, threads: int):
    """Our SavedModel exports as `albert-tf serve` runs them: in a process of their own that sets
    oneDNN's frozen-weights mode by the server's rule (`onednn_weights.apply_frozen_weights("auto",
    ...)`: on when every export is bf16) before TensorFlow runs anything, each through the model
    server's `SessionServable` (TF Serving's loader and session)."""
    from albert_tf.export.onednn_weights import apply_frozen_weights

    mode = apply_frozen_weights("auto", [m["path"] for m in spec["models"]])
    # The session's own config leaves the thread count to TensorFlow, which reads this first.
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(threads))
    import numpy as np

    from albert_tf.model_server.servable import SessionServable

    cases, precisions = {}, {}
    for model_spec in spec["models"]:
        servable = SessionServable(model_spec["path"])
        name = f"{model_spec['name']}/savedmodel"
        cases[name] = _servable_forward(servable, np)
        precisions[name] = f"{model_spec['precision']}; {mode}"
    return cases, precisions, [mode], "albert_tf SessionServable"


def _servable_forward(servable, np):
    def forward(text):
        # logits only: the string `label` output costs a conversion no row of the table needs.
        return np.asarray(servable.run("serving_default", {"text": text}, output_filter=("logits",))["logits"])

    return forward


def text_feed(texts):
    """Texts -> the object array of UTF-8 bytes the model server hands a text model."""
    import numpy as np

    return np.array([t.encode("utf-8") for t in texts], dtype=object)


BUILDERS = {"torch": torch_cases, "onnxruntime": onnxruntime_cases, "openvino": openvino_cases,
            "albert_tf_openvino": albert_tf_openvino_cases, "albert_tf_savedmodel": albert_tf_savedmodel_cases}
# Workers that take raw text (our exports) rather than ids tokenized outside the timing (the peers).
TEXT_IN = ("albert_tf_openvino", "albert_tf_savedmodel")


def serve(runtime: str, spec_path: str) -> int:
    """The worker loop: build the cases, say they are ready, answer one JSON line per request."""
    import warnings

    warnings.filterwarnings("ignore")
    # Replies go to the real stdout; whatever the libraries print (NNCF's progress, C++ logs) to stderr.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    cases, precisions, notes, versions = BUILDERS[runtime](spec, spec["threads"])
    encoders = {m["name"]: text_feed if runtime in TEXT_IN else Encoder(m) for m in spec["models"]}
    models = {m["name"]: m for m in spec["models"]}

    def logits(case, texts):
        return cases[case](encoders[case.rsplit("/", 1)[0]](texts))

    print(json.dumps({"cases": list(cases), "versions": versions, "threads": spec["threads"],
                      "precisions": precisions, "notes": notes}), file=replies, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "time":
            feeds = encoders[request["case"].rsplit("/", 1)[0]](request["texts"])
            start = time.perf_counter()
            cases[request["case"]](feeds)
            reply = {"s": time.perf_counter() - start}
        elif request["op"] == "ids":
            reply = {"ids": encoders[request["model"]].ids(request["texts"])}
        elif request["op"] == "onnx":
            export_onnx(torch_classifier(models[request["model"]]), request["path"])
            reply = {"path": request["path"]}
        else:
            texts = request["texts"]
            reply = {"pred": [int(p) for i in range(0, len(texts), EVAL_BATCH)
                              for p in logits(request["case"], texts[i:i + EVAL_BATCH]).argmax(-1)]}
        print(json.dumps(reply), file=replies, flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in BUILDERS:
        print(f"usage: {sys.argv[0]} {{{','.join(BUILDERS)}}} SPEC_JSON_FILE", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(sys.argv[1], sys.argv[2]))
