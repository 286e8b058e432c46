"""Training: pieces counted in a corpus, then merges learned from the counts.

- ``trainer``: ``train`` and ``train_merges``, which load a word-count table,
  replay a checkpoint and drive the merge loop.
- ``merge_loop``: the merge loop in pure Python, the readable twin of the C
  loop in ``_merges.c`` (built as ``bpe.training._merges``).
- ``parity_loop``: the parity-aware merge loop in pure Python, the twin of the
  C loop's parity mode.
- ``compiled``: the C loop and replay (``bpe.training._merges``), or None when
  not built or switched off (``BEAM_BPE_PURE_PYTHON=1``).
- ``sources``: word counts by source and their exact weights.
- ``extension``: new merges on an existing tokenizer (``train --extend``), with
  ``base_encoding``: the base's encoding of every piece of a table in one call.
- ``piece_counter``: the pieces of documents counted, by the fastest exact engine.
- ``gigatoken_counts``: gigatoken's piece counter, one of those engines.
"""

from bpe.training.trainer import MAX_TOKEN_ID, check_merges, train, train_merges

__all__ = ["MAX_TOKEN_ID", "check_merges", "train", "train_merges"]
