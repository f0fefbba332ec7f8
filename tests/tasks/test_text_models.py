"""Tests of the raw-text Keras task models (`albert_tf.tasks.<task>.text_model`), the keras-hub way.

A tiny SentencePiece model (ALBERT recipe) and a tiny encoder are stored in every checkpoint
layout `from_pretrained` reads (original TF1 release, TF-Hub module, Hugging Face, keras-hub
preset, this package's pretraining and fine-tuning outputs); the models load the encoder weights
and the tokenizer of each. On a toy task (texts with "good" vs "bad" among filler words) `fit` on
raw strings must learn far beyond the majority rate; `.keras` round trips give identical
predictions with the vocabulary stored as an archive asset; `export` writes what `albert-tf
export` writes and serves what `predict` answers. What every family shares (fit on raw strings,
the `.keras` round trip, export, served answers equal to `predict`'s, bad inputs) is checked for
each by the per-task battery, tests/tasks/test_task_battery.py; the tests here are the rest.
"""

import json
import random
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.modeling import AlbertEncoder
from albert_tf.tasks.classification import text_model as classification_text_model
from albert_tf.tasks.tagging import text_model as tagging_text_model
from albert_tf.tasks.tagging.metrics import entity_record
from albert_tf import (
    AlbertMultipleChoice,
    AlbertQuestionAnswerer,
    AlbertTextClassifier,
    AlbertTextRegressor,
    AlbertTextTagger,
)
from albert_tf.tasks.pretrained import TokenizerNotFoundError, find_tokenizer_file
from albert_tf.tokenization import in_graph
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

SEQ = 16
FILLER = "the a film movie plot actor story was is very quite really and but this that it scene music".split()
TOKEN_TEXTS = ["a good film", "the plot was bad", "Music, and 1971,000 scenes"]


def toy_task(n, seed):
    """Texts of 1-3 filler words and "good" (label 1) or "bad" (label 0) at a random place."""
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        label = rng.randrange(2)
        words = [rng.choice(FILLER) for _ in range(rng.randrange(1, 4))]
        words.insert(rng.randrange(len(words) + 1), "good" if label else "bad")
        texts.append(" ".join(words))
        labels.append(label)
    return texts, np.array(labels, "int32")


@pytest.fixture(scope="session")
def spm_model(tmp_path_factory):
    from albert_tf.tokenization import train_sentencepiece

    directory = tmp_path_factory.mktemp("spm")
    rng = random.Random(0)
    lines = [" ".join(rng.choice(FILLER + ["good", "bad"]) for _ in range(10)) for _ in range(400)]
    (directory / "corpus.txt").write_text("\n".join(lines), encoding="utf-8")
    return train_sentencepiece([str(directory / "corpus.txt")], str(directory / "spm"), vocab_size=50, seed=0).model_file


@pytest.fixture(scope="session")
def config():
    return AlbertConfig(
        vocab_size=50, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32,
    )


@pytest.fixture(scope="session")
def source(config):
    keras.utils.set_random_seed(7)
    return AlbertEncoder.from_albert_config(config)


TOKENS = {
    "input_ids": np.array([[2, 11, 23, 40, 3, 0], [2, 30, 3, 17, 3, 0]], "int32"),
    "input_mask": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 0]], "int32"),
    "segment_ids": np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 0]], "int32"),
}


def pooled(encoder):
    return np.asarray(encoder(TOKENS)["pooled_output"])


def _copy(src, dst):
    dst.write_bytes(open(src, "rb").read())


@pytest.fixture(scope="session")
def layouts(tmp_path_factory, spm_model, config, source):
    """Directory of each checkpoint layout, holding `source`'s weights and the tiny tokenizer."""
    import keras_hub

    from albert_tf.checkpoints.huggingface import config_to_huggingface, save_huggingface_safetensors
    from albert_tf.checkpoints.keras_hub import to_keras_hub_backbone
    from albert_tf.checkpoints.original import original_variable_map, save_original_checkpoint
    from albert_tf.tasks.classification import AlbertForClassification
    from albert_tf.tasks.spec import TaskSpec

    root = tmp_path_factory.mktemp("layouts")
    dirs = {name: root / name for name in ("tf1", "tfhub", "hf", "keras_hub", "pretraining", "finetuning")}
    for directory in dirs.values():
        directory.mkdir()
    # The original release: albert_config.json, model.ckpt-best.*, 30k-clean.model.
    save_original_checkpoint(str(dirs["tf1"] / "model.ckpt-best"), source)
    config.to_json_file(str(dirs["tf1"] / "albert_config.json"))
    _copy(spm_model, dirs["tf1"] / "30k-clean.model")
    # A TF-Hub module: variables/variables under the `module/` scope, assets/30k-clean.model.
    (dirs["tfhub"] / "variables").mkdir()
    (dirs["tfhub"] / "assets").mkdir()
    names, values = zip(*((f"module/{n}", v.numpy()) for n, v in original_variable_map(source).items()))
    tf.raw_ops.SaveV2(prefix=str(dirs["tfhub"] / "variables" / "variables"), tensor_names=list(names),
                      shape_and_slices=[""] * len(names), tensors=[tf.constant(v) for v in values])
    (dirs["tfhub"] / "saved_model.pb").write_bytes(b"")
    _copy(spm_model, dirs["tfhub"] / "assets" / "30k-clean.model")
    # Hugging Face: config.json, model.safetensors, spiece.model, tokenizer_config.json (cased here).
    save_huggingface_safetensors(str(dirs["hf"]), source)
    (dirs["hf"] / "config.json").write_text(json.dumps(config_to_huggingface(config)))
    (dirs["hf"] / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "keep_accents": False}))
    _copy(spm_model, dirs["hf"] / "spiece.model")
    # keras-hub: a backbone and a tokenizer preset (assets/tokenizer/vocabulary.spm).
    to_keras_hub_backbone(source).save_to_preset(str(dirs["keras_hub"]))
    keras_hub.models.AlbertTokenizer(proto=open(spm_model, "rb").read()).save_to_preset(str(dirs["keras_hub"]))
    # albert-tf pretrain: encoder.keras, spm.model described by tokenizer.json.
    source.save(str(dirs["pretraining"] / "encoder.keras"))
    _copy(spm_model, dirs["pretraining"] / "spm.model")
    (dirs["pretraining"] / "tokenizer.json").write_text(
        json.dumps({"type": "sentencepiece", "file": "spm.model", "lower_case": True})
    )
    # albert-tf finetune: model.keras, COMPLETE, task.json naming its tokenizer file.
    classifier = AlbertForClassification(source, num_labels=2, pooling="mean")
    classifier(TOKENS)
    classifier.save(str(dirs["finetuning"] / "model.keras"))
    _copy(spm_model, dirs["finetuning"] / "sentiment.model")
    TaskSpec(
        task="classification", kind="classification", labels=["neg", "pos"], max_seq_length=SEQ,
        metrics=["accuracy"], best_metric="accuracy",
        tokenizer={"type": "sentencepiece", "file": "sentiment.model", "lower_case": True},
        columns={"text": "text", "text_b": None, "label": "label", "format": "tsv"},
    ).write(str(dirs["finetuning"]))
    (dirs["finetuning"] / "COMPLETE").write_text("done")
    return dirs


