"""report.json: the measures of ``MeasureTokenizers`` turned into the report's figures (pure).

Every number the page shows is in this file. Per tokenizer, per class of
``bpe.scripts.SCRIPTS`` and per source: tokens, bytes, characters, words and
their ratios (bytes per token, characters per token, tokens per word); the
vocabulary's use (the rank-frequency curve, the tokens never produced, those
produced fewer than K times, the longest tokens); its health (the tokens no
merge path reaches, those that are not valid UTF-8 on their own); the share of
byte-level fallback tokens per script; on the sample, BPE against greedy longest match and
the fewest-tokens segmentation. With several tokenizers, ``comparison`` gives
each one's tokens per script against the first. The definitions are those of
``transforms.report.figures`` and ``transforms.report.sample``.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from bpe.merge_graph import MergeGraph
from bpe.pretokenize import PRESETS
from bpe.tokenizer import Tokenizer
from bpe.superwords.rules import is_superword
from transforms.report import SAMPLE_BYTES, token_lengths

FORMAT = "beam-bpe report 1"
LONGEST_TOKENS = 50
# The curve keeps every rank up to this one, then about this many ranks per decade.
RANK_FREQUENCY_DENSE = 100
RANK_FREQUENCY_PER_DECADE = 40


def ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, or None (JSON null) when the denominator is 0."""
    return float(numerator) / float(denominator) if denominator else None


def token_text(data: bytes) -> str:
    """A token's bytes for reading: UTF-8 text, bytes that are not shown as \\xNN."""
    return data.decode("utf-8", "backslashreplace")


def _row(tokens, bytes_, characters, words, fallback) -> dict:
    return {
        "tokens": int(tokens), "bytes": int(bytes_), "characters": int(characters), "words": int(words),
        "fallback_tokens": int(fallback),
        "bytes_per_token": ratio(bytes_, tokens), "characters_per_token": ratio(characters, tokens),
        "tokens_per_word": ratio(tokens, words), "fallback_share": ratio(fallback, tokens),
    }


def rank_frequency(counts: np.ndarray) -> list[list[int]]:
    """[rank, count] of the produced tokens by descending count (rank 1 = most frequent), thinned on a log scale."""
    ordered = np.sort(counts[counts > 0])[::-1]
    n = len(ordered)
    if not n:
        return []
    ranks = set(range(1, min(n, RANK_FREQUENCY_DENSE) + 1))
    points = RANK_FREQUENCY_PER_DECADE * max(1, int(np.log10(n)) + 1)
    ranks.update(int(r) for r in np.unique(np.round(np.logspace(0, np.log10(n), points))))
    ranks.add(n)
    return [[r, int(ordered[r - 1])] for r in sorted(ranks) if 1 <= r <= n]


def _token(tokenizer: Tokenizer, token_id: int, count: int | None = None) -> dict:
    data = tokenizer.token_bytes(token_id)
    entry = {"id": token_id, "text": token_text(data), "hex": data.hex(), "length": len(data)}
    if count is not None:
        entry["count"] = count
    return entry


def vocabulary_use(tokenizer: Tokenizer, counts: np.ndarray, rare_below: int) -> dict:
    """The use of the ordinary tokens (neither special nor added: the tokens text is spelled with),
    under their own IDs, which need not be 0..N-1 (a gap, added tokens between them)."""
    spelled = {*tokenizer.special_tokens.values(), *tokenizer.added_tokens.values()}  # a HF vocab lists them too
    ids = np.array([i for i in tokenizer.ordinary_ids() if i not in spelled], dtype=np.int64)
    ordinary = counts[ids]
    never = np.flatnonzero(ordinary == 0)
    rare = np.flatnonzero((ordinary > 0) & (ordinary < rare_below))
    rare = rare[np.lexsort((ids[rare], ordinary[rare]))]  # by count, then ID
    longest = np.lexsort((ids, -token_lengths(tokenizer)[ids]))[:LONGEST_TOKENS]  # by length, then ID
    return {
        "ordinary_tokens": len(ordinary),
        "produced": int((ordinary > 0).sum()),
        "never_produced": {"count": len(never), "tokens": [_token(tokenizer, int(ids[i])) for i in never]},
        "rare": {
            "below": rare_below, "count": len(rare),
            "tokens": [_token(tokenizer, int(ids[i]), int(ordinary[i])) for i in rare],
        },
        "longest": [_token(tokenizer, int(ids[i]), int(ordinary[i])) for i in longest],
        "rank_frequency": rank_frequency(ordinary),
        "superwords": superword_use(tokenizer, ids, ordinary),
    }


