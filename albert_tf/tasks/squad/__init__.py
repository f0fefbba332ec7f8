"""Extractive question answering (SQuAD v1.1 and v2.0), all in this folder:

* `head` -- the heads on token ids, `AlbertForSquadV1` and `AlbertForSquadV2` (`build_squad_model`);
* `data` -- the SQuAD JSON read into `SquadExample`s and the original doc-stride conversion into
  `SquadFeature`s (`convert_examples_to_features`, `make_squad_dataset`);
* `spans` -- the answer selection in TensorFlow (n-best spans, max answer length, the v2 null
  score and threshold, spans mapped back to the context's characters), the one implementation
  that `postprocessing` and `serving` both call;
* `postprocessing` -- n-best answers from the heads' outputs (through `spans`) and the official
  EM/F1 scores;
* `evaluation` -- a head run on SQuAD data: `predict_squad`, `evaluate_squad`, the dev
  `make_squad_eval_fn`, the data of a fine-tuning run (`prepare_squad_task`),
  `predict_squad_file` and `write_squad_outputs`;
* `text_model` -- the raw-text model `AlbertQuestionAnswerer`;
* `serving` -- the serving modules `SquadV1Serving` and `SquadV2Serving`, registered with the
  export by `head` (whatever builds a SQuAD model has imported it), and the in-graph QA pipeline
  `QaGraph`;
* `family` -- `SquadFamily`, what `albert-tf finetune` / `evaluate` / `predict` run for
  `squad-v1` and `squad-v2`.

The names of the former module `albert_tf.tasks.squad` are importable from here, with the
folder's main classes. They are imported on first use, so that the family registry (and with it
`albert-tf --help`) does not load TensorFlow.
"""

from albert_tf._lazy import lazy_attributes as _lazy_attributes

# The task kind of this folder (`TaskSpec.kind`); a model exports as its version's kind
# (`export.json`'s "kind"), the two versions serving different signatures.
SQUAD = "squad"
SQUAD_V1 = "squad_v1"
SQUAD_V2 = "squad_v2"

_LAZY = {
    **{name: "albert_tf.tasks.squad.head" for name in (
        "SQUAD_VERSIONS", "AlbertSquadV2Head", "AlbertForSquadV1", "AlbertForSquadV2", "build_squad_model")},
    **{name: "albert_tf.tasks.squad.evaluation" for name in (
        "SquadTaskData", "evaluate_squad", "make_squad_eval_fn", "predict_squad", "predict_squad_file",
        "prepare_squad_task", "write_squad_outputs")},
    "AlbertQuestionAnswerer": "albert_tf.tasks.squad.text_model",
    "QaGraph": "albert_tf.tasks.squad.serving",
    "SquadV1Serving": "albert_tf.tasks.squad.serving",
    "SquadV2Serving": "albert_tf.tasks.squad.serving",
    "SquadFamily": "albert_tf.tasks.squad.family",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())