@pytest.fixture(scope="session")
def reference_layer(spm_model):
    return AlbertTokenizerLayer.from_sentencepiece(spm_model, sequence_length=SEQ)


# --- from_pretrained ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout, path, tokenizer_name, lower_case",
    [
        ("tf1", "", "30k-clean.model", True),
        ("tf1", "model.ckpt-best", "30k-clean.model", True),
        ("tfhub", "", "30k-clean.model", True),
        ("hf", "", "spiece.model", False),
        ("keras_hub", "", "vocabulary.spm", True),
        ("pretraining", "", "spm.model", True),
        ("finetuning", "", "sentiment.model", True),
    ],
)
@pytest.mark.slow
def test_from_pretrained_reads_every_layout(layouts, config, source, reference_layer, layout, path, tokenizer_name,
                                            lower_case):
    target = layouts[layout] / path if path else layouts[layout]
    extra = {"config": config} if layout == "tfhub" else {}  # a TF-Hub module stores no architecture
    model = AlbertTextClassifier.from_pretrained(str(target), num_classes=3, sequence_length=SEQ, compile=False, **extra)
    np.testing.assert_allclose(pooled(model.encoder), pooled(source), rtol=1e-5, atol=1e-6)
    kind, file, _ = find_tokenizer_file(str(target))
    assert kind == "sentencepiece" and file.endswith(tokenizer_name)
    assert model.preprocessor.lower_case is lower_case and model.preprocessor.sequence_length == SEQ
    texts = tf.constant(TOKEN_TEXTS)
    if lower_case:
        assert model.preprocessor(texts)["input_ids"].numpy().tolist() == reference_layer(texts)["input_ids"].numpy().tolist()
    assert model.pooling == "mean"  # the recipe's pooling for a tiny encoder


def test_missing_tokenizer_architecture_and_misfits_are_clear_errors(layouts, tmp_path, config, spm_model):
    from albert_tf.checkpoints.original import save_original_checkpoint
    from albert_tf.tokenization.tokenizers import VocabSizeMismatch

    bare = tmp_path / "bare"
    save_original_checkpoint(str(bare / "model.ckpt"), AlbertEncoder.from_albert_config(config))
    config.to_json_file(str(bare / "albert_config.json"))
    with pytest.raises(TokenizerNotFoundError) as error:
        AlbertTextClassifier.from_pretrained(str(bare), num_classes=2, sequence_length=SEQ)
    message = str(error.value)
    assert isinstance(error.value, ValueError) and "\n" not in message
    for looked_for in ("spiece.model", "30k-clean.model", "vocabulary.spm", "vocab.txt", "tokenizer=", str(bare)):
        assert looked_for in message
    # An explicit tokenizer file fills the gap.
    model = AlbertTextClassifier.from_pretrained(str(bare), num_classes=2, sequence_length=SEQ, tokenizer=spm_model,
                                                 compile=False)
    assert model.preprocessor.vocab_size == 50
    with pytest.raises(ValueError, match="stores no architecture.*pass config="):
        AlbertTextClassifier.from_pretrained(str(layouts["tfhub"]), num_classes=2, sequence_length=SEQ)
    with pytest.raises(ValueError, match="exceeds the model's max_position_embeddings 32"):
        AlbertTextClassifier.from_pretrained(str(layouts["tf1"]), num_classes=2)  # the default length 128
    with pytest.raises(ValueError, match="not found"):
        AlbertTextClassifier.from_pretrained(str(tmp_path / "nowhere"), num_classes=2)
    # A tokenizer smaller than the embedding table is refused unless allowed.
    wide = tmp_path / "wide"
    wider = config.replace(vocab_size=60)
    save_original_checkpoint(str(wide / "model.ckpt"), AlbertEncoder.from_albert_config(wider))
    wider.to_json_file(str(wide / "albert_config.json"))
    _copy(spm_model, wide / "30k-clean.model")
    with pytest.raises(VocabSizeMismatch, match="allow_vocab_mismatch=True"):
        AlbertTextClassifier.from_pretrained(str(wide), num_classes=2, sequence_length=SEQ)
    model = AlbertTextClassifier.from_pretrained(str(wide), num_classes=2, sequence_length=SEQ, allow_vocab_mismatch=True,
                                                 compile=False)
    assert model.encoder.vocab_size == 60


# --- training on raw text ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(layouts):
    """A classifier from the TF1 layout, fitted on the toy task with the default compile."""
    keras.utils.set_random_seed(3)
    model = AlbertTextClassifier.from_pretrained(str(layouts["tf1"]), num_classes=2, sequence_length=SEQ)
    texts, labels = toy_task(320, seed=0)
    history = model.fit(x=texts, y=labels, batch_size=16, epochs=5, verbose=0, validation_data=toy_task(40, seed=9))
    return model, history


