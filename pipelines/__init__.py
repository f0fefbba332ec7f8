"""The TFX-style ALBERT pipeline for Kubeflow Pipelines v2: components and the pipeline definition.

`components` wraps the steps of `albert_tf.pipeline_steps` as KFP components; `albert_pipeline` wires
them into one pipeline that runs locally (`kfp.local`) or compiles for Kubeflow / Vertex AI.
"""
