"""``beam-bpe train``: a sharded corpus -> word counts -> a trained tokenizer.json.

    command.py      the command: flags, the two phases in order, the merges, the summary
    checks.py       the checks before any work: flag values, the vocabulary, a complete run in --output
    count_job.py    phase 1: the Beam job that counts the corpus (or the complete count --resume finds)
    word_counts.py  word_counts.parquet: the counted table, written and read back
    stats.py        train_stats.json and the summary lines
    extend.py       --extend BASE --new-tokens K: new merges on top of an existing tokenizer
    superwords.py   --superword-transition T: a superword tokenizer (SuperBPE)
    resume.py       --resume: the count marker and the merge checkpoint
    sources.py      --source-weight, --source-field, --parity, --global-merges: the sources, checked before the job
"""

from pipeline.train.command import add_arguments, run

__all__ = ["add_arguments", "run"]
