"""Choosing the `tf.distribute` strategy and the XLA default for a pretraining run.

`get_strategy(name)` maps the names the CLI and `PretrainingRunConfig` use to strategies:

==================  ==========================================================================
name                strategy
==================  ==========================================================================
``default``         TensorFlow's default strategy: one device, no distribution machinery
``one_device``      `OneDeviceStrategy` on the first GPU, else the CPU
``mirrored``        `MirroredStrategy` over every local GPU (or every logical CPU if none)
``multi_worker``    `MultiWorkerMirroredStrategy`; the cluster comes from ``TF_CONFIG``
``tpu``             `TPUStrategy` through a `TPUClusterResolver`
==================  ==========================================================================

The training code is the same for all of them: it builds and compiles the model under
`strategy.scope()` and lets `model.fit` distribute the global batch. Configuration problems
(a missing or malformed ``TF_CONFIG``, no TPU) raise `StrategyError` with the reason.

`default_jit_compile(device_kind, precision)` is the XLA default: on for GPU and TPU, off on CPU,
where plain TensorFlow measured faster (see the function).
"""

from __future__ import annotations

import json
import os
from typing import Optional, Sequence

STRATEGY_NAMES = ("default", "one_device", "mirrored", "multi_worker", "tpu")
DEVICE_KINDS = ("CPU", "GPU", "TPU")
PRECISIONS = ("float32", "mixed_bfloat16")

# Task types of a TF_CONFIG cluster that can run `MultiWorkerMirroredStrategy`.
_MULTI_WORKER_TASK_TYPES = ("chief", "worker")


class StrategyError(ValueError):
    """A distribution strategy that cannot be created as configured."""


def default_jit_compile(device_kind: str, precision: str = "float32") -> bool:
    """Whether `model.fit` should compile the train step with XLA by default.

    GPU and TPU: yes (TPUs always compile; on GPUs XLA fuses the many small element-wise ops of
    the transformer). CPU: no, for both precisions. Measured on this project's development
    machine (2 cores of an AMD EPYC, AVX512_BF16, no AMX) with `AlbertPretrainer.fit` on the small and base configs of
    `benchmarks/training_throughput.py` (BENCHMARKS.md):

    * float32: 54.1 sequences/s plain vs 55.0 with XLA (small), 5.00 vs 4.53 (ALBERT-base);
    * mixed_bfloat16: 95.0 plain vs 44.5 with XLA (small), 12.64 vs 4.15 (base): the bfloat16
      matmuls lose oneDNN's AVX512_BF16 kernels (XLA's CPU backend emits its own). Without XLA the
      elementwise ops run as the fused kernels of `albert_tf.fused_ops`.

    Args:
        device_kind: "CPU", "GPU" or "TPU" (case-insensitive).
        precision: "float32" or "mixed_bfloat16".

    Returns:
        The default `jit_compile`; an explicit setting always overrides it.

    Raises:
        ValueError: For an unknown device kind or precision.
    """
    kind = str(device_kind).upper()
    if kind not in DEVICE_KINDS:
        raise ValueError(f"unknown device kind {device_kind!r}; expected one of {', '.join(DEVICE_KINDS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")
    return kind != "CPU"


def parse_tf_config(environ=None) -> dict:
    """Reads and checks ``TF_CONFIG`` for `MultiWorkerMirroredStrategy`.

    Returns:
        The parsed JSON object (``cluster`` and ``task``).

    Raises:
        StrategyError: ``TF_CONFIG`` is unset, not JSON, or does not describe a cluster of
            ``chief``/``worker`` tasks with this process's ``task`` among them.
    """
    environ = os.environ if environ is None else environ
    raw = environ.get("TF_CONFIG")
    example = (
        'e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, "task": {"type": "worker", "index": 0}}'
    )
    if not raw:
        raise StrategyError(f"strategy 'multi_worker' needs the TF_CONFIG environment variable; {example}")
    try:
        tf_config = json.loads(raw)
    except json.JSONDecodeError as e:
        raise StrategyError(f"TF_CONFIG is not valid JSON ({e}); {example}") from None
    if not isinstance(tf_config, dict):
        raise StrategyError(f"TF_CONFIG must be a JSON object, got {type(tf_config).__name__}; {example}")
    cluster = tf_config.get("cluster")
    if not isinstance(cluster, dict) or not cluster:
        raise StrategyError(f"TF_CONFIG has no 'cluster' object; {example}")
    for task_type, addresses in cluster.items():
        if not isinstance(addresses, list) or not addresses or not all(isinstance(a, str) and a for a in addresses):
            raise StrategyError(f"TF_CONFIG cluster[{task_type!r}] must be a non-empty list of 'host:port' strings")
    if not any(t in cluster for t in _MULTI_WORKER_TASK_TYPES):
        raise StrategyError(f"TF_CONFIG cluster has neither 'chief' nor 'worker' tasks: {sorted(cluster)}")
    task = tf_config.get("task")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise StrategyError(f"TF_CONFIG has no 'task' with 'type' and 'index'; {example}")
    task_type, index = task["type"], task["index"]
    if task_type not in cluster:
        raise StrategyError(f"TF_CONFIG task type {task_type!r} is not in the cluster ({sorted(cluster)})")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(cluster[task_type]):
        raise StrategyError(
            f"TF_CONFIG task index {index!r} is out of range for {len(cluster[task_type])} {task_type!r} task(s)"
        )
    return tf_config


