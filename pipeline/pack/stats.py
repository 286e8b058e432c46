"""``beam-bpe pack``'s stats.json: computed after the job from what was written (the files'
footers or headers, and the job's plan of each split in plan.json) and checked: the real tokens
written plus the dropped ones equal the tokens of the input shards (or of what a mixture took),
and the documents of both splits are the input's documents.

    plan = plan_json(plans, repeated_ids, mixture, spec)                 # the job writes it
    stats = collect_stats(staging, format, inputs, settings, mixture)  # the driver, after the job
"""

from __future__ import annotations

import json

from apache_beam.io.filesystems import FileSystems

from pipeline.command_machinery import outputs
from pipeline.pack import sources as pack_sources
from transforms.pack import SPLITS, SUFFIXES, MixtureSpec, ShardsInfo, plan_mixture_json, split_files, written_counts
from transforms.pack.mds_format import INDEX_FILE

__all__ = ["COUNTED_FORMATS", "DOCUMENT_FORMATS", "PADDED_FORMATS", "PLAN_FILE", "STATS_FILE", "collect_stats",
           "plan_json"]

STATS_FILE = "stats.json"  # written last: the completion marker
PLAN_FILE = "plan.json"  # written by the job into the staging directory
# Formats whose files record their sequences (megatron: its entries); and those whose sequences hold padding.
COUNTED_FORMATS = ("parquet", "mds", "megatron")
PADDED_FORMATS = ("parquet", "mds")
# Formats of whole documents (one entry each), where the options of sequences make no sense.
DOCUMENT_FORMATS = ("megatron",)


def plan_json(plans: dict, repeated_ids: int = 0, mixture: dict | None = None, spec: MixtureSpec | None = None) -> bytes:
    """The job's plan of every split, how many documents share their id with an
    earlier one and, for a mixture, mixture.json (from its sources' plans
    ``mixture`` and the ``spec``), as the driver reads them back."""
    return json.dumps({
        **{split: {"documents": plan.documents, "tokens": plan.tokens, "sequences": plan.sequences,
                   "dropped_tokens": plan.dropped_tokens, "padding_tokens": plan.padding_tokens, "files": plan.files}
           for split, plan in plans.items()},
        "repeated_ids": repeated_ids,
        **({"mixture": plan_mixture_json(spec, mixture)} if mixture is not None else {}),
    }, indent=2).encode()


def collect_stats(directory: str, format: str, inputs: ShardsInfo, settings: dict, mixture: dict | None = None) -> dict:
    """stats.json's content, from the job's plan and the files written in ``directory``;
    with a ``mixture`` (mixture.json), the output accounts for what it took.

    Raises:
      RuntimeError: the written files disagree with the plan or the input (a
        token lost or added): never published.
    """
    plans = outputs.read_json(FileSystems.join(directory, PLAN_FILE))
    if plans is None:
        raise RuntimeError(f"the job wrote no {PLAN_FILE} into {directory}")
    length = settings["sequence_length"]
    splits = {}
    for split in SPLITS:
        plan = plans[split]
        files = _split_files(directory, split, format)
        counted = [written_counts(FileSystems.join(directory, *name.split("/")), format) for name in files]
        real = sum(tokens for _, tokens in counted)
        sequences = sum(rows for rows, _ in counted) if format in COUNTED_FORMATS else plan["sequences"]
        if len(files) != plan["files"] or sequences != plan["sequences"] or real != plan["tokens"] - plan["dropped_tokens"]:
            raise RuntimeError(
                f"{split}: wrote {len(files)} files, {sequences} sequences and {real} real tokens; the plan was "
                f"{plan['files']} files, {plan['sequences']} sequences and {plan['tokens'] - plan['dropped_tokens']} tokens"
            )
        splits[split] = {
            "documents": plan["documents"],
            "sequences": sequences,
            "tokens": real,
            "padding_tokens": sequences * length - real if format in PADDED_FORMATS else 0,
            "dropped_tokens": plan["dropped_tokens"],
            "files": _split_files(directory, split, format, every_file=True),
        }
    totals = {key: sum(s[key] for s in splits.values())
              for key in ("documents", "sequences", "tokens", "padding_tokens", "dropped_tokens")}
    documents, tokens = _expected_totals(inputs, mixture)
    if totals["tokens"] + totals["dropped_tokens"] != tokens or totals["documents"] != documents:
        raise RuntimeError(
            f"the {'mixture takes' if mixture else 'input shards hold'} {documents} documents and {tokens} tokens; "
            f"the output accounts for {totals['documents']} documents and {totals['tokens']} + "
            f"{totals['dropped_tokens']} dropped tokens"
        )
    return {
        **({"mixture": pack_sources.MIXTURE_FILE} if mixture else {}),
        **settings,
        **totals,
        "splits": splits,
        "input": {"documents": inputs.documents, "tokens": inputs.tokens},
        "repeated_ids": plans.get("repeated_ids", 0),
        "tokenizer_sha256": inputs.tokenizer_sha256,
        "vocab_size": inputs.vocab_size,
        "eos_token_id": inputs.eos_token_id,
    }


def _expected_totals(inputs: ShardsInfo, mixture: dict | None) -> tuple[int, int]:
    """(documents, tokens) the output must account for: the input's, or those the
    mixture took (training documents with their repeats, and the held-out ones),
    once its sources are checked to add up to the input."""
    if mixture is None:
        return inputs.documents, inputs.tokens
    sources = mixture["sources"].values()
    available = tuple(sum(s["available"][key] for s in sources) for key in ("documents", "tokens"))
    if available != (inputs.documents, inputs.tokens):
        raise RuntimeError(f"the mixture's sources hold {available[0]} documents and {available[1]} tokens; the "
                           f"input shards {inputs.documents} and {inputs.tokens}")
    return tuple(sum(s["train"][key] + s["held_out"][key] for s in sources) for key in ("documents", "tokens"))


def _split_files(directory: str, split: str, format: str, every_file: bool = False) -> list[str]:
    """Names of a split's written files, relative to ``directory``: the files its
    counts are read from (one per block; megatron's ``.idx``), or every file."""
    if format in DOCUMENT_FORMATS:
        names = [name for name in split_files(split) if outputs.exists(FileSystems.join(directory, name))]
        return names if every_file else [name for name in names if name.endswith(".idx")]
    suffixes = SUFFIXES[format]
    names = [p.rsplit("/", 1)[-1] for p in outputs.matching(FileSystems.join(directory, split), ("part-*",))]
    names = [f"{split}/{name}" for name in sorted(names) if name.endswith(suffixes)]
    if every_file and format == "mds" and names:
        names.append(f"{split}/{INDEX_FILE}")
    return names
