"""Parity-aware training beside plain training, on a multilingual corpus with held-out text.

    python -m benchmarks.bench_parity --vocab-size 32000 --english-mb 8 --mb-per-language 1.5

The corpus is this machine's own multilingual text (``benchmarks/corpus.py``):
the Debian man pages and the gettext catalogs of each language below, English
(``en``: man1..man8 and the English man pages) up to ``--english-mb`` and every
other language up to ``--mb-per-language``, so English dominates as it does in
real corpora. Every tenth document of each language is held out.

Both tokenizers learn the same number of merges from the same per-language
piece tables (gpt2 pattern, min-frequency 2): plain training on their sum
(``bpe.train(table, weights={})``) and parity-aware training
(``bpe.train(table, parity=True)``). On the held-out text of each language it
reports bytes per token; then the ratio between the best- and the
worst-compressed language's bytes per token (the parity gap: 1.0 is perfect
parity) and the overall bytes per token (all held-out bytes over all tokens).

``--global-merges M [M ...]``: also the hybrid variant with the first M merges
learned as plain training learns them (``bpe.train(..., global_merges=M)``),
one tokenizer per M: the trade between the gap and overall compression.

``--loop-against SO``: also times plain training on the summed table with this
tree's compiled merge loop and with another build of it (e.g. the one before
the parity mode: ``bpe/training/_merges*.so`` of another checkout), alternating,
``--repeat`` rounds, in CPU seconds (the process's own, so other load on the
machine counts less); the merges must be equal.
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks import corpus

LANGUAGES = ("en", "de", "fr", "es", "pl", "tr", "vi", "ru", "uk", "el", "ka", "zh", "ja", "ko", "bn", "ta")


def language_documents(languages, english_mb: float, mb_per_language: float) -> dict[str, list[str]]:
    """Each language's documents, in the corpus's stable file order, up to its size."""
    groups: dict[str, list] = {}
    for sources in (corpus._man_sources(), corpus._catalog_sources()):
        for language, paths in sources.items():
            groups.setdefault(language.split("_")[0].split(".")[0], []).append(paths)
    documents = {}
    for language in languages:
        limit = (english_mb if language == "en" else mb_per_language) * 1e6
        docs, size = [], 0
        for path in corpus._interleaved(groups.get(language, [])):
            text = corpus._read(path)
            if not text:
                continue
            docs.append(text)
            size += len(text.encode("utf-8"))
            if size >= limit:
                break
        documents[language] = docs
    return documents


def split(docs: list[str]) -> tuple[list[str], list[str]]:
    """(training, held-out): every tenth document is held out."""
    return [d for i, d in enumerate(docs) if i % 10 != 9], [d for i, d in enumerate(docs) if i % 10 == 9]


def bytes_per_token(tokenizer, docs: list[str]) -> tuple[int, int]:
    """(bytes, tokens) of the documents under the tokenizer."""
    size = tokens = 0
    for doc in docs:
        size += len(doc.encode("utf-8"))
        tokens += len(tokenizer.encode(doc))
    return size, tokens


def time_loops(table: dict, vocab_size: int, other_build: str, repeat: int) -> dict[str, list[float]]:
    """CPU seconds of plain training with this tree's compiled loop and with ``other_build``, alternating."""
    import importlib.util

    from bpe.training import trainer

    spec = importlib.util.spec_from_file_location("bpe.training._merges", other_build)
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    ours = trainer._merges
    seconds: dict[str, list[float]] = {"this": [], "other": []}
    merges = {}
    try:
        for _ in range(repeat):
            for name, module in (("this", ours), ("other", other)):
                trainer._merges = module
                started = time.process_time()
                merges[name] = trainer.train_merges(table, vocab_size - 256, progress=False, weights={})
                seconds[name].append(round(time.process_time() - started, 2))
    finally:
        trainer._merges = ours
    assert merges["this"] == merges["other"], "the two builds learned different merges"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--english-mb", type=float, default=8.0)
    parser.add_argument("--mb-per-language", type=float, default=1.5)
    parser.add_argument("--json", metavar="FILE", help="also write the figures here")
    parser.add_argument("--loop-against", metavar="SO", help="another build of the compiled merge loop to time")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--global-merges", type=int, nargs="+", default=[], metavar="M",
                        help="also train the hybrid variant with this many plain merges first")
    args = parser.parse_args()

    import bpe
    from bpe.training.piece_counter import PieceCounter

    documents = language_documents(LANGUAGES, args.english_mb, args.mb_per_language)
    counter = PieceCounter("gpt2")
    table, held_out = {}, {}
    for language, docs in documents.items():
        if len(docs) < 10:
            continue  # too little text on this machine to hold any out
        training, held_out[language] = split(docs)
        table[language] = counter.count(training)
    train_bytes = {language: sum(len(w) * c for w, c in counts.items()) for language, counts in table.items()}

    results = {}
    runs = [("plain", {"weights": {}}), ("parity", {"parity": True})]
    runs += [(f"hybrid {m}", {"parity": True, "global_merges": m}) for m in args.global_merges]
    for name, options in runs:
        started = time.perf_counter()
        tokenizer = bpe.train(table, args.vocab_size, progress=False, **options)
        seconds = time.perf_counter() - started
        per_language = {language: bytes_per_token(tokenizer, docs) for language, docs in held_out.items()}
        ratios = {language: size / tokens for language, (size, tokens) in per_language.items()}
        results[name] = {
            "train_seconds": round(seconds, 1),
            "merges": len(tokenizer.merges),
            "bytes_per_token": {language: round(ratio, 3) for language, ratio in ratios.items()},
            "overall_bytes_per_token": round(sum(s for s, _ in per_language.values())
                                             / sum(t for _, t in per_language.values()), 3),
            "parity_gap": round(max(ratios.values()) / min(ratios.values()), 3),
            "worst": min(ratios, key=ratios.get),
            "best": max(ratios, key=ratios.get),
        }
    figures = {
        "vocab_size": args.vocab_size,
        "languages": len(table),
        "training_mb": {language: round(size / 1e6, 2) for language, size in train_bytes.items()},
        "held_out_mb": round(sum(len(d.encode("utf-8")) for docs in held_out.values() for d in docs) / 1e6, 2),
        **results,
    }
    print(f"{len(table)} languages, training MB: {figures['training_mb']}, held out {figures['held_out_mb']} MB")
    print(f"{'language':<10}" + "".join(f"{name:>14}" for name in results))
    for language in held_out:
        print(f"{language:<10}" + "".join(f"{r['bytes_per_token'][language]:>14.3f}" for r in results.values()))
    for name in results:
        r = results[name]
        print(f"{name}: {r['merges']} merges in {r['train_seconds']} s; overall {r['overall_bytes_per_token']} B/tok; "
              f"best/worst {r['parity_gap']} ({r['best']} / {r['worst']})")
    if args.loop_against:
        figures["loop_against"] = time_loops(table, args.vocab_size, args.loop_against, args.repeat)
        print(f"plain training, CPU seconds per round: {figures['loop_against']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
