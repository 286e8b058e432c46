"""Superword tokenizers (SuperBPE) against ordinary BPE: compression, training time, encoding speed.

Sections (``--sections``, all by default):

* ``compression``: English documents of the benchmark corpus (the English man
  pages), split into training and held-out documents by position. Ordinary BPE at
  ``--vocab-size`` and superword tokenizers of the same size with the transition
  at each of ``--transitions`` (fractions of the size), all trained on the same
  tables; the tokens each needs for the held-out documents. Goal: at least 20%
  fewer tokens than ordinary BPE with the transition at 80-90%. The multilingual
  corpus gives the figure per script (``--scripts``).
* ``train``: ``beam-bpe train --superword-transition`` end to end on ``--mb`` MB of
  the multilingual corpus as JSON Lines, 2 workers: the count and merge phases as
  ``train_stats.json`` gives them, and the peak memory of the process tree.
  Goal: under 593 s at 1 GB.
* ``encode``: ``Tokenizer.encode`` of a superword tokenizer against HF tokenizers
  on the same tokenizer.json, one core, held-out text; IDs compared. Goal: 2x.

    python -m benchmarks.bench_superwords --train-mb 20 --vocab-size 32000
    python -m benchmarks.bench_superwords --sections train --mb 1000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import tempfile
import re
import time
import zlib
from collections import Counter

import bpe
from benchmarks.corpus import _man_sources, _read, corpus_text
from bpe.scripts import SCRIPTS, WRITING, classify
from bpe.superwords.rules import STAGE_TWO_PATTERN, is_superword
from bpe.training.piece_counter import PieceCounter
from bpe.training.superwords import train_superwords


def english_documents(max_bytes: int, by_family: bool = False) -> tuple[list[str], list[str]]:
    """English man pages, in the corpus's order, up to ``max_bytes`` of UTF-8: (training, held out).

    Every tenth page is held out; with ``by_family``, every page of one family in ten
    (the name up to its first "_", "-" or ".": all of git-*, all of systemd*), so no
    held-out page has a near-copy among the training pages, and gcloud's pages are left
    out: 16,631 pages from one generator's template, 54% of the English pages' bytes.
    """
    train, held_out, total = [], [], 0
    for i, path in enumerate(_man_sources().get("en", [])):
        family = re.split(r"[-_.]", path.name, maxsplit=1)[0]
        if by_family and family == "gcloud":
            continue
        text = _read(path)
        if not text:
            continue
        if by_family:
            side = held_out if zlib.crc32(family.encode()) % 10 == 0 else train
        else:
            side = held_out if i % 10 == 0 else train
        side.append(text)
        total += len(text.encode())
        if total >= max_bytes:
            break
    return train, held_out


def split(docs: list[str]) -> tuple[list[str], list[str]]:
    """Every tenth document held out (by position, so both halves span the same sources)."""
    return [d for i, d in enumerate(docs) if i % 10], [d for i, d in enumerate(docs) if not i % 10]


def tables(docs: list[str], pattern: str) -> tuple[dict, dict]:
    return PieceCounter(pattern).count(docs), PieceCounter(STAGE_TWO_PATTERN, "regex").count(docs)


def token_count(tokenizer: bpe.Tokenizer, docs: list[str]) -> int:
    return sum(len(tokenizer.encode(doc)) for doc in docs)


def compression(train_docs, held_out, vocab_size: int, transitions: list[float], pattern: str) -> dict:
    """Tokens on ``held_out``: ordinary BPE, then a superword tokenizer per transition."""
    word_counts, superword_counts = tables(train_docs, pattern)
    started = time.perf_counter()
    ordinary = bpe.train(word_counts, vocab_size, pattern=pattern, progress=False)
    base = token_count(ordinary, held_out)
    print(f"ordinary BPE {vocab_size}: {base:,} tokens ({time.perf_counter() - started:.1f} s)", flush=True)
    results = {"ordinary": base, "superwords": {}}
    for share in transitions:
        transition = round(vocab_size * share)
        started = time.perf_counter()
        tok = train_superwords(word_counts, superword_counts, vocab_size, transition, pattern, progress=False)
        seconds = time.perf_counter() - started
        tokens = token_count(tok, held_out)
        superwords = sum(is_superword(tok.token_bytes(t)) for t in range(256, 256 + len(tok.merges)))
        results["superwords"][share] = tokens
        print(f"superwords T={transition} ({share:.0%}): {tokens:,} tokens, {1 - tokens / base:.1%} fewer; "
              f"{superwords:,} superword tokens; trained in {seconds:.1f} s", flush=True)
    return results


def per_script(docs: list[str], vocab_size: int, share: float, pattern: str) -> None:
    """Fewer tokens per script of the multilingual corpus (documents by their main script)."""
    train_docs, held_out = split(docs)
    word_counts, superword_counts = tables(train_docs, pattern)
    ordinary = bpe.train(word_counts, vocab_size, pattern=pattern, progress=False)
    superword = train_superwords(word_counts, superword_counts, vocab_size, round(vocab_size * share), pattern,
                                 progress=False)
    by_script: dict[str, list[int]] = {}
    for doc in held_out:
        script = Counter(index for index in classify(doc) if index in WRITING).most_common(1)
        name = SCRIPTS[script[0][0]] if script else "none"
        counts = by_script.setdefault(name, [0, 0])
        counts[0] += len(ordinary.encode(doc))
        counts[1] += len(superword.encode(doc))
    for name, (base, tokens) in sorted(by_script.items(), key=lambda item: -item[1][0]):
        print(f"  {name:12} ordinary {base:>10,}  superwords {tokens:>10,}  {1 - tokens / base:6.1%} fewer")


def encode_speed(train_docs, held_out, vocab_size: int, share: float, pattern: str) -> None:
    """One core: ``Tokenizer.encode`` against HF tokenizers on the same tokenizer.json."""
    import tokenizers

    tok = train_superwords(*tables(train_docs, pattern), vocab_size, round(vocab_size * share), pattern,
                           progress=False)
    with tempfile.TemporaryDirectory() as scratch:
        hf = tokenizers.Tokenizer.from_file(tok.save(scratch))
    size = sum(len(doc.encode()) for doc in held_out)
    timings = {}
    for name, encode in (("beam-bpe", tok.encode), ("HF tokenizers", lambda d: hf.encode(d, add_special_tokens=False).ids)):
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            ids = [encode(doc) for doc in held_out]
            best = min(best, time.perf_counter() - started)
        timings[name] = (best, ids)
        print(f"{name}: {size / best / 1e6:.2f} MB/s", flush=True)
    assert timings["beam-bpe"][1] == timings["HF tokenizers"][1], "IDs differ"
    print(f"IDs identical; beam-bpe {timings['HF tokenizers'][0] / timings['beam-bpe'][0]:.2f}x HF tokenizers")


def train_end_to_end(mb: int, vocab_size: int, share: float, workers: int, copies: int) -> None:
    """``beam-bpe train --superword-transition`` on ``mb`` MB as JSON Lines, written ``copies``
    times (the benchmark corpus holds 247 MB of distinct text: more repeats documents, so the
    count reads more while the tables, and the merge phase, stay those of one copy); phases and
    peak memory."""
    docs = corpus_text(mb * 1_000_000)
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        corpus = os.path.join(scratch, "corpus.jsonl")
        with open(corpus, "w", encoding="utf-8") as f:
            for _ in range(copies):
                for doc in docs:
                    f.write(json.dumps({"text": doc}) + "\n")
        output = os.path.join(scratch, "out")
        started = time.perf_counter()
        subprocess.run(["beam-bpe", "train", "--no-progress", f"--direct_num_workers={workers}",
                        "--direct_running_mode=multi_processing", "--input", corpus, "--format", "jsonl",
                        "--vocab-size", str(vocab_size), "--superword-transition", str(round(vocab_size * share)),
                        "--output", output], check=True)
        seconds = time.perf_counter() - started
        stats = json.load(open(os.path.join(output, "train_stats.json")))
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"{os.path.getsize(corpus) / 1e6:.0f} MB of JSON Lines ({stats['bytes'] / 1e6:.0f} MB of text, "
              f"{copies} copies): {seconds:.1f} s end to end; phases {stats['seconds']}; "
              f"largest process {peak:.0f} MiB (peak resident set of the biggest child)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="compression,encode", help="compression, scripts, encode, train")
    parser.add_argument("--train-mb", type=float, default=20, help="English text for the compression sections")
    parser.add_argument("--mb", type=int, default=100, help="multilingual text for the train and scripts sections")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--transitions", default="0.8,0.85,0.9")
    parser.add_argument("--pattern", default="gpt2")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--copies", type=int, default=1, help="train: write the corpus this many times")
    parser.add_argument("--by-family", action="store_true",
                        help="hold out whole families of man pages (gcloud_*, git-*), not every tenth page")
    args = parser.parse_args()
    sections = args.sections.split(",")
    shares = [float(s) for s in args.transitions.split(",")]
    if "compression" in sections or "encode" in sections:
        train_docs, held_out = english_documents(int(args.train_mb * 1e6), args.by_family)
        print(f"English: {sum(len(d.encode()) for d in train_docs) / 1e6:.1f} MB training, "
              f"{sum(len(d.encode()) for d in held_out) / 1e6:.1f} MB held out", flush=True)
        if "compression" in sections:
            compression(train_docs, held_out, args.vocab_size, shares, args.pattern)
        if "encode" in sections:
            encode_speed(train_docs, held_out, args.vocab_size, shares[0], args.pattern)
    if "scripts" in sections:
        per_script(corpus_text(args.mb * 1_000_000), args.vocab_size, shares[0], args.pattern)
    if "train" in sections:
        train_end_to_end(args.mb, args.vocab_size, shares[0], args.workers, args.copies)


if __name__ == "__main__":
    main()
