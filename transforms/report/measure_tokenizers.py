"""Measuring how well tokenizers fit a corpus: ``MeasureTokenizers``.

Documents are measured in batches by every tokenizer at once (each document is
read once, decoded once and classified once; see ``transforms.report.figures``
for the definitions), the batches' additive totals are merged by one
CombineFn, and the merged result's sample (the documents with the smallest
hash of file and record, so it does not depend on sharding) is segmented three
ways (``transforms.report.sample``) in parts that the workers share: every part
is one tokenizer's segmentation of some of the sample's documents, with the
tokens of the visualizer's documents among them and the IDs of the texts a page
checks its own encoder against. The job's result is a few named pieces, the
merged figures and one per part, that ``measures.combine_measures`` puts together: the
parts' tables add up. The driver does that after the job, so no step waits for
all the parts.

Workers read the tokenizer files themselves (any Beam filesystem) and check
each one's SHA-256 against the one the driver read, so a file replaced while
the job runs cannot mix two tokenizers into one report. A worker process loads
them once for all its steps (``apache_beam.utils.shared``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Sequence

import apache_beam as beam
from apache_beam.utils import shared

from bpe.engines import EngineProof
from bpe.scripts import SCRIPTS
from bpe.tokenizer import Tokenizer
from transforms import metrics
from transforms.batches import AddUp, document_size, fixed_batches
from transforms.report.figures import Figures, measure_batch
from transforms.report.measures import SamplePart, figures_to_json, sample_parts
from transforms.report.sample import Segmenter, visualizer_picks, visualizer_tokens
from transforms.report.tokens import MeasuredTokenizer
from transforms.tokenizer_loading import load_proven

# The tag of the sample's parts beside the merged figures.
PARTS = "parts"

__all__ = ["MeasureTokenizers", "PARTS"]


class _Loaded(list):
    """The measured tokenizers of one worker process (a list that ``Shared`` can hold)."""


class _Tokenizers:
    """Which tokenizers a job measures, and how a worker loads them once.

    Args:
      paths: the tokenizer files or directories.
      proofs: each tokenizer's ``EngineProof``, made by the driver; it names the
        engine and the SHA-256 of the file the driver read.
      presets: each tokenizer's preset (``bpe.presets``; a rank file's pattern and
        special tokens), None for one without.
    """

    def __init__(self, paths: Sequence[str], proofs: Sequence[EngineProof], presets: Sequence[str | None] = ()):
        self.paths, self.proofs = list(paths), list(proofs)
        self.presets = list(presets) or [None] * len(self.paths)
        self.sha256 = [proof.tokenizer_sha256 for proof in self.proofs]
        self._shared = shared.Shared()

    def load(self) -> list[MeasuredTokenizer]:
        return self._shared.acquire(self._read, tag="|".join(self.sha256))

    def _read(self) -> _Loaded:
        loaded = _Loaded()
        for path, preset, proof in zip(self.paths, self.presets, self.proofs):
            tokenizer, engine = load_proven(path, preset, proof)
            loaded.append(MeasuredTokenizer(tokenizer, engine))
        return loaded


class _MeasureBatchFn(beam.DoFn):
    """A batch of Documents -> one Figures of their totals (and sample candidates)."""

    def __init__(self, tokenizers: _Tokenizers, source_field: str | None, sample_size: int):
        self._spec = tokenizers
        self._source_field, self._sample_size = source_field, sample_size
        self._counters = metrics.Counters("report", "documents", "bytes")

    def setup(self):
        self._tokenizers = self._spec.load()

    def _source(self, doc) -> str:
        if self._source_field is None:
            return doc.file
        return doc.doc_id if doc.doc_id is not None else f"(no {self._source_field})"

    def process(self, documents):
        sources = [self._source(doc) for doc in documents]
        figures = measure_batch(
            [(source, doc.data) for source, doc in zip(sources, documents)],
            self._tokenizers,
            sample_size=self._sample_size,
        )
        figures.offer([(source, doc.file, doc.record, doc.data) for source, doc in zip(sources, documents)])
        self._counters.documents.inc(len(documents))
        self._counters.bytes.inc(sum(len(doc.data) for doc in documents))
        yield figures


class _SplitSampleFn(beam.DoFn):
    """Once: the merged Figures -> their measures ("figures", as JSON) and, under the tag
    PARTS, the sample's parts (``sample_parts``)."""

    def __init__(self, tokenizers: int):
        self._tokenizers = tokenizers

    def process(self, figures: Figures):
        picks = visualizer_picks(figures.sample)
        measures = figures_to_json(figures)
        measures["visualizer"] = []  # each document's tokens come with the part that holds it
        for i, script in picks:
            _, source, file, record, _, length = figures.sample[i]
            measures["visualizer"].append(
                {"script": SCRIPTS[script], "source": source, "file": file, "record": record, "bytes": length}
            )
        yield "figures", measures
        for part in sample_parts(figures, self._tokenizers, [i for i, _ in picks]):
            yield beam.pvalue.TaggedOutput(PARTS, part)


