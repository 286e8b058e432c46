"""The compiled merge loop and replay, ``bpe.training._merges`` (built from ``_merges.c``), or None.

None when the extension is not built, or when the environment variable
``BEAM_BPE_PURE_PYTHON=1`` switches it off: the pure-Python twins
(``bpe.training.merge_loop``, ``bpe.training.parity_loop``,
``bpe.training.extension.replay``) then run, with the same results.
"""

from __future__ import annotations

import os

__all__ = ["compiled_merges"]


def _load():
    if os.environ.get("BEAM_BPE_PURE_PYTHON") == "1":
        return None
    try:
        from bpe.training import _merges
    except ImportError:  # not built
        return None
    return _merges


compiled_merges = _load()
