"""Tests for albert_tf.config: validation, JSON round trip, presets and the hand-derived parameter counts."""

import json

import pytest

from albert_tf.config import PRESETS, AlbertConfig, ConfigError, count_parameters, load_config

ORIGINAL_BASE_JSON = {
    # The albert_config.json shipped with the original albert_base v2 release.
    "attention_probs_dropout_prob": 0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0,
    "embedding_size": 128,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "net_structure_type": 0,
    "layers_to_keep": [],
    "gap_size": 0,
    "num_memory_blocks": 0,
    "inner_group_num": 1,
    "down_scale_factor": 1,
    "type_vocab_size": 2,
    "vocab_size": 30000,
}


def test_original_json_loads_and_keeps_unknown_keys(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(ORIGINAL_BASE_JSON))
    config = AlbertConfig.from_json_file(path)
    assert config.hidden_size == 768 and config.embedding_size == 128
    assert config.extra == {
        "net_structure_type": 0,
        "layers_to_keep": [],
        "gap_size": 0,
        "num_memory_blocks": 0,
        "down_scale_factor": 1,
    }
    out = tmp_path / "out.json"
    config.to_json_file(out)
    written = json.loads(out.read_text())
    for key, value in ORIGINAL_BASE_JSON.items():
        assert written[key] == value, key
    assert written["sharing"] == "all"
    assert AlbertConfig.from_json_file(out) == config


def test_preset_matches_original_base_v2():
    config = AlbertConfig.preset("base-v2")
    for key in ("hidden_size", "embedding_size", "num_hidden_layers", "intermediate_size", "num_attention_heads"):
        assert getattr(config, key) == ORIGINAL_BASE_JSON[key]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_dropout(name):
    config = AlbertConfig.preset(name)
    expected = 0.1 if name.endswith("v1") and not name.startswith("xxlarge") else 0.0
    assert config.hidden_dropout_prob == expected
    assert config.attention_probs_dropout_prob == expected


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(hidden_size=30, num_attention_heads=4), "not a multiple of num_attention_heads"),
        (dict(num_hidden_layers=12, num_hidden_groups=5), "must divide num_hidden_layers"),
        (dict(num_hidden_layers=2, num_hidden_groups=4), "must divide num_hidden_layers"),
        (dict(vocab_size=-3), "vocab_size must be positive"),
        (dict(embedding_size=0), "embedding_size must be positive"),
        (dict(hidden_act="gelu_fast"), "unknown hidden_act 'gelu_fast'"),
        (dict(sharing="some"), "unknown sharing 'some'"),
        (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob must be in [0, 1)"),
        (dict(intermediate_size="big"), "intermediate_size must be an integer"),
        (dict(initializer_range=-1.0), "initializer_range must be a positive number"),
    ],
)
def test_impossible_values_are_rejected(changes, message):
    with pytest.raises(ConfigError) as info:
        AlbertConfig(**changes)
    assert message in str(info.value)


def test_missing_keys_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="missing required key.*hidden_size"):
        AlbertConfig.from_dict({"vocab_size": 10, "num_hidden_layers": 1, "num_attention_heads": 1})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json is not valid JSON"):
        AlbertConfig.from_json_file(bad)
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="not valid JSON"):
        AlbertConfig.from_json_file(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        AlbertConfig.from_json_file(bad)
    with pytest.raises(ConfigError, match="not found"):
        AlbertConfig.from_json_file(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match="neither a preset"):
        load_config("base-v9")


def test_writing_never_leaves_a_partial_file(tmp_path):
    path = tmp_path / "config.json"
    AlbertConfig.preset("base-v2").to_json_file(path)
    before = path.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]
    assert json.loads(before)["hidden_size"] == 768


