"""A real (small) pretraining run on the State of the Union corpus, end to end, and the sharing ablation.

The whole chain of `albert-tf pretrain`'s sample job at a larger size: a SentencePiece vocabulary
on all addresses in ``../shared/data/en/sotu`` (relative to the repository's parent), SOP + n-gram
instances through the Beam pipeline (a few addresses held out as an evaluation set), then a small
ALBERT (E=128, H=256, L=6, 4 heads, intermediate 1024, sharing "all") pretrained with LAMB by
`run_pretraining`. It records the training curves (``metrics.jsonl``, one line per checkpoint
interval) and the held-out loss / MLM accuracy / SOP accuracy after each interval and at the end,
compares the MLM accuracy with the unigram baseline (always predicting the most frequent masked
token of the held-out records), and writes a plot and a Markdown table.

    python benchmarks/pretrain_sotu.py                          # ~30 min of training (--minutes)
    python benchmarks/pretrain_sotu.py --steps 720 --batch-size 16 --learning-rate 0.005   # the run reported
    python benchmarks/pretrain_sotu.py --compare-sharing --sharing-steps 300   # "all"/"attention"/"ffn"/"none"

Outputs go to ``--out`` (default ``../runs/sotu_small``): ``spm.model``, ``data/`` (records), and
the run itself (``tf1/model.ckpt`` + ``tf1/albert_config.json`` for ``albert-tf finetune --init``,
``encoder.keras``, ``metrics.jsonl``, ``eval_curve.jsonl``, ``eval_final.json``); the figure and
table go to ``--results`` (default ``benchmarks/results``). Steps already complete (vocabulary,
records, a finished run) are reused when the command is run again.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import shutil
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS = os.path.join(os.path.dirname(REPO), "shared", "data", "en", "sotu")
DEFAULT_OUT = os.path.join(os.path.dirname(REPO), "runs", "sotu_small")
DEFAULT_RESULTS = os.path.join(REPO, "benchmarks", "results")
SHARING_MODES = ("all", "attention", "ffn", "none")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- data ---------------------------------------------------------------------------------------


def held_out_files(files, count):
    """`count` files spread evenly over the (chronologically sorted) corpus."""
    if count <= 0:
        return []
    step = len(files) / count
    return sorted({files[int(step * i + step / 2)] for i in range(count)})


_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f]")


def clean_copy(files, directory):
    """The corpus with stray C0 control characters replaced by spaces (one SOTU address has a U+0002,
    which the pipeline rightly rejects as binary data); returns the copies' paths and the files fixed."""
    os.makedirs(directory, exist_ok=True)
    out, fixed = [], []
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        clean = _CONTROL.sub(" ", text)
        if clean != text:
            fixed.append(os.path.basename(path))
        target = os.path.join(directory, os.path.basename(path))
        if not os.path.exists(target) or open(target, encoding="utf-8").read() != clean:
            with open(target + ".tmp", "w", encoding="utf-8") as f:
                f.write(clean)
            os.replace(target + ".tmp", target)
        out.append(target)
    return out, fixed


