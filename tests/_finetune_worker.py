"""Subprocess entry point (and shared pieces) for the fine-tuning resume test.

A tiny classifier (with dropout) on synthetic features, trained by `run_finetuning` with an
evaluation, hence a resume checkpoint, every `EVAL_EVERY` steps. Run as a script it trains into
``--model-dir`` and, with ``--block-after-step N``, stops at the end of step N's interval (after
its checkpoint), writes ``.blocked-N`` beside the model directory and sleeps until killed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

STEPS = 8
EVAL_EVERY = 2
BATCH = 8
SEED = 7


def features(n: int = 48, seq: int = 6, seed: int = 0):
    """Label 1 iff the second token is 7."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n).astype("int32")
    ids = rng.integers(9, 30, size=(n, seq)).astype("int32")
    ids[:, 0] = 2
    ids[:, 1] = np.where(labels == 1, 7, 8)
    return {"input_ids": ids, "input_mask": np.ones((n, seq), "int32"), "segment_ids": np.zeros((n, seq), "int32"),
            "labels": labels}


def train(model_dir: str, learning_rate: float = 1e-3, callbacks=(), overwrite: bool = False):
    from albert_tf.config import AlbertConfig
    from albert_tf.modeling import AlbertEncoder
    from albert_tf.data.features import examples_dataset
    from albert_tf.tasks.classification import AlbertForClassification, make_eval_fn
    from albert_tf.training.finetuning import run_finetuning

    config = AlbertConfig(vocab_size=30, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
    return run_finetuning(
        lambda: AlbertForClassification(AlbertEncoder.from_albert_config(config), num_labels=2),
        examples_dataset(features()), examples_dataset(features(16, seed=1)),
        num_train_steps=STEPS, warmup_steps=1, learning_rate=learning_rate, model_dir=model_dir,
        eval_fn=make_eval_fn(["accuracy"], regression=False), best_metric="accuracy",
        eval_every_n_steps=EVAL_EVERY, batch_size=BATCH, shuffle_buffer=48, seed=SEED, verbose=0,
        callbacks=list(callbacks), overwrite=overwrite, tensorboard=False,
    )


def weights(model):
    return [np.array(v.numpy()) for v in model.weights]


def main() -> int:
    import keras

    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--block-after-step", type=int)
    args = parser.parse_args()

    class Block(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if (epoch + 1) * EVAL_EVERY == args.block_after_step:
                parent, name = os.path.split(os.path.abspath(args.model_dir))
                open(os.path.join(parent, f".blocked-{args.block_after_step}"), "w").close()
                while True:
                    time.sleep(60)

    train(args.model_dir, callbacks=[Block()] if args.block_after_step else ())
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
