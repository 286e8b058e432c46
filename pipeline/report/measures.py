"""The measures files: how ``beam-bpe report``'s job hands its result to the driver.

The job's result is a few named pieces (``transforms.report.MeasureTokenizers``):
each step that makes one writes it as one line of JSON into
``STAGING/measures/NAME.json`` (``write_measures``, atomically: a retried step
writes the same file again); the driver reads them all back (``read_measures``)
and puts them together. Steps of their own rather than a file sink: the pieces
are few and small, and a sink's stages would only add round trips.
"""

from __future__ import annotations

import json
import os

from apache_beam.io.filesystems import FileSystems

from pipeline.command_machinery import outputs

MEASURES_DIR = "measures"

__all__ = ["MEASURES_DIR", "read_measures", "write_measures"]


def write_measures(piece: tuple[str, dict], staging: str) -> None:
    """Writes one (name, measures) piece into ``staging`` (a step of the job, on a worker)."""
    name, measures = piece
    path = FileSystems.join(staging, MEASURES_DIR, f"{name}.json")
    if outputs.is_local(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    outputs.write_atomic(path, json.dumps(measures, separators=(",", ":")) + "\n")


def read_measures(staging: str) -> dict[str, dict]:
    """The pieces the job wrote into ``staging``, by name (none for a job without documents)."""
    pattern = FileSystems.join(staging, MEASURES_DIR, "*.json")
    pieces = {}
    for metadata in FileSystems.match([pattern])[0].metadata_list:
        with outputs.open_read(metadata.path) as f:
            pieces[metadata.path.rsplit("/", 1)[-1][: -len(".json")]] = json.loads(f.read())
    return pieces