def prepare_data(args):
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
    from albert_tf.data.pipeline_output import read_metadata
    from albert_tf.data.pretraining_instances import InstanceConfig
    from albert_tf.tokenization import train_sentencepiece

    files = sorted(glob.glob(os.path.join(args.corpus, "*.txt")))
    if args.max_files:
        files = files[: args.max_files]
    os.makedirs(args.out, exist_ok=True)
    data_dir = os.path.join(args.out, "data")
    os.makedirs(data_dir, exist_ok=True)
    files, fixed = clean_copy(files, os.path.join(data_dir, "corpus"))
    if fixed:
        log(f"replaced control characters by spaces in {', '.join(fixed)}")
    eval_files = held_out_files(files, args.eval_files)
    train_files = [f for f in files if f not in eval_files]

    spm_prefix = os.path.join(data_dir, "spm")
    if not os.path.exists(spm_prefix + ".model"):
        log(f"SentencePiece vocabulary, {args.vocab_size} pieces, on {len(files)} files of {args.corpus}")
        start = time.time()
        train_sentencepiece(files, spm_prefix, args.vocab_size, seed=args.seed)
        log(f"  vocabulary done in {time.time() - start:.0f} s")
    else:
        log(f"reusing vocabulary {spm_prefix}.model")
    # Next to the run, for fine-tuning from it (atomically, and only when it changed: other jobs read it).
    for ext in (".model", ".vocab"):
        target = os.path.join(args.out, "spm" + ext)
        with open(spm_prefix + ext, "rb") as f:
            content = f.read()
        if not os.path.exists(target) or open(target, "rb").read() != content:
            with open(target + ".tmp", "wb") as f:
                f.write(content)
            os.replace(target + ".tmp", target)

    summaries = {}
    for name, inputs, dupe in (("train", train_files, args.dupe_factor), ("eval", eval_files, 1)):
        records = os.path.join(data_dir, name)
        try:
            summaries[name] = read_metadata(records)["counters"]
            log(f"reusing {name} records in {records}")
            continue
        except Exception:  # absent or incomplete: (re)make them
            pass
        log(f"{name} records: {len(inputs)} files, dupe factor {dupe}, length {args.seq}, {args.predictions} predictions")
        start = time.time()
        summary = make_pretraining_data(
            inputs,
            records,
            PipelineConfig(
                instance=InstanceConfig(max_seq_length=args.seq, max_predictions_per_seq=args.predictions),
                tokenizer=TokenizerSpec(spm_model=spm_prefix + ".model"),
                dupe_factor=dupe,
                seed=args.seed + (0 if name == "train" else 1),
                input_format="paragraphs",
                num_shards=4 if name == "train" else 1,
            ),
            overwrite=True,
        )
        summaries[name] = summary.counters
        log(f"  {summary.counters.get('instances')} instances in {time.time() - start:.0f} s")
    return {
        "spm_model": spm_prefix + ".model",
        "train": sorted(glob.glob(os.path.join(data_dir, "train", "*.tfrecord"))),
        "eval": sorted(glob.glob(os.path.join(data_dir, "eval", "*.tfrecord"))),
        "train_files": len(train_files),
        "eval_files": [os.path.basename(f) for f in eval_files],
        "counters": summaries,
    }


def eval_dataset(files, args, batches=None):
    from albert_tf.data.tfrecords import make_pretraining_dataset

    ds = make_pretraining_dataset(files, args.seq, args.predictions, args.batch_size, is_training=False)
    if batches:
        ds = ds.take(batches)
    return ds.cache()


def unigram_baseline(files, args, spm_model):
    """Accuracy of always predicting the most frequent masked-target token of the held-out records."""
    import numpy as np
    import sentencepiece as spm

    counts = collections.Counter()
    labels = collections.Counter()
    for batch in eval_dataset(files, args):
        ids = batch["masked_lm_ids"].numpy()
        weights = batch["masked_lm_weights"].numpy() > 0
        counts.update(ids[weights].tolist())
        labels.update(batch["next_sentence_labels"].numpy().reshape(-1).tolist())
    total = sum(counts.values())
    token, count = counts.most_common(1)[0]
    sp = spm.SentencePieceProcessor(model_file=spm_model)
    return {
        "positions": int(total),
        "token_id": int(token),
        "token": sp.id_to_piece(int(token)),
        "accuracy": count / total,
        "distinct_targets": len(counts),
        "top5": [(sp.id_to_piece(int(t)), c / total) for t, c in counts.most_common(5)],
        # SOP accuracy of always answering the more frequent label of these records (not exactly 0.5).
        "sop_majority": max(labels.values()) / sum(labels.values()),
        "_np": np,
    }


# --- training -----------------------------------------------------------------------------------


