"""Measuring how well tokenizers fit a corpus, for ``beam-bpe report``.

    pieces = documents | MeasureTokenizers(["tokenizer/"])   # named pieces, written by the job
    measures = combine_measures(pieces_read_back, tokenizers, check_texts)   # on the driver, after it

The Beam part is named after the PTransform it holds:

- ``measure_tokenizers``: ``MeasureTokenizers`` (documents -> named pieces of measures).

Pure, without Beam (numpy), what it runs on workers and the driver runs after the job:

- ``figures``: the per-document measures and their definitions, and how they merge.
- ``tokens``: ``MeasuredTokenizer``, what each token is on its own.
- ``sample``: the sample's segmentations (BPE, greedy, fewest) and the visualizer's documents.
- ``measures``: the sample's parts, and the job's pieces put together (``combine_measures``).
"""

from transforms.report.figures import SAMPLE_BYTES
from transforms.report.measure_tokenizers import MeasureTokenizers
from transforms.report.measures import combine_measures, figures_to_json
from transforms.report.tokens import token_lengths

__all__ = ["MeasureTokenizers", "combine_measures", "figures_to_json", "SAMPLE_BYTES", "token_lengths"]