def superword_use(tokenizer: Tokenizer, ids: np.ndarray, counts: np.ndarray) -> dict:
    """The superword tokens (``bpe.superwords.rules.is_superword``: a space between two of their
    non-space bytes) among the ordinary ``ids`` (used ``counts`` times): how many the vocabulary
    holds, their share of the tokens produced and of the text's bytes, and the most used ones."""
    lengths = token_lengths(tokenizer)[ids]
    superword = np.array([is_superword(tokenizer.token_bytes(int(i))) for i in ids], dtype=bool)
    tokens, text_bytes = int(counts.sum()), int((counts * lengths).sum())
    used = counts * superword
    most = np.lexsort((ids, -used))[:LONGEST_TOKENS]
    return {
        "in_vocabulary": int(superword.sum()),
        "produced": int(used.sum()),
        "share_of_tokens": ratio(int(used.sum()), tokens),
        "share_of_bytes": ratio(int((used * lengths).sum()), text_bytes),
        "most_used": [_token(tokenizer, int(ids[i]), int(counts[i])) for i in most if used[i]],
    }


def vocabulary_health(tokenizer: Tokenizer, use: dict) -> dict:
    """What is wrong with the ordinary tokens on their own, given ``vocabulary_use``'s result ``use``:
    those no merge path reaches (``bpe.merge_graph``: BPE never produces them from text, e.g. a
    rank file's token that is no two lower-ranked tokens joined), those whose bytes are not valid
    UTF-8 on their own (byte-level fragments of characters), and how many were never produced on
    the corpus (listed under ``vocabulary.never_produced``)."""
    spelled = {*tokenizer.special_tokens.values(), *tokenizer.added_tokens.values()}
    unreachable = [i for i in MergeGraph.of(tokenizer).unreachable() if i not in spelled]
    not_utf8 = []
    for token_id, data in sorted(tokenizer.ordinary_tokens().items()):
        if token_id in spelled:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            not_utf8.append(token_id)
    return {
        "no_merge_path": {"count": len(unreachable), "tokens": [_token(tokenizer, i) for i in unreachable]},
        "not_utf8": {"count": len(not_utf8), "tokens": [_token(tokenizer, i) for i in not_utf8]},
        "never_produced": {"count": use["never_produced"]["count"], "tokens_in": "vocabulary.never_produced"},
    }


def segmentation(table: Sequence[Sequence[int]], classes: Sequence[str]) -> dict:
    """BPE's, greedy longest match's and the fewest token counts on the sample, per class and in total."""
    def row(pieces, bytes_, bpe, greedy, fewest) -> dict:
        return {
            "pieces": int(pieces), "bytes": int(bytes_), "bpe": int(bpe), "greedy": int(greedy), "fewest": int(fewest),
            "bpe_over_fewest_percent": ratio(100 * (bpe - fewest), fewest),
            "greedy_over_fewest_percent": ratio(100 * (greedy - fewest), fewest),
        }

    array = np.array(table, dtype=np.int64)
    return {
        "by_script": [{"script": name, **row(*array[i])} for i, name in enumerate(classes) if array[i, 0]],
        "total": row(*array.sum(axis=0)),
    }