@pytest.mark.slow
def test_default_compile_is_the_recipe(layouts):
    from albert_tf.training.optimizers import AdamWeightDecayOptimizer
    from albert_tf.training.recipes import recommended_recipe

    model = AlbertTextClassifier.from_pretrained(str(layouts["tf1"]), num_classes=2, sequence_length=SEQ)
    recipe = recommended_recipe(model.encoder.to_albert_config(), "classification")
    assert model.recipe == recipe and recipe.size_class == "tiny"
    assert isinstance(model.optimizer, AdamWeightDecayOptimizer) and model.optimizer.bias_correction
    assert float(model.optimizer.learning_rate) == pytest.approx(recipe.learning_rate)
    assert isinstance(model.loss, keras.losses.SparseCategoricalCrossentropy) and model.loss.from_logits
    assert not model.encoder.pooler.trainable  # mean pooling: the pooler gets no gradient
    # The same resolver as `albert-tf finetune` on a task without a preset; the user's values win.
    from albert_tf.training.finetuning_config import resolve_finetuning_config

    assert model.finetuning_config() == resolve_finetuning_config("classification", model.encoder.to_albert_config())
    mine = model.recommended_optimizer(learning_rate=3e-4, bias_correction=False)
    assert float(mine.learning_rate) == pytest.approx(3e-4) and not mine.bias_correction
    model.compile(optimizer=keras.optimizers.Adam(1e-4))  # other arguments keep their defaults
    assert isinstance(model.optimizer, keras.optimizers.Adam) and model.loss.from_logits
    assert not AlbertTextClassifier.from_pretrained(str(layouts["tf1"]), num_classes=2, sequence_length=SEQ,
                                                    compile=False).compiled
    bf16 = AlbertTextClassifier.from_pretrained(str(layouts["tf1"]), num_classes=2, sequence_length=SEQ,
                                                dtype="mixed_bfloat16", compile=False)
    assert bf16.encoder.embeddings.dtype_policy.name == "mixed_bfloat16"
    assert bf16.predict(TOKEN_TEXTS, verbose=0).dtype == np.float32


@pytest.mark.slow
def test_fit_on_strings_learns_the_toy_task(trained):
    model, history = trained
    dev_texts, dev_labels = toy_task(120, seed=1)
    majority = max(dev_labels.mean(), 1 - dev_labels.mean())
    metrics = model.evaluate(dev_texts, dev_labels, verbose=0, return_dict=True)
    assert metrics["accuracy"] >= 0.9 and metrics["accuracy"] > majority + 0.25, (metrics, majority)
    assert history.history["loss"][-1] < history.history["loss"][0] / 2
    assert history.history["val_accuracy"][-1] >= 0.9
    logits = model.predict(dev_texts, batch_size=7, verbose=0)
    assert logits.shape == (120, 2) and logits.dtype == np.float32
    assert np.mean(logits.argmax(-1) == dev_labels) == pytest.approx(metrics["accuracy"], abs=1e-6)
    assert model.predict(["this film was good", "this film was bad"], verbose=0).argmax(-1).tolist() == [1, 0]


@pytest.mark.slow
def test_inputs_as_tensors_datasets_and_token_features(trained):
    model, _ = trained
    texts, labels = toy_task(40, seed=2)
    expected = model.predict(texts, verbose=0)
    np.testing.assert_allclose(model.predict(tf.constant(texts), verbose=0), expected, rtol=1e-5, atol=1e-6)
    unbatched = tf.data.Dataset.from_tensor_slices(texts)
    np.testing.assert_allclose(model.predict(unbatched, batch_size=8, verbose=0), expected, rtol=1e-5, atol=1e-6)
    features = {k: v.numpy() for k, v in model.preprocessor(tf.constant(texts)).items()}
    np.testing.assert_allclose(model.predict(features, verbose=0), expected, rtol=1e-5, atol=1e-6)
    by_list = model.evaluate(texts, labels, verbose=0, return_dict=True)
    batched = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(16)
    assert model.evaluate(batched, verbose=0, return_dict=True) == pytest.approx(by_list)
    assert model.evaluate(unbatched, labels, verbose=0, return_dict=True) == pytest.approx(by_list)
    # Sample weights reach the loss (Keras weighs only `weighted_metrics`, not the metrics).
    weighted = model.evaluate(texts, labels, sample_weight=np.full(40, 2.0), verbose=0, return_dict=True)
    assert weighted["loss"] == pytest.approx(2 * by_list["loss"], rel=1e-5)
    # Pairs: a tuple (texts_a, texts_b), packed `[CLS] a [SEP] b [SEP]` by the tokenizer.
    pair_features = {k: v.numpy() for k, v in model.preprocessor((tf.constant(texts), tf.constant(texts[::-1]))).items()}
    np.testing.assert_allclose(model.predict((texts, texts[::-1]), verbose=0),
                               model.predict(pair_features, verbose=0), rtol=1e-5, atol=1e-6)
    pairs = tf.data.Dataset.from_tensor_slices(((texts, texts[::-1]), labels)).batch(8)
    assert model.evaluate(pairs, verbose=0, return_dict=True) == pytest.approx(
        model.evaluate((texts, texts[::-1]), labels, verbose=0, return_dict=True))
    with pytest.raises(ValueError, match="unbatched dataset"):
        model.evaluate(unbatched.batch(4), labels, verbose=0)
    with pytest.raises(ValueError, match="validation_split"):
        model.fit(texts, labels, validation_split=0.2, verbose=0)
    # The map function is kept per bucket and traced once per element structure: predicting
    # again traces nothing.
    preprocess = model._preprocess_function(model.length_bucket)
    traced = preprocess.experimental_get_tracing_count()
    np.testing.assert_allclose(model.predict(texts, verbose=0), expected, rtol=1e-5, atol=1e-6)
    assert model._preprocess_function(model.length_bucket) is preprocess
    assert preprocess.experimental_get_tracing_count() == traced


# --- .keras files and the tokenizer asset ---------------------------------------------------------------


@pytest.mark.slow
def test_keras_round_trip_identical_with_the_vocabulary_as_an_asset(trained, spm_model, tmp_path):
    model, _ = trained
    path = tmp_path / "classifier.keras"
    model.save(path)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        config_text = archive.read("config.json").decode("utf-8")
        assert archive.read("assets/preprocessor/spiece.model") == open(spm_model, "rb").read()
    assert [n for n in names if n.startswith("assets/")] == ["assets/preprocessor/spiece.model"]
    tree = json.loads(config_text)
    tokenizer_config = tree["config"]["preprocessor"]["config"]
    assert tokenizer_config["sentencepiece_model"] is None and tokenizer_config["vocabulary_asset"] == "spiece.model"
    import base64

    assert base64.b64encode(open(spm_model, "rb").read()[:60]).decode()[:40] not in config_text
    reloaded = keras.saving.load_model(path)
    assert type(reloaded) is AlbertTextClassifier and reloaded.pooling == "mean" and reloaded.num_classes == 2
    texts, labels = toy_task(50, seed=4)
    for saved, loaded in zip(model.weights, reloaded.weights):
        assert saved.path == loaded.path and np.array_equal(saved.numpy(), loaded.numpy())
    # Bit for bit on equal footing: a predict function traced afresh, as the reloaded model's is
    # (`model`'s own was retraced for several batch sizes above, which may change float rounding).
    model.predict_function = None
    assert np.array_equal(reloaded.predict(texts, verbose=0), model.predict(texts, verbose=0))
    # The optimizer and its state come back: training goes on from where it was.
    assert int(reloaded.optimizer.iterations) == int(model.optimizer.iterations) > 0
    assert reloaded.optimizer.bias_correction
    np.testing.assert_array_equal(reloaded.optimizer.variables[-1].numpy(), model.optimizer.variables[-1].numpy())
    reloaded.fit(texts, labels, batch_size=25, verbose=0)
    assert int(reloaded.optimizer.iterations) == int(model.optimizer.iterations) + 2


