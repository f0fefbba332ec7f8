"""Pretraining data for ALBERT: SOP + n-gram masked-LM instances, TFRecords, Beam and tf.data paths.

Modules (imported on demand, so that Beam workers do not load tf.data code and vice versa):

* `albert_tf.data.documents` -- reading one-sentence-per-line / blank-line-separated documents,
  and a rule-based sentence splitter for paragraph-per-line text.
* `albert_tf.data.pretraining_instances` -- instance creation (SOP pairing, truncation) and n-gram
  masking in pure Python, with the documented per-document seed derivation.
* `albert_tf.data.tfrecords` -- the original ALBERT feature spec, serialization and the tf.data reader
  `make_pretraining_dataset`.
* `albert_tf.data.beam_pipeline` -- the Apache Beam pipeline (`make_pretraining_data`).
* `albert_tf.data.on_the_fly` -- masking inside tf.data with fresh masks every epoch
  (`make_on_the_fly_dataset`).
"""
