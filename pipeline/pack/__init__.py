"""``beam-bpe pack``: token shards -> shuffled fixed-length sequences, or Megatron datasets.

    command.py  the command: flags, checks before the job, the packing job, the result published
    stats.py    stats.json: counted from what the job wrote, checked against its plan and the input
    sources.py  ``--source NAME=GLOB`` with token budgets: the mixture's sources, checked before the job
"""

from pipeline.pack.command import add_arguments, run

__all__ = ["add_arguments", "run"]
