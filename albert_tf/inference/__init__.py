"""Inference at scale: scoring large unlabelled sets with a fine-tuned model, as TFX's BulkInferrer does.

* `albert_tf.inference.inputs`: the texts to score, read from text files, tables or TFRecords of
  tf.Examples, every problem a one-line error naming the file (and line or record).
* `albert_tf.inference.prediction_logs`: TF Serving's `PredictionLog` records of the answers
  (`classify_log` / `regress_log`, as TFX's BulkInferrer writes for those signatures).
* `albert_tf.inference.bulk`: `bulk_infer`, the Beam pipeline (DirectRunner or Dask) that scores
  the texts shard by shard, resumes a killed run and publishes the output directory last.

`albert-tf bulk-infer` and the pipeline's optional BulkInferrer step are its callers.
"""
