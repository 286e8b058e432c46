"""``beam-bpe train``: a sharded corpus -> word counts -> a trained tokenizer.json.

    command.py      the command: flags, the count job, the merges, the summary
    word_counts.py  word_counts.parquet: the counted table, written and read back
    stats.py        train_stats.json and the summary lines
    resume.py       --resume: the count marker and the merge checkpoint
    sources.py      --source-weight, --source-field, --parity, --global-merges: the sources, checked before the job
"""

from pipeline.train.command import add_arguments, run

__all__ = ["add_arguments", "run"]
