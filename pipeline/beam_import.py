"""Importing Apache Beam without pandas, which no step of beam-bpe uses.

    beam_import.import_beam()   # first thing in the CLI and in each worker process

When pandas is installed, ``import apache_beam`` imports it too, only to
register conversions for DataFrame-batched DoFns. Those conversions are never
used here, and pandas is a large part of Beam's import time and memory, paid by
the driver and by every worker. While Beam is imported, ``import pandas``
fails as if pandas were not installed (Beam then skips the conversions, as it
does without pandas); afterwards anything may import pandas as usual.
"""

from __future__ import annotations

import sys

__all__ = ["import_beam"]


def import_beam() -> None:
    """Imports ``apache_beam`` without pandas, unless either is already imported."""
    if "apache_beam" in sys.modules or "pandas" in sys.modules:
        return
    sys.modules["pandas"] = None  # makes "import pandas" raise ImportError
    try:
        import apache_beam  # noqa: F401
    finally:
        del sys.modules["pandas"]
