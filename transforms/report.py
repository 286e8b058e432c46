"""Measuring how well tokenizers fit a corpus: ``MeasureTokenizers``.

Documents are measured in batches by every tokenizer at once (each document is
read once, decoded once and classified once; see ``transforms.report_figures``
for the definitions), the batches' additive totals are merged by one
CombineFn, and the merged result's sample (the documents with the smallest
hash of file and record, so it does not depend on sharding) is segmented three
ways (``transforms.report_sample``) in parts that the workers share: every part
is one tokenizer's segmentation of some of the sample's documents, with the
tokens of the visualizer's documents among them and the IDs of the texts a page
checks its own encoder against. The job's result is a few named pieces, the
merged figures and one per part, that ``combine_measures`` puts together: the
parts' tables add up. The driver does that after the job, so no step waits for
all the parts.

Workers read the tokenizer files themselves (any Beam filesystem) and check
each one's SHA-256 against the one the driver read, so a file replaced while
the job runs cannot mix two tokenizers into one report. A worker process loads
them once for all its steps (``apache_beam.utils.shared``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.utils import shared

from bpe.engines import EngineProof, ProofMismatch
from bpe.scripts import SCRIPTS
from bpe.tokenizer import Tokenizer
from transforms import metrics
from transforms.report_figures import Figures, measure_batch
from transforms.report_tokens import MeasuredTokenizer
from transforms.report_sample import SEGMENTATION_FIELDS, Segmenter, visualizer_picks, visualizer_tokens
from transforms.tokenizer_loading import load_tokenizer

# The sample is segmented in parts of about this many bytes per tokenizer (parts spread over
# the workers; each call's arrays take several times its bytes).
SAMPLE_PART_BYTES = 1 << 17
# The tag of the sample's parts beside the merged figures.
PARTS = "parts"

__all__ = ["MeasureTokenizers", "combine_measures", "figures_to_json"]


class _Loaded(list):
    """The measured tokenizers of one worker process (a list that ``Shared`` can hold)."""


class _Tokenizers:
    """Which tokenizers a job measures, and how a worker loads them once.

    Args:
      paths: the tokenizer files or directories.
      proofs: each tokenizer's ``EngineProof``, made by the driver; it names the
        engine and the SHA-256 of the file the driver read.
    """

    def __init__(self, paths: Sequence[str], proofs: Sequence[EngineProof]):
        self.paths, self.proofs = list(paths), list(proofs)
        self.sha256 = [proof.tokenizer_sha256 for proof in self.proofs]
        self._shared = shared.Shared()

    def load(self) -> list[MeasuredTokenizer]:
        return self._shared.acquire(self._read, tag="|".join(self.sha256))

    def _read(self) -> _Loaded:
        loaded = _Loaded()
        for path, proof in zip(self.paths, self.proofs):
            tokenizer = load_tokenizer(path, None, proof)
            try:
                engine = tokenizer.use_proof(proof)
            except ProofMismatch:
                raise RuntimeError(
                    f"tokenizer {path} changed while the job ran: SHA-256 {tokenizer.sha256}, "
                    f"the job started with {proof.tokenizer_sha256}"
                ) from None
            loaded.append(MeasuredTokenizer(tokenizer, engine))
        return loaded


class _MeasureBatchFn(beam.DoFn):
    """A batch of Documents -> one Figures of their totals (and sample candidates)."""

    def __init__(self, tokenizers: _Tokenizers, source_field: str | None, sample_size: int):
        self._spec = tokenizers
        self._source_field, self._sample_size = source_field, sample_size
        self._documents = metrics.counter("report", "documents")
        self._bytes = metrics.counter("report", "bytes")

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
        self._documents.inc(len(documents))
        self._bytes.inc(sum(len(doc.data) for doc in documents))
        yield figures


class _MergeFiguresFn(beam.CombineFn):
    """Adds Figures up (every field is a sum, the sample a bounded smallest-keys set)."""

    def __init__(self, vocab_sizes: Sequence[int], sample_size: int):
        self._vocab_sizes, self._sample_size = list(vocab_sizes), sample_size

    def create_accumulator(self):
        return Figures.empty(self._vocab_sizes, self._sample_size)

    def add_input(self, accumulator, figures):
        return accumulator.merge(figures)

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for accumulator in accumulators:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator


class SamplePart(NamedTuple):
    """Some of the sample's documents, to be segmented by one tokenizer.

    Attributes:
      tokenizer: the tokenizer's index.
      index: the part's number among that tokenizer's parts (0, 1, ...).
      documents: the documents' prefixes (``report_figures.sample_prefix``).
      shown: per document, its place among the visualizer's documents, or -1.
    """

    tokenizer: int
    index: int
    documents: list[bytes]
    shown: list[int]


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


def sample_parts(figures: Figures, tokenizers: int, shown: Sequence[int] = ()) -> list[SamplePart]:
    """The sample's documents (their prefixes) in parts of about SAMPLE_PART_BYTES, once per
    tokenizer, each document in one part per tokenizer; ``shown`` are the indices in the sample
    of the visualizer's documents, in its order. Each tokenizer has a part 0, if need be empty."""
    place = {i: p for p, i in enumerate(shown)}
    parts: list[list[int]] = []
    part: list[int] = []
    size = 0
    for i, (*_, prefix, _) in enumerate(figures.sample):
        if part and size + len(prefix) > SAMPLE_PART_BYTES:
            parts.append(part)
            part, size = [], 0
        part.append(i)
        size += len(prefix)
    parts.append(part)
    return [
        SamplePart(t, k, [figures.sample[i][4] for i in indices], [place.get(i, -1) for i in indices])
        for t in range(tokenizers) for k, indices in enumerate(parts)
    ]