def test_tokenizer_layer_assets_and_old_archives(spm_model, tmp_path, monkeypatch):
    texts = tf.constant(["a good film", "Music, and 1971,000 scenes"])
    wordpiece = AlbertTokenizerLayer(wordpiece_vocab=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "film", "##s"],
                                     sequence_length=8, name="wordpiece")
    sentencepiece = AlbertTokenizerLayer.from_sentencepiece(spm_model, sequence_length=8, name="sentencepiece")
    for layer, asset in ((sentencepiece, "spiece.model"), (wordpiece, "vocab.txt")):
        # Outside archive saving, get_config keeps the vocabulary (a working copy from the config).
        assert AlbertTokenizerLayer.from_config(layer.get_config()).get_config() == layer.get_config()
        inputs = keras.Input(shape=(), dtype="string")
        model = keras.Model(inputs, layer(inputs))
        path = tmp_path / f"{layer.name}.keras"
        model.save(path)
        with zipfile.ZipFile(path) as archive:
            assert [n.rsplit("/", 1)[-1] for n in archive.namelist() if n.startswith("assets/")] == [asset]
            layer_config = json.loads(archive.read("config.json"))["config"]["layers"][1]["config"]
        assert layer_config["vocabulary_asset"] == asset
        assert layer_config["sentencepiece_model"] is None and layer_config["wordpiece_vocab"] is None
        reloaded = keras.saving.load_model(path)
        assert reloaded(texts)["input_ids"].numpy().tolist() == layer(texts)["input_ids"].numpy().tolist()

    # An archive written before the vocabulary was an asset: base64 in config.json, no assets.
    with monkeypatch.context() as patch:
        patch.setattr(in_graph, "_serializing_keras_archive", lambda: False)
        patch.delattr(AlbertTokenizerLayer, "save_assets")
        inputs = keras.Input(shape=(), dtype="string")
        old = tmp_path / "old.keras"
        keras.Model(inputs, sentencepiece(inputs)).save(old)
    with zipfile.ZipFile(old) as archive:
        assert not [n for n in archive.namelist() if n.startswith("assets/")]
        assert json.loads(archive.read("config.json"))["config"]["layers"][1]["config"]["sentencepiece_model"]
    reloaded = keras.saving.load_model(old)
    assert reloaded(texts)["input_ids"].numpy().tolist() == sentencepiece(texts)["input_ids"].numpy().tolist()

    # A layer restored from an archive config has no vocabulary until load_assets.
    pending = AlbertTokenizerLayer(vocabulary_asset="spiece.model", sequence_length=8, name="pending")
    with pytest.raises(ValueError, match="no vocabulary yet.*load_model"):
        pending(texts)
    with pytest.raises(ValueError, match="no vocabulary asset spiece.model"):
        pending.load_assets(str(tmp_path))
    with pytest.raises(ValueError, match="vocabulary_asset must be one of"):
        AlbertTokenizerLayer(vocabulary_asset="vocab.json")
    with pytest.raises(ValueError, match="one or the other"):
        AlbertTokenizerLayer(sentencepiece_model=open(spm_model, "rb").read(), vocabulary_asset="spiece.model")
    sentencepiece.save_assets(str(tmp_path))
    pending.load_assets(str(tmp_path))
    assert pending(texts)["input_ids"].numpy().tolist() == sentencepiece(texts)["input_ids"].numpy().tolist()


# --- export ------------------------------------------------------------------------------------------


def _signature_summary(saved_model_dir):
    from albert_tf.export.compatibility import read_meta_graph

    summary = {}
    for key, signature in read_meta_graph(saved_model_dir).signature_def.items():
        def specs(tensors):
            return {name: (info.dtype, [d.size for d in info.tensor_shape.dim]) for name, info in tensors.items()}

        summary[key] = (signature.method_name, specs(signature.inputs), specs(signature.outputs))
    return summary


@pytest.mark.slow
def test_export_serves_what_predict_answers_with_the_cli_signatures(trained, layouts, tmp_path):
    from albert_tf.cli import main as cli_main

    model, _ = trained
    result = model.export(tmp_path / "serving", model_name="sentiment", labels=["neg", "pos"], check=False)
    assert result.path == str(tmp_path / "serving" / "sentiment" / "1")
    texts, _ = toy_task(12, seed=5)
    served = tf.saved_model.load(result.path).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(served["logits"].numpy(), model.predict(texts, verbose=0), rtol=1e-5, atol=1e-5)
    assert [l.decode() for l in served["label"].numpy()] == [["neg", "pos"][i] for i in model.predict(texts, verbose=0).argmax(-1)]
    # `albert-tf export` of a fine-tuned classifier writes the same signatures.
    assert cli_main(["export", "--model-dir", str(layouts["finetuning"]), "--export-base", str(tmp_path / "cli"),
                     "--model-name", "sentiment", "--skip-check"]) == 0
    assert _signature_summary(result.path) == _signature_summary(str(tmp_path / "cli" / "sentiment" / "1"))


# --- regression ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_regressor_learns_fits_pairs_and_exports(layouts, tmp_path):
    keras.utils.set_random_seed(5)
    model = AlbertTextRegressor.from_pretrained(str(layouts["hf"]), sequence_length=SEQ, lower_case=True)
    assert model.pooling == "mean" and model.recipe.learning_rate == pytest.approx(1e-3)
    assert isinstance(model.loss, keras.losses.MeanSquaredError)
    texts, labels = toy_task(320, seed=6)
    targets = labels * 2.0 - 1.0  # "good" 1, "bad" -1 (within the reach of a constant 1e-3 in 100 updates)
    dev_texts, dev_labels = toy_task(80, seed=7)
    dev_targets = dev_labels * 2.0 - 1.0
    validation = tf.data.Dataset.from_tensor_slices((dev_texts, dev_targets)).batch(16)
    history = model.fit(texts, targets, batch_size=16, epochs=5, verbose=0, validation_data=validation)
    assert history.history["val_loss"][-1] < history.history["val_loss"][0]
    predictions = model.predict(dev_texts, verbose=0)
    assert predictions.shape == (80,)
    mse = float(np.mean((predictions - dev_targets) ** 2))
    assert mse < 0.2 * float(np.var(dev_targets)), (mse, np.var(dev_targets))
    metrics = model.evaluate(dev_texts, dev_targets, verbose=0, return_dict=True)
    assert metrics["loss"] == pytest.approx(mse, rel=1e-4) and metrics["pearson"] > 0.9
    assert model.predict((dev_texts[:4], dev_texts[4:8]), verbose=0).shape == (4,)
    result = model.export(tmp_path / "serving", check=False)
    assert result.path.endswith("albert_text_regressor/1") and set(result.signatures) == {"serving_default", "tokens", "regress"}
    served = tf.saved_model.load(result.path).signatures["serving_default"](text=tf.constant(dev_texts))
    np.testing.assert_allclose(served["score"].numpy(), predictions, rtol=1e-5, atol=1e-5)


