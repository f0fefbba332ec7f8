"""Pre-flight checks of a pipeline run: every place it writes can be written, every input exists.

`check_pipeline` runs before the first step, so that a read-only serving base or a misspelt
corpus glob is one line at the start, not a traceback after all the training. A writable place
is probed for real (a file created and removed in the nearest existing folder), because
permission bits say nothing to root or about a read-only mount. Remote paths (``gs://``) are left
to the steps: checking them needs credentials the steps have.
"""

from __future__ import annotations

import os
import tempfile
from typing import Optional

from albert_tf.errors import ParameterError, param
from albert_tf.file_io import is_remote


class PreflightError(ParameterError):
    """A place the pipeline cannot write, or an input that is not there."""


class MissingInputError(PreflightError):
    """An input the settings name is not there (a corpus pattern matching nothing, a missing
    task folder or split file): the data refused, not the command line."""


def _nearest_existing(path: str) -> str:
    current = os.path.abspath(path)
    while not os.path.exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def writable_problem(path: str) -> Optional[str]:
    """Why the directory `path` (created if missing) cannot be written, or None when it can."""
    existing = _nearest_existing(path)
    if not os.path.isdir(existing):
        return f"{existing} is a file, not a folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=".albert-tf-preflight-", dir=existing)
    except OSError as e:
        return f"{existing} is not writable ({os.strerror(e.errno) if e.errno else e})"
    os.close(fd)
    os.remove(probe)
    return None


def check_writable(path: str, name: str) -> None:
    """Raises `PreflightError` naming parameter `name` when directory `path` cannot be written."""
    if is_remote(path):
        return
    problem = writable_problem(path)
    if problem is not None:
        raise PreflightError(f"{param(name)} {path}: cannot write there: {problem}")


def check_pipeline(settings, pipeline_root: str) -> None:
    """Checks a local run of the pipeline before any step starts.

    Raises:
        PreflightError: The pipeline root, its log folder or the serving base cannot be written,
            or (`MissingInputError`) the corpus or the task data is not there (naming the setting).
    """
    from albert_tf.data.tables import find_split_file
    from albert_tf.pipeline_steps.example_gen import expand_corpus
    from albert_tf.pipeline_steps.spans import SpanError, resolve_spans

    check_writable(pipeline_root, "pipeline_root")
    check_writable(settings.serving_base, "serving_base")
    if not is_remote(settings.corpus):
        try:
            expand_corpus(settings.corpus)
        except FileNotFoundError as e:
            raise MissingInputError(f"the settings' corpus: {e}") from None
    if not is_remote(settings.task_data):
        try:
            # A `{SPAN}` pattern: every span the run reads must be there, like a plain folder.
            inputs = [s.path for s in resolve_spans(settings.task_data, settings.span, settings.num_spans)]
        except SpanError as e:
            raise MissingInputError(f"the settings' task_data: {e}") from None
        for task_data in inputs:
            if not os.path.isdir(task_data):
                raise MissingInputError(f"the settings' task_data {task_data} is not a folder")
            for name in ("train", "dev"):
                try:
                    find_split_file(task_data, name)
                except (FileNotFoundError, ValueError) as e:
                    raise MissingInputError(f"the settings' task_data: {e}") from None
    if settings.warm_start and not is_remote(settings.serving_base):
        check_warm_start(settings)


def check_warm_start(settings) -> None:
    """The model a warm-started run continues from can be continued: an albert-tf classifier
    export with a weight index, of the settings' architecture (the data's labels are checked by
    the Trainer, once ExampleGen has read them)."""
    from albert_tf.pipeline_steps.settings import albert_config_for
    from albert_tf.pipeline_steps.warm_start import WarmStartError, base_config, check_architecture, resolve_base

    try:
        base = resolve_base(settings.serving_base, settings.model_name)
        if base is None:
            return
        # The run's vocabulary is the base's, so is its size.
        vocab_size = base_config(base["path"]).vocab_size
        check_architecture(base["path"], albert_config_for(settings.model, vocab_size, settings.max_seq_length))
    except WarmStartError as e:
        raise PreflightError(str(e)) from None

