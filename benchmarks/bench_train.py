"""Training benchmark: beam-bpe's merge loop against Hugging Face ``tokenizers``.

What is timed, on the same documents:

* (a) counting: beam-bpe's pre-tokenizer building the word-count table (in the
  real pipeline Beam does this, spread over workers);
* (b) training: ``bpe.trainer.train_merges`` on that table, one core, with the
  C merge loop (when built) and with its pure-Python twin;
* (c) HF: ``tokenizers``' BpeTrainer ``train_from_iterator`` on the documents
  (Rust, all cores; it pre-tokenizes, counts and merges).

The goal is (b) < (c). Peak memory of the pure-Python loop is measured in a
separate run under tracemalloc (which slows Python down, and sees no memory
the C loop allocates), and reported per unique piece; benchmarks/bench_merges.py
measures the peak RSS of both loops.

    python -m benchmarks.bench_train --mb 50 --vocab-size 32000
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc

from benchmarks.corpus import corpus_text, word_counts
from bpe.training import trainer
from bpe.pretokenize import resolve_pattern
from bpe.training.trainer import train_merges


def hf_train(docs: list[str], vocab_size: int, pattern: str = "gpt2", min_frequency: int = 2):
    """Trains HF ``tokenizers`` byte-level BPE the way beam-bpe does; returns the HF tokenizer.

    Args:
      docs: the documents.
      vocab_size: HF's vocab size (256 byte tokens + merges; no special tokens).
      pattern: a preset name or regex, split with "isolated" behaviour as ours.
      min_frequency: the smallest pair count HF may merge.
    """
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(resolve_pattern(pattern)), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(docs, trainer)
    return tokenizer


def pure_python_merges(table: dict[bytes, int], num_merges: int, min_frequency: int = 2) -> list:
    """``train_merges`` with the pure-Python loop, as when the C loop is not built."""
    compiled, trainer._merges = trainer._merges, None
    try:
        return train_merges(table, num_merges, min_frequency=min_frequency, progress=False)
    finally:
        trainer._merges = compiled


def peak_memory(table: dict[bytes, int], num_merges: int, min_frequency: int = 2) -> int:
    """Peak bytes allocated by Python during the pure-Python ``train_merges`` (beyond the input table)."""
    tracemalloc.start()
    try:
        pure_python_merges(table, num_merges, min_frequency)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bench_train(
    docs: list[str],
    vocab_size: int,
    pattern: str = "gpt2",
    min_frequency: int = 2,
    hf: bool = True,
    memory: bool = True,
) -> dict:
    """Times counting, our training and HF's training on ``docs``.

    Args:
      docs: the documents.
      vocab_size: target vocab size (256 + merges; no special tokens).
      pattern: pre-tokenizer preset or regex, used by both sides.
      min_frequency: passed to both trainers.
      hf: also time HF ``tokenizers`` (skipped if False).
      memory: also measure our peak memory (a second, slower training run).

    Returns:
      A dict of results: sizes, seconds per stage, merges learned, memory.
    """
    results: dict = {
        "input_bytes": sum(len(doc.encode("utf-8")) for doc in docs),
        "documents": len(docs),
        "vocab_size": vocab_size,
        "pattern": pattern,
    }
    start = time.perf_counter()
    table = word_counts(docs, pattern)
    results["count_s"] = time.perf_counter() - start
    results["unique_pieces"] = len(table)
    results["unique_piece_bytes"] = sum(map(len, table))

    num_merges = vocab_size - 256
    start = time.perf_counter()
    merges = train_merges(table, num_merges, min_frequency=min_frequency, progress=False)
    results["train_s"] = time.perf_counter() - start
    results["merges"] = len(merges)
    results["loop"] = "C" if trainer._merges is not None else "pure Python (the C loop is not built)"
    start = time.perf_counter()
    same = pure_python_merges(table, num_merges, min_frequency) == merges
    results["train_python_s"] = time.perf_counter() - start
    results["same_merges"] = same

    if memory:
        peak = peak_memory(table, num_merges, min_frequency)
        results["train_peak_bytes"] = peak
        results["train_bytes_per_piece"] = peak / max(1, len(table))

    if hf:
        start = time.perf_counter()
        hf_tokenizer = hf_train(docs, vocab_size, pattern, min_frequency)
        results["hf_s"] = time.perf_counter() - start
        results["hf_vocab_size"] = hf_tokenizer.get_vocab_size()
        results["ratio_train_over_hf"] = results["train_s"] / results["hf_s"]
    return results


def format_table(results: dict) -> str:
    """A side-by-side text table of ``bench_train``'s results."""
    mb = results["input_bytes"] / 1e6
    lines = [
        f"corpus: {mb:.1f} MB, {results['documents']} documents, pattern {results['pattern']}, "
        f"vocab {results['vocab_size']}",
        f"table: {results['unique_pieces']} unique pieces, {results['unique_piece_bytes'] / 1e6:.2f} MB of piece bytes",
        "",
        f"{'stage':<44} {'seconds':>9}",
        f"{'(a) beam-bpe count table (1 core)':<44} {results['count_s']:>9.2f}",
        f"{'(b) beam-bpe train_merges (1 core)':<44} {results['train_s']:>9.2f}   "
        f"({results['merges']} merges, {results['loop']} loop)",
        f"{'(b) the same, pure-Python loop':<44} {results['train_python_s']:>9.2f}   "
        f"(same merges: {results['same_merges']})",
    ]
    if "hf_s" in results:
        lines.append(
            f"{'(c) HF tokenizers train_from_iterator':<44} {results['hf_s']:>9.2f}   "
            f"(vocab {results['hf_vocab_size']}, {os.cpu_count()} cores)"
        )
        lines.append(f"{'ratio (b) / (c)':<44} {results['ratio_train_over_hf']:>9.2f}")
    if "train_peak_bytes" in results:
        lines.append(
            f"beam-bpe pure-Python loop peak memory (tracemalloc): {results['train_peak_bytes'] / 1e6:.1f} MB, "
            f"{results['train_bytes_per_piece']:.0f} bytes per unique piece"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=50, help="corpus size in MB (default 50)")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--pattern", default="gpt2")
    parser.add_argument("--min-frequency", type=int, default=2)
    parser.add_argument("--no-hf", action="store_true", help="skip HF tokenizers")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    args = parser.parse_args(argv)

    docs = corpus_text(int(args.mb * 1e6))
    results = bench_train(
        docs,
        args.vocab_size,
        pattern=args.pattern,
        min_frequency=args.min_frequency,
        hf=not args.no_hf,
        memory=not args.no_memory,
    )
    print(format_table(results))


if __name__ == "__main__":
    main()