def test_package_exports():
    import albert_tf
    import albert_tf.tasks

    for name in ("AlbertTextClassifier", "AlbertTextRegressor", "AlbertTextTagger", "AlbertMultipleChoice",
                 "AlbertQuestionAnswerer"):
        assert getattr(albert_tf, name) is getattr(albert_tf.tasks, name)
    assert albert_tf.AlbertTextClassifier is classification_text_model.AlbertTextClassifier


# --- tagging, multiple choice, question answering --------------------------------------------------------

TAGS = ["O", "B-POS", "I-POS", "B-NEG", "I-NEG"]


def tagging_task(n, seed):
    """Filler words with "good" (POS) and "bad" (NEG) entities; some of two words ("very good")."""
    rng = random.Random(seed)
    texts, entities = [], []
    for _ in range(n):
        words = [rng.choice(FILLER[:9]) for _ in range(rng.randrange(1, 4))]
        spans = []
        for _ in range(rng.randrange(0, 3)):
            words.insert(rng.randrange(len(words) + 1), rng.choice(["good", "bad"]))
        text = " ".join(words)
        offset = 0
        for word in words:
            start = text.index(word, offset)
            offset = start + len(word)
            if word in ("good", "bad"):
                spans.append((start, offset, "POS" if word == "good" else "NEG"))
        texts.append(text)
        entities.append(spans)
    return texts, entities


@pytest.mark.slow
def test_tagger_learns_entities_with_character_spans(layouts, tmp_path):
    keras.utils.set_random_seed(11)
    model = AlbertTextTagger.from_pretrained(str(layouts["keras_hub"]), TAGS, sequence_length=32)
    assert model.recipe.epochs == 10 and isinstance(model.loss, keras.losses.SparseCategoricalCrossentropy)
    texts, entities = tagging_task(320, seed=0)
    # Labels as entity spans; the same as one tag per word.
    features, units, _ = model.encode(texts[:3], entities[:3])
    tags = [model._unit_tags(u, e, i) for i, (u, e) in enumerate(zip(units, entities[:3]))]
    np.testing.assert_array_equal(model.encode(texts[:3], tags)[0]["labels"], features["labels"])
    history = model.fit(texts, entities, batch_size=16, epochs=5, verbose=0)
    assert history.history["token_accuracy"][-1] > 0.95
    dev_texts, dev_entities = tagging_task(60, seed=1)
    predicted = model.predict(dev_texts, verbose=0)
    assert all(set(e) == {"label", "start", "end", "text", "score"} and 0 < e["score"] <= 1 for p in predicted for e in p)
    expected = [[{"label": l, "start": a, "end": b, "text": t[a:b]} for a, b, l in e] for t, e in zip(dev_texts, dev_entities)]
    exact = np.mean([[{k: v for k, v in e.items() if k != "score"} for e in p] == x for p, x in zip(predicted, expected)])
    assert exact >= 0.9 and sum(map(len, dev_entities)) > 30, exact
    metrics = model.evaluate(dev_texts, dev_entities, verbose=0, return_dict=True)
    assert metrics["token_accuracy"] > 0.95
    weighted = model.evaluate(dev_texts, dev_entities, sample_weight=np.full(60, 3.0), verbose=0, return_dict=True)
    assert weighted["loss"] == pytest.approx(3 * metrics["loss"], rel=1e-5)
    # The metric itself takes weights too (as a `weighted_metrics` entry): per text, over its labelled pieces.
    metric = tagging_text_model.MaskedTokenAccuracy()
    metric.update_state(np.array([[0, 1, -100], [1, 1, 1]]), np.array([[[1.0, 0.0]] * 3, [[0.0, 1.0]] * 3]),
                        sample_weight=np.array([1.0, 0.0]))
    assert float(metric.result()) == pytest.approx(0.5)
    metric.reset_state()
    metric.update_state(np.array([[0, 1, -100]]), np.array([[[1.0, 0.0]] * 3]), sample_weight=np.array([[0.0, 1.0, 1.0]]))
    assert float(metric.result()) == pytest.approx(0.0)
    # Character units (Chinese-style): one tag per non-space character, spans exact.
    chars = AlbertTextTagger(model.encoder, model.preprocessor, TAGS, token_unit="char", compile=False)
    char_features, _, char_encoded = chars.encode(["ab c"], [["B-POS", "I-POS", "O"]])
    assert [char_features["labels"][0, p] for p in char_encoded.word_positions[0]] == [1, 2, 0]
    assert tagging_text_model.split_units("ab c", "char") == [("a", 0, 1), ("b", 1, 2), ("c", 3, 4)]
    with pytest.raises(ValueError, match="covers no word"):
        model.encode(["a b"], [[(1, 2, "POS")]])
    with pytest.raises(ValueError, match="token_unit"):
        AlbertTextTagger(model.encoder, model.preprocessor, TAGS, token_unit="piece")
    path = tmp_path / "tagger.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert type(reloaded) is AlbertTextTagger and reloaded.tags == TAGS and reloaded.token_unit == "word"
    assert reloaded.predict(dev_texts, verbose=0) == predicted
    assert reloaded.evaluate(dev_texts, dev_entities, verbose=0, return_dict=True) == pytest.approx(metrics)
    served = tf.saved_model.load(model.export(tmp_path / "serving", check=False).path).signatures["serving_default"]
    out = served(text=tf.constant(dev_texts))
    # The served entities are `predict`'s records, field by field.
    for i, entities in enumerate(predicted):
        n = int(out["num_entities"][i])
        got = [entity_record(out["entity_labels"][i, j].numpy().decode(), out["entity_starts"][i, j],
                             out["entity_ends"][i, j], out["entity_texts"][i, j].numpy().decode(), out["entity_scores"][i, j])
               for j in range(n)]
        assert [{k: e[k] for k in ("label", "start", "end", "text")} for e in got] == [
            {k: e[k] for k in ("label", "start", "end", "text")} for e in entities]
        np.testing.assert_allclose([e["score"] for e in got], [e["score"] for e in entities], atol=1e-5)


