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


def test_the_lazy_registry_lists_every_registered_class():
    assert SERIALIZABLE == _registered_names()


def test_keras_finds_the_classes_after_import_albert_tf_alone():
    script = (
        "import sys, albert_tf\n"
        "assert 'keras' not in sys.modules and 'tensorflow' not in sys.modules\n"
        "import keras\n"
        "assert 'albert_tf.modeling' not in sys.modules\n"
        "cls = keras.saving.get_registered_object('albert_tf>AlbertTextClassifier')\n"
        "assert cls is not None and cls.__name__ == 'AlbertTextClassifier', cls\n"
        "assert keras.saving.get_registered_object('albert_tf>NoSuchClass') is None\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=PACKAGE_DIR.parent)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
