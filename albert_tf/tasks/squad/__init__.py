"""Extractive question answering (SQuAD v1.1 and v2.0): everything of the task in one folder.

* `head` -- the heads on token ids (`SquadV1Model`, `SquadV2Model`, `build_squad_model`);
* `data` -- reading the SQuAD JSON and the original doc-stride feature conversion;
* `postprocessing` -- n-best answers from the head's outputs and the official EM/F1 scores;
* `evaluation` -- running a head: `predict_squad`, `evaluate_squad`, the `eval_fn` and the data
  of a fine-tuning run (`prepare_squad_task`), `predict_squad_file`, `write_squad_outputs`;
* `text_model` -- `AlbertQuestionAnswerer`, the raw-text Keras model;
* `serving` -- the export (`SquadV1Serving`, `SquadV2Serving`) and its in-graph answers (`QaGraph`);
* `family` -- `SquadFamily`, the tasks `squad-v1` / `squad-v2` of `albert-tf finetune`.

The names of `head` and `evaluation` are importable from here (as from the former module
`albert_tf.tasks.squad`); importing the package registers the serving classes.
"""

from albert_tf.tasks.squad import serving  # noqa: F401  (registers the export kinds squad_v1, squad_v2)
from albert_tf.tasks.squad.evaluation import (  # noqa: F401
    SquadTaskData,
    evaluate_squad,
    make_squad_eval_fn,
    predict_squad,
    predict_squad_file,
    prepare_squad_task,
    write_squad_outputs,
)
from albert_tf.tasks.squad.family import SquadFamily  # noqa: F401
from albert_tf.tasks.squad.head import (  # noqa: F401
    SQUAD_VERSIONS,
    AlbertSquadV2Head,
    SquadV1Model,
    SquadV2Model,
    build_squad_model,
)
from albert_tf.tasks.squad.text_model import AlbertQuestionAnswerer  # noqa: F401
