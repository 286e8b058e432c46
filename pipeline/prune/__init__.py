"""``beam-bpe prune``: a tokenizer without its least-used tokens on a corpus, and the old -> new ID map.

    command.py  the command: flags, the token-use job, the pruned tokenizer and its files
"""

from pipeline.prune.command import add_arguments, run

__all__ = ["add_arguments", "run"]
