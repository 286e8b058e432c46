"""``beam-bpe decode``: token shards -> documents, or a live stream of IDs -> text.

    command.py  the command: flags, the shards' documents and the stream of IDs, decoded
"""

from pipeline.decode.command import BEAM_OPTIONS, add_arguments, run

__all__ = ["BEAM_OPTIONS", "add_arguments", "run"]
