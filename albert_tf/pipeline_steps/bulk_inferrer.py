"""BulkInferrer (optional, after the Pusher): the pipeline's unlabelled set scored by the pushed model.

A thin caller of `albert_tf.inference.bulk.bulk_infer`, as TFX's BulkInferrer follows its Pusher:
the version the Pusher pushed (or the serving version identical to the candidate) scores the
`bulk_infer_input` files on the data step's Beam runner, and the step's output directory gets the
`PredictionLog` shards, `answers.jsonl` and `metadata.json`, plus `summary.json`. Nothing pushed
(the candidate was not blessed) means nothing scored, as TFX's BulkInferrer skips an unblessed
model: `summary.json` says why.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Sequence

from albert_tf.pipeline_steps.staging import read_summary, staged_directory, write_summary


def run_bulk_inferrer(pushed_model_dir: str, inputs: Sequence[str], output_dir: str, *,
                      beam_runner: str = "DirectRunner") -> Dict[str, Any]:
    """Scores `inputs` with the model the Pusher's output `pushed_model_dir` names; writes `output_dir`."""
    from albert_tf.inference.bulk import bulk_infer

    pushed = read_summary(pushed_model_dir)
    model = pushed.get("path")
    if not model:
        result: Dict[str, Any] = {"inferred": False, "reason": f"nothing served: {pushed.get('reason', 'not pushed')}"}
        with staged_directory(output_dir) as staging:
            write_summary(staging, result)
        return result
    runner = None if beam_runner in ("", "DirectRunner") else beam_runner
    summary = bulk_infer(model, list(inputs), output_dir, runner=runner, answers_format="jsonl", overwrite=True)
    result = {"inferred": True, "model": model, "version": pushed.get("version"), "num_texts": summary.num_texts,
              "num_shards": summary.num_shards, "answers": summary.answers}
    write_summary(output_dir, result)
    return result


def input_paths(setting: str) -> list:
    """The comma-separated `bulk_infer_input` setting as absolute paths (remote ones as given)."""
    return [p if "://" in p else os.path.abspath(p) for p in setting.split(",") if p]
