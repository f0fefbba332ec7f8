"""Tests of `albert-tf pretrain --masking on-the-fly`: settings from the data's metadata.json and ids
from its tokenizer, a resumed run that trains on the masks of an uninterrupted one (across epochs),
and the user errors (one line each, nothing written)."""

import argparse
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from albert_tf.cli import CommandError, pretrain

SAMPLE = Path(__file__).resolve().parents[2] / "albert_tf" / "resources" / "sample" / "sotu"
SEQ, PREDICTIONS, VOCAB = 32, 5, 300


def _pretrain(argv):
    parser = argparse.ArgumentParser()
    pretrain.add_arguments(parser)
    return pretrain.run(parser.parse_args([str(a) for a in argv]))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Unmasked records (``masked_lm_prob=0``, bigrams, no whole-word masking) of a ~600-word text:
    about 30 instances, so a run of a few batches of 8 crosses epochs; and their SentencePiece model."""
    from albert_tf.data.beam_pipeline import PipelineConfig, TokenizerSpec, make_pretraining_data
    from albert_tf.data.pretraining_instances import InstanceConfig
    from albert_tf.tokenization import train_sentencepiece

    work = tmp_path_factory.mktemp("masking_data")
    inputs = sorted(str(p) for p in SAMPLE.glob("201[01]_*.txt"))
    train_sentencepiece(inputs, str(work / "spm"), VOCAB, seed=1, num_threads=1)
    words = Path(inputs[0]).read_text().split()[:600]
    (work / "corpus.txt").write_text(" ".join(words) + "\n")
    summary = make_pretraining_data(
        [str(work / "corpus.txt")],
        str(work / "data"),
        PipelineConfig(
            instance=InstanceConfig(
                max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, masked_lm_prob=0.0, ngram=2,
                do_whole_word_mask=False,
            ),
            tokenizer=TokenizerSpec(spm_model=str(work / "spm.model")),
            dupe_factor=1,
            input_format="paragraphs",
            num_shards=2,
        ),
    )
    assert 20 <= summary.counters["instances"] <= 48
    return work / "data", work / "spm.model", summary.counters["instances"]


def _training_flags(model_dir, steps):
    return ["--config", "tiny", "--model-dir", model_dir, "--steps", steps, "--batch-size", 8,
            "--checkpoint-every", 2, "--keep-checkpoints", 10, "--log-every", 0, "--verbose", 0]


def _weights(run):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(run / "tf1" / "model.ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _losses(run):
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(line["step"], line["loss"], line["mlm_loss"]) for line in lines]


@pytest.mark.slow
def test_a_resumed_on_the_fly_run_trains_on_the_masks_of_an_uninterrupted_one(data, tmp_path, capsys):
    directory, spm, instances = data
    steps = 8  # 64 records: the run goes through two epochs and into a third
    assert steps * 8 > 2 * instances
    flags = ["--data", directory, "--masking", "on-the-fly", "--masked-lm-prob", 0.2]
    assert _pretrain(flags + _training_flags(tmp_path / "whole", steps)) == 0
    out = capsys.readouterr().out
    # The data's settings (bigrams, single pieces), the flag's rate, and the ids of the metadata's
    # vocabulary entry (it names no tokenizer, and none is passed).
    assert "masking on the fly: rate 0.2, n-grams up to 2 (shorter favored), single pieces; [MASK] id 4, " \
        f"random ids below {VOCAB}" in out
    recorded = json.loads((tmp_path / "whole" / "run_config.json").read_text())["masking"]
    assert (recorded["mode"], recorded["masked_lm_prob"], recorded["ngram"], recorded["mask_id"]) == ("on-the-fly", 0.2, 2, 4)

    # A run interrupted after step 4 (its checkpoint at an epoch's middle), then resumed.
    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "whole", resumed)
    checkpoints = resumed / "checkpoints"
    for path in checkpoints.iterdir():
        if re.match(r"ckpt-(6|8)\.", path.name) or path.name == "checkpoint":
            path.unlink()
    assert _pretrain(flags + _training_flags(resumed, steps)) == 0
    assert f"resumed from {checkpoints / 'ckpt-4'} (step 4)" in capsys.readouterr().out
    assert _losses(resumed) == _losses(tmp_path / "whole")
    whole, again = _weights(tmp_path / "whole"), _weights(resumed)
    assert whole.keys() == again.keys()
    for name in whole:
        np.testing.assert_array_equal(again[name], whole[name], err_msg=name)

    # The batches themselves: those the resumed run read after skipping 4 equal the uninterrupted run's.
    from albert_tf.data.on_the_fly import MaskingConfig, make_on_the_fly_dataset

    masking = MaskingConfig.from_output_dir(str(directory), masked_lm_prob=0.2)
    files = sorted(str(p) for p in directory.glob("*.tfrecord"))

    def as_the_run_reads_it():  # the command's defaults: --seed 12345, --shuffle-buffer 10000
        return make_on_the_fly_dataset(files, 8, masking, seed=12345, shuffle_buffer_size=10000)

    uninterrupted = [b["input_ids"].numpy() for b in as_the_run_reads_it().take(steps)]
    after_resume = [b["input_ids"].numpy() for b in as_the_run_reads_it().skip(4).take(steps - 4)]
    np.testing.assert_array_equal(np.stack(uninterrupted[4:]), np.stack(after_resume))


def test_the_tokenizer_gives_the_ids_and_must_agree_with_the_metadata(data, tmp_path, capsys):
    directory, spm, _ = data
    copy = tmp_path / "plain"
    copy.mkdir()
    for record in directory.glob("*.tfrecord"):
        shutil.copy(record, copy / record.name)
    base = ["--data", copy, "--masking", "on-the-fly", "--config", "tiny", "--model-dir", tmp_path / "run"]
    # Records without metadata: the ids can only come from the tokenizer.
    with pytest.raises(CommandError) as error:
        _pretrain(base)
    assert str(error.value) == (
        "--masking on-the-fly needs the data's vocabulary (the [CLS], [SEP] and [MASK] ids and its size): "
        "pass --spm-model or --vocab-file"
    )
    from albert_tf.data.tfrecords import find_pretraining_data

    from albert_tf.training.pretraining_runner import PretrainSettings, data_tokenizer, masking_config

    settings = PretrainSettings(spm_model=str(spm), masking="on-the-fly")
    found = find_pretraining_data(str(copy))
    tokenizer, _ = data_tokenizer(settings, found)
    masking = masking_config(settings, found, {}, (SEQ, PREDICTIONS), tokenizer)
    # Without metadata, the original ALBERT's settings.
    assert (masking.masked_lm_prob, masking.ngram, masking.do_whole_word_mask) == (0.15, 3, True)
    assert (masking.vocab_size, masking.cls_id, masking.sep_id, masking.mask_id) == (VOCAB, 2, 3, 4)

    # A vocabulary of the data's size whose special ids differ from the metadata's.
    vocab = tmp_path / "vocab.txt"
    pieces = ["[PAD]", "[UNK]", "[MASK]", "[CLS]", "[SEP]"] + [f"w{i}" for i in range(VOCAB - 5)]
    vocab.write_text("\n".join(pieces) + "\n")
    with pytest.raises(CommandError) as error:
        _pretrain(["--data", directory, "--masking", "on-the-fly", "--config", "tiny", "--model-dir",
                   tmp_path / "run", "--vocab-file", vocab])
    assert str(error.value) == (
        f"{vocab} has cls_id 3, sep_id 4, mask_id 2, but {directory}/metadata.json says the records were made "
        "with cls_id 2, sep_id 3, mask_id 4: it is not the data's tokenizer"
    )
    assert not (tmp_path / "run").exists()


def test_masking_flag_errors_are_one_line_and_write_nothing(data, tmp_path):
    directory, _, _ = data
    base = ["--data", directory, "--config", "tiny", "--model-dir", tmp_path / "run"]
    with pytest.raises(CommandError, match=r"^--masked-lm-prob applies to --masking on-the-fly \(offline"):
        _pretrain(base + ["--masked-lm-prob", 0.2])
    with pytest.raises(CommandError, match=r"^--masked-lm-prob must be in \(0, 1\], got 1.5$"):
        _pretrain(base + ["--masking", "on-the-fly", "--masked-lm-prob", 1.5])
    with pytest.raises(CommandError) as error:
        _pretrain(base)
    assert str(error.value) == (
        f"{directory}/metadata.json says the records are unmasked (masked_lm_prob 0): pass --masking on-the-fly"
    )
    copy = tmp_path / "plain"
    copy.mkdir()
    for record in directory.glob("*.tfrecord"):
        shutil.copy(record, copy / record.name)
    with pytest.raises(CommandError, match=r"\.tfrecord: the records have no masked positions .*--masking on-the-fly$"):
        _pretrain(["--data", copy, "--config", "tiny", "--model-dir", tmp_path / "run"])
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_the_sample_run_masks_on_the_fly(tmp_path, capsys):
    assert _pretrain(["--masking", "on-the-fly", "--model-dir", tmp_path / "sample", "--steps", 2,
                      "--batch-size", 8, "--checkpoint-every", 2, "--log-every", 0, "--verbose", 0]) == 0
    out = capsys.readouterr().out
    assert "masking on the fly: rate 0.15, n-grams up to 3 (shorter favored), whole words; [MASK] id 4, " \
        "random ids below 3000" in out
    assert (tmp_path / "sample" / "tf1" / "model.ckpt.index").exists()
