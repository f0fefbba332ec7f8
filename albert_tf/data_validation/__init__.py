"""Data validation in TFDV's formats: statistics, schema, anomalies and drift over the pipeline's splits.

Real TFDV cannot be installed beside TensorFlow 2.20 here, so this package computes the same
artifacts with Beam and `tensorflow_metadata`'s protos (`DatasetFeatureStatisticsList`,
`Schema`, `Anomalies`): TFDV and Facets read what it writes, and it reads theirs.
"""
