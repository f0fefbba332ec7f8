"""Warm start: the continuous-training loop's resolver, TFX's latest blessed model.

With `warm_start: true` a run starts from the model it may replace. Every version in the serving
base was blessed by the Evaluator and served by the InfraValidator before the Pusher copied it
there, so the newest version is TFX's latest blessed model. VocabGen resolves it once and records
it in the vocabulary's summary (`warm_start`); the steps after it read it from there, so one run
never mixes two bases:

* VocabGen takes the base's vocabulary as it is (its embedding rows belong to those pieces);
* the Pretrainer continues from the base's encoder on the new span's corpus;
* the Trainer takes that encoder and the base's classifier head, then fine-tunes on the new span;
* the Evaluator compares the candidate with the same base (the newest pushed version).

The base's weights are read from its `assets/weights.json` (`albert_tf.weight_index`).
A base that cannot be continued (another architecture, other labels, an export without a
weight index) stops the run in one line naming what differs; `warm_start: false` trains from
scratch.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Tuple

from albert_tf.tasks.classification import CLASSIFICATION
from albert_tf.weight_index import ExportWeightsError, is_export, read_export_info, read_weight_index


class WarmStartError(ValueError):
    """A base model the run cannot continue from; the message names what differs."""


def latest_blessed_model(serving_base: str, model_name: str) -> Optional[str]:
    """The newest version under `<serving_base>/<model_name>` (only blessed models are pushed), or None."""
    from albert_tf.export.serving_config import model_versions

    model_dir = os.path.join(serving_base, model_name)
    versions = model_versions(model_dir) if os.path.isdir(model_dir) else []
    return os.path.join(model_dir, str(max(versions))) if versions else None


def resolve_base(serving_base: str, model_name: str) -> Optional[Dict[str, Any]]:
    """`{"path", "version", "kind"}` of the base a warm-started run continues from, or None when
    nothing is pushed yet.

    Raises:
        WarmStartError: the newest version is not an albert-tf classifier export with a weight index.
    """
    base = latest_blessed_model(serving_base, model_name)
    if base is None:
        return None
    if not is_export(base):
        raise WarmStartError(f"warm start: {base} is not an albert-tf export (no assets/export.json)")
    info = read_export_info(base)
    if info.get("kind") != CLASSIFICATION:
        raise WarmStartError(f"warm start: {base} is a {info.get('kind')} export; the pipeline trains a classifier")
    try:
        read_weight_index(base)
    except ExportWeightsError as e:
        raise WarmStartError(f"warm start: {e}") from None
    return {"path": os.path.abspath(base), "version": int(os.path.basename(base)), "kind": info["kind"]}


def base_tokenizer(base_dir: str) -> Tuple[str, Dict[str, Any]]:
    """The base's vocabulary file and its `export.json` entry (`type`, `lower_case`, ...)."""
    tokenizer = read_export_info(base_dir)["tokenizer"]
    return os.path.join(base_dir, "assets", tokenizer["file"]), tokenizer


def base_config(base_dir: str):
    """The base's `AlbertConfig`."""
    from albert_tf.config import AlbertConfig

    return AlbertConfig.from_json_file(os.path.join(base_dir, "assets", "albert_config.json"))


def check_architecture(base_dir: str, albert_config) -> None:
    """The pipeline's `model:` must be the base's architecture."""
    stored = base_config(base_dir).to_dict()
    wanted = albert_config.to_dict()
    differing = [f"{k} {stored.get(k)!r} (pipeline: {wanted.get(k)!r})" for k in sorted(wanted) if stored.get(k) != wanted.get(k)]
    if differing:
        raise WarmStartError(
            f"warm start: the pushed model {base_dir} has another architecture: {', '.join(differing)}; "
            "set warm_start: false to train this one from scratch"
        )


def check_labels(base_dir: str, labels: Sequence[str]) -> None:
    """The base's classes must be the data's, in the same order."""
    stored = list(read_export_info(base_dir).get("labels") or [])
    if stored != [str(label) for label in labels]:
        raise WarmStartError(
            f"warm start: the pushed model {base_dir} predicts {stored}, the data have labels {list(labels)}; "
            "set warm_start: false to train a classifier of the new labels from scratch"
        )


def load_head(base_dir: str, model) -> Dict[str, Any]:
    """Assigns the base's task-head weights (everything but the encoder) to `model` (built first:
    a task model creates its head's weights on its first call)."""
    import numpy as np

    from albert_tf.weight_index import HEAD, load_export_weights

    if not model.built:
        ids = np.ones((1, 2), "int32")
        model({"input_ids": ids, "input_mask": ids, "segment_ids": np.zeros_like(ids)}, training=False)
    try:
        return load_export_weights(base_dir, model, HEAD)
    except ExportWeightsError as e:
        raise WarmStartError(f"warm start: {e}") from None
