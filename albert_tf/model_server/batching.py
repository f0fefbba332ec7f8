"""`Batcher`: TF Serving's basic batch scheduler for one loaded version, in arrival order.

Concurrent requests of the same signature and input shapes merge into one session run: up to
`max_batch_size` rows, waiting at most `batch_timeout_micros` for more, like the server's
`--enable_batching`. With `pad_variable_length_inputs` (the default), requests to a
variable-length `tokens` signature ([-1, -1] token inputs) merge across lengths: each is padded to
the longest of the batch (pad id 0, mask 0, `p_mask` 1, so the real positions' outputs do not
change) and each reply is cut back to its own length. `length_batching.LengthGroupingBatcher`
queues by length bucket instead; both share the batch run (`Batcher._run_batch`).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import queue
import threading
import time
from concurrent.futures import Future
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from albert_tf.export.serving_config import BatchingConfig
from albert_tf.model_server.servable import (
    FAILED_PRECONDITION,
    INVALID_ARGUMENT,
    UNAVAILABLE,
    ServingError,
    SessionServable,
)

# The token inputs a length-aware `tokens` signature takes, and what pads them: padding must be
# masked out (mask 0) and never an answer position (`p_mask` 1, SQuAD v2).
SEQUENCE_INPUT_PADDING = {"input_ids": 0, "input_mask": 0, "segment_ids": 0, "p_mask": 1}


@dataclasses.dataclass
class BatchTask:
    """One request waiting for its batch: its inputs, batch key, rows, and the future of its answer."""

    signature: str
    inputs: Dict[str, np.ndarray]
    output_filter: Tuple[str, ...]
    size: int
    key: tuple
    future: Future
    # The sequence length of a request to a variable-length token signature (None otherwise).
    length: Optional[int] = None
    # When it was queued (`time.monotonic()`), and its length bucket (`LengthGroupingBatcher`).
    enqueued: float = 0.0
    bucket: Optional[int] = None


def variable_length_signature(definition) -> bool:
    """Whether every input of a signature is a `[-1, -1]` token input (`SEQUENCE_INPUT_PADDING`)."""
    for name, info in definition.inputs.items():
        if name not in SEQUENCE_INPUT_PADDING or info.tensor_shape.unknown_rank:
            return False
        if [d.size for d in info.tensor_shape.dim] != [-1, -1]:
            return False
    return bool(definition.inputs)


def _pad_length(value: np.ndarray, length: int, pad) -> np.ndarray:
    return np.pad(value, [(0, 0), (0, length - value.shape[1])], constant_values=pad)


class Batcher:
    """Batches concurrent `run` calls on one servable (TF Serving's basic batch scheduler).

    Args:
      servable: the `SessionServable`.
      config: the `BatchingConfig`; None runs every request on its own.
    """

    def __init__(self, servable: SessionServable, config: Optional[BatchingConfig]):
        self.servable = servable
        self.config = config
        self._queue: "queue.Queue[Optional[BatchTask]]" = queue.Queue()
        self._stopped = threading.Event()
        self._threads: List[threading.Thread] = []
        if config is not None:
            for index in range(config.num_batch_threads):
                thread = threading.Thread(target=self._work, name=f"batch-{os.path.basename(servable.path)}-{index}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def run(self, signature: str, inputs: Dict[str, np.ndarray], output_filter: Sequence[str] = ()) -> Dict[str, np.ndarray]:
        """Runs (possibly batched with others) and returns this request's outputs."""
        if self.config is None:
            return self.servable.run(signature, inputs, output_filter)
        task = self._task(signature, inputs, output_filter)
        if task is None:
            return self.servable.run(signature, inputs, output_filter)
        self._enqueue(task)
        return task.future.result()

    def _task(self, signature: str, inputs: Dict[str, np.ndarray], output_filter: Sequence[str]) -> Optional[BatchTask]:
        """The batch task of a request, or None for one that runs on its own (unbatchable inputs)."""
        self.servable.validate_inputs(signature, inputs)
        definition = self.servable.signature(signature)
        sizes = {value.shape[0] if value.ndim else None for value in inputs.values()}
        batchable = all(
            not info.tensor_shape.unknown_rank and info.tensor_shape.dim and info.tensor_shape.dim[0].size == -1
            for info in definition.inputs.values()
        )
        if not batchable or len(sizes) != 1 or None in sizes:
            if batchable and len(sizes) > 1:
                raise ServingError(INVALID_ARGUMENT, "Batching session Run() input tensors must have equal 0th-dimension size")
            return None
        size = sizes.pop()
        if size > self.config.max_batch_size:
            raise ServingError(
                INVALID_ARGUMENT,
                f"Task size {size} is larger than maximum input batch size {self.config.max_batch_size}",
            )
        length = None
        lengths = {value.shape[1] for value in inputs.values() if value.ndim == 2}
        if self.config.pad_variable_length_inputs and len(lengths) == 1 and variable_length_signature(definition):
            length = lengths.pop()
        key = (signature or "serving_default", tuple(output_filter), length is not None) + tuple(
            (name, value.dtype.str, value.shape[1:] if length is None else ()) for name, value in sorted(inputs.items())
        )
        return BatchTask(signature, inputs, tuple(output_filter), size, key, Future(), length)

    def _enqueue(self, task: BatchTask) -> None:
        """Queues a task for the batch threads; UNAVAILABLE when the queue is full."""
        if self._queue.qsize() >= self.config.max_enqueued_batches * self.config.max_batch_size:
            raise ServingError(UNAVAILABLE, "The batch scheduling queue to which this task was submitted is full")
        self._queue.put(task)

    def _work(self) -> None:
        pending: "collections.deque[BatchTask]" = collections.deque()
        timeout = self.config.batch_timeout_micros / 1e6
        while not self._stopped.is_set():
            if pending:
                first = pending.popleft()
            else:
                try:
                    first = self._queue.get(timeout=0.1)
                except queue.Empty:
                    continue
            if first is None:
                break
            batch, size = [first], first.size
            for task in list(pending):
                if task.key == first.key and size + task.size <= self.config.max_batch_size:
                    pending.remove(task)
                    batch.append(task)
                    size += task.size
            deadline = time.monotonic() + timeout
            while size < self.config.max_batch_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    task = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
                if task is None:
                    self._stopped.set()
                    break
                if task.key == first.key and size + task.size <= self.config.max_batch_size:
                    batch.append(task)
                    size += task.size
                else:
                    pending.append(task)
            self._run_batch(batch)
        for task in pending:
            task.future.set_exception(ServingError(UNAVAILABLE, "the servable was unloaded"))

    def _run_batch(self, batch: List[BatchTask]) -> None:
        first = batch[0]
        try:
            if len(batch) == 1:
                outputs = self.servable.run(first.signature, first.inputs, first.output_filter)
            else:
                longest = max(t.length or 0 for t in batch)
                if first.length is not None:
                    parts = {name: [_pad_length(t.inputs[name], longest, SEQUENCE_INPUT_PADDING[name]) for t in batch]
                             for name in first.inputs}
                else:
                    parts = {name: [t.inputs[name] for t in batch] for name in first.inputs}
                inputs = {name: np.concatenate(values, axis=0) for name, values in parts.items()}
                merged = self.servable.run(first.signature, inputs, first.output_filter)
                outputs_info = self.servable.signature(first.signature).outputs
                total = sum(t.size for t in batch)
                for name, value in merged.items():
                    if np.ndim(value) == 0 or value.shape[0] != total:
                        raise ServingError(
                            FAILED_PRECONDITION,
                            f"Batched output tensor {name} has 0th dimension {np.shape(value)[:1]}, expected {total}",
                        )
                # Outputs along the padded sequence axis ([-1, -1, ...] in the signature) are cut
                # back to each request's own length.
                sequence_outputs = {
                    name for name, value in merged.items()
                    if first.length is not None and np.ndim(value) >= 2 and value.shape[1] == longest
                    and len(outputs_info[name].tensor_shape.dim) >= 2 and outputs_info[name].tensor_shape.dim[1].size == -1
                }
                start = 0
                for task in batch:
                    task.future.set_result({
                        k: v[start : start + task.size, : task.length] if k in sequence_outputs else v[start : start + task.size]
                        for k, v in merged.items()
                    })
                    start += task.size
                return
            first.future.set_result(outputs)
        except Exception as e:  # every waiting request must get an answer, whatever failed
            for task in batch:
                if not task.future.done():
                    task.future.set_exception(e)

    def stop(self) -> None:
        self._stopped.set()
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=5)
        while True:
            try:
                task = self._queue.get_nowait()
            except queue.Empty:
                break
            if task is not None and not task.future.done():
                task.future.set_exception(ServingError(UNAVAILABLE, "the servable was unloaded"))