def combine_measures(pieces: dict[str, dict], tokenizers: Sequence[Tokenizer], check_texts: Sequence[str],
                     per_tokenizer: Callable | None = None) -> dict:
    """The pieces the job wrote (by name) -> the measures (see ``MeasureTokenizers``, which
    took the same ``check_texts`` and ``per_tokenizer``).

    No documents: no pieces; the measures are those of no documents, and the check
    texts are encoded here, and ``per_tokenizer`` called here.
    """
    vocab_sizes = [tokenizer.vocab_size for tokenizer in tokenizers]
    measures = pieces.get("figures") or {**figures_to_json(Figures.empty(vocab_sizes)), "visualizer": []}
    parts = [value for name, value in sorted(pieces.items()) if name.startswith("part-")]
    measures["segmentation"] = segmentation_tables(
        len(tokenizers), [(part["tokenizer"], np.array(part["segmentation"], dtype=np.int64)) for part in parts]
    ).tolist()
    for doc in measures["visualizer"]:
        doc["tokens"] = [None] * len(tokenizers)
    checks: list[list[tuple[int, str, list[int]]]] = [[] for _ in tokenizers]
    values = [None] * len(tokenizers)  # of per_tokenizer, from each tokenizer's part 0
    for part in parts:
        t = part["tokenizer"]
        for place, tokens in part["visualizer"]:
            measures["visualizer"][place]["tokens"][t] = tokens
        checks[t] += [tuple(check) for check in part["checks"]]
        values[t] = part.get("per_tokenizer", values[t])
    if not parts:
        checks = [[(-1, text, tokenizer.encode(text)) for text in check_texts] for tokenizer in tokenizers]
        if per_tokenizer is not None:
            values = [per_tokenizer(tokenizer) for tokenizer in tokenizers]
    if per_tokenizer is not None:
        measures["per_tokenizer"] = values
    # The fixed texts first, in their order, then the visualizer's documents in theirs.
    measures["checks"] = [
        [{"text": text, "ids": ids} for _, text, ids in sorted(mine, key=lambda check: check[0])] for mine in checks
    ]
    return measures


def segmentation_tables(tokenizers: int, segmented: Sequence[tuple[int, np.ndarray]]) -> np.ndarray:
    """int64 [tokenizer, class, SEGMENTATION_FIELDS]: the sum of each tokenizer's part tables."""
    tables = np.zeros((tokenizers, len(SCRIPTS), len(SEGMENTATION_FIELDS)), dtype=np.int64)
    for t, table in segmented:
        tables[t] += table
    return tables


def figures_to_json(figures: Figures) -> dict:
    """Figures as plain JSON values (the sample is summarised by its size)."""
    return {
        "classes": list(SCRIPTS),
        "quantities": ["tokens", "bytes", "characters", "fallback_tokens"],
        "segmentation_fields": list(SEGMENTATION_FIELDS),
        "sources": {
            source: {
                "documents": figures.documents[source],
                "counts": figures.counts[source].tolist(),
                "words": figures.words[source].tolist(),
            }
            for source in sorted(figures.counts)
        },
        "token_counts": [counts.tolist() for counts in figures.token_counts],
        "sample_documents": len(figures.sample),
    }


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
        it; local, ``gs://``, ``s3://``), in report order. Loaded here, for
        their vocabulary sizes and proofs, unless both are given; workers load
        them again and check each proof's SHA-256.
      proofs: each tokenizer's ``Tokenizer.prove()``, when the driver made them.
      source_field: the documents' source is their ``doc_id`` (the reader was
        given this field as the id field); None: their input file.
      sample_documents: how many documents the sample holds (the first
        ``report_figures.SAMPLE_BYTES`` of each).
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
        if not (proofs and vocab_sizes):
            tokenizers = [Tokenizer.load(path) for path in self.tokenizer_paths]
            proofs = proofs or [tokenizer.prove() for tokenizer in tokenizers]
            vocab_sizes = vocab_sizes or [tokenizer.vocab_size for tokenizer in tokenizers]
        self._tokenizers = _Tokenizers(self.tokenizer_paths, proofs)
        self._vocab_sizes = vocab_sizes

    def expand(self, documents):
        tokenizers = self._tokenizers
        merged = (
            documents
            | "Batch" >> beam.BatchElements(
                min_batch_size=self.batch_bytes, max_batch_size=self.batch_bytes,
                element_size_fn=lambda doc: len(doc.data) + 1, record_metrics=False,
            )
            | "Measure" >> beam.ParDo(_MeasureBatchFn(tokenizers, self.source_field, self.sample_documents))
            | "Merge" >> beam.CombineGlobally(_MergeFiguresFn(self._vocab_sizes, self.sample_documents))
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
