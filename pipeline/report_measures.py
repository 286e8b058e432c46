"""The measures file: how ``beam-bpe report``'s job hands its one result to the driver.

The job's last step writes the dict of ``transforms.report.MeasureTokenizers``
as one line of JSON into the staging directory (``write_measures``, atomically:
a retried step writes the same file again); the driver reads it back
(``read_measures``). A step of its own rather than a file sink: the result is
one small value, and a sink's stages would only add round trips.
"""

from __future__ import annotations

import json
import os

from apache_beam.io.filesystems import FileSystems

from pipeline import outputs

MEASURES_FILE = "measures.json"

__all__ = ["MEASURES_FILE", "read_measures", "write_measures"]


def write_measures(measures: dict, staging: str) -> None:
    """Writes the measures into ``staging`` (a step of the job, on a worker)."""
    path = FileSystems.join(staging, MEASURES_FILE)
    if outputs.is_local(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    outputs.write_atomic(path, json.dumps(measures, separators=(",", ":")) + "\n")


def read_measures(staging: str) -> dict:
    """The measures the job wrote into ``staging``."""
    with outputs.open_read(FileSystems.join(staging, MEASURES_FILE)) as f:
        return json.loads(f.read())
