"""SchemaGen: the schema the data are validated against, `schema.pbtxt` (a tensorflow_metadata `Schema`).

Which schema, in order:

1. a pinned one (`schema:` in the pipeline settings), used as given;
2. the one this pipeline inferred on its first run, kept in the statistics store;
3. otherwise it is inferred from the train split's statistics (`data_validation.schema`) and
   kept in the store, so later spans are checked against the first one (a schema inferred
   afresh from each span would accept whatever the span holds).

Edit the kept `schema.pbtxt` (or a copy) and pin it to change what is accepted.
"""

from __future__ import annotations

import os
from typing import Any, Dict

from albert_tf.pipeline_steps.staging import staged_directory, write_summary


def run_schema_gen(statistics_dir: str, output_dir: str, *, schema: str = "", store: str = "") -> Dict[str, Any]:
    """Writes `output_dir/schema.pbtxt`; returns the summary (`source`: pinned, stored or inferred)."""
    from albert_tf.data_validation.schema import SCHEMA_FILE, infer_schema, load_schema, write_schema
    from albert_tf.pipeline_steps.statistics_gen import load_split_statistics

    stored = os.path.join(store, SCHEMA_FILE) if store else ""
    if schema:
        result, source, origin = load_schema(schema), "pinned", schema
    elif stored and os.path.isfile(stored):
        result, source, origin = load_schema(stored), "stored", stored
    else:
        result, source, origin = infer_schema(load_split_statistics(statistics_dir, "train")), "inferred", statistics_dir
        if stored:
            write_schema(result, stored)
    with staged_directory(output_dir) as staging:
        write_schema(result, os.path.join(staging, SCHEMA_FILE))
        summary = {"source": source, "from": origin, "features": [f.name for f in result.feature]}
        write_summary(staging, summary)
    return summary
