"""Tests for albert_tf.checkpoints.huggingface: safetensors / npz / dict import, config mapping, export."""

import json
import os

import numpy as np
import pytest
from safetensors.numpy import save_file

from albert_tf import AlbertConfig, AlbertEncoder, AlbertMLMHead, AlbertSOPHead
from albert_tf.checkpoints.huggingface import (
    config_from_huggingface,
    config_to_huggingface,
    export_huggingface_weights,
    load_huggingface_weights,
    save_huggingface_safetensors,
)
from albert_tf.checkpoints.original import CheckpointError, original_variable_map
from albert_tf.config import ConfigError
from albert_numpy import (
    albert_numpy_forward,
    albert_numpy_mlm_logits,
    albert_numpy_sop_logits,
    random_original_weights,
)

ATOL = 1e-5

HF_CONFIG = {
    "architectures": ["AlbertForPreTraining"],
    "model_type": "albert",
    "vocab_size": 40,
    "embedding_size": 8,
    "hidden_size": 16,
    "num_hidden_layers": 4,
    "num_hidden_groups": 2,
    "inner_group_num": 2,
    "num_attention_heads": 2,
    "intermediate_size": 24,
    "hidden_act": "gelu",  # Hugging Face's "gelu" is the exact erf form
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 12,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "position_embedding_type": "absolute",
    "pad_token_id": 0,
    "bos_token_id": 2,
    "eos_token_id": 3,
}


def to_hf_state_dict(weights, config, prefix="albert.", heads=True):
    """Original-named weights -> a Hugging Face state dict, written out by hand (independent of the package)."""
    t = lambda a: np.ascontiguousarray(a.T)  # noqa: E731  torch Linear weights are [out, in]
    w = weights
    sd = {
        "embeddings.word_embeddings.weight": w["bert/embeddings/word_embeddings"],
        "embeddings.position_embeddings.weight": w["bert/embeddings/position_embeddings"],
        "embeddings.token_type_embeddings.weight": w["bert/embeddings/token_type_embeddings"],
        "embeddings.LayerNorm.weight": w["bert/embeddings/LayerNorm/gamma"],
        "embeddings.LayerNorm.bias": w["bert/embeddings/LayerNorm/beta"],
        "pooler.weight": t(w["bert/pooler/dense/kernel"]),
        "pooler.bias": w["bert/pooler/dense/bias"],
    }
    if config.embedding_size != config.hidden_size:
        sd["encoder.embedding_hidden_mapping_in.weight"] = t(w["bert/encoder/embedding_hidden_mapping_in/kernel"])
        sd["encoder.embedding_hidden_mapping_in.bias"] = w["bert/encoder/embedding_hidden_mapping_in/bias"]
    for g in range(config.num_hidden_groups):
        for k in range(config.inner_group_num):
            hf = f"encoder.albert_layer_groups.{g}.albert_layers.{k}."
            tf1 = f"bert/encoder/transformer/group_{g}/inner_group_{k}/"
            for ours, theirs in (("self/query", "query"), ("self/key", "key"), ("self/value", "value"), ("output/dense", "dense")):
                sd[hf + f"attention.{theirs}.weight"] = t(w[tf1 + f"attention_1/{ours}/kernel"])
                sd[hf + f"attention.{theirs}.bias"] = w[tf1 + f"attention_1/{ours}/bias"]
            sd[hf + "attention.LayerNorm.weight"] = w[tf1 + "LayerNorm/gamma"]
            sd[hf + "attention.LayerNorm.bias"] = w[tf1 + "LayerNorm/beta"]
            sd[hf + "ffn.weight"] = t(w[tf1 + "ffn_1/intermediate/dense/kernel"])
            sd[hf + "ffn.bias"] = w[tf1 + "ffn_1/intermediate/dense/bias"]
            sd[hf + "ffn_output.weight"] = t(w[tf1 + "ffn_1/intermediate/output/dense/kernel"])
            sd[hf + "ffn_output.bias"] = w[tf1 + "ffn_1/intermediate/output/dense/bias"]
            sd[hf + "full_layer_layer_norm.weight"] = w[tf1 + "LayerNorm_1/gamma"]
            sd[hf + "full_layer_layer_norm.bias"] = w[tf1 + "LayerNorm_1/beta"]
    sd = {prefix + name: value for name, value in sd.items()}
    if heads:
        sd.update(
            {
                "predictions.dense.weight": t(w["cls/predictions/transform/dense/kernel"]),
                "predictions.dense.bias": w["cls/predictions/transform/dense/bias"],
                "predictions.LayerNorm.weight": w["cls/predictions/transform/LayerNorm/gamma"],
                "predictions.LayerNorm.bias": w["cls/predictions/transform/LayerNorm/beta"],
                "predictions.bias": w["cls/predictions/output_bias"],
                "sop_classifier.classifier.weight": w["cls/seq_relationship/output_weights"],
                "sop_classifier.classifier.bias": w["cls/seq_relationship/output_bias"],
            }
        )
    return sd


