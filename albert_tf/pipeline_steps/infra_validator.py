"""InfraValidator: the candidate served in a separate process, every warmup request replayed.

The candidate's export base is served by `albert-tf serve` (the local server speaking TF
Serving's gRPC and REST protocols, which loads SavedModels the way the C++ server does) in a
subprocess on loopback ports. The step waits for the version to be AVAILABLE, sends each
`PredictionLog` of the export's `assets.extra/tf_serving_warmup_requests` over gRPC (Predict,
Classify, Regress) and a raw-text REST `:predict`, and fails on any error, timeout or a server
that dies. Output: `summary.json` (requests, latencies), `server.log`, and `INFRA_BLESSED`.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List

from albert_tf.pipeline_steps.staging import staged_directory, write_summary

BLESSED_FILE = "INFRA_BLESSED"
_READY = re.compile(r"^serving .*: gRPC (\S+):(\d+), REST (\S+):(\d+)")


class InfraValidationError(RuntimeError):
    """The candidate could not be served or answered a request with an error."""


def _start_server(export_base: str, model_name: str, log_path: str, timeout_s: float):
    command = [
        sys.executable, "-m", "albert_tf", "serve", "--export-base", export_base, "--model-name", model_name,
        "--port", "0", "--rest-api-port", "0", "--poll-seconds", "0",
    ]
    log = open(log_path, "w", encoding="utf-8")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1)
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in process.stdout], daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if process.poll() is not None:
                break
            continue
        log.write(line)
        match = _READY.match(line.strip())
        if match:
            return process, log, f"{match.group(1)}:{match.group(2)}", f"{match.group(3)}:{match.group(4)}"
    _stop(process, log)
    with open(log_path, encoding="utf-8") as f:
        tail = "".join(f.readlines()[-15:])
    what = f"exited with status {process.returncode}" if process.returncode is not None else f"was not ready in {timeout_s:.0f} s"
    raise InfraValidationError(f"the model server {what}; its log ends:\n{tail}")


def _stop(process, log) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    log.close()


def _replay(grpc_address: str, logs, timeout_s: float) -> List[Dict[str, Any]]:
    from albert_tf.model_server.client import ServingClientError, grpc_call

    methods = {"predict_log": "Predict", "classify_log": "Classify", "regress_log": "Regress"}
    results = []
    for index, log in enumerate(logs):
        kind = log.WhichOneof("log_type")
        if kind not in methods:
            raise InfraValidationError(f"warmup record {index} is a {kind}, which the validator cannot send")
        request = getattr(log, kind).request
        start = time.perf_counter()
        try:
            grpc_call(grpc_address, "prediction", methods[kind], request, timeout_s)
        except ServingClientError as e:
            raise InfraValidationError(f"warmup record {index} ({methods[kind]}, signature "
                                       f"{request.model_spec.signature_name!r}) failed: {e}") from None
        results.append({"method": methods[kind], "signature": request.model_spec.signature_name,
                        "ms": round(1000 * (time.perf_counter() - start), 2)})
    return results


def run_infra_validator(
    candidate_base: str,
    model_name: str,
    output_dir: str,
    *,
    sample_text: str = "a sample request",
    start_timeout_s: float = 300.0,
    request_timeout_s: float = 60.0,
) -> Dict[str, Any]:
    """Serves `<candidate_base>/<model_name>/<version>` in a subprocess and sends it every warmup
    request; raises `InfraValidationError` on any failure (nothing is written then)."""
    from albert_tf.export.warmup import read_warmup_file
    from albert_tf.pipeline_steps.evaluator import newest_version
    from albert_tf.model_server.client import ServingClientError, model_status, predict_text

    version_dir = newest_version(os.path.join(candidate_base, model_name))
    if version_dir is None:
        raise InfraValidationError(f"{candidate_base} holds no version of {model_name!r}")
    logs = read_warmup_file(version_dir)
    if not logs:
        raise InfraValidationError(f"{version_dir} has no warmup requests (assets.extra/tf_serving_warmup_requests)")
    with staged_directory(output_dir) as staging:
        log_path = os.path.join(staging, "server.log")
        started = time.perf_counter()
        process, log, grpc_address, rest_address = _start_server(candidate_base, model_name, log_path, start_timeout_s)
        try:
            load_s = time.perf_counter() - started
            status = model_status(grpc_address, model_name)
            if not status or status[0]["state"] != "AVAILABLE":
                raise InfraValidationError(f"{model_name} is not AVAILABLE after loading: {status}")
            requests = _replay(grpc_address, logs, request_timeout_s)
            start = time.perf_counter()
            try:
                outputs = predict_text(rest_address, model_name, [sample_text], protocol="rest", timeout=request_timeout_s)
            except ServingClientError as e:
                raise InfraValidationError(f"REST :predict of a raw text failed: {e}") from None
            requests.append({"method": "REST predict", "signature": "serving_default", "ms": round(1000 * (time.perf_counter() - start), 2)})
            if process.poll() is not None:
                raise InfraValidationError(f"the model server exited with status {process.returncode} during validation")
        finally:
            _stop(process, log)
        summary = {
            "version": os.path.basename(version_dir),
            "load_seconds": round(load_s, 2),
            "requests": requests,
            "sample": {"text": sample_text, "outputs": sorted(outputs)},
            "blessed": True,
        }
        write_summary(staging, summary)
        open(os.path.join(staging, BLESSED_FILE), "w").close()
    return summary


def is_infra_blessed(validation_dir: str) -> bool:
    return os.path.isfile(os.path.join(validation_dir, BLESSED_FILE))
