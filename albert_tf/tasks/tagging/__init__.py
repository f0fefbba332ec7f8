"""Token classification (NER, BIO tags), all in this folder:

* `head` -- the head on token ids, `AlbertTokenClassifier`, and `predict_text_entities` (raw
  texts tagged with it);
* `data` -- CoNLL files and the People's Daily corpus read into `TaggedSentence`s, the one
  splitter of raw text into units (`split_with_offsets`, `TOKEN_UNITS`) and the sub-word
  encoding (`encode_sentences`);
* `text_model` -- the raw-text model `AlbertTextTagger`;
* `serving` -- the serving module `TaggerServing` (registered with the export when this package
  is imported) and the in-graph entity pipeline `TaggingGraph`;
* `family` -- `TaggingFamily`, what `albert-tf finetune` / `evaluate` / `predict` run;
* `metrics` -- entities from tags (`get_entities`), their scores (`entity_scores`), the one
  entity shape (`entity_record`) and the dev `make_eval_fn`.

The names of the former module `albert_tf.tasks.tagging` are importable from here.
"""

from albert_tf.tasks.tagging import serving  # noqa: F401 (registers the serving class)
from albert_tf.tasks.tagging.data import (  # noqa: F401
    FEATURE_NAMES,
    IGNORE_LABEL,
    TOKEN_UNITS,
    EncodedSentences,
    TaggedSentence,
    TagVocab,
    encode_sentences,
    split_with_offsets,
)
from albert_tf.tasks.tagging.family import TaggingFamily  # noqa: F401
from albert_tf.tasks.tagging.head import AlbertTokenClassifier, predict_text_entities  # noqa: F401
from albert_tf.tasks.tagging.metrics import (  # noqa: F401
    decode_predictions,
    entity_record,
    entity_scores,
    entity_spans,
    get_entities,
    make_eval_fn,
    predict_logits,
    score_tagging,
)
from albert_tf.tasks.tagging.serving import TaggerServing, TaggingGraph  # noqa: F401
from albert_tf.tasks.tagging.text_model import AlbertTextTagger, MaskedTokenAccuracy, split_units  # noqa: F401
