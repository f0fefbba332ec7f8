"""How far a fine-tuning run has got: a line for each evaluation interval (a Keras progress bar
on a terminal, one plain line per interval otherwise) and `ProgressLine`, the progress of a long
evaluation or prediction, shown only once it has run a few seconds.

Piped output stays free of carriage returns and colour codes: what is redrawn in place on a
terminal is written as plain lines elsewhere.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, List, Optional, TextIO, Union

# Evaluations and predictions this short run silently; longer ones report every so often.
PROGRESS_DELAY_S = 3.0
PROGRESS_EVERY_S = 10.0


def is_tty(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed or detached stream
        return False


def _number(value: float) -> str:
    """1, 2.5, 2.17: at most two decimals, none when whole."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


class ProgressLine:
    """How far a long loop has got, shown only once it has run `delay` seconds.

    On a terminal the line is redrawn in place (and ended by `close`); elsewhere a new line is
    written every `every` seconds, so that piped output stays one plain line per report.

    Args:
        label: What is running ("evaluating at step 60", "predicting").
        total: Batches in all, when known.
        stream: Where to write (default: `sys.stderr` at creation).
        tty: Redraw in place; default: whether `stream` is a terminal.
        delay: Seconds of silence before the first report (default `PROGRESS_DELAY_S`).
        every: Seconds between lines when not redrawing (default `PROGRESS_EVERY_S`).
        clock: The time source (seconds).
    """

    def __init__(self, label: str, total: Optional[int] = None, *, stream: Optional[TextIO] = None,
                 tty: Optional[bool] = None, delay: Optional[float] = None, every: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.label = label
        self.total = total if total and total > 0 else None
        self.stream = stream if stream is not None else sys.stderr
        self.tty = is_tty(self.stream) if tty is None else tty
        self.delay = PROGRESS_DELAY_S if delay is None else delay
        self.every = PROGRESS_EVERY_S if every is None else every
        self.clock = clock
        self.started = clock()
        self.last: Optional[float] = None
        self.done = 0
        self.shown = -1  # the count of the last line written

    def _text(self, elapsed: float) -> str:
        if self.total:
            width = 20
            filled = min(width, int(width * self.done / self.total))
            bar = f" [{'=' * filled}{'.' * (width - filled)}]" if self.tty else ""
            return f"{self.label}: {self.done}/{self.total} batches{bar}, {elapsed:.0f}s"
        return f"{self.label}: {self.done} batches, {elapsed:.0f}s"

    def update(self, done: int) -> None:
        self.done = done
        now = self.clock()
        elapsed = now - self.started
        if elapsed < self.delay:
            return
        if self.tty:
            # Redrawing faster than a person reads only costs time.
            if self.last is None or now - self.last >= 0.2:
                self.stream.write("\r" + self._text(elapsed))
                self.stream.flush()
                self.last, self.shown = now, done
        elif self.last is None or now - self.last >= self.every:
            self.stream.write(self._text(elapsed) + "\n")
            self.stream.flush()
            self.last, self.shown = now, done

    def close(self) -> None:
        """Ends a line drawn in place, or reports the end after periodic lines (unless the last one
        already said it)."""
        if self.last is None:
            return
        if self.tty or self.shown != self.done:
            elapsed = self.clock() - self.started
            self.stream.write(("\r" if self.tty else "") + self._text(elapsed) + ", done\n")
            self.stream.flush()
        self.last = None


def _progress_callback(keras, label: str, options: Dict[str, Any]):
    class PredictionProgress(keras.callbacks.Callback):
        """A `ProgressLine` over the batches of one `predict` or `evaluate` call."""

        def __init__(self):
            super().__init__()
            self.line: Optional[ProgressLine] = None

        def _begin(self, logs=None):
            self.line = ProgressLine(label, (self.params or {}).get("steps"), **options)

        def _batch_end(self, batch, logs=None):
            if self.line is not None:
                self.line.update(int(batch) + 1)

        def _end(self, logs=None):
            if self.line is not None:
                self.line.close()

        on_predict_begin = on_test_begin = _begin
        on_predict_batch_end = on_test_batch_end = _batch_end
        on_predict_end = on_test_end = _end

    return PredictionProgress()


def progress_callbacks(label: str, *, verbose: Union[int, bool] = True, **options) -> List[Any]:
    """Keras callbacks that report the progress of one `model.predict` or `model.evaluate` call
    under `label` (`ProgressLine` options in `options`); none when `verbose` is off.

    Pass them to the call (`callbacks=`); the task modules' predict functions take them.
    """
    if not verbose:
        return []
    import keras

    return [_progress_callback(keras, label, options)]




def _interval_progress(keras):
    class IntervalProgress(keras.callbacks.Callback):
        """The training progress of each evaluation interval, labelled in steps and epochs.

        Verbose 1: a header line and a Keras progress bar over the interval's batches; verbose 2:
        one plain line per interval. Either is finished before the interval's evaluation prints.
        """

        def __init__(self, run, steps_per_epoch: Optional[int]):
            super().__init__()
            self.run = run
            self.steps_per_epoch = steps_per_epoch
            self.bar = None
            self.seen = 0
            self.started = 0.0

        def _header(self, epoch: int) -> str:
            run = self.run
            first = epoch * run.eval_every + 1
            last = min((epoch + 1) * run.eval_every, run.num_train_steps)
            text = f"steps {first}-{last} of {run.num_train_steps}"
            if self.steps_per_epoch:
                text += f" (epoch {_number(last / self.steps_per_epoch)} of {_number(run.num_train_steps / self.steps_per_epoch)})"
            return text

        def on_epoch_begin(self, epoch, logs=None):
            run = self.run
            self.seen = 0
            self.started = time.time()
            if run.verbose == 1:
                batches = min(run.batches_per_interval, run.total_batches - epoch * run.batches_per_interval)
                print(self._header(epoch), flush=True)
                # Logged values are already running means: shown as they come.
                self.bar = keras.utils.Progbar(batches, verbose=1, stateless_metrics=[],
                                               unit_name="batch" if run.accumulation > 1 else "step")

        def on_train_batch_end(self, batch, logs=None):
            self.seen = batch + 1
            if self.bar is not None:
                self.bar.update(self.seen, _loggable(logs), finalize=False)

        def on_epoch_end(self, epoch, logs=None):
            if self.bar is not None:
                self.bar.update(self.seen, _loggable(logs), finalize=True)
                self.bar = None
            elif self.run.verbose == 2:
                shown = ", ".join(f"{k}={v:.4f}" for k, v in _loggable(logs))
                print(f"{self._header(epoch)}: {shown}{', ' if shown else ''}{time.time() - self.started:.1f}s", flush=True)

    return IntervalProgress


def interval_progress(run, steps_per_epoch: Optional[int]):
    """The Keras callback of a run's training progress (`run` the fine-tuning run's bookkeeping:
    `verbose`, `eval_every`, `num_train_steps`, `batches_per_interval`, `total_batches`,
    `accumulation`)."""
    import keras

    return _interval_progress(keras)(run, steps_per_epoch)


def _loggable(logs) -> List[Any]:
    values = []
    for name, value in (logs or {}).items():
        try:
            values.append((name, float(value)))
        except (TypeError, ValueError):
            continue
    return values
