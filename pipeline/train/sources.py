"""``--source-weight``, ``--source-field``, ``--parity`` and ``--global-merges``: the sources of a training run.

Sources by file (no ``--source-field``): each ``--source-weight PATTERN=W``
names a source. PATTERN, fnmatch-style, matches an input file's path (absolute,
or relative to the working directory) or its name; a file that no pattern
matches counts for the rest (source "", weight 1). A pattern that matches no
file, or a file that two patterns match, is refused before the job.

Sources by field (``--source-field F``): a record's value of F names its source
(an integer as its digits; a record without F counts for the rest), and
``--source-weight VALUE=W`` weights one value. Text files have no fields, so
they are refused before the job; a VALUE that no record has is refused once
the corpus is counted, before training.

A weight is a positive decimal with at most three places (``bpe.training.sources``:
exact, and ``--min-frequency`` / ``--min-word-count`` apply to the weighted counts).
``--parity`` trains parity-aware over these sources (``bpe.reference.train_parity``);
``--global-merges M`` first learns M merges as plain training does (the hybrid variant).
The count marker and the merge checkpoint record the sources (``settings``), so
``--resume`` and ``--word-counts`` refuse a table counted with other ones.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import posixpath

from bpe.training.sources import MILLI, format_weight, is_by_source, parse_weight
from pipeline.command_machinery import outputs
from pipeline.command_machinery.errors import UserError
from transforms.count import REST, SourceRule
from transforms.read import detect_format

__all__ = [
    "SourceRule", "add_arguments", "check_counted", "check_settings", "check_table", "keep_common", "settings", "source_rule",
    "source_stats", "summary_lines", "training_weights",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds --source-weight, --source-field, --parity and --global-merges."""
    parser.add_argument("--source-weight", action="append", metavar="PATTERN=W",
                        help="multiply the counts of the input files PATTERN matches (fnmatch, on the path or the "
                        "name; with --source-field: of the records whose field has the value PATTERN) by W, a "
                        "positive decimal with at most three places; repeatable")
    parser.add_argument("--source-field", metavar="NAME",
                        help="jsonl key / Parquet column naming each record's source, for --source-weight and --parity")
    parser.add_argument("--parity", action="store_true", default=None,
                        help="parity-aware training: each merge is the most frequent pair of the source that is "
                        "compressed worst so far (needs --source-field or --source-weight)")
    parser.add_argument("--global-merges", type=int, metavar="M",
                        help="with --parity: learn the first M merges as plain training does (the most frequent pair "
                        "over all sources), then parity-aware ones; more costs less overall compression, fewer gives the "
                        "sources closer compression (default 0)")


def check_settings(args: argparse.Namespace) -> None:
    """Refuses a --global-merges that is negative, without --parity, or that leaves no
    parity-aware merge (what the run learns would be plain training's)."""
    if args.global_merges is not None and args.global_merges < 0:
        raise UserError(f"--global-merges must be at least 0, not {args.global_merges}")
    if not args.global_merges:
        return
    if not args.parity:
        raise UserError("--global-merges needs --parity: it is the number of merges learned before parity-aware "
                        "training takes over")
    if args.vocab_size is None:
        return
    merges = args.vocab_size - 256 - len(args.special_token or ())
    if args.global_merges >= merges:
        raise UserError(f"--global-merges {args.global_merges} leaves no parity-aware merge: --vocab-size "
                        f"{args.vocab_size} holds {merges:,} merges")


def _weights(args: argparse.Namespace) -> dict[str, int]:
    """--source-weight as {name: weight in thousandths}, in the order given.

    Raises:
      UserError: a flag without "=", an empty name, a bad weight, a name given twice.
    """
    weights: dict[str, int] = {}
    for flag in args.source_weight:
        name, equals, weight = flag.rpartition("=")
        if not equals or not name:
            raise UserError(f"--source-weight {flag!r}: expected PATTERN=W (or VALUE=W with --source-field), e.g. 'en/*=3'")
        try:
            milli = parse_weight(weight)
        except ValueError as e:
            raise UserError(f"--source-weight {flag}: {e}") from None
        if name in weights:
            raise UserError(f"--source-weight names {name!r} twice")
        weights[name] = milli
    return weights


def settings(args: argparse.Namespace) -> dict:
    """What the sources are, for the count marker and the checkpoint (None where unused)."""
    weights = _weights(args)
    return {
        "source_field": args.source_field,
        "source_weight": [f"{name}={format_weight(milli)}" for name, milli in weights.items()] or None,
    }


def _matches(pattern: str, path: str) -> bool:
    names = {path, posixpath.basename(path.rstrip("/"))}
    if outputs.is_local(path):
        names.add(os.path.relpath(path))
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


