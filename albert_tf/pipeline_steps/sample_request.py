"""The closing sample request of a local pipeline run: a text of the task's own eval split, sent
through the local TF-Serving-protocol server to the pushed model (REST `:predict`)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

from albert_tf.pipeline_steps import example_gen


def sample_text(examples_dir: str) -> Tuple[str, Optional[str]]:
    """The first example of ExampleGen's eval split: its text and, for a sentence pair, its second text.

    Raises:
        ValueError: the eval split holds no example.
    """
    path = os.path.join(example_gen.split_dir(examples_dir, "eval"), example_gen.EXAMPLES_FILE)
    for row in example_gen.read_examples(path):
        if row.get(example_gen.TEXT_FEATURE):
            return row[example_gen.TEXT_FEATURE], row.get(example_gen.TEXT_B_FEATURE) or None
    raise ValueError(f"the eval split {path} holds no example with a text")


def sample_request(serving_base: str, model_name: str, examples_dir: str, log_file: Optional[str] = None) -> Dict[str, Any]:
    """Serves `serving_base` with the local server and asks `model_name` about `sample_text`.
    TensorFlow's start-up notices (it starts in this process) go to `log_file`, not to stderr.

    Returns:
        {"text", "text_b", "label" (str), "probabilities" (list of floats, rounded to 4 places)}.
    """
    from albert_tf.runtime_env import TENSORFLOW_STARTUP_NOTICES, native_notices_dropped

    with native_notices_dropped(TENSORFLOW_STARTUP_NOTICES, kept_in=log_file):
        from albert_tf.model_server.client import predict_text
        from albert_tf.model_server.server import LocalModelServer

        text, text_b = sample_text(examples_dir)
        with LocalModelServer(serving_base, model_names=[model_name], poll_interval_s=0) as server:
            address = f"127.0.0.1:{server.rest_port}"
            outputs = predict_text(address, model_name, [text], text_b=[text_b] if text_b else None, protocol="rest")
    label = outputs["label"].reshape(-1)[0]
    label = label.decode("utf-8") if isinstance(label, bytes) else str(label)
    probabilities = [round(float(p), 4) for p in outputs["probabilities"].reshape(-1)]
    return {"text": text, "text_b": text_b, "label": label, "probabilities": probabilities}
