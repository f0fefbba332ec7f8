"""Export to TF Serving: `export_saved_model` (saved_model.py), the serving signatures
(signatures.py), the graph's precision (precision.py: float32, or bf16 weights read without casts),
the compatibility check (compatibility.py), the accuracy check of a lower-precision graph
(accuracy_check.py), warmup requests (warmup.py) and `models.config` / `batching_parameters.txt`
(serving_config.py).

The names below load `saved_model.py` (and TensorFlow) when first read, so that what needs only
`serving_config` (the pipeline's Pusher, a step of its own process) does not pay TensorFlow's import."""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

_LAZY = {name: "albert_tf.export.saved_model" for name in ("ExportError", "ExportResult", "export_saved_model")}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