def model_config(args, sharing):
    from albert_tf.config import AlbertConfig

    return AlbertConfig(
        vocab_size=args.vocab_size,
        embedding_size=args.embedding_size,
        hidden_size=args.hidden_size,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=args.intermediate_size,
        max_position_embeddings=args.seq,
        sharing=sharing,
    )


def measure_rate(args, data, sharing="all", batches=6):
    """Training sequences/s of this model on this machine now (a few LAMB steps, first one traced)."""
    import keras

    from albert_tf import AlbertEncoder
    from albert_tf.data.tfrecords import make_pretraining_dataset
    from albert_tf.pretrainer import AlbertPretrainer
    from albert_tf.training import create_optimizer

    keras.utils.set_random_seed(args.seed)
    model = AlbertPretrainer(AlbertEncoder.from_albert_config(model_config(args, sharing), dtype=args.precision))
    model.compile(optimizer=create_optimizer("lamb", learning_rate=1e-4, num_train_steps=100, num_warmup_steps=1))
    ds = make_pretraining_dataset(data["train"], args.seq, args.predictions, args.batch_size, seed=args.seed)
    times = []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter())

    model.fit(ds, steps_per_epoch=batches, epochs=1, verbose=0, callbacks=[Timer()])
    seconds = (times[-1] - times[1]) / (len(times) - 2)
    del model
    keras.backend.clear_session()
    return args.batch_size / seconds


