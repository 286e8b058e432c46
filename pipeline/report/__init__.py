"""``beam-bpe report``: how well tokenizers fit a corpus, as report.json and one offline page.

    command.py      the command: flags, checks, the Beam job, the summary
    measures.py     the job's measures, written into and read back from the staging directory
    json_report.py  report.json, from the combined measures
    page.py         index.html: tables, charts (charts.py), the live encoder and its assets/
    pattern.py      a tokenizer's pre-tokenization regex, translated for the page's JavaScript
"""

from pipeline.report.command import add_arguments, run

__all__ = ["add_arguments", "run"]
