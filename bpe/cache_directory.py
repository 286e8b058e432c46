"""Where beam-bpe keeps what it measured or proved once, to reuse on later runs.

``$BEAM_BPE_CACHE_DIR``, else ``beam-bpe`` in the user's cache directory
(honouring ``$XDG_CACHE_HOME``). Engine proofs (``bpe.proof_cache``) and the
measured Unicode gaps of the engines (``bpe.accelerators.unicode_gaps``) live
there, each kind in its own folder.
"""

from __future__ import annotations

import os
import pathlib

__all__ = ["CACHE_VARIABLE", "cache_directory"]

CACHE_VARIABLE = "BEAM_BPE_CACHE_DIR"


def cache_directory() -> pathlib.Path:
    """Where results are kept: ``$BEAM_BPE_CACHE_DIR``, else the user's cache directory."""
    if os.environ.get(CACHE_VARIABLE):
        return pathlib.Path(os.environ[CACHE_VARIABLE])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "beam-bpe"
