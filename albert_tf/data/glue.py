"""Moved to `albert_tf.tasks.classification.data`; its names are importable from here, loaded on first use."""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

# Loaded on first use: the task layer sits above `albert_tf.data`, so importing it from here
# eagerly would make the two subpackages a cycle.
_MOVED = {
    name: "albert_tf.tasks.classification.data"
    for name in (
        "ColumnRef", "TABLE_FORMATS", "TSV_QUOTING", "SPLIT_ALIASES", "ON_ERROR", "DataFormatError",
        "MissingColumnError", "TextExample", "GlueLayout", "GLUE_LAYOUTS", "glue_layout", "read_text", "detect_format",
        "detect_file_format", "read_table", "glue_split_file", "read_glue_split", "find_split_file", "LabelVocab",
        "regression_target",
    )
}
__all__ = sorted(_MOVED)
__getattr__, __dir__ = _lazy_attributes(__name__, _MOVED, globals())