class HeldOutCurve:
    """A Keras callback factory: the held-out metrics after every checkpoint interval."""

    @staticmethod
    def make(dataset, path):
        import keras

        class Callback(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                step = int(self.model.optimizer.iterations.numpy())
                start = time.time()
                result = self.model.evaluate(dataset, verbose=0, return_dict=True)
                record = {"step": step, **{k: float(v) for k, v in result.items()}, "seconds": round(time.time() - start, 2)}
                with open(path, "a") as f:
                    f.write(json.dumps(record) + "\n")
                log(
                    f"step {step}: train loss {logs.get('loss', float('nan')):.3f} mlm {logs.get('mlm_accuracy', 0):.3f} "
                    f"sop {logs.get('sop_accuracy', 0):.3f} | held-out loss {record['loss']:.3f} "
                    f"mlm {record['mlm_accuracy']:.3f} sop {record['sop_accuracy']:.3f}"
                )

        return Callback()


def read_jsonl(path):
    """Records by step (the last one wins, as a resumed run may repeat a step)."""
    by_step = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    record = json.loads(line)
                    by_step[record["step"]] = record
    return [by_step[s] for s in sorted(by_step)]


def train(args, data, model_dir, sharing, steps, curve_batches):
    import keras

    from albert_tf.data.tfrecords import make_pretraining_dataset
    from albert_tf.training.pretraining import PretrainingRunConfig, run_pretraining

    every = max(1, steps // args.points)
    config = PretrainingRunConfig(
        model_dir=model_dir,
        model_config=model_config(args, sharing),
        batch_size=args.batch_size,
        max_seq_length=args.seq,
        max_predictions_per_seq=args.predictions,
        num_train_steps=steps,
        num_warmup_steps=args.warmup_steps if args.warmup_steps is not None else max(1, int(steps * args.warmup_fraction)),
        learning_rate=args.learning_rate,
        optimizer="lamb",
        precision=args.precision,
        checkpoint_every_n_steps=every,
        keep_checkpoints=2,
        seed=args.seed,
        log_every=0,
        verbose=0,
    )
    curve_path = os.path.join(model_dir, "eval_curve.jsonl")
    os.makedirs(model_dir, exist_ok=True)
    callbacks = []
    if curve_batches:
        callbacks.append(HeldOutCurve.make(eval_dataset(data["eval"], args, curve_batches), curve_path))

    def dataset_fn():
        return make_pretraining_dataset(
            data["train"], args.seq, args.predictions, args.batch_size, is_training=True, seed=args.seed
        )

    log(
        f"pretraining sharing={sharing}: {steps} steps x batch {args.batch_size}, LAMB lr {config.learning_rate} "
        f"warmup {config.num_warmup_steps}, checkpoint/metrics every {every} -> {model_dir}"
    )
    start = time.time()
    result = run_pretraining(config, dataset_fn, callbacks=callbacks)
    train_seconds = time.time() - start
    log(f"  trained in {train_seconds / 60:.1f} min")
    final_path = os.path.join(model_dir, "eval_final.json")
    if result.initial_step == steps and os.path.exists(final_path):
        # A finished run, only restored and evaluated here: its training time is the earlier one's.
        with open(final_path) as f:
            train_seconds = 60 * json.load(f).get("train_minutes", train_seconds / 60)
    final = result.model.evaluate(eval_dataset(data["eval"], args), verbose=0, return_dict=True)
    final = {k: float(v) for k, v in final.items()}
    summary = {
        "sharing": sharing,
        "steps": steps,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "warmup_steps": config.num_warmup_steps,
        "train_minutes": train_seconds / 60,
        "params": int(result.model.encoder.count_params()),
        "initial_step": result.initial_step,
        "curve_records": curve_batches * args.batch_size,
        "eval": final,
        "train_last": result.history[-1] if result.history else None,
        "artifacts": result.artifacts,
    }
    with open(final_path, "w") as f:
        json.dump(summary, f, indent=2)
    log(f"  held-out: loss {final['loss']:.3f}, MLM acc {final['mlm_accuracy']:.4f}, SOP acc {final['sop_accuracy']:.4f}")
    del result
    keras.backend.clear_session()
    return summary, read_jsonl(os.path.join(model_dir, "metrics.jsonl")), read_jsonl(curve_path)


# --- reporting ----------------------------------------------------------------------------------


def plot_main(path, train_curve, eval_curve, baseline, title, resumed_at=None, eval_records=None, sop_majority=0.5):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), dpi=80)
    steps = [r["step"] for r in train_curve]
    esteps = [r["step"] for r in eval_curve]
    for ax, key, name in zip(axes, ("loss", "mlm_accuracy", "sop_accuracy"), ("loss (MLM + SOP)", "MLM accuracy", "SOP accuracy")):
        ax.plot(steps, [r.get(key) for r in train_curve], "o-", ms=3, label="train (interval mean)")
        if eval_curve:
            label = f"held-out (first {eval_records} records)" if eval_records else "held-out"
            ax.plot(esteps, [r.get(key) for r in eval_curve], "s--", ms=3, label=label)
        if resumed_at:
            ax.axvline(resumed_at, color="k", lw=0.8, alpha=0.5, label=f"resumed at {resumed_at}")
        if key == "mlm_accuracy":
            ax.axhline(baseline, color="gray", ls=":", label=f"unigram baseline {baseline:.3f}")
        if key == "sop_accuracy":
            ax.axhline(sop_majority, color="gray", ls=":", label=f"majority label {sop_majority:.3f}")
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def plot_sharing(path, runs, baseline, title, sop_majority=0.5):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), dpi=80)
    for sharing, (summary, train_curve, eval_curve) in runs.items():
        label = f"{sharing} ({summary['params'] / 1e6:.2f}M)"
        curve = eval_curve or train_curve
        for ax, key in zip(axes, ("loss", "mlm_accuracy", "sop_accuracy")):
            ax.plot([r["step"] for r in curve], [r.get(key) for r in curve], "o-", ms=3, label=label)
    for ax, name in zip(axes, ("held-out loss", "held-out MLM accuracy", "held-out SOP accuracy")):
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[1].axhline(baseline, color="gray", ls=":", label="unigram baseline")
    axes[2].axhline(sop_majority, color="gray", ls=":", label="majority label")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def main_table(train_curve, eval_curve, final, baseline):
    evals = {r["step"]: r for r in eval_curve}
    lines = [
        "| step | train loss | train MLM acc | train SOP acc | held-out loss | held-out MLM acc | held-out SOP acc |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in train_curve:
        e = evals.get(r["step"], {})
        lines.append(
            f"| {r['step']} | {fmt(r.get('loss'))} | {fmt(r.get('mlm_accuracy'))} | {fmt(r.get('sop_accuracy'))} | "
            f"{fmt(e.get('loss'))} | {fmt(e.get('mlm_accuracy'))} | {fmt(e.get('sop_accuracy'))} |"
        )
    ev = final["eval"]
    lines.append(
        f"| **final, all held-out records** | | | | **{fmt(ev['loss'])}** | **{fmt(ev['mlm_accuracy'])}** | "
        f"**{fmt(ev['sop_accuracy'])}** |"
    )
    lines.append("")
    lines.append(
        f"Unigram baseline (always the most frequent held-out masked token, {baseline['token']!r}): "
        f"MLM accuracy {baseline['accuracy']:.3f} over {baseline['positions']} masked positions. "
        f"SOP majority-label baseline: {baseline.get('sop_majority', 0.5):.3f}."
    )
    return "\n".join(lines)


def sharing_table(runs, baseline):
    lines = [
        "| sharing | encoder params | final train loss | held-out loss | held-out MLM acc | held-out SOP acc | train min |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for sharing, (summary, _, _) in runs.items():
        ev, last = summary["eval"], summary["train_last"] or {}
        lines.append(
            f"| {sharing} | {summary['params']:,} | {fmt(last.get('loss'))} | {fmt(ev['loss'])} | "
            f"{fmt(ev['mlm_accuracy'])} | {fmt(ev['sop_accuracy'])} | {summary['train_minutes']:.1f} |"
        )
    lines.append("")
    lines.append(f"Unigram baseline MLM accuracy: {baseline['accuracy']:.3f}; "
                 f"SOP majority-label baseline: {baseline.get('sop_majority', 0.5):.3f}.")
    return "\n".join(lines)


def repo_relative(value):
    """`value` with every absolute path in it made relative to the repository (results are committed,
    and must not name this machine's folders)."""
    if isinstance(value, dict):
        return {key: repo_relative(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [repo_relative(item) for item in value]
    if isinstance(value, str) and os.path.isabs(value):
        return os.path.relpath(value, REPO)
    return value


def write_results(args, name, text, payload):
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, name + ".md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.results, name + ".json"), "w") as f:
        json.dump(repo_relative(json.loads(json.dumps(payload, default=str))), f, indent=2)


# --- main ---------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=DEFAULT_CORPUS, help="folder of *.txt, one address per file")
    parser.add_argument("--out", default=DEFAULT_OUT, help="vocabulary, records and the run (outside the repo)")
    parser.add_argument("--results", default=DEFAULT_RESULTS, help="where the plot and tables go")
    parser.add_argument("--max-files", type=int, default=0, help="use only the first N files (0: all)")
    parser.add_argument("--eval-files", type=int, default=5, help="files held out for evaluation")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--dupe-factor", type=int, default=2)
    parser.add_argument("--embedding-size", type=int, default=128)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--intermediate-size", type=int, default=1024)
    parser.add_argument("--sharing", default="all", choices=SHARING_MODES)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--precision", default="float32", choices=("float32", "mixed_bfloat16"),
                        help="mixed_bfloat16 trains ~1.8x faster on a CPU with AVX512_BF16 (see training_throughput.py)")
    parser.add_argument("--learning-rate", type=float, default=0.005, help="peak LAMB learning rate")
    parser.add_argument("--warmup-fraction", type=float, default=0.1)
    parser.add_argument("--warmup-steps", type=int, help="overrides --warmup-fraction")
    parser.add_argument("--steps", type=int, help="training steps (default: what fits in --minutes, measured)")
    parser.add_argument("--minutes", type=float, default=30.0, help="training budget when --steps is not given")
    parser.add_argument("--points", type=int, default=16, help="checkpoint/metrics intervals in the run")
    parser.add_argument("--curve-batches", type=int, default=8, help="held-out batches evaluated per interval (0: none)")
    parser.add_argument("--run-name", default="", help="train into OUT/RUN_NAME instead of OUT (tuning runs)")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--compare-sharing", action="store_true", help="the four sharing strategies at equal steps")
    parser.add_argument("--sharing-steps", type=int, default=300)
    parser.add_argument("--sharing-modes", default=",".join(SHARING_MODES))
    args = parser.parse_args(argv)

    if not os.path.isdir(args.corpus) or not glob.glob(os.path.join(args.corpus, "*.txt")):
        print(f"SKIPPED: corpus {args.corpus} is absent (needs ../shared/data/en/sotu/*.txt)")
        return 0
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    data = prepare_data(args)
    log(f"records: {data['counters']['train'].get('instances')} train, {data['counters']['eval'].get('instances')} "
        f"held-out (from {', '.join(data['eval_files'])})")
    baseline = unigram_baseline(data["eval"], args, data["spm_model"])
    baseline.pop("_np")
    log(f"unigram baseline: {baseline['accuracy']:.4f} ({baseline['token']!r}, {baseline['positions']} positions); "
        f"SOP majority label: {baseline['sop_majority']:.4f}")
    with open(os.path.join(args.out, "unigram_baseline.json"), "w") as f:
        json.dump(baseline, f, indent=2)

    shape = f"E={args.embedding_size}, H={args.hidden_size}, L={args.layers}, {args.heads} heads, I={args.intermediate_size}"
    if args.compare_sharing:
        runs = {}
        for sharing in args.sharing_modes.split(","):
            model_dir = os.path.join(args.out, "sharing", sharing)
            runs[sharing] = train(args, data, model_dir, sharing, args.sharing_steps, args.curve_batches)
        title = (f"Sharing ablation on SOTU: {shape}, {args.sharing_steps} LAMB steps x batch {args.batch_size}, "
                 f"lr {args.learning_rate}")
        table = sharing_table(runs, baseline)
        print("\n" + title + "\n\n" + table)
        plot_sharing(os.path.join(args.results, "pretrain_sharing.png"), runs, baseline["accuracy"], title,
                     sop_majority=baseline["sop_majority"])
        write_results(args, "pretrain_sharing", title + "\n\n" + table,
                      {"baseline": baseline, "runs": {k: v[0] for k, v in runs.items()}, "args": vars(args)})
        return 0

    steps = args.steps
    rate = None
    if not steps:
        rate = measure_rate(args, data, args.sharing)
        steps = max(args.points, int(rate * args.minutes * 60 / args.batch_size))
        log(f"measured {rate:.1f} sequences/s: {steps} steps fit in {args.minutes} min")
    model_dir = os.path.join(args.out, args.run_name) if args.run_name else args.out
    summary, train_curve, eval_curve = train(args, data, model_dir, args.sharing, steps, args.curve_batches)
    summary["measured_rate"] = rate
    minutes = f"{summary['train_minutes']:.0f} min" + (f" after resuming at step {summary['initial_step']}"
                                                        if summary["initial_step"] else "")
    title = (f"ALBERT ({shape}, sharing {args.sharing}, {args.precision}) on SOTU: {steps} LAMB steps x batch {args.batch_size}, "
             f"lr {args.learning_rate}, {minutes}")
    table = main_table(train_curve, eval_curve, summary, baseline)
    print("\n" + title + "\n\n" + table)
    plot_main(os.path.join(args.results, "pretrain_sotu_curves.png"), train_curve, eval_curve, baseline["accuracy"], title,
              resumed_at=summary["initial_step"], eval_records=summary["curve_records"],
              sop_majority=baseline["sop_majority"])
    write_results(args, "pretrain_sotu", title + "\n\n" + table,
                  {"baseline": baseline, "summary": summary, "train_curve": train_curve, "eval_curve": eval_curve,
                   "data": {k: v for k, v in data.items() if k not in ("train", "eval")}, "args": vars(args)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
