"""``MixSources``: a mixture's spilled units -> the units of its stream (repeats and draws), and its plan.

The algorithm is ``transforms.pack.mixture_plan``; here it runs on workers,
with only counts and a few documents' keys crossing between them:

    documents ──SourceCounts──> Passes (side input: each source's full passes, rest)
      ├── Buckets ──> sums per source and bucket of draws ──> Crossings (side input)
      ├── Candidates (the documents of each crossing bucket) ──> Plans (side input)
      └── Mixed: per unit, one unit per repeat that holds its documents ──> the stream's units

The documents must come with their keys (``spill_unit(..., with_keys=True)``).
A mixed unit is keyed (repeat, file, row group), refers to its documents'
tokens where the unit's spill put them (``UnitDocuments.spilled_at``), and its
documents' ids are ``SOURCE:ID``, so every packed token names its source.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transforms.pack.mixture_plan import (
    BucketCounts, Crossing, MixtureSpec, SourceCounts, SourcePlan, buckets_of, draw_last, draws, find_crossing,
    plan_source,
)
from transforms.pack.packing_algorithm import UnitDocuments
from transforms.pack.sequence_order import SPLITS

__all__ = ["MixSources", "MixedSources", "source_ids"]


def source_ids(name: str, ids: pa.Array) -> pa.Array:
    """Document ids as packed sequences of a mixture name them: ``SOURCE:ID``."""
    return pc.binary_join_element_wise(pa.scalar(f"{name}:"), ids.cast(pa.string()), "")


def _source(spec: MixtureSpec, documents: UnitDocuments) -> str:
    return spec.names[spec.source_of(documents.key[0])]


def _counts(documents: UnitDocuments) -> SourceCounts:
    return SourceCounts({s: len(documents.lengths[s]) for s in SPLITS},
                        {s: int(documents.lengths[s].sum()) for s in SPLITS})


def _passes(counts: list[tuple[str, SourceCounts]], spec: MixtureSpec) -> dict[str, SourcePlan]:
    empty = SourceCounts(dict.fromkeys(SPLITS, 0), dict.fromkeys(SPLITS, 0))
    found = {name: sum((c for n, c in counts if n == name), empty) for name in spec.names}
    return {name: plan_source(name, budget, found[name]) for name, budget in zip(spec.names, spec.budgets)}


def _draws(spec: MixtureSpec, plan: SourcePlan, documents: UnitDocuments) -> np.ndarray:
    """The draws of the unit's training documents in the source's partial repeat."""
    return draws(documents.hashes["train"], spec.seed, plan.name, plan.full)


def _buckets(documents: UnitDocuments, spec: MixtureSpec, passes: dict[str, SourcePlan]) -> dict[str, BucketCounts]:
    """{source: BucketCounts} of the unit's training documents where its source draws;
    empty where it does not (one element per unit, so the sum always has one)."""
    plan = passes[_source(spec, documents)]
    if plan.rest and len(documents.lengths["train"]):
        return {plan.name: BucketCounts.of(_draws(spec, plan, documents), documents.lengths["train"])}
    return {}


def _add_buckets(parts: Iterable[dict[str, BucketCounts]]) -> dict[str, BucketCounts]:
    by_source: dict[str, list[BucketCounts]] = {}
    for part in parts:
        for name, counts in part.items():
            by_source.setdefault(name, []).append(counts)
    return {name: BucketCounts.add(counts) for name, counts in by_source.items()}


def _crossings(counts: dict[str, BucketCounts], passes: dict[str, SourcePlan]) -> dict[str, Crossing]:
    found = {name: find_crossing(counts[name], plan.rest) for name, plan in passes.items() if name in counts}
    return {name: crossing for name, crossing in found.items() if crossing is not None}


def _candidates(documents: UnitDocuments, spec: MixtureSpec, passes: dict[str, SourcePlan],
                crossings: dict[str, Crossing]) -> list[tuple[str, tuple]]:
    """[(source, (draw, id, occurrence, tokens))] of the unit's documents in its source's
    crossing bucket (one list per unit, often empty, so the gathering always has one)."""
    plan = passes[_source(spec, documents)]
    crossing = crossings.get(plan.name)
    if crossing is None or not len(documents.lengths["train"]):
        return []
    unit_draws = _draws(spec, plan, documents)
    ids = documents.ids["train"]
    return [(plan.name, (int(unit_draws[i]), ids[i].as_py(), int(documents.occurrences["train"][i]),
                         int(documents.lengths["train"][i])))
            for i in np.flatnonzero(buckets_of(unit_draws) == crossing.bucket).tolist()]


def _joined(lists: Iterable[list]) -> list:
    return [item for part in lists for item in part]


def _plans(candidates: list[tuple[str, tuple]], passes: dict[str, SourcePlan],
           crossings: dict[str, Crossing]) -> dict[str, SourcePlan]:
    return {name: draw_last(plan, crossings[name], [c for n, c in candidates if n == name])
            if name in crossings else plan for name, plan in passes.items()}


def _mixed(documents: UnitDocuments, spec: MixtureSpec, plans: dict[str, SourcePlan]) -> Iterable[UnitDocuments]:
    """The unit's documents in each repeat that holds some: its training documents
    chosen for the repeat, and its held-out ones in repeat 0."""
    plan = plans[_source(spec, documents)]
    train, validation = documents.lengths["train"], documents.lengths["validation"]
    ids = {split: source_ids(plan.name, documents.ids[split]) for split in SPLITS}
    at = {split: documents.spill_offsets(split) for split in SPLITS}
    drawing = plan.last is not None and len(train) > 0
    unit_draws = _draws(spec, plan, documents) if drawing else np.zeros(len(train), np.uint64)
    train_ids = documents.ids["train"].to_pylist() if drawing else [None] * len(train)
    for repeat in range(max(plan.repeats, 1)):
        mask = plan.chosen(repeat, unit_draws, train_ids, documents.occurrences["train"])
        held = repeat == 0
        if not mask.any() and not (held and len(validation)):
            continue
        lengths = {"train": train[mask], "validation": validation if held else validation[:0]}
        chosen = {"train": ids["train"].filter(pa.array(mask)), "validation": ids["validation"] if held
                  else ids["validation"].slice(0, 0)}
        spilled_at = {"train": at["train"][mask], "validation": at["validation"] if held else at["validation"][:0]}
        yield UnitDocuments((repeat, *documents.key), lengths, chosen, spilled_at)


class MixedSources(NamedTuple):
    """What MixSources gives: the units of the mixture's stream, and one element,
    {source: SourcePlan}, the mixture's plan."""

    documents: beam.PCollection
    plans: beam.PCollection


