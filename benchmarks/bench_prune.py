"""``beam-bpe prune``: the job against ``beam-bpe encode`` of the same corpus, and the pruning step alone.

    python -m benchmarks.bench_prune [--mb 50] [--workers 2] [--vocab 32000] [--keep 16000]

1. ``beam-bpe prune`` of a tokenizer of ``--vocab`` tokens (gpt2 pattern, trained
   on a fifth of the corpus, cached) down to ``--keep`` on >= 50 MB of real text
   in 8 JSON Lines shards, DirectRunner with N workers, wall clock including
   start-up; against ``beam-bpe encode`` of the same shards with the same
   tokenizer. Prune reads the corpus twice (the token use, then the tokens with
   the pruned tokenizer), so about twice encode's time is the expectation; no
   peer prunes a BPE vocabulary to compare with.
2. ``bpe.pruning.prune`` alone, in this process, on the job's counts: the
   driver's share of the command.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import bpe
from benchmarks.bench_report import BEAM_BPE, cached_tokenizer, timed, write_shards
from benchmarks.corpus import corpus_text
from bpe.pruning import prune


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--keep", type=int, default=16000)
    args = parser.parse_args(argv)
    docs = corpus_text(int(args.mb * 1e6))
    print(f"corpus: {len(docs)} documents, {sum(len(d.encode()) for d in docs) / 1e6:.1f} MB")
    tokenizer = cached_tokenizer(f"report-tokenizer-{args.vocab}-gpt2", docs[: max(1, len(docs) // 5)], args.vocab, "gpt2")
    work = tempfile.mkdtemp(prefix="bench-prune-")
    try:
        inputs = write_shards(docs, work)
        runner = ["--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}"]
        encode_s, encode_cpu = timed([*BEAM_BPE, "encode", "--tokenizer", tokenizer, "--input", inputs,
                                      "--output", os.path.join(work, "shards"), *runner])
        prune_s, prune_cpu = timed([*BEAM_BPE, "prune", "--tokenizer", tokenizer, "--input", inputs,
                                    "--vocab-size", str(args.keep), "--output", os.path.join(work, "pruned"), *runner])
        stats = json.load(open(os.path.join(work, "pruned", "stats.json")))
        encoded = json.load(open(os.path.join(work, "shards", "stats.json")))
        assert stats["tokens_before"] == encoded["tokens"]
        mb = stats["corpus"]["bytes"] / 1e6
        print(f"beam-bpe encode, {args.workers} workers: {encode_s:.1f} s ({mb / encode_s:.2f} MB/s), {encode_cpu:.1f} s CPU")
        print(f"beam-bpe prune {stats['base']['tokens']:,} -> {stats['pruned']['tokens']:,} tokens, {args.workers} "
              f"workers: {prune_s:.1f} s ({mb / prune_s:.2f} MB/s), {prune_cpu:.1f} s CPU; ratio prune/encode "
              f"{prune_s / encode_s:.2f}, CPU {prune_cpu / encode_cpu:.2f}; tokens {stats['tokens_before']:,} -> "
              f"{stats['tokens_after']:,} ({100 * (stats['tokens_after'] / stats['tokens_before'] - 1):+.2f}%)")
        base = bpe.Tokenizer.load(tokenizer)
        id_map = json.load(open(os.path.join(work, "pruned", "id_map.json")))
        removed = json.load(open(os.path.join(work, "pruned", "removed.json")))
        # The removed tokens' own counts and, for the kept ones, a count above them all: each step's
        # least-used leaf is then the same removed token as in the job, so the same ID map comes out.
        counts = {entry["id"]: entry["count"] for entry in removed}
        counts.update({i: stats["tokens_before"] + 1 for i, new in enumerate(id_map) if new is not None})
        start = time.perf_counter()
        pruned = prune(base, counts, args.keep)
        seconds = time.perf_counter() - start
        assert pruned.id_map == id_map
        print(f"bpe.pruning.prune alone, {base.vocab_size:,} -> {args.keep:,} tokens: {seconds:.2f} s (the same ID map)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
