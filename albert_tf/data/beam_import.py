"""Apache Beam, imported once without the "apitools not found" record that its import logs.

The pipeline's modules (`albert_tf.data.beam_pipeline`, `albert_tf.data.dask_runner`,
`albert_tf.data.pipeline_output`) take Beam from here, so whichever of them is imported first,
Beam is imported with that one record dropped.
"""

from __future__ import annotations

import logging

__all__ = ["beam", "filebasedsink", "CompressionTypes", "FileSystems", "Metrics", "PipelineOptions"]


class _DropMessage(logging.Filter):
    """Drops log records whose message starts with a given text."""

    def __init__(self, prefix: str):
        super().__init__()
        self._prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self._prefix)


# Importing Beam without Google's apitools logs "apitools not found, and bigquery client libraries
# are not available ..." on every run; GCS and BigQuery are not what a local run needs. Only that
# record is dropped, only during the import; every other message passes.
_APITOOLS_FILTER = _DropMessage("apitools not found")
logging.getLogger().addFilter(_APITOOLS_FILTER)
try:
    import apache_beam as beam
    from apache_beam.io import filebasedsink
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.metrics import Metrics
    from apache_beam.options.pipeline_options import PipelineOptions
finally:
    logging.getLogger().removeFilter(_APITOOLS_FILTER)
