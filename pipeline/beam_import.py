"""Importing Apache Beam without pandas, which no step of beam-bpe uses.

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
"""

from __future__ import annotations

import sys

__all__ = ["import_beam"]


class _NoPandas:
    """An import finder that refuses pandas, as if it were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is kept out of this process (pipeline.beam_import)", name=name)
        return None


def import_beam(for_good: bool = False) -> None:
    """Imports ``apache_beam`` without pandas, unless either is already imported.

    Args:
      for_good: keep ``import pandas`` failing afterwards too (a worker process;
        also when Beam is imported already, as in a worker forked from the command).
    """
    if for_good:
        _keep_pandas_out()
    if "apache_beam" in sys.modules or "pandas" in sys.modules:
        return
    refuse = _NoPandas()
    sys.meta_path.insert(0, refuse)
    try:
        import apache_beam  # noqa: F401
    finally:
        sys.meta_path.remove(refuse)


def _keep_pandas_out() -> None:
    """From now on, ``import pandas`` fails in this process (unless pandas is imported already)."""
    if "pandas" not in sys.modules and not any(isinstance(finder, _NoPandas) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())
