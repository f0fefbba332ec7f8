"""The same weights exported by two processes give the same SavedModel bytes.

The Pusher compares `fingerprint`s to skip pushing a model identical to the serving one; before,
the variables were saved in the (process-dependent) order of the functions' captures and the
protobuf maps of `saved_model.pb` and the warmup records were serialized in hash order, so two
exports of one model never matched.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from albert_tf.pipeline_steps.pusher import fingerprint

EXPORT = """
import sys
import keras
from albert_tf.config import AlbertConfig
from albert_tf.export.saved_model import export_saved_model
from albert_tf.modeling import AlbertEncoder
from albert_tf.tasks.classification import AlbertForClassification
from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

keras.utils.set_random_seed(7)
config = AlbertConfig(vocab_size=64, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=32)
model = AlbertForClassification(AlbertEncoder.from_albert_config(config), num_labels=2)
tokenizer = AlbertTokenizerLayer.from_sentencepiece(sys.argv[1], sequence_length=16)
export_saved_model(model, tokenizer, sys.argv[2], "m", 1, labels=["neg", "pos"], check=False)
# The bf16 graph (bf16 variables, the q|k|v concatenation made once per graph) as well.
export_saved_model(model, tokenizer, sys.argv[2], "b", 1, labels=["neg", "pos"], check=False, precision="mixed_bfloat16")
"""

COMPARED = ("saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001",
            "assets.extra/tf_serving_warmup_requests")


def test_two_processes_export_identical_bytes(tmp_path, tiny_spm_model):
    exports = []
    for name in ("first", "second"):
        base = tmp_path / name
        proc = subprocess.run([sys.executable, "-c", EXPORT, str(tiny_spm_model), str(base)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        exports.append(base)
    for model in ("m", "b"):
        first, second = (base / model / "1" for base in exports)
        for name in COMPARED:
            assert (first / name).read_bytes() == (second / name).read_bytes(), (model, name)
        assert fingerprint(str(first)) == fingerprint(str(second))


@pytest.mark.slow
def test_variables_with_the_same_name_are_saved_in_the_order_of_their_paths(tiny_encoder, tiny_spm_model):
    # A SQuAD v2 head has several variables named `bias`: ordered by name alone, they kept the
    # captures' order, which differs between processes.
    from albert_tf.export.signatures import ServingModule
    from albert_tf.tasks.squad.head import AlbertForSquadV2
    from albert_tf.tokenization.in_graph import AlbertTokenizerLayer

    model = AlbertForSquadV2(tiny_encoder)
    module = ServingModule(model, AlbertTokenizerLayer.from_sentencepiece(tiny_spm_model, sequence_length=32),
                           qa_settings={"max_query_length": 8, "doc_stride": 8})
    paths = {id(weight.value): weight.path for weight in model.weights}
    keys = [(v.name, paths[id(v)]) for v in module.exported_variables]
    names = [name for name, _ in keys]
    assert len(set(names)) < len(names), "no repeated names: the test would check nothing"
    assert keys == sorted(keys)
