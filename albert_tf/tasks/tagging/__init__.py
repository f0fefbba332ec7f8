"""Token classification (NER, BIO tags), all in this folder:

* `head` -- the head on token ids, `AlbertForTagging`, and `predict_text_entities` (raw
  texts tagged with it);
* `data` -- CoNLL files and the People's Daily corpus read into `TaggedSentence`s, the one
  splitter of raw text into units (`split_with_offsets`, `TOKEN_UNITS`) and the sub-word
  encoding (`encode_sentences`);
* `text_model` -- the raw-text model `AlbertTextTagger`;
* `serving` -- the serving module `TaggerServing`, registered with the export by `head`
  (whatever builds a token classifier has imported it), and the in-graph entity pipeline
  `TaggingGraph`;
* `family` -- `TaggingFamily`, what `albert-tf finetune` / `evaluate` / `predict` run;
* `metrics` -- entities from tags (`get_entities`), their scores (`entity_scores`), the one
  entity shape (`entity_record`) and the dev `make_eval_fn`.

The names of the former module `albert_tf.tasks.tagging` are importable from here, with the
folder's main classes. They are imported on first use, so that the family registry (and with it
`albert-tf --help`) does not load TensorFlow.
"""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

# The task kind of this folder (`TaskSpec.kind`, `export.json`'s "kind").
TAGGING = "tagging"

_LAZY = {
    **{name: "albert_tf.tasks.tagging.data" for name in (
        "FEATURE_NAMES", "IGNORE_LABEL", "TOKEN_UNITS", "EncodedSentences", "TaggedSentence", "TagVocab",
        "encode_sentences", "split_with_offsets")},
    **{name: "albert_tf.tasks.tagging.metrics" for name in (
        "decode_predictions", "entity_record", "entity_scores", "entity_spans", "get_entities", "make_eval_fn",
        "predict_logits", "score_tagging")},
    "AlbertForTagging": "albert_tf.tasks.tagging.head",
    "predict_text_entities": "albert_tf.tasks.tagging.head",
    "AlbertTextTagger": "albert_tf.tasks.tagging.text_model",
    "MaskedTokenAccuracy": "albert_tf.tasks.tagging.text_model",
    "split_units": "albert_tf.tasks.tagging.text_model",
    "TaggerServing": "albert_tf.tasks.tagging.serving",
    "TaggingGraph": "albert_tf.tasks.tagging.serving",
    "TaggingFamily": "albert_tf.tasks.tagging.family",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
