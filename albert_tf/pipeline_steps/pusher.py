"""Pusher: a blessed candidate copied into the serving base as the next integer version, atomically.

The version directory is assembled under a hidden temporary name in the model's directory and
renamed into place (TF Serving and the local server skip names that are not integers, so a
crash never exposes a half-copied version). SIGTERM mid-copy removes that directory before the
process exits; one left by a process killed outright (SIGKILL) is swept by the next push (its
name carries the owner's pid and host: `albert_tf.pipeline_steps.staging.is_stale`). `models.config`
and `batching_parameters.txt` are then regenerated for the base. Nothing is pushed unless the
Evaluator blessed the candidate and the InfraValidator served it, and a candidate identical to the
newest pushed version (same graph and weights: a re-run on unchanged inputs) is not pushed twice.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from typing import Any, Dict, Optional

from albert_tf import file_io
from albert_tf.pipeline_steps.staging import sigterm_unwinds, staged_directory, staging_prefix, sweep_stale, write_summary

PUSH_PREFIX = ".push-"
_FINGERPRINTED = ("saved_model.pb", "variables")


def fingerprint(saved_model_dir: str) -> str:
    """A hash of a SavedModel's graph and variables (not its assets or warmup file)."""
    digest = hashlib.sha256()
    for entry in _FINGERPRINTED:
        path = os.path.join(saved_model_dir, entry)
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(root, name) for root, _, names in os.walk(path) for name in names
        )
        for file in files:
            digest.update(os.path.relpath(file, saved_model_dir).encode("utf-8"))
            with open(file, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
    return digest.hexdigest()


def push(candidate_dir: str, serving_base: str, model_name: str) -> Dict[str, Any]:
    """Copies `candidate_dir` to `<serving_base>/<model_name>/<next version>`; returns what it did.

    Stale staging directories of earlier pushes (killed outright) are removed first; their names
    are the result's `swept`.
    """
    from albert_tf.export.serving_config import model_versions, write_serving_configs
    from albert_tf.pipeline_steps.evaluator import newest_version

    model_dir = os.path.join(serving_base, model_name)
    os.makedirs(model_dir, exist_ok=True)
    swept = sweep_stale(model_dir, PUSH_PREFIX)
    current = newest_version(model_dir)
    candidate_print = fingerprint(candidate_dir)
    if current is not None and fingerprint(current) == candidate_print:
        return {"pushed": False, "reason": f"identical to the serving version {os.path.basename(current)}",
                "version": int(os.path.basename(current)), "path": current, "swept": swept}
    versions = model_versions(model_dir)
    version = (max(versions) + 1) if versions else 1
    final = os.path.join(model_dir, str(version))
    with sigterm_unwinds():
        with file_io.staged_directory(final, prefix=staging_prefix(f"{PUSH_PREFIX}{version}-"), create=False) as staging:
            shutil.copytree(candidate_dir, staging)
    configs = write_serving_configs(serving_base)
    return {"pushed": True, "reason": "blessed", "version": version, "path": final, "fingerprint": candidate_print,
            "serving_configs": configs, "swept": swept}


def run_pusher(
    candidate_dir: str,
    blessed: bool,
    infra_blessed: bool,
    serving_base: str,
    model_name: str,
    output_dir: Optional[str] = None,
) -> Dict[str, Any]:
    """Pushes when both blessings are given; otherwise records why not. Writes `summary.json`."""
    if not blessed:
        result = {"pushed": False, "reason": "the Evaluator did not bless the candidate"}
    elif not infra_blessed:
        result = {"pushed": False, "reason": "the InfraValidator did not bless the candidate"}
    else:
        result = push(candidate_dir, serving_base, model_name)
    result.update(serving_base=os.path.abspath(serving_base), model_name=model_name)
    if output_dir is not None:
        with staged_directory(output_dir) as staging:
            write_summary(staging, result)
    return result