def source_rule(args: argparse.Namespace, files: list[str]) -> SourceRule | None:
    """The run's ``SourceRule`` for the count job (None without source flags, or with
    --word-counts); ``files``: the matched input files.

    Raises:
      UserError: see the module doc.
    """
    if not args.source_weight and not args.source_field:
        if args.parity:
            raise UserError("--parity needs sources: --source-field NAME, or --source-weight PATTERN=W per source")
        return None
    weights = _weights(args)
    if args.word_counts:
        return None  # nothing to count: the table's sources are checked by check_table
    if args.source_field:
        text = [path for path in files if (args.format if args.format != "auto" else detect_format(path)) == "text"]
        if text:
            raise UserError(f"--source-field {args.source_field}: {text[0]} is a text file, whose records have no "
                            "fields (use jsonl or parquet, or --source-weight PATTERN=W by file)")
        return SourceRule(by_field=True, weights=weights)
    by_file: dict[str, str] = {}
    for path in files:
        matched = [pattern for pattern in weights if _matches(pattern, path)]
        if len(matched) > 1:
            raise UserError(f"--source-weight: {path} matches both {matched[0]!r} and {matched[1]!r}; "
                            "each file may count for one source only")
        if matched:
            by_file[path] = matched[0]
    unmatched = [pattern for pattern in weights if pattern not in by_file.values()]
    if unmatched:
        raise UserError(f"--source-weight {unmatched[0]}=...: the pattern matches none of the {len(files):,} "
                        "input files (it is matched against each file's path and name)")
    return SourceRule(files=by_file, weights=weights)


def check_table(args: argparse.Namespace, table: dict, path: str, recorded: dict | None) -> None:
    """Refuses a --word-counts table whose sources are not the flags' ones.

    Args:
      table: the table read (by source or not).
      path: its path, for the message.
      recorded: the settings its count marker records, or None (a table vouched for).
    """
    now = settings(args)
    if recorded is not None:
        then = {key: recorded.get(key) for key in now}
        if then != now:
            raise UserError(f"word-count table {path} was counted with {_describe(then)}, not with {_describe(now)}: "
                            "pass the same --source-field/--source-weight, or count the corpus again")
    by_source = is_by_source(table)
    if by_source and now == {"source_field": None, "source_weight": None}:
        raise UserError(f"word-count table {path} is counted by source: pass --source-field or --source-weight")
    if table and not by_source and (args.source_field or args.source_weight):
        raise UserError(f"word-count table {path} has no source column: it was counted without sources")


def _describe(source_settings: dict) -> str:
    parts = []
    if source_settings["source_field"]:
        parts.append(f"--source-field {source_settings['source_field']}")
    parts += [f"--source-weight {flag}" for flag in source_settings["source_weight"] or ()]
    return " ".join(parts) or "no sources"


def check_counted(args: argparse.Namespace, table: dict) -> None:
    """Refuses to train when a weighted source has no counts (a value no record has,
    or files that hold no text)."""
    for name in _weights(args):
        if name not in table:
            what = (f"no record has {args.source_field} = {name!r}" if args.source_field
                    else "its files hold no text")
            raise UserError(f"--source-weight {name}=...: nothing was counted for it ({what})")


def keep_common(table: dict, args: argparse.Namespace) -> dict:
    """The table without the pieces seen fewer than --min-word-count times, as the count
    phase drops them (by source: a piece's weighted count over all sources decides)."""
    if not is_by_source(table):
        return {word: count for word, count in table.items() if count >= args.min_word_count}
    rows = {(name, word): count for name, counts in table.items() for word, count in counts.items()}
    kept: dict[str, dict[bytes, int]] = {name: {} for name in table}
    for (name, word), count in SourceRule(weights=_weights(args)).keep(rows, args.min_word_count).items():
        kept[name][word] = count
    return kept


def training_weights(args: argparse.Namespace) -> dict[str, str] | None:
    """The weights for ``bpe.train`` (source -> decimal), or None without sources."""
    if not args.source_weight and not args.source_field:
        return None
    return {name: format_weight(milli) for name, milli in _weights(args).items()}


def source_stats(table: dict, args: argparse.Namespace) -> dict[str, dict]:
    """Per source, in the table trained from: its weight, bytes, pieces and unique pieces,
    and its bytes and pieces weighted (exact: whole numbers, or decimals to three places)."""
    weights = _weights(args)
    result = {}
    for name in sorted(table):
        counts = table[name]
        milli = weights.get(name, MILLI)
        pieces = sum(counts.values())
        size = sum(len(word) * count for word, count in counts.items())
        result[name] = {
            "weight": format_weight(milli), "bytes": size, "pieces": pieces, "unique_pieces": len(counts),
            "weighted_bytes": _weighted(size, milli), "weighted_pieces": _weighted(pieces, milli),
        }
    return result


def _weighted(value: int, milli: int) -> int | float:
    whole, part = divmod(value * milli, MILLI)
    return whole if not part else float(format_weight(value * milli))


def summary_lines(sources: dict[str, dict]) -> list[str]:
    """One line per source for the summary: before and after weighting, with its share."""
    total = sum(numbers["weighted_bytes"] for numbers in sources.values()) or 1
    lines = []
    for name, numbers in sources.items():
        shown = repr(name) if name != REST else "(the rest)"
        lines.append(
            f"  source {shown} (weight {numbers['weight']}): {outputs.size(numbers['bytes'])}, "
            f"{numbers['pieces']:,} pieces -> weighted {outputs.size(round(numbers['weighted_bytes']))}, "
            f"{numbers['weighted_pieces']:,} pieces ({numbers['weighted_bytes'] / total:.0%})"
        )
    return lines