def choice_task(n, seed):
    """Three choices; the right one ends with "good", the others with "bad"."""
    rng = random.Random(seed)
    contexts, choices, labels = [], [], []
    for _ in range(n):
        label = rng.randrange(3)
        row = [f"{rng.choice(FILLER)} {rng.choice(FILLER)} {'good' if i == label else 'bad'}" for i in range(3)]
        contexts.append(" ".join(rng.choice(FILLER) for _ in range(4)))
        choices.append(row)
        labels.append(label)
    return contexts, choices, np.array(labels, "int32")


@pytest.mark.slow
def test_multiple_choice_scores_choices(layouts):
    keras.utils.set_random_seed(13)
    model = AlbertMultipleChoice.from_pretrained(str(layouts["pretraining"]), sequence_length=SEQ)
    contexts, choices, labels = choice_task(320, seed=0)
    features = model.preprocess_texts((tf.constant(contexts[:2]), tf.constant(choices[:2])))
    pair = model.preprocessor((tf.constant([contexts[1]]), tf.constant([choices[1][2]])))
    assert features["input_ids"].shape == (2, 3, SEQ)
    assert features["input_ids"][1, 2].numpy().tolist() == pair["input_ids"][0].numpy().tolist()
    model.fit((contexts, choices), labels, batch_size=16, epochs=4, verbose=0)  # right on the training set by the third
    dev_contexts, dev_choices, dev_labels = choice_task(90, seed=1)
    scores = model.predict((dev_contexts, dev_choices), verbose=0)
    assert scores.shape == (90, 3)
    accuracy = float(np.mean(scores.argmax(-1) == dev_labels))
    assert accuracy >= 0.6, accuracy  # chance: 1/3
    metrics = model.evaluate((dev_contexts, dev_choices), dev_labels, verbose=0, return_dict=True)
    assert metrics["accuracy"] == pytest.approx(accuracy, abs=1e-6)
    dataset = tf.data.Dataset.from_tensor_slices(((dev_contexts, dev_choices), dev_labels)).batch(16)
    assert model.evaluate(dataset, verbose=0, return_dict=True) == pytest.approx(metrics)


def qa_task(n, seed):
    """Contexts of filler words with "good" somewhere; the answer is always "good"."""
    rng = random.Random(seed)
    questions, contexts, answers = [], [], []
    for _ in range(n):
        words = [rng.choice(FILLER) for _ in range(rng.randrange(3, 8))]
        position = rng.randrange(len(words) + 1)
        words.insert(position, "good")
        context = " ".join(words)
        questions.append("what is " + rng.choice(FILLER))
        contexts.append(context)
        answers.append(("good", len(" ".join(words[:position])) + (1 if position else 0)))
    return questions, contexts, answers


@pytest.mark.slow
def test_question_answerer_learns_answers_with_spans(layouts):
    keras.utils.set_random_seed(17)
    model = AlbertQuestionAnswerer.from_pretrained(str(layouts["finetuning"]), sequence_length=32, doc_stride=8,
                                                   max_query_length=6, max_answer_length=4)
    questions, contexts, answers = qa_task(320, seed=0)
    history = model.fit((questions, contexts), answers, batch_size=16, epochs=5, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0] / 4
    dev_questions, dev_contexts, dev_answers = qa_task(30, seed=1)
    predicted = model.predict((dev_questions, dev_contexts))
    right = [p["text"] == "good" and (p["start"], p["end"]) == (a[1], a[1] + 4) for p, a in zip(predicted, dev_answers)]
    assert np.mean(right) >= 0.9, predicted
    assert all(c[p["start"]: p["end"]] == p["text"] for p, c in zip(predicted, dev_contexts) if p["start"] >= 0)
    metrics = model.evaluate((dev_questions, dev_contexts), [{"text": t, "answer_start": s} for t, s in dev_answers],
                             verbose=0, return_dict=True)
    assert metrics["start_logits_accuracy"] >= 0.9 and metrics["end_logits_accuracy"] >= 0.9
    weighted = model.evaluate((dev_questions, dev_contexts), dev_answers, sample_weight=np.full(30, 2.0), verbose=0,
                              return_dict=True)
    assert weighted["loss"] == pytest.approx(2 * metrics["loss"], rel=1e-5)
    with pytest.raises(ValueError, match="must exceed max_query_length"):
        AlbertQuestionAnswerer(model.encoder, model.preprocessor, max_query_length=29)


# --- SQuAD v2: unanswerable questions ------------------------------------------------------------------


def qa_v2_task(n, seed):
    """`qa_task` where every third context has no "good": its question is unanswerable (labelled None
    or, SQuAD's way, {"is_impossible": True})."""
    rng = random.Random(seed)
    questions, contexts, answers = qa_task(n, seed)
    for i in range(0, n, 3):
        contexts[i] = " ".join(rng.choice(FILLER) for _ in range(rng.randrange(3, 8)))
        answers[i] = None if i % 2 else {"is_impossible": True}
    return questions, contexts, answers


def _v2_right(predicted, answers):
    return [p == {"text": "", "start": -1, "end": -1, "score": p["score"]} if a is None or isinstance(a, dict)
            else (p["text"], p["start"], p["end"]) == ("good", a[1], a[1] + 4) for p, a in zip(predicted, answers)]


@pytest.fixture(scope="module")
def trained_v2(layouts):
    """A SQuAD v2 answerer from the fine-tuning layout, fitted on raw strings with unanswerable
    questions (the v2 tests share it: each trace of a QA graph costs seconds)."""
    keras.utils.set_random_seed(29)
    model = AlbertQuestionAnswerer.from_pretrained(str(layouts["finetuning"]), sequence_length=32, doc_stride=8,
                                                   max_query_length=6, max_answer_length=4, version="v2")
    questions, contexts, answers = qa_v2_task(320, seed=0)
    history = model.fit((questions, contexts), answers, batch_size=16, epochs=5, verbose=0)
    return model, history