@dataclasses.dataclass
class MixSources(beam.PTransform):
    """Turns the spilled units of a mixture's sources into the units of its stream.

    Apply to the ``UnitDocuments`` of every unit, spilled with their keys.

    Args:
      spec: the sources, their budgets and the seed of the draws.
    """

    spec: MixtureSpec

    def __post_init__(self):
        super().__init__()

    def expand(self, documents):
        spec, single = self.spec, beam.pvalue.AsSingleton
        # Every step between Spill and Mixed moves one small element per unit (the
        # documents of a crossing bucket are few), and each global step's result is
        # computed in the stage that gathers it: the mixture's cost is a few stages.
        # Every unit gives one element to each gathering, so each gives one element
        # without the stages that insert a default.
        passes = (
            documents
            | "SourceCounts" >> beam.Map(lambda d: (_source(spec, d), _counts(d)))
            | "AllSources" >> beam.CombineGlobally(beam.combiners.ToListCombineFn()).without_defaults()
            | "Passes" >> beam.Map(_passes, spec)
        )
        crossings = (
            documents
            | "Buckets" >> beam.Map(_buckets, spec, single(passes))
            | "SumBuckets" >> beam.CombineGlobally(_add_buckets).without_defaults()
            | "Crossings" >> beam.Map(_crossings, single(passes))
        )
        plans = (
            documents
            | "Candidates" >> beam.Map(_candidates, spec, single(passes), single(crossings))
            | "AllCandidates" >> beam.CombineGlobally(_joined).without_defaults()
            | "Plans" >> beam.Map(_plans, single(passes), single(crossings))
        )
        mixed = documents | "Mixed" >> beam.FlatMap(_mixed, spec, single(plans))
        return MixedSources(mixed, plans)
