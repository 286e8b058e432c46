"""``beam-bpe pack --source NAME=SHARD_GLOB ...`` (and ``encode --pack N --source NAME=GLOB ...``, whose
sources are corpora, each encoded on its own): named sources with token budgets, checked before the job.

    beam-bpe pack --source web='web/' --source code='code/part-*.parquet' \\
        --source-tokens web=3000000 --source-tokens code=1000000 --seq-len 2048 --output mix/
    beam-bpe pack --source web=web/ --source code=code/ \\
        --source-weight web=3 --source-weight code=1 --total-tokens 4000000 --seq-len 2048 --output mix/

Each source gets an exact budget of training tokens (``--source-tokens``), or
a share of ``--total-tokens`` in proportion to its weight (``--source-weight``;
the budgets add up to the total exactly). The mixture itself is
``transforms.pack.mixture_plan``; what it took is written to ``mixture.json``
beside stats.json. Every mistake in these flags, a source that matches no
shards or holds no tokens, and a shard named by two sources is one line
(``UserError``) before the job; a source left without training documents by
the validation split is one after it, and nothing is published.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from fractions import Fraction
from typing import Callable, Sequence

from pipeline.command_machinery.errors import UserError
from transforms.pack import MixtureSpec, describe_shards, weighted_budgets

__all__ = [
    "MIXTURE_FILE", "Sources", "add_arguments", "check_disjoint", "check_result", "check_shards", "parse", "summary",
]

MIXTURE_FILE = "mixture.json"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def add_arguments(parser: argparse.ArgumentParser, inputs: str = "token shards") -> dict[str, object]:
    """The flags of sources and budgets (``inputs``: what a source's glob names); returns {dest: default} of each."""
    options = [
        parser.add_argument("--source", action="append", default=[], metavar="NAME=GLOB",
                            help=f"a named source of {inputs} (repeatable, instead of --input); needs budgets"),
        parser.add_argument("--source-tokens", action="append", default=[], metavar="NAME=N",
                            help="the training tokens of a source, exactly (to within one document); repeated or "
                            "subsampled by whole documents as needed"),
        parser.add_argument("--source-weight", action="append", default=[], metavar="NAME=W",
                            help="a source's share of --total-tokens, in proportion to its weight"),
        parser.add_argument("--total-tokens", type=int, default=0, metavar="N",
                            help="with --source-weight: the training tokens of the whole mixture"),
    ]
    return {option.dest: option.default for option in options}


@dataclasses.dataclass(frozen=True)
class Sources:
    """The sources the flags name, in name order, with their globs and budgets."""

    globs: dict[str, str]
    budgets: dict[str, int]
    weights: dict[str, Fraction] | None = None

    @property
    def names(self) -> list[str]:
        return sorted(self.globs)

    def spec(self, seed: int) -> MixtureSpec:
        names = self.names
        weights = tuple(float(self.weights[n]) for n in names) if self.weights else None
        return MixtureSpec(tuple(names), tuple(self.budgets[n] for n in names), seed, weights)


def _pairs(flag: str, values: Sequence[str], parse_value: Callable[[str], object] | None) -> dict[str, object]:
    """{NAME: value} of NAME=VALUE flags (the value parsed, when ``parse_value`` is given); each name once."""
    found = {}
    for text in values:
        name, equals, value = text.partition("=")
        if not equals or not name or not value:
            raise UserError(f"{flag} {text!r}: expected NAME=VALUE")
        if not _NAME.fullmatch(name):
            raise UserError(f"{flag} {text!r}: a source name is letters, digits, '_', '.' and '-'")
        if name in found:
            raise UserError(f"{flag} names source {name} twice")
        found[name] = parse_value(value) if parse_value else value
    return found


def _budget(flag: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < 1:
            raise UserError(f"{flag}: {text!r} is not a budget; a budget is a whole number of tokens, at least 1")
        return int(text)
    return parse


def _weight(text: str) -> Fraction:
    try:
        weight = Fraction(text)
    except (ValueError, ZeroDivisionError):
        weight = Fraction(0)
    if weight <= 0:
        raise UserError(f"--source-weight: {text!r} is not a weight; a weight is a positive number")
    return weight


def _check_names(flag: str, given: dict, names: list[str]) -> None:
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise UserError(f"{flag} {unknown[0]}: no --source is named {unknown[0]} (the sources: {', '.join(names)})")
    missing = [n for n in names if n not in given]
    if missing:
        raise UserError(f"{flag}: no budget for source {missing[0]}; every source needs one")


def parse(args: argparse.Namespace) -> Sources | None:
    """The sources the flags describe; None without --source (packing --input).

    Raises:
      UserError: any flag mistake (one line).
    """
    budget_flags = [flag for flag, value in (("--source-tokens", args.source_tokens),
                                             ("--source-weight", args.source_weight),
                                             ("--total-tokens", args.total_tokens)) if value]
    if not args.source:
        if budget_flags:
            raise UserError(f"{budget_flags[0]} needs named sources: --source NAME=GLOB ...")
        if not args.input:
            raise UserError("give the inputs: --input GLOB, or --source NAME=GLOB ...")
        return None
    if args.input:
        raise UserError("give --input or --source NAME=GLOB, not both")
    globs = _pairs("--source", args.source, None)
    names = sorted(globs)
    if args.source_tokens and (args.source_weight or args.total_tokens):
        raise UserError("give --source-tokens, or --source-weight with --total-tokens, not both")
    if args.source_tokens:
        budgets = _pairs("--source-tokens", args.source_tokens, _budget("--source-tokens"))
        _check_names("--source-tokens", budgets, names)
        return Sources(globs, budgets)
    if not args.source_weight:
        raise UserError("--source needs budgets: --source-tokens NAME=N for every source, or --source-weight "
                        "NAME=W for every source with --total-tokens N")
    if args.total_tokens < 1:
        raise UserError(f"--source-weight needs --total-tokens N (at least 1), not {args.total_tokens}")
    weights = _pairs("--source-weight", args.source_weight, _weight)
    _check_names("--source-weight", weights, names)
    budgets = weighted_budgets(weights, args.total_tokens)
    for name in names:
        if not budgets[name]:
            raise UserError(f"--source-weight {name}: its share of --total-tokens {args.total_tokens} is 0 tokens; "
                            "give it more weight or raise --total-tokens")
    return Sources(globs, budgets, weights)


def check_disjoint(files: dict[str, list[str]]) -> None:
    """No file belongs to two sources."""
    owner: dict[str, str] = {}
    for name in sorted(files):
        for path in files[name]:
            if owner.setdefault(path, name) != name:
                raise UserError(f"--source {owner[path]} and --source {name} both hold {path}; "
                                "a document belongs to one source")


def check_shards(shards: dict[str, list[str]]) -> None:
    """Each source's shards are token shards of one tokenizer that hold tokens,
    and no shard belongs to two sources."""
    check_disjoint(shards)
    for name in sorted(shards):
        try:
            tokens = describe_shards(shards[name]).tokens
        except ValueError as e:
            raise UserError(f"--source {name}: {e}") from None
        if not tokens:
            raise UserError(f"--source {name}: its shards hold no tokens, so no budget of it can be met")


def check_result(mixture: dict) -> None:
    """A source whose budget could not be met (the validation split left it no
    training tokens) is an error, not a smaller mixture."""
    for name, source in mixture["sources"].items():
        if not source["available"]["tokens"]:
            raise UserError(f"--source {name}: it holds no tokens, so its budget of {source['budget']} training "
                            "tokens cannot be met; nothing was written")
        if not source["train"]["tokens"]:
            raise UserError(
                f"--source {name}: the validation split holds all its {source['held_out']['documents']} documents, "
                f"so none is left for its budget of {source['budget']} training tokens; nothing was written"
            )


def summary(mixture: dict) -> str:
    """One line: each source's training tokens and epochs."""
    return ", ".join(f"{name} {s['train']['tokens']:,} tokens ({s['epochs']:.2f} epochs)"
                     for name, s in mixture["sources"].items())