def build_model(config):
    encoder = AlbertEncoder.from_albert_config(config)
    mlm = AlbertMLMHead(config.vocab_size, config.embedding_size, activation=config.hidden_act)
    sop = AlbertSOPHead(config.hidden_size)
    return encoder, mlm, sop


def batch(config, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, config.vocab_size, size=(3, 7)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 5:] = 0
    mask[2, 3:] = 0
    ids[mask == 0] = 0
    segments = (np.arange(7)[None, :] >= 3).astype("int32").repeat(3, 0)
    return ids, mask, segments


def assert_matches_reference(weights, config, encoder, mlm=None, sop=None):
    ids, mask, segments = batch(config)
    out = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    ref_seq, ref_pooled = albert_numpy_forward(weights, config, ids, mask, segments)
    np.testing.assert_allclose(out["sequence_output"].numpy(), ref_seq, atol=ATOL, rtol=ATOL)
    np.testing.assert_allclose(out["pooled_output"].numpy(), ref_pooled, atol=ATOL, rtol=ATOL)
    if mlm is not None:
        logits = mlm(out["sequence_output"], encoder.embeddings.word_embeddings).numpy()
        np.testing.assert_allclose(logits, albert_numpy_mlm_logits(weights, config, ref_seq), atol=ATOL, rtol=ATOL)
    if sop is not None:
        np.testing.assert_allclose(
            sop(out["pooled_output"]).numpy(), albert_numpy_sop_logits(weights, ref_pooled), atol=ATOL, rtol=ATOL
        )


def test_safetensors_for_pretraining_reproduces_numpy_reference(tmp_path):
    config = config_from_huggingface(HF_CONFIG)
    weights = random_original_weights(config, seed=11)
    sd = to_hf_state_dict(weights, config)
    sd["albert.embeddings.position_ids"] = np.arange(12, dtype=np.int64)[None]  # old buffer
    sd["predictions.decoder.weight"] = sd["albert.embeddings.word_embeddings.weight"].copy()
    sd["predictions.decoder.bias"] = sd["predictions.bias"].copy()
    path = tmp_path / "model.safetensors"
    save_file(sd, str(path), metadata={"format": "pt"})
    encoder, mlm, sop = build_model(config)
    report = load_huggingface_weights(path, encoder, mlm, sop)
    assert report.ok
    assert set(report.skipped) == {
        "albert.embeddings.position_ids",
        "predictions.decoder.weight",
        "predictions.decoder.bias",
    }
    assert len(report.loaded) == len(weights)
    assert_matches_reference(weights, config, encoder, mlm, sop)
    # A directory holding model.safetensors works too.
    assert load_huggingface_weights(tmp_path, *build_model(config)).ok


@pytest.mark.parametrize("kind", ["npz", "dict"])
def test_bare_albert_model_names_from_npz_and_dict(tmp_path, kind):
    config = AlbertConfig(
        vocab_size=30, embedding_size=16, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=20, max_position_embeddings=10, hidden_act="relu",
    )
    weights = random_original_weights(config, seed=12)
    sd = to_hf_state_dict(weights, config, prefix="", heads=False)
    source = sd
    if kind == "npz":
        source = tmp_path / "state.npz"
        np.savez(source, **sd)
    encoder = AlbertEncoder.from_albert_config(config)
    report = load_huggingface_weights(source, encoder)
    assert report.ok and len(report.loaded) == len(sd)
    assert_matches_reference(weights, config, encoder)


