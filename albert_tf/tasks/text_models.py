"""Raw-text Keras task models, the keras-hub way: strings in, answers out.

Each task folder holds its own (`albert_tf.tasks.<task>.text_model`): `AlbertTextClassifier` and
`AlbertTextRegressor` in `classification`, `AlbertTextTagger` in `tagging`, `AlbertMultipleChoice`
in `multiple_choice`, `AlbertQuestionAnswerer` in `squad`; all are importable from here. Their
template is `albert_tf.tasks.text_task.AlbertTextTask`.

Each model holds the three parts of a keras-hub task: the in-graph tokenizer
(`AlbertTokenizerLayer`, `model.preprocessor`), the `AlbertEncoder` (`model.encoder`, keras-hub's
backbone) and the task head, which is the token-level task model of `albert_tf.tasks`
(`model.task_model`: an `AlbertForClassification`, `AlbertForRegression`, ...). These models are the tasks
`albert-tf finetune`, the pipeline's Trainer and the benchmarks train: they feed them token
features with the labels inside (`has_labels_inside`), on which a model trains as its head, and
keep the head in the model directory, which `albert-tf export` serves. The Keras graph runs on
token ids; `fit`, `evaluate` and `predict` take raw text and map the tokenizer over the data in
`tf.data`, as keras-hub's tasks do with their preprocessors:

* a `[batch]` string tensor, a list or array of `str`, or a pair `(texts_a, texts_b)` of them for
  sentence-pair tasks, with `y` (and `sample_weight`) as arrays, batched by `batch_size`
  (default 32) and shuffled for `fit` unless `shuffle=False`;
* a `tf.data.Dataset` of texts (or pairs), unbatched with `y` given as an array (zipped, then
  batched by `batch_size`), or yielding `(texts, labels)` itself, batched or not;
* a dict of token features (`input_ids`, `input_mask`, `segment_ids`) bypasses the tokenizer.

`AlbertMultipleChoice` takes `(contexts, choices)` the same ways. The tagger and the question
answerer convert their labels in Python, as `albert-tf finetune` does (word alignment, SQuAD
windows), so they take lists: texts, or `(questions, contexts)`; their `predict` returns entities
and answers with character spans rather than arrays. `AlbertQuestionAnswerer` is SQuAD v1.1 by
default and SQuAD v2.0 with `version="v2"` (the CLI's `squad-v2` head: unanswerable questions
train with the answer `None` and get the empty answer when their null score exceeds
`null_score_diff_threshold`).

`from_pretrained(path, ...)` builds a model from any checkpoint layout this package reads, with its
tokenizer (see `resolve_pretrained`): an original TF1 release directory (`albert_config.json`,
`model.ckpt-*`, `30k-clean.model`) or TF-Hub module (`variables/`, `assets/30k-clean.model`), a
Hugging Face directory (`config.json`, `model.safetensors`, `spiece.model`), a keras-hub preset
(`assets/tokenizer/vocabulary.spm`), or the output of `albert-tf pretrain` / `albert-tf finetune`
(`spm.model` or `vocab.txt`, described by `tokenizer.json` / `task.json`). Only the encoder is
taken from the checkpoint; the head starts from random weights, as keras-hub's `from_preset` does
when `num_classes` is given.

With `compile=True` the model is compiled with the package's fine-tuning recipe for its size
(`albert_tf.training.recipes.recommended_recipe`): bias-corrected AdamW
(`AdamWeightDecayOptimizer`, weight decay 0.01, global clipnorm 1.0) at the recipe's learning rate,
held constant as keras-hub's tasks compile (the recipe's 10 % warmup and linear decay need the
number of updates, which only the caller knows: pass `optimizer=create_optimizer("adamw", ...,
bias_correction=True)` to `compile` for them), and the task's loss and metrics. The recipe also
chooses the pooling of classifiers and regressors when `pooling=None`.

In a `.keras` file the tokenizer's vocabulary is an asset of the archive (`AlbertTokenizerLayer`
`save_assets` / `load_assets`), not text in `config.json`; `keras.saving.load_model` restores the
model with identical predictions (import `albert_tf.tasks.text_models`, or the class from `albert_tf`,
first: it registers the classes, as importing keras-hub does for its tasks).
`model.export(export_base)` writes the TF Serving SavedModel with
`albert_tf.export.export_saved_model`, the code behind `albert-tf export`, so that the signatures
are the ones the command writes for the same task: classifier, regressor, tagger, multiple choice
and question answerer alike. The export's `assets/weights.json` makes the version a checkpoint
again: `from_pretrained` reads its encoder.
"""

from __future__ import annotations

# The raw-text models of the task folders, importable from here as before; importing this module
# registers every one of them (and their heads' serving classes) with Keras.
from albert_tf.tasks.classification.text_model import AlbertTextClassifier, AlbertTextRegressor  # noqa: F401
from albert_tf.tasks.multiple_choice.text_model import AlbertMultipleChoice  # noqa: F401
from albert_tf.tasks.squad.text_model import AlbertQuestionAnswerer  # noqa: F401
from albert_tf.tasks.tagging.text_model import AlbertTextTagger, MaskedTokenAccuracy, split_units  # noqa: F401

# What every raw-text model shares and what `from_pretrained` reads, importable from here as before.
from albert_tf.tasks.pretrained import (  # noqa: F401
    PRETRAINED_LAYOUTS,
    PretrainedFiles,
    PretrainedNotFoundError,
    TokenizerNotFoundError,
    find_tokenizer_file,
    load_pretrained_backbone,
    resolve_pretrained,
)
from albert_tf.tasks.text_task import (  # noqa: F401
    DEFAULT_BATCH_SIZE,
    AlbertTextTask,
    check_parts,
    export_text_model,
    python_tokenizer,
    resolve_pooling,
    string_tensor,
    token_inputs,
)