@pytest.fixture
def v2_model(trained_v2):
    """`trained_v2`, its threshold set back after the test (tests change it)."""
    model, history = trained_v2
    threshold = model.null_score_diff_threshold
    yield model, history
    model.null_score_diff_threshold = threshold


@pytest.mark.slow
def test_question_answerer_v2_fits_raw_strings_with_unanswerable_questions(v2_model):
    from albert_tf.tasks.squad import AlbertForSquadV2

    model, history = v2_model
    assert isinstance(model.task_model, AlbertForSquadV2) and model.qa_settings["version"] == "v2"
    assert model.null_score_diff_threshold == 0.0 and model.dropout == 0.1
    assert np.isfinite(history.history["loss"]).all()
    assert {f"{k}_accuracy" for k in ("start_log_probs", "end_log_probs", "cls_logits")} <= set(history.history)
    # The compiled loss is AlbertForSquadV2's (its own loss on the same batch, labels in the inputs).
    questions, contexts, answers = qa_v2_task(48, seed=0)
    x, y = next(iter(model.make_dataset((questions, contexts), answers, batch_size=48)))
    impossible = y["cls_logits"][:, 0].numpy()
    assert impossible.sum() >= 16 and (y["end_log_probs"].numpy()[impossible == 1] == 0).all()  # [CLS]
    labelled = dict(x, end_positions=y["end_log_probs"], is_impossible=y["cls_logits"][:, 0])
    np.testing.assert_allclose(
        float(model.compute_loss(x=x, y=y, y_pred=model(x, training=False))),
        float(model.task_model.compute_task_loss(labelled, model.task_model(labelled, training=False))), rtol=1e-5)