def test_decoder_bias_alone_stands_for_the_shared_bias():
    config = config_from_huggingface(HF_CONFIG)
    weights = random_original_weights(config, seed=13)
    sd = to_hf_state_dict(weights, config)
    sd["predictions.decoder.bias"] = sd.pop("predictions.bias")
    encoder, mlm, sop = build_model(config)
    assert load_huggingface_weights(sd, encoder, mlm, sop).ok
    np.testing.assert_array_equal(mlm.output_bias.numpy(), weights["cls/predictions/output_bias"])


def test_tied_decoder_that_differs_is_a_conflict():
    config = config_from_huggingface(HF_CONFIG)
    sd = to_hf_state_dict(random_original_weights(config, seed=14), config)
    sd["predictions.decoder.weight"] = sd["albert.embeddings.word_embeddings.weight"] + 1.0
    with pytest.raises(CheckpointError, match="conflict: predictions.decoder.weight: differs from albert.embeddings"):
        load_huggingface_weights(sd, *build_model(config))


def test_problems_are_reported_under_hugging_face_names():
    config = config_from_huggingface(HF_CONFIG)
    sd = to_hf_state_dict(random_original_weights(config, seed=15), config)
    del sd["albert.pooler.weight"]  # as AlbertForMaskedLM saves: no pooler
    sd["classifier.weight"] = np.zeros((3, 16), np.float32)
    sd["albert.encoder.albert_layer_groups.1.albert_layers.0.ffn.bias"] = np.zeros((5,), np.float32)
    encoder, mlm, sop = build_model(config)
    with pytest.raises(CheckpointError) as err:
        load_huggingface_weights(sd, encoder, mlm, sop)
    message = str(err.value)
    assert "missing: albert.pooler.weight" in message
    assert "unexpected: classifier.weight" in message
    assert "shape mismatch: albert.encoder.albert_layer_groups.1.albert_layers.0.ffn.bias: source [5] vs model [24]" in message
    report = load_huggingface_weights(sd, encoder, mlm, sop, strict=False)
    assert report.missing == ["albert.pooler.weight"]
    assert report.unexpected == ["classifier.weight"]
    assert len(report.loaded) == len(sd) - 2


def test_encoder_only_lists_head_tensors_as_unused():
    config = config_from_huggingface(HF_CONFIG)
    sd = to_hf_state_dict(random_original_weights(config, seed=16), config)
    report = load_huggingface_weights(sd, AlbertEncoder.from_albert_config(config))
    assert report.ok
    assert sorted(report.unused) == sorted(n for n in sd if n.startswith(("predictions.", "sop_classifier.")))


def test_export_import_round_trip_is_exact_and_uses_hugging_face_names(tmp_path):
    config = config_from_huggingface(HF_CONFIG)
    source = build_model(config)
    rng = np.random.default_rng(17)
    for variable in original_variable_map(*source).values():
        variable.assign(rng.standard_normal(variable.shape).astype("float32"))
    exported = export_huggingface_weights(*source)
    # The names and layouts are exactly those of the hand-written table.
    values = {name: np.asarray(v.numpy()) for name, v in original_variable_map(*source).items()}
    expected = to_hf_state_dict(values, config)
    assert exported.keys() == expected.keys()
    for name in expected:
        np.testing.assert_array_equal(exported[name], expected[name], err_msg=name)
    assert "pooler.weight" in export_huggingface_weights(source[0])  # AlbertModel naming

    path = save_huggingface_safetensors(tmp_path / "out.safetensors", *source, include_tied=True)
    assert os.listdir(tmp_path) == ["out.safetensors"]
    target = build_model(config)
    assert load_huggingface_weights(path, *target).ok
    for name, variable in original_variable_map(*target).items():
        assert np.asarray(variable.numpy()).tobytes() == values[name].tobytes(), name


def test_other_sharing_modes_are_refused():
    config = config_from_huggingface(HF_CONFIG, sharing="ffn")
    encoder = AlbertEncoder.from_albert_config(config)
    with pytest.raises(CheckpointError, match="sharing='ffn'"):
        export_huggingface_weights(encoder)
    with pytest.raises(CheckpointError, match="sharing='ffn'"):
        load_huggingface_weights({}, encoder)