class _SegmentFn(beam.DoFn):
    """A SamplePart -> ("part-T-K", its measures): its segmentation table, the visualizer's
    tokens of its shown documents and the page's check texts among them (with the fixed
    check texts in each tokenizer's part 0), each with its IDs; part 0 also holds
    ``per_tokenizer`` of its tokenizer."""

    def __init__(self, tokenizers: _Tokenizers, check_texts: Sequence[str], per_tokenizer: Callable | None):
        self._spec, self._check_texts, self._per_tokenizer = tokenizers, list(check_texts), per_tokenizer

    def setup(self):
        self._tokenizers = self._spec.load()
        self._segmenters: dict[int, Segmenter] = {}

    def process(self, part: SamplePart):
        t = part.tokenizer
        tokenizer = self._tokenizers[t]
        if t not in self._segmenters:
            self._segmenters[t] = Segmenter(tokenizer)
        table, ids = self._segmenters[t].segment(part.documents)
        shown = [(place, visualizer_tokens(tokenizer, ids[d])) for d, place in enumerate(part.shown) if place >= 0]
        fixed = self._check_texts if part.index == 0 else []
        checks = [[-1, text] for text in fixed] + [
            [place, text] for place, tokens in shown
            if (text := _text(tokenizer.tokenizer, tokens)) is not None
        ]
        for check in checks:
            check.append(tokenizer.encode_text(check[1]))
        piece = {"tokenizer": t, "segmentation": table.tolist(), "visualizer": shown, "checks": checks}
        if part.index == 0 and self._per_tokenizer is not None:
            piece["per_tokenizer"] = self._per_tokenizer(tokenizer.tokenizer)
        yield f"part-{t}-{part.index}", piece


def _text(tokenizer: Tokenizer, tokens: list[int]) -> str | None:
    """The text of the tokens, or None when it is not valid UTF-8 (a live box takes typed text)."""
    try:
        return tokenizer.decode_bytes(tokens).decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclasses.dataclass
class MeasureTokenizers(beam.PTransform):
    """Documents -> the measures of every tokenizer on them, in named pieces (name, dict), as
    {"figures": the one piece of the merged figures, PARTS: the pieces of the sample's parts}.

    ``combine_measures`` turns the pieces into one dict. It holds, per source, per tokenizer and per class of
    ``bpe.scripts.SCRIPTS``, the tokens, bytes, characters and byte-level
    fallback tokens, the words per class, each tokenizer's count of every ID,
    and on the sample the pieces, bytes and token counts of BPE, greedy longest
    match and the fewest tokens per class, plus the visualizer's documents and,
    under ``checks``, per tokenizer the text and IDs of each check text and of
    each visualizer document (where its tokens are valid UTF-8).
    Counters: ``report.documents``, ``report.bytes``.

    Args:
      tokenizer_paths: the tokenizers (tokenizer.json or a directory holding
        it, or a tiktoken rank file; local, ``gs://``, ``s3://``), in report order.
        Loaded here, for their vocabulary sizes and proofs, unless both are given;
        workers load them again and check each proof's SHA-256.
      tokenizer_presets: per tokenizer, its preset (``bpe.presets``: a rank file's
        pattern and special tokens) or None; () for none at all.
      proofs: each tokenizer's ``Tokenizer.prove()``, when the driver made them.
      source_field: the documents' source is their ``doc_id`` (the reader was
        given this field as the id field); None: their input file.
      sample_documents: how many documents the sample holds (the first
        ``figures.SAMPLE_BYTES`` of each).
      batch_bytes: about how many document bytes are measured per call: the
        measures hold several arrays per byte, and batches that stay in the
        processor's caches are measured fastest.
      vocab_sizes: each tokenizer's ``vocab_size``, when the driver has loaded them.
      check_texts: texts whose IDs by every tokenizer the measures carry.
      per_tokenizer: a function of a Tokenizer whose JSON-able result for every
        tokenizer the measures carry (``per_tokenizer``), called on a worker, so
        that the driver does not spend its time on it while it runs the job.
    """

    tokenizer_paths: Sequence[str]
    tokenizer_presets: Sequence[str | None] = ()
    proofs: Sequence[EngineProof] = ()
    source_field: str | None = None
    sample_documents: int = 200
    batch_bytes: int = 1 << 18
    vocab_sizes: Sequence[int] = ()
    check_texts: Sequence[str] = ()
    per_tokenizer: Callable | None = None

    def __post_init__(self):
        super().__init__()
        if not self.tokenizer_paths:
            raise ValueError("MeasureTokenizers needs at least one tokenizer")
        proofs, vocab_sizes = list(self.proofs), list(self.vocab_sizes)
        presets = list(self.tokenizer_presets) or [None] * len(self.tokenizer_paths)
        if len(presets) != len(self.tokenizer_paths):
            raise ValueError("MeasureTokenizers takes one preset (or None) per tokenizer")
        if not (proofs and vocab_sizes):
            tokenizers = [Tokenizer.load(path, preset=preset) for path, preset in zip(self.tokenizer_paths, presets)]
            proofs = proofs or [tokenizer.prove() for tokenizer in tokenizers]
            vocab_sizes = vocab_sizes or [tokenizer.vocab_size for tokenizer in tokenizers]
        self._tokenizers = _Tokenizers(self.tokenizer_paths, proofs, presets)
        self._vocab_sizes = vocab_sizes

    def expand(self, documents):
        tokenizers = self._tokenizers
        merged = (
            documents
            | "Batch" >> fixed_batches(self.batch_bytes, document_size)
            | "Measure" >> beam.ParDo(_MeasureBatchFn(tokenizers, self.source_field, self.sample_documents))
            | "Merge" >> beam.CombineGlobally(AddUp(functools.partial(Figures.empty, self._vocab_sizes,
                                                                       self.sample_documents)))
            .without_defaults()
        )
        split = merged | "SplitSample" >> beam.ParDo(_SplitSampleFn(len(self.tokenizer_paths))).with_outputs(
            PARTS, main="figures"
        )
        segmented = (
            split[PARTS]
            | "Spread" >> beam.Reshuffle()
            | "Segment" >> beam.ParDo(_SegmentFn(tokenizers, self.check_texts, self.per_tokenizer))
        )
        # Two PCollections rather than one Flatten of them, which the runner would run as a stage of its own.
        return {"figures": split.figures, PARTS: segmented}