def build_report(
    measures: dict,
    tokenizers: Sequence[Tokenizer],
    tokenizer_paths: Sequence[str],
    inputs: Sequence[str],
    dead_letters: int,
    rare_below: int,
) -> dict:
    """report.json's content."""
    classes = measures["classes"]
    sources = measures["sources"]
    counts = {s: np.array(v["counts"], dtype=np.int64) for s, v in sources.items()}  # [tok, quantity, class]
    words = {s: np.array(v["words"], dtype=np.int64) for s, v in sources.items()}
    n_classes = len(classes)
    all_counts = sum(counts.values()) if counts else np.zeros((len(tokenizers), 4, n_classes), dtype=np.int64)
    all_words = sum(words.values()) if words else np.zeros(n_classes, dtype=np.int64)
    report_tokenizers = []
    for t, (tokenizer, path) in enumerate(zip(tokenizers, tokenizer_paths)):
        c = all_counts[t]
        by_script = [
            {"script": name, **_row(c[0, i], c[1, i], c[2, i], all_words[i], c[3, i])}
            for i, name in enumerate(classes) if c[0, i] or all_words[i]
        ]
        by_source = [
            {"source": s, "documents": sources[s]["documents"],
             **_row(*(counts[s][t, q].sum() for q in range(3)), words[s].sum(), counts[s][t, 3].sum())}
            for s in sorted(sources)
        ]
        preset = next((name for name, p in PRESETS.items() if p == tokenizer.pattern), None)
        use = vocabulary_use(tokenizer, np.array(measures["token_counts"][t], dtype=np.int64), rare_below)
        report_tokenizers.append({
            "name": _name(path, tokenizer_paths),
            "path": path, "sha256": tokenizer.sha256, "vocab_size": tokenizer.vocab_size,
            "merges": len(tokenizer.merges), "special_tokens": dict(tokenizer.special_tokens),
            "pattern": tokenizer.pattern, "pattern_preset": preset,
            "total": _row(c[0].sum(), c[1].sum(), c[2].sum(), all_words.sum(), c[3].sum()),
            "by_script": by_script, "by_source": by_source,
            "vocabulary": use, "health": vocabulary_health(tokenizer, use),
            "segmentation": segmentation(measures["segmentation"][t], classes),
        })
    documents = sum(v["documents"] for v in sources.values())
    return {
        "format": FORMAT,
        "corpus": {
            "inputs": list(inputs), "documents": documents, "dead_letters": dead_letters,
            "records_read": documents + dead_letters,
            "bytes": int(all_counts[0, 1].sum()) if len(tokenizers) else 0,
            "characters": int(all_counts[0, 2].sum()) if len(tokenizers) else 0,
            "words": int(all_words.sum()), "sources": len(sources),
            "sample_documents": measures["sample_documents"],
            "sample_bytes_per_document": SAMPLE_BYTES,
        },
        "tokenizers": report_tokenizers,
        "comparison": _comparison(all_counts, classes),
        "visualizer": measures["visualizer"],
    }


def _comparison(all_counts: np.ndarray, classes: Sequence[str]) -> list[dict]:
    """Per class, every tokenizer's tokens and their difference from the first tokenizer's, in percent."""
    rows = []
    for i, name in enumerate(classes):
        tokens = [int(all_counts[t, 0, i]) for t in range(all_counts.shape[0])]
        if any(tokens):
            rows.append({
                "script": name, "bytes": int(all_counts[0, 1, i]), "tokens": tokens,
                "difference_percent": [ratio(100 * (n - tokens[0]), tokens[0]) for n in tokens],
            })
    return rows


def _name(path: str, paths: Sequence[str]) -> str:
    """A short name for a tokenizer: the last path parts that tell it apart from the others."""
    parts = path.rstrip("/").split("/")
    if parts[-1] == "tokenizer.json" and len(parts) > 1:
        parts = parts[:-1]
    others = [p.rstrip("/").split("/") for p in paths if p != path]
    for n in range(1, len(parts) + 1):
        name = "/".join(parts[-n:])
        if not any("/".join(o[-n:]) == name or "/".join(o[-n - 1 : -1]) == name for o in others):
            return name
    return path


def display_source(source: str, sources: Sequence[str]) -> str:
    """A source as the page shows it: a file path relative to the files' common directory."""
    files = [s for s in sources if os.path.isabs(s)]
    if not os.path.isabs(source) or len(files) < 2:
        return os.path.basename(source) if os.path.isabs(source) else source
    return os.path.relpath(source, os.path.commonpath(files))
