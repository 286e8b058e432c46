"""``beam-bpe encode``: a corpus -> token-ID Parquet shards, or packed sequences with ``--pack N``.

    command.py  the command: its flags, and which of the two jobs runs
    job.py      the encode job: checks, the encode part of a pipeline, stats.json
    packed.py   ``encode --pack N``: the encode job and ``beam-bpe pack``'s stages in one job
"""

from pipeline.encode.command import add_arguments, run

__all__ = ["add_arguments", "run"]
