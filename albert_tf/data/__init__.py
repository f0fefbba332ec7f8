"""Data for ALBERT; submodules are imported on demand (Beam workers never load TensorFlow for them).

Pretraining data (SOP + n-gram masked LM, exact to google-research/albert create_pretraining_data.py):

* `albert_tf.data.documents` -- reading one-sentence-per-line / blank-line-separated documents,
  and a rule-based sentence splitter for paragraph-per-line text.
* `albert_tf.data.pretraining_instances` -- instance creation (SOP pairing, truncation) and n-gram
  masking in pure Python, with the documented per-document seed derivation.
* `albert_tf.data.tfrecords` -- the original ALBERT feature spec, serialization and the tf.data reader
  `make_pretraining_dataset`.
* `albert_tf.data.beam_pipeline` -- the Apache Beam pipeline (`make_pretraining_data`).
* `albert_tf.data.on_the_fly` -- masking inside tf.data with fresh masks every epoch
  (`make_on_the_fly_dataset`).

Fine-tuning data is read in each task's folder: `albert_tf.tasks.classification.data` (GLUE layouts,
generic TSV/CSV/JSONL), `albert_tf.tasks.tagging.data` (CoNLL BIO, People's Daily),
`albert_tf.tasks.squad.data` (SQuAD v1.1/v2.0) and `albert_tf.tasks.multiple_choice.data` (RACE).
"""
