"""Files written before the id-level heads were renamed (`albert_tf.legacy_names`) load whole and
answer as they did: `tests/fixtures/*_before_rename.keras` were saved by albert_tf 65e6a64
(`tests/fixtures/make_before_rename.py`), with their answers in `before_rename.json`. New files are
written with today's names only."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

from albert_tf.legacy_names import RENAMED, current_layer_path, legacy_weight_paths, snake_case

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]


def test_old_paths_and_names_map_to_the_new_ones():
    assert snake_case("AlbertForSquadV2") == "albert_for_squad_v2" and snake_case("SquadV2Model") == "squad_v2_model"
    assert legacy_weight_paths("layers/albert_for_classification/head/vars/0") == ["layers/albert_classifier/head/vars/0"]
    assert legacy_weight_paths("layers/albert_for_tagging_2/head/vars/1") == ["layers/albert_token_classifier_2/head/vars/1"]
    assert legacy_weight_paths("layers/albert_attention/query/vars/0") == []
    assert current_layer_path("albert_classifier/classifier/kernel") == "albert_for_classification/classifier/kernel"
    # One pattern, and no keras-hub name reused for something else.
    assert all(new.startswith("AlbertFor") for new in RENAMED.values())
    assert "AlbertClassifier" not in RENAMED.values()


def test_files_saved_before_the_rename_load_whole_in_a_fresh_process():
    script = (
        "import json, sys, numpy as np, keras, albert_tf\n"
        f"fixtures = {str(FIXTURES)!r}\n"
        "expected = json.load(open(fixtures + '/before_rename.json'))\n"
        "model = keras.saving.load_model(fixtures + '/text_classifier_before_rename.keras')\n"
        "assert type(model).__name__ == 'AlbertTextClassifier', type(model)\n"
        "assert type(model.task_model).__name__ == 'AlbertForClassification', type(model.task_model)\n"
        "np.testing.assert_allclose(model.predict(expected['texts'], verbose=0), expected['classifier_logits'], atol=1e-6)\n"
        "again = albert_tf.AlbertTextClassifier.from_pretrained(fixtures + '/text_classifier_before_rename.keras')\n"
        "assert again.labels == ['a', 'b', 'c']\n"
        "np.testing.assert_array_equal(again.predict(expected['texts'], verbose=0), model.predict(expected['texts'], verbose=0))\n"
        "qa = keras.saving.load_model(fixtures + '/squad_v2_model_before_rename.keras')\n"
        "assert type(qa).__name__ == 'AlbertForSquadV2', type(qa)\n"
        "features = {k: np.asarray(v, 'int32') for k, v in expected['squad_v2_features'].items()}\n"
        "outputs = qa(features)\n"
        "for key, value in expected['squad_v2_outputs'].items():\n"
        "    np.testing.assert_allclose(np.asarray(outputs[key]), value, atol=1e-6, err_msg=key)\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_new_files_carry_only_the_new_names(tmp_path, tiny_encoder):
    import io

    import h5py

    from albert_tf.tasks.classification import AlbertForClassification

    model = AlbertForClassification(tiny_encoder, num_labels=2)
    ones = np.ones((1, 8), "int32")
    model({"input_ids": ones, "input_mask": ones, "segment_ids": 0 * ones})
    path = tmp_path / "head.keras"
    model.save(str(path))
    with zipfile.ZipFile(path) as archive:
        config = archive.read("config.json").decode()
        names = []
        with h5py.File(io.BytesIO(archive.read("model.weights.h5"))) as weights:
            weights.visit(names.append)
    assert "albert_tf>AlbertForClassification" in config
    assert not any(old in config for old in RENAMED)
    assert not any(snake_case(old) in name for old in RENAMED for name in names)
    assert json.loads(config)["registered_name"] == "albert_tf>AlbertForClassification"