def test_bad_files_give_clear_errors(tmp_path):
    encoder = AlbertEncoder.from_albert_config(config_from_huggingface(HF_CONFIG))
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(CheckpointError, match="cannot read safetensors file"):
        load_huggingface_weights(broken, encoder)
    torch_file = tmp_path / "pytorch_model.bin"
    torch_file.write_bytes(b"\x80\x02")
    with pytest.raises(CheckpointError, match="PyTorch pickle"):
        load_huggingface_weights(torch_file, encoder)
    with pytest.raises(CheckpointError, match="not found"):
        load_huggingface_weights(tmp_path / "absent.safetensors", encoder)
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        load_huggingface_weights(tmp_path, encoder)
    with pytest.raises(CheckpointError, match="not a numeric array"):
        load_huggingface_weights({"pooler.bias": np.array(["a", None], dtype=object)}, encoder)


def test_config_mapping(tmp_path):
    config = config_from_huggingface(HF_CONFIG)
    assert config.hidden_act == "gelu_exact"
    assert (config.num_hidden_groups, config.inner_group_num, config.num_hidden_layers) == (2, 2, 4)
    assert (config.vocab_size, config.embedding_size, config.hidden_size, config.intermediate_size) == (40, 8, 16, 24)
    assert config.max_position_embeddings == 12 and config.sharing == "all"
    assert config_from_huggingface({**HF_CONFIG, "hidden_act": "gelu_new"}).hidden_act == "gelu"
    # Round trip through our writer, and from a file / directory.
    assert config_from_huggingface(config_to_huggingface(config)) == config
    (tmp_path / "config.json").write_text(json.dumps(HF_CONFIG))
    assert config_from_huggingface(tmp_path) == config
    assert config_from_huggingface(tmp_path / "config.json", hidden_dropout_prob=0.1).hidden_dropout_prob == 0.1
    # Hugging Face defaults fill the keys a file leaves out.
    minimal = {k: HF_CONFIG[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")}
    assert config_from_huggingface(minimal).embedding_size == 128
    assert config_from_huggingface(minimal).hidden_act == "gelu"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_type": "bert"}, "not an ALBERT config"),
        ({"hidden_act": "quick_gelu"}, "unsupported hidden_act 'quick_gelu'"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
        ({"layer_norm_eps": 1e-5}, "layer_norm_eps"),
        ({"hidden_size": 15}, "not a multiple of num_attention_heads"),
    ],
)
def test_config_errors(change, message):
    with pytest.raises(ConfigError, match=message):
        config_from_huggingface({**HF_CONFIG, **change})


def test_config_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        config_from_huggingface(tmp_path)
    bad = tmp_path / "config.json"
    bad.write_text("{oops")
    with pytest.raises(ConfigError, match="not valid JSON"):
        config_from_huggingface(bad)
    bad.write_text(json.dumps({"model_type": "albert", "vocab_size": 10}))
    with pytest.raises(ConfigError, match="missing required key"):
        config_from_huggingface(bad)


def test_bfloat16_safetensors_load_as_float32(tmp_path):
    import tensorflow as tf
    from safetensors.tensorflow import save_file as save_file_tf

    config = config_from_huggingface(HF_CONFIG)
    sd = to_hf_state_dict(random_original_weights(config, seed=18), config)
    path = tmp_path / "bf16.safetensors"
    save_file_tf({name: tf.cast(value, tf.bfloat16) for name, value in sd.items()}, str(path))
    encoder, mlm, sop = build_model(config)
    assert load_huggingface_weights(path, encoder, mlm, sop).ok
    expected = sd["albert.embeddings.word_embeddings.weight"].astype(tf.bfloat16.as_numpy_dtype).astype(np.float32)
    assert not np.array_equal(expected, sd["albert.embeddings.word_embeddings.weight"])  # rounding happened
    np.testing.assert_array_equal(encoder.embeddings.word_embeddings.numpy(), expected)
    assert encoder.embeddings.word_embeddings.dtype == "float32"
