"""Importing Apache Beam without pandas and the optional IOs no step of beam-bpe uses.

    beam_import.import_beam()                 # first thing in the CLI
    beam_import.import_beam(for_good=True)    # first thing in a worker process

When pandas is installed, ``import apache_beam`` imports it too, only to
register conversions for DataFrame-batched DoFns, and so does pyarrow the first
time it builds an array from Python objects, only to check whether they are
pandas objects. Neither is ever needed here, and pandas is a large part of
Beam's import time and memory, paid by the driver and by every worker. While
Beam is imported, ``import pandas`` fails as if pandas were not installed
(Beam then skips the conversions, as it does without pandas); afterwards the
driver may import pandas as usual, while a worker process, which runs nothing
but our steps, keeps it out for good (pyarrow then skips its check).

The same holds, while Beam is imported, for two optional connectors Beam
imports only to offer them in ``apache_beam.io`` and skips when their
libraries are missing: MongoDB (``pymongo``) and BigQuery (with Pub/Sub,
which Beam imports after it). Both remain importable afterwards. And for
boto3, which Beam's S3 filesystem imports at once and uses only when a path is
``s3://``: ``pipeline.runtime.s3_sessions`` imports it when Beam makes its first S3 client.
"""

from __future__ import annotations

import sys

from pipeline.runtime.beam_internals import BIGQUERY

__all__ = ["import_beam"]


# Kept out while Beam is imported: connectors no step uses, and boto3 (imported when used).
_KEPT_OUT = ("pymongo", BIGQUERY.module, "boto3")


class _Refuse:
    """An import finder that refuses the ``packages``, as if they were not installed."""

    def __init__(self, *packages: str):
        self.packages = packages

    def find_spec(self, name, path=None, target=None):
        if any(name == package or name.startswith(package + ".") for package in self.packages):
            raise ImportError(f"{name} is kept out of this process (pipeline.runtime.beam_import)", name=name)
        return None


def import_beam(for_good: bool = False) -> None:
    """Imports ``apache_beam`` without pandas, unless either is already imported; then makes
    Beam's S3 clients import boto3 when first made and share one botocore model loader
    (``pipeline.runtime.s3_sessions``).

    Args:
      for_good: keep ``import pandas`` failing afterwards too (a worker process;
        also when Beam is imported already, as in a worker forked from the command).
    """
    if for_good:
        _keep_pandas_out()
    if "apache_beam" not in sys.modules and "pandas" not in sys.modules:
        refuse = _Refuse("pandas", *_KEPT_OUT)
        sys.meta_path.insert(0, refuse)
        try:
            import apache_beam  # noqa: F401
        finally:
            sys.meta_path.remove(refuse)
    from pipeline.runtime import s3_sessions

    s3_sessions.share_model_loader()


def _keep_pandas_out() -> None:
    """From now on, ``import pandas`` fails in this process (unless pandas is imported already)."""
    if "pandas" not in sys.modules and not any(isinstance(finder, _Refuse) and finder.packages == ("pandas",)
                                               for finder in sys.meta_path):
        sys.meta_path.insert(0, _Refuse("pandas"))