@pytest.mark.slow
def test_question_answerer_v2_round_trips_and_serves_what_predict_answers(v2_model, tmp_path):
    from albert_tf.tasks.squad.serving import QaGraph
    from albert_tf.export.saved_model import read_export_info

    model, _ = v2_model  # a compiled model with optimizer state
    dev_questions, dev_contexts, _ = qa_v2_task(24, seed=1)
    null_scores = QaGraph(model.task_model, model.preprocessor, model.qa_settings)(
        tf.constant(dev_questions), tf.constant(dev_contexts))["null_score"].numpy()
    # A threshold between two null scores: the questions whose null score is above it get no answer.
    ordered = np.sort(null_scores)
    model.null_score_diff_threshold = float(ordered[11] + ordered[12]) / 2
    predicted = model.predict((dev_questions, dev_contexts))
    assert all(set(p) == {"text", "start", "end", "score"} for p in predicted)
    assert all((p["text"], p["start"], p["end"]) == ("", -1, -1) for p, null in zip(predicted, null_scores)
               if null > model.null_score_diff_threshold)
    assert any(p["text"] for p in predicted)
    assert all(c[p["start"]: p["end"]] == p["text"] for p, c in zip(predicted, dev_contexts) if p["text"])

    path = tmp_path / "qa_v2.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert type(reloaded) is AlbertQuestionAnswerer and reloaded.version == "v2"
    assert reloaded.qa_settings == model.qa_settings
    assert int(reloaded.optimizer.iterations) == int(model.optimizer.iterations) > 0
    again = reloaded.predict((dev_questions, dev_contexts))
    assert [(p["text"], p["start"], p["end"]) for p in again] == [(p["text"], p["start"], p["end"]) for p in predicted]
    np.testing.assert_allclose([p["score"] for p in again], [p["score"] for p in predicted], rtol=1e-5, atol=1e-5)

    result = model.export(tmp_path / "serving", check=False)
    info = read_export_info(result.path)
    assert info["kind"] == "squad_v2"
    assert info["qa"]["null_score_diff_threshold"] == model.null_score_diff_threshold
    served = tf.saved_model.load(result.path).signatures["serving_default"](
        question=tf.constant(dev_questions), context=tf.constant(dev_contexts))
    assert [t.decode() for t in served["answer_text"].numpy()] == [p["text"] for p in predicted]
    assert served["start_char"].numpy().tolist() == [p["start"] for p in predicted]
    assert served["end_char"].numpy().tolist() == [p["end"] for p in predicted]
    assert served["has_answer"].numpy().tolist() == [int(p["text"] != "") for p in predicted]
    np.testing.assert_allclose(served["score"].numpy(), [p["score"] for p in predicted], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_question_answerer_v2_learns_when_there_is_no_answer(v2_model):
    model, history = v2_model
    assert history.history["loss"][-1] < history.history["loss"][0] / 4
    dev_questions, dev_contexts, dev_answers = qa_v2_task(30, seed=1)
    predicted = model.predict((dev_questions, dev_contexts))
    assert np.mean(_v2_right(predicted, dev_answers)) >= 0.9, predicted
    # `predict`'s traced graph is kept while the settings stay; a new threshold traces a new one.
    answer = model._answer_function()
    assert [a["text"] for a in model.predict((dev_questions, dev_contexts))] == [a["text"] for a in predicted]
    assert model._answer_function() is answer
    model.null_score_diff_threshold = -1e6  # the null answer always wins by more than this
    assert model._answer_function() is not answer
    assert {a["text"] for a in model.predict((dev_questions[:4], dev_contexts[:4]))} == {""}
    metrics = model.evaluate((dev_questions, dev_contexts), dev_answers, verbose=0, return_dict=True)
    assert min(metrics[f"{k}_accuracy"] for k in ("start_log_probs", "end_log_probs", "cls_logits")) >= 0.9


def test_question_answerer_version_option_errors_and_old_configs(layouts):
    model = AlbertQuestionAnswerer.from_pretrained(str(layouts["finetuning"]), sequence_length=32, max_query_length=6)
    assert model.version == "v1" and model.null_score_diff_threshold is None and model.dropout == 0.0
    config = model.get_config()
    assert config["version"] == "v1"
    # A config saved before the option existed is a v1 model's.
    for key in ("version", "null_score_diff_threshold"):
        del config[key]
    old = AlbertQuestionAnswerer.from_config(config)
    assert old.version == "v1" and old.qa_settings == model.qa_settings
    with pytest.raises(ValueError, match="answer 1 is unanswerable: unanswerable questions need version='v2'"):
        model.encode((["q", "r"], ["a good film", "a film"]), [("good", 2), None])
    with pytest.raises(ValueError, match="null_score_diff_threshold is for version='v2'"):
        AlbertQuestionAnswerer(model.encoder, model.preprocessor, max_query_length=6, null_score_diff_threshold=1.0)
    with pytest.raises(ValueError, match="null_score_diff_threshold is for version='v2'"):
        model.null_score_diff_threshold = 1.0
    with pytest.raises(ValueError, match=r"version must be one of \('v1', 'v2'\), got 'v3'"):
        AlbertQuestionAnswerer(model.encoder, model.preprocessor, max_query_length=6, version="v3")
    v2 = AlbertQuestionAnswerer(model.encoder, model.preprocessor, max_query_length=6, version="v2",
                                null_score_diff_threshold=-2)
    assert v2.get_config()["null_score_diff_threshold"] == -2.0 and v2.dropout == 0.1
    with pytest.raises(ValueError, match="^2 questions but 1 contexts$"):
        v2.fit((["q", "r"], ["a good film"]), [("good", 2), None])
    with pytest.raises(ValueError, match=r"^1 answers for 2 questions$"):
        v2.fit((["q", "r"], ["a good film", "a film"]), [None])


@pytest.mark.slow
def test_the_raw_text_classifier_trains_as_its_head_bit_for_bit(tiny_config, tiny_spm_model):
    """Trained on the same token batches from the same seed, the head alone (`AlbertForClassification`),
    the raw-text classifier on `(features, labels)` with its compiled loss, and the raw-text
    classifier on feature dicts with the labels inside (`compile(loss=None)`: how `albert-tf
    finetune` and the pipeline's Trainer train it) end with the same weights, bit for bit; the
    last reports the head's metrics under the head's names. One model, whichever form trains it."""
    from albert_tf.tasks.classification.head import AlbertForClassification
    from albert_tf.training.optimizers import create_optimizer

    rng = np.random.default_rng(0)
    ids = rng.integers(5, tiny_config.vocab_size, size=(32, SEQ)).astype("int32")
    mask = (np.arange(SEQ)[None, :] < rng.integers(3, SEQ, size=(32, 1))).astype("int32")
    features = {"input_ids": ids * mask, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    labels = rng.integers(0, 2, size=(32,)).astype("int32")

    def trained(form: str):
        keras.utils.set_random_seed(3)
        encoder = AlbertEncoder.from_albert_config(tiny_config)
        inside = tf.data.Dataset.from_tensor_slices({**features, "labels": labels})
        if form == "head":
            model, data, loss = AlbertForClassification(encoder, num_labels=2, pooling="mean"), inside, None
        else:
            preprocessor = AlbertTokenizerLayer.from_sentencepiece(tiny_spm_model, sequence_length=SEQ)
            model = AlbertTextClassifier(encoder, preprocessor, num_classes=2, pooling="mean", compile=False)
            if form == "pairs":  # the raw-text model's own form: its "auto" loss and metrics
                data, loss = tf.data.Dataset.from_tensor_slices((features, labels)), "auto"
            else:
                data, loss = inside, None
        optimizer = create_optimizer("adamw", 1e-3, num_train_steps=4, num_warmup_steps=1, weight_decay=0.01,
                                     bias_correction=True)
        model.compile(optimizer=optimizer, loss=loss, jit_compile=False)
        history = model.fit(data.batch(8), epochs=1, verbose=0, shuffle=False).history
        evaluation = model.evaluate(inside.batch(8), verbose=0, return_dict=True) if form != "pairs" else None
        head = model if form == "head" else model.task_model
        return [v.numpy() for v in head.weights], history, evaluation

    head, head_history, head_evaluation = trained("head")
    for form in ("pairs", "labels inside"):
        weights, history, evaluation = trained(form)
        assert len(weights) == len(head)
        assert all(np.array_equal(a, b) for a, b in zip(head, weights)), form
    # The labels-inside form reports exactly what the head reports, in training and evaluation.
    assert history == head_history and sorted(history) == ["accuracy", "loss"]
    assert evaluation == head_evaluation
    # Not trivially equal: training moved the weights away from their initial values.
    keras.utils.set_random_seed(3)
    untrained = AlbertForClassification(AlbertEncoder.from_albert_config(tiny_config), num_labels=2, pooling="mean")
    untrained(features)
    initial = [v.numpy() for v in untrained.weights]
    assert len(initial) == len(head)
    assert sum(not np.array_equal(a, b) for a, b in zip(initial, head)) > len(head) // 2


def test_a_raw_text_models_checkpoints_are_its_heads(tiny_config, tiny_spm_model, tmp_path):
    """`run_finetuning` checkpoints a raw-text model's head (`weights_of`): its best-weights file
    and its resume checkpoint are laid out as the head's, so a run the command started when it
    trained the head alone resumes into the raw-text model."""
    from albert_tf.tasks.classification.head import AlbertForClassification
    from albert_tf.training.finetuning import weights_of
    from albert_tf.training.optimizers import create_optimizer
    from albert_tf.training.pretraining import training_state

    def build(text: bool, seed: int):
        keras.utils.set_random_seed(seed)
        encoder = AlbertEncoder.from_albert_config(tiny_config)
        if text:
            preprocessor = AlbertTokenizerLayer.from_sentencepiece(tiny_spm_model, sequence_length=SEQ)
            model = AlbertTextClassifier(encoder, preprocessor, num_classes=2, compile=False, task_model_name=None)
        else:
            model = AlbertForClassification(encoder, num_labels=2)
        ids = np.ones((2, SEQ), "int32")
        model({"input_ids": ids, "input_mask": ids, "segment_ids": np.zeros_like(ids), "labels": np.zeros(2, "int32")})
        optimizer = create_optimizer("adamw", 1e-3, num_train_steps=4, num_warmup_steps=1)
        optimizer.build(model.trainable_variables)
        return model, optimizer

    head, head_optimizer = build(False, 1)
    text, text_optimizer = build(True, 2)
    assert weights_of(text) is text.task_model and weights_of(head) is head
    head_optimizer.iterations.assign(3)
    head.save_weights(str(tmp_path / "best.weights.h5"))
    prefix = training_state(weights_of(head), head_optimizer).write(str(tmp_path / "ckpt"))
    weights_of(text).load_weights(str(tmp_path / "best.weights.h5"))
    assert all(np.array_equal(a, b) for a, b in zip(head.get_weights(), text.task_model.get_weights()))
    text.task_model.set_weights([np.zeros_like(w) for w in text.task_model.get_weights()])
    training_state(weights_of(text), text_optimizer).read(prefix).assert_consumed()
    assert all(np.array_equal(a, b) for a, b in zip(head.get_weights(), text.task_model.get_weights()))
    assert int(text_optimizer.iterations.numpy()) == 3