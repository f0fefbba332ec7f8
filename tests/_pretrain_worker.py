"""Subprocess entry point (and shared fixtures) for the pretraining-run and strategy tests.

A tiny ALBERT on a synthetic, deterministic dataset, trained by `run_pretraining`. Run as a
script it trains once (optionally blocking at a step so a test can SIGKILL it there, or under a
strategy that needs a fresh process: logical CPUs, TF_CONFIG) and writes the final weights to an
``.npz`` and a summary of the result to a JSON file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

VOCAB = 64
SEQ = 16
PREDICTIONS = 3
BATCH = 8
EXAMPLES = 64


def tiny_albert_config(dropout: float = 0.1):
    from albert_tf.config import AlbertConfig

    return AlbertConfig(
        vocab_size=VOCAB,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        max_position_embeddings=SEQ,
    )


def synthetic_features(seed: int = 0):
    """`EXAMPLES` pretraining examples; every one has exactly 2 real masked positions of 3.

    Equal counts per example make the replicas' weighted MLM means average to the global
    batch's weighted mean, so distributed and single-device runs compute the same loss.
    """
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB, (EXAMPLES, SEQ)).astype("int32")
    positions = np.stack([np.sort(rng.choice(np.arange(1, SEQ), 3, replace=False)) for _ in range(EXAMPLES)])
    positions = positions.astype("int32")
    weights = np.tile(np.array([1.0, 1.0, 0.0], "float32"), (EXAMPLES, 1))
    return {
        "input_ids": ids,
        "input_mask": np.ones((EXAMPLES, SEQ), "int32"),
        "segment_ids": (np.arange(SEQ)[None] >= SEQ // 2).repeat(EXAMPLES, 0).astype("int32"),
        "masked_lm_positions": positions * weights.astype("int32"),
        "masked_lm_ids": np.take_along_axis(ids, positions, 1) * weights.astype("int32"),
        "masked_lm_weights": weights,
        "next_sentence_labels": (ids[:, 1:2] % 2).astype("int32"),
    }


def dataset_fn(seed: int = 7, batch_size: int = BATCH):
    """A function returning the infinite, seeded-shuffle dataset (fresh on every call)."""

    def make():
        import tensorflow as tf

        features = synthetic_features()
        dataset = tf.data.Dataset.from_tensor_slices(features)
        dataset = dataset.shuffle(EXAMPLES, seed=seed, reshuffle_each_iteration=True).repeat()
        return dataset.batch(batch_size, drop_remainder=True)

    return make


def tiny_run_config(model_dir, **overrides):
    from albert_tf.training.pretraining import PretrainingRunConfig

    values = dict(
        model_dir=str(model_dir),
        model_config=tiny_albert_config(overrides.pop("dropout", 0.1)),
        batch_size=BATCH,
        max_seq_length=SEQ,
        max_predictions_per_seq=PREDICTIONS,
        num_train_steps=10,
        num_warmup_steps=2,
        learning_rate=0.01,
        checkpoint_every_n_steps=3,
        keep_checkpoints=3,
        gradient_accumulation_steps=2,
        steps_per_execution=2,
        seed=3,
        log_every=4,
        verbose=0,
    )
    values.update(overrides)
    return PretrainingRunConfig(**values)


def model_weights(model):
    """Every model variable (dropout seed states included) by position; names are not stable
    across processes (Keras numbers auto-named objects per process)."""
    return {f"{i:03d}": np.asarray(v.numpy()) for i, v in enumerate(model.variables)}


def _blocking_callback(block_at_step: int, marker: str):
    import keras

    class BlockAt(keras.callbacks.Callback):
        """Stops dead (for a SIGKILL) once the optimizer reaches `block_at_step`."""

        def on_train_batch_end(self, batch, logs=None):
            if int(np.asarray(self.model.optimizer.iterations)) >= block_at_step:
                with open(marker, "w") as f:
                    f.write(str(os.getpid()))
                while True:
                    time.sleep(1)

    return BlockAt()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--strategy", default="default")
    parser.add_argument("--logical-cpus", type=int, default=0)
    parser.add_argument("--block-at-step", type=int, default=0)
    parser.add_argument("--weights-out")
    parser.add_argument("--result-out")
    parser.add_argument("--overrides", default="{}", help="JSON of PretrainingRunConfig fields")
    args = parser.parse_args(argv)

    import tensorflow as tf

    if args.logical_cpus:
        # Must happen before TensorFlow initializes its devices.
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.logical_cpus)

    from albert_tf.training.pretraining import run_pretraining

    overrides = json.loads(args.overrides)
    config = tiny_run_config(args.model_dir, strategy=args.strategy, **overrides)
    callbacks = []
    if args.block_at_step:
        marker = os.path.join(args.model_dir, f".blocked-{args.block_at_step}")
        callbacks.append(_blocking_callback(args.block_at_step, marker))
    result = run_pretraining(config, dataset_fn(), callbacks=callbacks)
    if args.weights_out:
        np.savez(args.weights_out, **model_weights(result.model))
    if args.result_out:
        summary = {
            "initial_step": result.initial_step,
            "final_step": result.final_step,
            "restored_from": result.restored_from,
            "skipped_checkpoints": result.skipped_checkpoints,
            "history": result.history,
            "replicas": result.strategy.num_replicas_in_sync,
        }
        with open(args.result_out, "w") as f:
            json.dump(summary, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
