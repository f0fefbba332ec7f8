"""How a pretraining run reports its progress: ``metrics.jsonl`` (`MetricsLog`, one line per
checkpoint interval) and the Keras callbacks of its `fit` calls (`make_callbacks`): a metrics line
and a checkpoint at the end of every interval, TensorBoard on the optimizer-step axis, and the
running metrics every `log_every` updates.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Dict, List, Optional, Sequence

from albert_tf import file_io

# Its lines are the run's: logged under the run's name, as `albert-tf pretrain` prints them.
logger = logging.getLogger("albert_tf.training.pretraining")

METRICS_FILE = "metrics.jsonl"
LOG_SUBDIR = "logs"


def _read_jsonl(path: str) -> List[Dict[str, Any]]:
    """The records of a metrics file; an unparseable line (a write cut by a crash) is skipped."""
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        return []
    records = []
    with tf.io.gfile.GFile(path, "r") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("%s:%d is not a JSON line (an interrupted write?); dropping it", path, number)
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int):
                records.append(record)
    return records


class MetricsLog:
    """``metrics.jsonl``: one JSON object per checkpoint interval.

    Locally a record is appended with a single `write` on an ``O_APPEND`` descriptor and
    fsync'ed, so a crash leaves whole lines only; filesystems without append (GCS) get the whole
    file rewritten atomically instead.
    """

    def __init__(self, path: str):
        self.path = path

    def records(self) -> List[Dict[str, Any]]:
        return _read_jsonl(self.path)

    def append(self, record: Dict[str, Any]) -> None:
        file_io.append_line(self.path, json.dumps(record, sort_keys=True))

    def truncate_after(self, step: int) -> None:
        """Keeps the records of steps <= `step` (rewritten atomically if anything changes)."""
        import tensorflow as tf

        if not tf.io.gfile.exists(self.path):
            return
        with tf.io.gfile.GFile(self.path, "r") as f:
            original = f.read()
        kept = [r for r in self.records() if r["step"] <= step]
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept)
        if text != original:
            dropped = len(original.splitlines()) - len(kept)
            if dropped:
                logger.info("%s: dropping %d record(s) after step %d (not in a checkpoint)", self.path, dropped, step)
            file_io.atomic_write_text(self.path, text)



def scalar(value) -> float:
    import numpy as np

    return float(np.asarray(value))


def make_callbacks(keras):
    """Callback classes, defined once Keras is imported."""

    class IntervalCheckpoint(keras.callbacks.Callback):
        """At the end of every checkpoint interval: a metrics line, then a checkpoint.

        The line is written first: a crash between the two leaves a line without a checkpoint,
        which the restart drops (`MetricsLog.truncate_after`); the other order would lose it.
        """

        def __init__(
            self,
            manager,
            metrics_log: Optional[MetricsLog],
            history: list,
            interval_starts: Sequence[int],
            expected_ends: Sequence[int],
            examples_per_step: int,
        ):
            super().__init__()
            self.manager = manager
            self.metrics_log = metrics_log
            self.history = history
            self.interval_starts = list(interval_starts)
            self.expected_ends = list(expected_ends)
            self.examples_per_step = examples_per_step
            self.last_checkpoint = None
            self._interval_start = None

        def on_epoch_begin(self, epoch, logs=None):
            self._interval_start = time.time()

        def on_epoch_end(self, epoch, logs=None):
            optimizer = self.model.optimizer
            step = int(scalar(optimizer.iterations))
            if step != self.expected_ends[epoch]:
                raise RuntimeError(
                    f"checkpoint interval {epoch} ended at step {step}, expected {self.expected_ends[epoch]} "
                    "(did the dataset run out of batches?)"
                )
            record = {"step": step}
            for name, value in (logs or {}).items():
                record[name] = scalar(value)
            record["lr"] = scalar(optimizer.learning_rate)
            seconds = time.time() - self._interval_start
            record["seconds"] = round(seconds, 3)
            # Includes the first interval's tracing; later intervals show the steady rate.
            steps = step - self.interval_starts[epoch]
            record["examples_per_second"] = round(steps * self.examples_per_step / max(seconds, 1e-9), 2)
            if self.metrics_log is not None:
                self.metrics_log.append(record)
            self.last_checkpoint = self.manager.save(checkpoint_number=step)
            self.history.append(record)
            logger.info(
                "step %d: loss %.4f, checkpoint %s", step, record.get("loss", float("nan")), self.last_checkpoint
            )

    class StepTensorBoard(keras.callbacks.TensorBoard):
        """Keras's TensorBoard with the optimizer step, not the interval number, as x-axis.

        The step survives restarts, so the curves of a resumed run continue where they were.
        """

        def on_epoch_end(self, epoch, logs=None):
            super().on_epoch_end(int(scalar(self.model.optimizer.iterations)), logs)

    class RunningScalars(keras.callbacks.Callback):
        """The running interval metrics every `log_every` updates, as TensorBoard `batch_*` scalars.

        Steps are counted in Python from the interval's first step (no device round trip).
        """

        def __init__(self, log_dir: str, log_every: int, accumulation: int, interval_starts: Sequence[int]):
            super().__init__()
            self.log_dir = log_dir
            self.log_every = log_every
            self.accumulation = accumulation
            self.interval_starts = list(interval_starts)
            self._writer = None
            self._start = 0
            self._last_step = 0

        def on_train_begin(self, logs=None):
            import tensorflow as tf

            self._writer = tf.summary.create_file_writer(self.log_dir)

        def on_epoch_begin(self, epoch, logs=None):
            self._start = self._last_step = self.interval_starts[epoch]

        def on_train_batch_end(self, batch, logs=None):
            import tensorflow as tf

            # `batch` is the last batch of the execution: with several steps per execution
            # a multiple of `log_every` may be passed over, so "crossed" rather than "equal".
            step = self._start + (batch + 1) // self.accumulation
            crossed = step // self.log_every > self._last_step // self.log_every
            self._last_step = step
            if not crossed or not isinstance(logs, dict):
                return
            with self._writer.as_default():
                for name, value in logs.items():
                    tf.summary.scalar(f"batch_{name}", value, step=step)

        def on_train_end(self, logs=None):
            if self._writer is not None:
                self._writer.close()

    return IntervalCheckpoint, StepTensorBoard, RunningScalars
