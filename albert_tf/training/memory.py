"""Peak-memory estimate of a training run, checked against the memory this machine has free.

`estimate_training_memory` adds up what a training step holds at its peak: the float32
parameters, their gradients, the optimizer's slots (two for LAMB and AdamW, one more for
gradient accumulation), and the activations kept for the backward pass at batch x length
(per layer, after Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models": about 34 h + 5 a s values per token, in the compute precision), with the
masked-LM logits over the vocabulary and TensorFlow's own runtime on top. It is an estimate, sized
to err on the high side: a run it passes does fit; a run it refuses would be killed or swap.

`check_fits` turns a refused estimate into one `TrainingMemoryError` line that names the
estimate, what is free, and what fits instead: the largest batch that fits, gradient
accumulation to keep the effective batch, and smaller presets.

`available_bytes` is what the process may still allocate: the smaller of ``MemAvailable`` and
the cgroup's limit less its usage (a container's limit is what the kernel enforces). Only the
host memory is known before the run; for accelerators the check is skipped.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional, Sequence, Tuple

from albert_tf.config import AlbertConfig, count_parameters
from albert_tf.errors import ParameterError, param

GIB = 1024**3
# TensorFlow, Keras and the input pipeline before any model exists (measured: 0.9-1.2 GB).
RUNTIME_BYTES = int(1.5 * GIB)
# Slack for allocator fragmentation and temporaries of the largest op.
SAFETY_FACTOR = 1.25
COMPUTE_BYTES = {"float32": 4, "mixed_bfloat16": 2}


class TrainingMemoryError(ParameterError, MemoryError):
    """A run whose estimated peak memory exceeds what is free."""


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a training step holds at its peak, by kind."""

    parameters: int
    gradients: int
    optimizer: int
    activations: int
    runtime: int

    @property
    def total(self) -> int:
        return int(SAFETY_FACTOR * (self.parameters + self.gradients + self.optimizer + self.activations)) + self.runtime

    def describe(self) -> str:
        parts = (("parameters", self.parameters + self.gradients), ("optimizer", self.optimizer),
                 ("activations", self.activations))
        return f"{gib(self.total)} (" + ", ".join(f"{name} {gib(value)}" for name, value in parts) + ")"


def gib(value: int) -> str:
    return f"{value / GIB:.1f} GiB"


def estimate_training_memory(
    config: AlbertConfig,
    batch_size: int,
    seq_length: int,
    *,
    precision: str = "float32",
    gradient_accumulation_steps: int = 1,
    predictions_per_seq: Optional[int] = None,
    num_labels: int = 2,
) -> MemoryEstimate:
    """The peak memory of a train step of an ALBERT of `config` (pretraining with
    `predictions_per_seq` masked positions, else fine-tuning with a `num_labels` head)."""
    act = COMPUTE_BYTES.get(precision, 4)
    params = count_parameters(config)
    if predictions_per_seq:
        # MLM head: transform + LayerNorm + output bias (the decoder is tied to the embeddings).
        params += config.hidden_size * config.embedding_size + 3 * config.embedding_size + config.vocab_size
    slots = 2 + (1 if gradient_accumulation_steps > 1 else 0)
    b, s, h, a = batch_size, seq_length, config.hidden_size, config.num_attention_heads
    per_layer = b * s * (34 * h + 5 * a * s) * act // 2
    layers = config.num_hidden_layers * per_layer
    embeddings = b * s * (3 * config.embedding_size + 2 * h) * 4
    if predictions_per_seq:
        # Logits, their softmax and its gradient over the vocabulary, in float32.
        head = 3 * b * predictions_per_seq * config.vocab_size * 4
    else:
        head = b * (h + num_labels) * 4
    return MemoryEstimate(
        parameters=params * 4,
        gradients=params * 4,
        optimizer=params * 4 * slots,
        activations=layers + embeddings + head,
        runtime=RUNTIME_BYTES,
    )


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_bytes() -> Optional[int]:
    """Host memory this process can still allocate (None where it cannot be read), or
    ``ALBERT_TF_FREE_MEMORY_GB`` where set (a shared machine's fair share)."""
    override = os.environ.get("ALBERT_TF_FREE_MEMORY_GB")
    if override:
        try:
            return int(float(override) * GIB)
        except ValueError:
            raise TrainingMemoryError(f"ALBERT_TF_FREE_MEMORY_GB must be a number of GB, got {override!r}") from None
    free = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    limit = _read_int("/sys/fs/cgroup/memory.max")
    usage = _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and usage is not None:
        free = min(free, limit - usage) if free is not None else limit - usage
    return free


def largest_fitting_batch(estimate_for, batch_size: int, free: int) -> int:
    """The largest batch below `batch_size` whose estimate fits in `free` (0: none does)."""
    low, high = 0, batch_size
    while low < high:
        mid = (low + high + 1) // 2
        if estimate_for(mid).total <= free:
            low = mid
        else:
            high = mid - 1
    return low


def check_fits(
    what: str,
    estimate_for,
    batch_size: int,
    seq_length: int,
    *,
    gradient_accumulation_steps: int = 1,
    free: Optional[int] = None,
    alternatives: Sequence[Tuple[str, MemoryEstimate]] = (),
    config_param: str = "config",
) -> Optional[MemoryEstimate]:
    """Raises `TrainingMemoryError` when `estimate_for(batch_size)` exceeds the free memory.

    Args:
        what: The run, for the message ("pretraining base-v2").
        estimate_for: `batch size -> MemoryEstimate` with every other setting of the run.
        batch_size, seq_length, gradient_accumulation_steps: The run's.
        free: Bytes free (default `available_bytes()`); None where unknown: no check.
        alternatives: `(preset name, its estimate)` of smaller presets to suggest when they fit.
        config_param: The parameter that selects the preset.

    Returns:
        The estimate (None when the free memory is unknown).
    """
    free = available_bytes() if free is None else free
    estimate = estimate_for(batch_size)
    if free is None or estimate.total <= free:
        return estimate if free is not None else None
    fits = []
    for name, other in alternatives:
        if other.total <= free:
            fits.append(f"{param(config_param, name)} (about {gib(other.total)})")
    batch = largest_fitting_batch(estimate_for, batch_size, free)
    if batch:
        # A power of two below the largest fitting batch divides the original batch evenly.
        fitting = 1 << (batch.bit_length() - 1)
        accumulation = max(1, (batch_size * gradient_accumulation_steps) // fitting)
        fits.append(
            f"{param('batch_size', fitting)} (about {gib(estimate_for(fitting).total)}), with "
            f"{param('gradient_accumulation_steps', accumulation)} for the same effective batch"
        )
    suggestion = "; or ".join(fits) if fits else "a smaller model: no batch of this one fits"
    raise TrainingMemoryError(
        f"{what} at batch {batch_size} x length {seq_length} needs about {estimate.describe()}, but {gib(free)} is free: "
        f"use {suggestion}"
    )


def memory_line(estimate: Optional[MemoryEstimate], free: Optional[int] = None) -> str:
    """One line for the run's log: the estimate against what is free."""
    if estimate is None:
        return "peak memory: not checked (free memory unknown)"
    free = available_bytes() if free is None else free
    return f"peak memory: about {estimate.describe()} of {gib(free)} free"
