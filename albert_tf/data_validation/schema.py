"""SchemaGen's inference: a TFDV `Schema` from a split's statistics, and reading/writing `schema.pbtxt`.

What is inferred, feature by feature (the user may edit any of it and pin the file):

* categorical (`label`): required (`presence.min_fraction: 1`), one value per example, the values
  seen as its `string_domain`, and an L-infinity `drift_comparator`;
* text (`text`, `text_b`): required and non-empty in at least `presence.min_fraction` of the
  examples (the share seen, less `EMPTY_SLACK`), a `natural_language_domain` whose coverage
  (share of pieces the tokenizer knows) may fall at most `COVERAGE_SLACK` below the share seen;
* the text's derived lengths (`<text>_char_length`, `<text>_piece_length`): length bounds
  (`int_domain`: at least 1, at most `MAX_LENGTH_FACTOR` x the longest seen) and a Jensen-Shannon
  `drift_comparator`;
* the text's derived script (`<text>_script`): the scripts seen as its domain, of which at least
  `min_domain_mass` of the texts must be, and an L-infinity `drift_comparator`;
* anything else (`source`): required.

Validation: `albert_tf.data_validation.validation`.
"""

from __future__ import annotations

import os

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from albert_tf.data_validation import drift
from albert_tf.data_validation.statistics import NL_STATISTICS, PIECE_LENGTH, SCRIPT, custom_stat

SCHEMA_FILE = "schema.pbtxt"
LABEL_L_INFINITY = 0.15
SCRIPT_L_INFINITY = 0.1
LENGTH_JENSEN_SHANNON = 0.1
SCRIPT_MIN_DOMAIN_MASS = 0.99
EMPTY_SLACK = 0.01
COVERAGE_SLACK = 0.05
MAX_LENGTH_FACTOR = 2


class SchemaError(ValueError):
    """A schema file that cannot be read."""


def _name(feature) -> str:
    return feature.path.step[0] if feature.path.step else feature.name


def infer_schema(dataset) -> schema_pb2.Schema:
    """The schema of a `DatasetFeatureStatistics` (the train split's, as TFX's SchemaGen)."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    schema = schema_pb2.Schema()
    for stats in dataset.features:
        name = _name(stats)
        feature = schema.feature.add(name=name)
        derived = stats.HasField("validation_derived_source")
        if derived:
            feature.validation_derived_source.CopyFrom(stats.validation_derived_source)
            feature.lifecycle_stage = schema_pb2.VALIDATION_DERIVED
        if stats.type == statistics_pb2.FeatureNameStatistics.INT:
            feature.type = schema_pb2.INT
            high = int(stats.num_stats.max)
            # A length of 0 is an empty text, counted by presence; pieces are bounded below by 1.
            feature.int_domain.min = 1 if name.endswith(PIECE_LENGTH) else 0
            feature.int_domain.max = max(1, high * MAX_LENGTH_FACTOR)
            feature.drift_comparator.jensen_shannon_divergence.threshold = LENGTH_JENSEN_SHANNON
            continue
        feature.type = schema_pb2.BYTES
        if derived and name.endswith(SCRIPT):
            domain = schema.string_domain.add(name=name, value=sorted(drift.value_shares(stats)))
            feature.domain = domain.name
            feature.distribution_constraints.min_domain_mass = SCRIPT_MIN_DOMAIN_MASS
            feature.drift_comparator.infinity_norm.threshold = SCRIPT_L_INFINITY
            continue
        common = stats.string_stats.common_stats
        feature.presence.min_count = 1
        feature.presence.min_fraction = 1.0
        feature.value_count.min = feature.value_count.max = 1
        nl = custom_stat(stats, NL_STATISTICS)
        if nl is not None:
            nl_stats = statistics_pb2.NaturalLanguageStatistics()
            nl.any.Unpack(nl_stats)
            empty = custom_stat(stats, "empty_count").num
            seen = (common.num_non_missing - empty) / dataset.num_examples if dataset.num_examples else 1.0
            feature.presence.min_fraction = round(max(0.0, seen - EMPTY_SLACK), 4)
            coverage = feature.natural_language_domain.coverage
            coverage.min_coverage = round(max(0.0, nl_stats.feature_coverage - COVERAGE_SLACK), 4)
        elif custom_stat(stats, "invalid_text_count") is None:  # a categorical feature
            domain = schema.string_domain.add(name=name, value=sorted(drift.value_shares(stats)))
            feature.domain = domain.name
            feature.drift_comparator.infinity_norm.threshold = LABEL_L_INFINITY
    return schema


def write_schema(schema: schema_pb2.Schema, path: str) -> str:
    """Writes `schema` as text (`schema.pbtxt`; a directory gets that file), atomically."""
    from albert_tf import file_io

    if os.path.isdir(path) or not path.endswith(".pbtxt"):
        path = os.path.join(path, SCHEMA_FILE)
    file_io.atomic_write_text(path, text_format.MessageToString(schema), makedirs=True)
    return path


def load_schema(path: str) -> schema_pb2.Schema:
    """A schema from a `.pbtxt` file (or a directory holding `schema.pbtxt`); `SchemaError` if unreadable."""
    if os.path.isdir(path):
        path = os.path.join(path, SCHEMA_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            return text_format.Parse(f.read(), schema_pb2.Schema())
    except OSError as e:
        raise SchemaError(f"cannot read the schema {path}: {e.strerror}") from None
    except text_format.ParseError as e:
        raise SchemaError(f"{path} is not a tensorflow_metadata Schema in text format: {e}") from None