def _local_devices(tf, devices: Optional[Sequence[str]]):
    if devices:
        return list(devices)
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return [d.name for d in gpus]
    # Several logical CPUs exist only when configured on purpose (e.g. to test distribution).
    return [d.name for d in tf.config.list_logical_devices("CPU")]


def _tpu_strategy(tf, tpu: Optional[str]):
    if tpu is None and not (os.environ.get("TPU_NAME") or os.environ.get("TPU_CONFIG")):
        if not tf.config.list_physical_devices("TPU"):
            raise StrategyError(
                "strategy 'tpu' found no TPU: run on a TPU VM, pass the TPU's name or grpc:// address "
                "(--tpu), or set TPU_NAME"
            )
        tpu = "local"
    if tpu == "local" and not tf.config.list_physical_devices("TPU"):
        raise StrategyError("strategy 'tpu' with tpu='local' but this machine has no TPU devices")
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        if tpu != "local":
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except StrategyError:
        raise
    except Exception as e:  # The resolver raises ValueError, RuntimeError, NotFoundError, ...
        raise StrategyError(f"could not connect to TPU {tpu!r}: {type(e).__name__}: {e}") from e


def get_strategy(name: str = "default", tpu: Optional[str] = None, devices: Optional[Sequence[str]] = None):
    """The `tf.distribute.Strategy` called `name` (see the module docstring).

    Create it before any other TensorFlow work in the process: `MultiWorkerMirroredStrategy`
    and `TPUStrategy` must configure the runtime before it starts.

    Args:
        name: one of `STRATEGY_NAMES`.
        tpu: for "tpu": the TPU name, ``grpc://`` address or "local"; by default the TPU_NAME
            environment variable or the TPU of this TPU VM.
        devices: for "mirrored" and "one_device": explicit device names (default: every GPU,
            else every logical CPU; for "one_device" the first of them).

    Returns:
        The strategy.

    Raises:
        StrategyError: Unknown name, bad ``TF_CONFIG``, no TPU.
    """
    if name not in STRATEGY_NAMES:
        raise StrategyError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGY_NAMES)}")
    if name == "multi_worker":
        # Checked first so that a misconfigured worker fails before TensorFlow starts a server.
        parse_tf_config()
    import tensorflow as tf

    if name == "default":
        return tf.distribute.get_strategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(_local_devices(tf, devices)[0])
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=_local_devices(tf, devices))
    if name == "multi_worker":
        try:
            return tf.distribute.MultiWorkerMirroredStrategy()
        except (RuntimeError, ValueError) as e:
            raise StrategyError(
                f"could not start MultiWorkerMirroredStrategy from TF_CONFIG ({e}); it must be created "
                "before any other TensorFlow operation in the process"
            ) from e
    return _tpu_strategy(tf, tpu)


def strategy_device_kind(strategy) -> str:
    """The kind of device the strategy's replicas run on: "TPU", "GPU" or "CPU"."""
    import tensorflow as tf

    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "TPU"
    try:
        devices = list(strategy.extended.worker_devices)
    except RuntimeError:
        # The default strategy has no device list: ops go to the first GPU if there is one.
        return "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    kinds = {tf.DeviceSpec.from_string(d).device_type for d in devices}
    if "TPU" in kinds:
        return "TPU"
    return "GPU" if "GPU" in kinds else "CPU"


def task_info(strategy) -> tuple[Optional[str], int]:
    """This process's (task type, task index) in a multi-worker cluster; (None, 0) otherwise.

    Only `MultiWorkerMirroredStrategy` runs one Python process per worker; the TPU strategy's
    client is a single process however many hosts the TPU has.
    """
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return None, 0
    resolver = strategy.cluster_resolver
    if resolver is None or resolver.task_type is None:
        return None, 0
    return resolver.task_type, int(resolver.task_id or 0)


def is_chief(strategy) -> bool:
    """Whether this process writes the shared outputs (checkpoints, logs, exported models).

    The chief is the "chief" task if the cluster has one, else worker 0, as in TensorFlow's
    multi-worker guides; single-process strategies are always chief.
    """
    task_type, task_id = task_info(strategy)
    if task_type is None or task_type == "chief":
        return True
    if task_type != "worker":
        return False
    has_chief = "chief" in strategy.cluster_resolver.cluster_spec().as_dict()
    return not has_chief and task_id == 0
