"""Which of a compiled pipeline's parameters are paths on this machine, which the steps of a
Kubeflow or Vertex AI cluster cannot read.

`albert-tf pipeline compile` refuses to write them into the YAML (unless `--allow-local-paths`):
the sample job's corpus and a `serving_base` derived from the working directory are this
machine's. A URI (`gs://`, `s3://`, `hdfs://`, ...) and Vertex's Cloud Storage mount (`/gcs/`) are
read by the cluster's containers.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Tuple

# The pipeline parameters that name files or folders the steps read or write.
PATH_PARAMETERS = ("corpus", "task_data", "serving_base", "pinned_schema", "statistics_store")
# Folders a cluster's containers mount from its storage (Vertex AI mounts gs://bucket at /gcs/bucket).
CLUSTER_MOUNTS = ("/gcs/",)
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_cluster_path(path: str) -> bool:
    """Whether a cluster's step can read `path`: a URI, or a path under a cluster mount."""
    return bool(_URI.match(path)) or path.startswith(CLUSTER_MOUNTS)


def local_paths(arguments: Dict[str, Any]) -> List[Tuple[str, str]]:
    """`(parameter, path)` for every path in the pipeline `arguments` (`pipeline_arguments`) that
    is this machine's; a comma-separated `corpus` is checked pattern by pattern. The distilling
    pipeline's student, when it is a config file, counts too (as `distill.student`)."""
    found = []
    for name in PATH_PARAMETERS:
        value = arguments.get(name) or ""
        for path in [p.strip() for p in str(value).split(",") if p.strip()] if name == "corpus" else [value]:
            if path and not is_cluster_path(path):
                found.append((name, path))
    if arguments.get("distill_json"):
        student = str(json.loads(arguments["distill_json"]).get("student", ""))
        if (student.endswith(".json") or "/" in student) and not is_cluster_path(student):
            found.append(("distill.student", student))
    return found


def describe_local_paths(found: List[Tuple[str, str]]) -> str:
    """One line naming them, and what to do."""
    listed = ", ".join(f"{name} {path}" for name, path in found)
    return (f"the settings hold paths on this machine, which a cluster's steps cannot read: {listed}; "
            "give gs:// (or /gcs/, s3://) paths in --config, or pass --allow-local-paths")
