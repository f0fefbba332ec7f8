"""`LengthGroupingBatcher`: batches that hold requests of one length bucket.

A length-aware export pads a batch to its longest row (rounded up to `length_bucket`), so in
arrival order a short request pays for the longest one beside it (Rotten Tomatoes: 48 pieces on
average, a batch of 32 padded to 89). Here each request waits in the queue of its bucket
(`request_length.RequestLengths`: piece count for text, ids' length for tokens) and a batch is
formed from one queue:

* a queue is ready when it holds `max_batch_size` rows, or when its oldest request has waited
  `batch_timeout_micros` (TF Serving's meaning: the timeout counts from the request's arrival,
  so a request that already waited for a free batch thread does not wait again);
* a free batch thread takes the ready queue whose oldest request is the oldest (so no bucket
  starves: a bucket's head becomes ready at its timeout and then goes before younger ones), up
  to `max_batch_size` rows in arrival order;
* a lone request, one whose bucket has no company when it is ready, waits no longer than that
  timeout either: it then takes the queued requests of the next longer bucket into its batch (it
  alone is padded up, by at most one bucket; the others leave early), or runs alone when that
  bucket is empty. It never pads other requests up to its own length;
* the queue bound is `max_enqueued_batches * max_batch_size` requests over all buckets, as for
  arrival order; beyond it a request fails with UNAVAILABLE;
* requests whose length cannot be known (other signatures, unreadable text) share one queue
  per signature and shapes, which then behaves as the arrival-order batcher.

The answers are those of the request alone: a batch is padded and cut back exactly as by the
arrival-order `Batcher`, whose batch run this class shares. `make_batcher` picks the batcher of a
version: this one for a length-aware export with `length_grouping` on (the default).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Deque, Dict, List, Optional, Tuple

from albert_tf.export.serving_config import BatchingConfig
from albert_tf.model_server.batching import Batcher, BatchTask
from albert_tf.model_server.request_length import RequestLengths
from albert_tf.model_server.servable import UNAVAILABLE, ServingError

logger = logging.getLogger(__name__)

# A waiting batch thread re-checks at least this often (seconds): a missed wake-up costs no more.
_MAX_IDLE_WAIT_S = 0.5


class LengthGroupingBatcher(Batcher):
    """Batches concurrent `run` calls on one servable by length bucket (see the module doc).

    Args:
      servable: the `SessionServable`.
      config: the `BatchingConfig`.
      lengths: the export's `RequestLengths`.
    """

    def __init__(self, servable, config: BatchingConfig, lengths: RequestLengths):
        self.lengths = lengths
        self._condition = threading.Condition()
        # (batch key, bucket) -> the queued tasks, oldest first; their row counts.
        self._groups: Dict[Tuple[tuple, Optional[int]], Deque[BatchTask]] = {}
        self._rows: Dict[Tuple[tuple, Optional[int]], int] = {}
        self._queued = 0
        super().__init__(servable, config)

    def _enqueue(self, task: BatchTask) -> None:
        task.bucket = self.lengths.bucket(self.servable.signature(task.signature), task.inputs)
        group = (task.key, task.bucket)
        with self._condition:
            if self._stopped.is_set():
                raise ServingError(UNAVAILABLE, "the servable was unloaded")
            if self._queued >= self.config.max_enqueued_batches * self.config.max_batch_size:
                raise ServingError(UNAVAILABLE, "The batch scheduling queue to which this task was submitted is full")
            task.enqueued = time.monotonic()
            self._groups.setdefault(group, collections.deque()).append(task)
            self._rows[group] = self._rows.get(group, 0) + task.size
            self._queued += 1
            self._condition.notify()

    def _work(self) -> None:
        while True:
            with self._condition:
                batch = self._wait_for_batch()
            if batch is None:
                return
            self._run_batch(batch)

    def _wait_for_batch(self) -> Optional[List[BatchTask]]:
        """The next batch (held: `_condition`), waiting until one is ready; None once stopped."""
        timeout = self.config.batch_timeout_micros / 1e6
        while not self._stopped.is_set():
            now = time.monotonic()
            ready, wake = None, now + _MAX_IDLE_WAIT_S
            for group, tasks in self._groups.items():
                head = tasks[0]
                if self._rows[group] >= self.config.max_batch_size or head.enqueued + timeout <= now:
                    if ready is None or head.enqueued < self._groups[ready][0].enqueued:
                        ready = group
                else:
                    wake = min(wake, head.enqueued + timeout)
            if ready is not None:
                batch = self._take(ready)
                if self._groups:
                    # This thread is busy now: another one times the queues that are left.
                    self._condition.notify()
                return batch
            self._condition.wait(max(wake - now, 0.0))
        return None

    def _take(self, group) -> List[BatchTask]:
        """Up to `max_batch_size` rows of `group`, oldest first; a lone request also takes the next
        longer bucket's queued requests."""
        batch = self._pop(group, self.config.max_batch_size)
        key, bucket = group
        if len(batch) == 1 and group not in self._groups and bucket is not None:
            above = self.lengths.next_bucket(bucket)
            if above is not None and (key, above) in self._groups:
                batch += self._pop((key, above), self.config.max_batch_size - batch[0].size)
        return batch

    def _pop(self, group, room: int) -> List[BatchTask]:
        tasks, batch, size = self._groups[group], [], 0
        while tasks and size + tasks[0].size <= room:
            task = tasks.popleft()
            batch.append(task)
            size += task.size
        self._rows[group] -= size
        self._queued -= len(batch)
        if not tasks:
            del self._groups[group], self._rows[group]
        return batch

    def stop(self) -> None:
        with self._condition:
            self._stopped.set()
            self._condition.notify_all()
        for thread in self._threads:
            thread.join(timeout=5)
        with self._condition:
            left = [task for tasks in self._groups.values() for task in tasks]
            self._groups.clear()
            self._rows.clear()
            self._queued = 0
        for task in left:
            if not task.future.done():
                task.future.set_exception(ServingError(UNAVAILABLE, "the servable was unloaded"))


def make_batcher(servable, config: Optional[BatchingConfig]) -> Batcher:
    """The batcher of a loaded version: by length bucket for a length-aware export with
    `config.length_grouping`, else in arrival order (also without batching: `config` None)."""
    if config is not None and config.length_grouping:
        lengths = RequestLengths.of_version(servable.path)
        if lengths is not None:
            return LengthGroupingBatcher(servable, config, lengths)
    return Batcher(servable, config)
