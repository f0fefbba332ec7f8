"""Export to TF Serving: `export_saved_model` (saved_model.py), the serving signatures
(signatures.py), the compatibility check (compatibility.py), warmup requests (warmup.py) and
`models.config` / `batching_parameters.txt` (serving_config.py)."""

from albert_tf.export.saved_model import ExportError, ExportResult, export_saved_model

__all__ = ["ExportError", "ExportResult", "export_saved_model"]
