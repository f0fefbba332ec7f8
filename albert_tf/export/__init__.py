"""Export to TF Serving: `export_saved_model` (saved_model.py), the serving signatures
(signatures.py), the compatibility check (compatibility.py), warmup requests (warmup.py) and
`models.config` / `batching_parameters.txt` (serving_config.py).

The names below load `saved_model.py` (and TensorFlow) when first read, so that what needs only
`serving_config` (the pipeline's Pusher, a step of its own process) does not pay TensorFlow's import."""

__all__ = ["ExportError", "ExportResult", "export_saved_model"]


def __getattr__(name):
    if name in __all__:
        from albert_tf.export import saved_model

        return getattr(saved_model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
