"""Fine-tuning recipes by model size, and the mean pooling they choose for small encoders."""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest

from albert_tf.config import AlbertConfig
from albert_tf.modeling import AlbertEncoder
from albert_tf.tasks.classification import AlbertForClassification, AlbertForRegression, masked_mean
from albert_tf.training.recipes import FinetuningRecipe, recommended_recipe, size_class

TINY = AlbertConfig(vocab_size=40, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16)


@pytest.mark.parametrize(
    "hidden, name, learning_rate, pooling",
    [(128, "tiny", 1e-3, "mean"), (256, "tiny", 1e-3, "mean"), (384, "small", 1e-4, "mean"), (768, "base", 2e-5, "cls"),
     (4096, "base", 2e-5, "cls")],
)
def test_recipe_by_size(hidden, name, learning_rate, pooling):
    recipe = recommended_recipe(dataclasses.replace(TINY, hidden_size=hidden))
    assert (recipe.size_class, recipe.learning_rate, recipe.pooling) == (name, learning_rate, pooling)
    assert recipe.bias_correction and recipe.warmup_fraction == 0.1 and size_class(hidden) == name


def test_tagging_trains_longer_and_a_kind_must_be_named():
    assert recommended_recipe(TINY, "tagging").epochs == 10.0
    assert recommended_recipe(TINY, "regression").epochs == recommended_recipe(TINY, "squad").epochs == 3.0
    with pytest.raises(ValueError, match="task must be a task kind"):
        recommended_recipe(TINY, "")


def test_a_recipes_run_is_counted_by_the_configurations_one_formula():
    from albert_tf.training.finetuning_config import resolve_finetuning_config, steps_for_epochs

    recipe = FinetuningRecipe("tiny", 1e-3, epochs=3.0, batch_size=32)
    assert recipe.to_dict()["pooling"] == "mean"
    config = resolve_finetuning_config("classification", TINY)
    # Counted as the run counts them: full batches (a last partial one is no step), at least 1 a pass.
    for examples in (1, 31, 4010, 12345):
        assert config.schedule(examples).num_train_steps == steps_for_epochs(examples, 3.0, 32)
    assert tuple(config.schedule(4000)) == (375, 37) and config.schedule(1).num_train_steps == 3


def features(mask_tail=2):
    ids = np.array([[2, 7, 9, 3, 0, 0], [2, 8, 3, 0, 0, 0]], "int32")
    return {"input_ids": ids, "input_mask": (ids > 0).astype("int32"), "segment_ids": np.zeros_like(ids)}


def test_masked_mean_ignores_padding():
    seq = np.arange(2 * 3 * 2, dtype="float32").reshape(2, 3, 2)
    mask = np.array([[1, 1, 0], [1, 0, 0]], "int32")
    np.testing.assert_allclose(np.asarray(masked_mean(seq, mask)), [[1.0, 2.0], [6.0, 7.0]])


def test_mean_pooling_reads_every_real_token_and_round_trips(tmp_path):
    keras.utils.set_random_seed(0)
    model = AlbertForClassification(AlbertEncoder.from_albert_config(TINY), num_labels=2, pooling="mean")
    assert not model.pooled_output_only
    x = features()
    logits = model(x)["logits"]
    expected = model.head(masked_mean(model.encoder(x)["sequence_output"], x["input_mask"]))
    np.testing.assert_allclose(np.asarray(logits), np.asarray(expected), rtol=1e-5, atol=1e-6)
    # Padding does not change the answer.
    padded = {k: np.concatenate([v, np.zeros((2, 3), "int32")], axis=1) for k, v in x.items()}
    np.testing.assert_allclose(np.asarray(model(padded)["logits"]), np.asarray(logits), rtol=1e-4, atol=1e-5)
    path = str(tmp_path / "m.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert restored.pooling == "mean" and restored.get_config()["pooling"] == "mean"
    np.testing.assert_allclose(np.asarray(restored(x)["logits"]), np.asarray(logits), rtol=1e-5, atol=1e-6)


def test_cls_pooling_stays_the_default_and_bad_values_are_named():
    model = AlbertForClassification(AlbertEncoder.from_albert_config(TINY), num_labels=2)
    assert model.pooling == "cls" and model.pooled_output_only
    regressor = AlbertForRegression(AlbertEncoder.from_albert_config(TINY), pooling="mean")
    assert regressor(features())["predictions"].shape == (2,)
    with pytest.raises(ValueError, match="pooling must be one of"):
        AlbertForClassification(AlbertEncoder.from_albert_config(TINY), num_labels=2, pooling="max")


def test_pipeline_settings_take_the_recipe_unless_set():
    from albert_tf.pipeline_steps.settings import PipelineSettings, SettingsError

    sample = PipelineSettings()
    assert (sample.finetune_learning_rate, sample.finetune_pooling, sample.finetune_bias_correction) == (1e-3, "mean", True)
    base = PipelineSettings(model="base-v2", max_seq_length=128)
    assert (base.finetune_learning_rate, base.finetune_pooling, base.finetune_bias_correction) == (2e-5, "cls", True)
    given = PipelineSettings(finetune_learning_rate=3e-4, finetune_pooling="cls", finetune_bias_correction=False)
    assert (given.finetune_learning_rate, given.finetune_pooling, given.finetune_bias_correction) == (3e-4, "cls", False)
    for values, message in (({"finetune_pooling": "max"}, "finetune_pooling"), ({"finetune_learning_rate": 0.0}, "finetune_learning_rate"),
                            ({"finetune_bias_correction": "yes"}, "finetune_bias_correction"),
                            ({"eval_confidence": 1.0}, "eval_confidence"), ({"eval_baseline_margin": -1.0}, "eval_baseline_margin")):
        with pytest.raises(SettingsError, match=message):
            PipelineSettings(**values)
    # A settings file written from resolved settings reads back the same.
    assert PipelineSettings.from_dict(sample.to_dict()) == sample
