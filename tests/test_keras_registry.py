"""Tests of albert_tf.keras_registry: after `import albert_tf` alone, Keras finds every class the
package registers, and the import itself stays light (no Keras, no TensorFlow)."""

import ast
import subprocess
import sys
from pathlib import Path

from albert_tf.keras_registry import PACKAGE, SERIALIZABLE

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "albert_tf"


def _registered_names():
    """{name: module} of every class or function decorated with `register_keras_serializable(package="albert_tf")`."""
    found = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                continue
            for decorator in node.decorator_list:
                if (isinstance(decorator, ast.Call) and getattr(decorator.func, "attr", "") == "register_keras_serializable"
                        and any(k.arg == "package" and getattr(k.value, "value", None) == PACKAGE
                                for k in decorator.keywords)):
                    found[node.name] = module
    return found


def test_the_lazy_registry_lists_every_registered_class_outside_the_task_folders():
    registered = _registered_names()
    in_folders = {name for name, module in registered.items() if module.startswith("albert_tf.tasks.")}
    # The task folders' classes are found by importing the folders, so a new folder needs no entry.
    assert in_folders >= {"AlbertTextClassifier", "AlbertForTagging", "AlbertForSquadV2", "AlbertForMultipleChoice"}
    assert SERIALIZABLE == {name: module for name, module in registered.items() if name not in in_folders}


def test_keras_finds_the_classes_after_import_albert_tf_alone():
    script = (
        "import sys, albert_tf\n"
        "assert 'keras' not in sys.modules and 'tensorflow' not in sys.modules\n"
        "import keras\n"
        "assert 'albert_tf.modeling' not in sys.modules\n"
        "cls = keras.saving.get_registered_object('albert_tf>AlbertTextClassifier')\n"
        "assert cls is not None and cls.__name__ == 'AlbertTextClassifier', cls\n"
        "for name in ('AlbertForTagging', 'AlbertForSquadV2', 'AlbertMultipleChoice', 'MaskedTokenAccuracy'):\n"
        "    assert keras.saving.get_registered_object('albert_tf>' + name).__name__ == name, name\n"
        "assert keras.saving.get_registered_object('albert_tf>NoSuchClass') is None\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=PACKAGE_DIR.parent)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
