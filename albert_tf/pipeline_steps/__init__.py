"""The steps of the end-to-end pipeline, as plain functions over directories.

Each module is one TFX-style component's logic; `pipelines/` wraps them as Kubeflow Pipelines
components, and any other orchestrator (or a TFX user module, `tfx_module.run_fn`) can call them
directly. Every step writes its output directory atomically (built beside it, then renamed), so
an interrupted step never leaves an output that looks complete.

Modules:
  settings         `PipelineSettings`: the whole run's configuration (typed, from JSON/YAML).
  staging          the atomic output directory helper the steps share.
  example_gen      raw corpus and labelled files -> train/eval splits as TFRecords of tf.Examples.
  spans            TFX's `{SPAN}` / `{VERSION}` input patterns: the latest span or a given one.
  vocab_gen        a SentencePiece or WordPiece vocabulary from the training splits.
  statistics_gen   TFDV statistics of every split (Beam, the data step's runner).
  schema_gen       the schema: pinned, kept from the first run, or inferred.
  example_validator  the splits against the schema and the previous span (drift); errors stop the run.
  transform        SOP + n-gram pretraining records (Beam) and fine-tuning features.
  trainer          pretraining, fine-tuning and the TF Serving export of the candidate.
  evaluator        task metrics of the candidate and of the pushed model; the blessing rule.
  infra_validator  the candidate served by the local TF-Serving-protocol server, warmup replayed.
  pusher           a blessed candidate copied into the serving base as the next version.
  tfx_module       `run_fn(fn_args)` for a TFX `Trainer(module_file=...)`.
  failures         a failed step as one line (the marker its component prints) and the run's exit statuses.
  cluster_paths    the settings that are this machine's paths, which `pipeline compile` refuses.
  sample_request   the closing request of a local run: a text of the task's eval split, served locally.
"""
