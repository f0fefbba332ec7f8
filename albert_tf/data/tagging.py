"""Moved to `albert_tf.tasks.tagging.data`; its names are importable from here, loaded on first use."""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

# Loaded on first use: the task layer sits above `albert_tf.data`, so importing it from here
# eagerly would make the two subpackages a cycle.
_MOVED = {
    name: "albert_tf.tasks.tagging.data"
    for name in (
        "PEOPLES_DAILY_ENTITY_TAGS", "SENTENCE_END", "TaggedSentence", "TOKEN_UNITS", "check_token_unit",
        "split_with_offsets", "check_tag", "read_conll", "parse_peoples_daily_line", "read_peoples_daily",
        "split_long_sentences", "TagVocab",
    )
}
__all__ = sorted(_MOVED)
__getattr__, __dir__ = _lazy_attributes(__name__, _MOVED, globals())