def test_embedding_size_defaults_to_hidden_size_when_absent():
    config = AlbertConfig.from_dict({"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2})
    assert config.embedding_size == 8


# Hand-derived counts (encoder + pooler). The paper's Table 1 rounds these to 12M / 18M / 60M / 235M;
# xlarge comes to 58.7M (paper: 60M) and xxlarge to 222.6M: nobody's count reproduces the paper's 235M.
@pytest.mark.parametrize(
    "preset, expected",
    [("base-v2", 11_683_584), ("large-v2", 17_683_968), ("xlarge-v2", 58_724_864), ("xxlarge-v2", 222_595_584)],
)
def test_parameter_counts_reproduce_the_paper(preset, expected):
    assert count_parameters(AlbertConfig.preset(preset)) == expected


# Table 4 of the paper (ALBERT-base, sharing ablation): exact hand counts and the paper's rounded figure.
# The paper's figures are within 1M of the exact counts but not all by the same rounding
# (E=128 not-shared is 89.65M, printed 89M; E=768 not-shared is 109.08M, printed 108M).
@pytest.mark.parametrize(
    "embedding_size, sharing, exact, paper_millions",
    [
        (768, "all", 31_114_752, 31),
        (768, "attention", 83_078_400, 83),
        (768, "ffn", 57_117_696, 57),
        (768, "none", 109_081_344, 108),
        (128, "all", 11_683_584, 12),
        (128, "attention", 63_647_232, 64),
        (128, "ffn", 37_686_528, 38),
        (128, "none", 89_650_176, 89),
    ],
)
def test_sharing_ablation_counts(embedding_size, sharing, exact, paper_millions):
    config = AlbertConfig.preset("base-v2", embedding_size=embedding_size, sharing=sharing)
    assert count_parameters(config) == exact
    assert abs(exact / 1e6 - paper_millions) < 1.1


def test_cpu_presets_are_the_sizes_the_recipes_were_measured_on():
    from albert_tf.training.recipes import recommended_recipe

    def shape(config):
        return (config.embedding_size, config.hidden_size, config.num_hidden_layers,
                config.num_attention_heads, config.intermediate_size)

    tiny, small = AlbertConfig.preset("tiny"), AlbertConfig.preset("small")
    assert shape(tiny) == (64, 128, 4, 2, 512) and shape(small) == (128, 256, 4, 4, 1024)
    assert tiny.hidden_dropout_prob == small.hidden_dropout_prob == 0.0
    # Both get the measured small-model fine-tuning recipe.
    for config in (tiny, small):
        recipe = recommended_recipe(config)
        assert (recipe.learning_rate, recipe.pooling, recipe.bias_correction) == (1e-3, "mean", True)


def test_the_recipe_benchmark_builds_the_preset_sizes():
    import importlib.util
    import sys
    from pathlib import Path

    from albert_tf.config import SMALL_SIZES

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "finetune_recipes.py"
    if not path.is_file():
        pytest.skip(f"{path} is not here (the benchmarks are not part of the package)")
    spec = importlib.util.spec_from_file_location("benchmark_finetune_recipes_sizes", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    assert module.SIZES is SMALL_SIZES  # one definition


def test_pretraining_presets():
    from albert_tf.config import PRETRAINING_PRESETS, pretraining_preset

    paper = pretraining_preset("base-v2")
    assert paper is PRETRAINING_PRESETS["paper"] and pretraining_preset("large-v1") is paper
    assert (paper.max_seq_length, paper.batch_size) == (512, 4096)
    assert (paper.num_train_steps, paper.num_warmup_steps) == (125000, 3125)
    assert paper.learning_rate == 0.00176 and not paper.vocab_from_data
    assert pretraining_preset("path/to/albert_config.json") is paper and pretraining_preset(None) is paper
    for name, learning_rate in (("tiny", 0.003), ("small", 0.005)):
        preset = pretraining_preset(name)
        assert (preset.max_seq_length, preset.batch_size, preset.learning_rate) == (128, 32, learning_rate)
        assert preset.num_train_steps <= 5000 and preset.vocab_from_data
    # Shorter runs keep the warmup's share, longer ones its count.
    assert [paper.warmup_for(n) for n in (2, 10000, 10**6)] == [0, 250, 3125]
    assert pretraining_preset("tiny").warmup_for(1000) == 100
