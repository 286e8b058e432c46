"""Mixing three named sources with token budgets beside a plain ``beam-bpe pack`` of the same tokens.

    python -m benchmarks.bench_mixture [--mb 200] [--vocab 8192] [--workers 2] [--seq-len 2048] [--repeat 3]

The benchmark corpus's 8 token shards (``benchmarks.bench_pack.token_shards``)
are three sources of 3, 3 and 2 shards. The mixture's budgets: half the first
source's tokens (subsampled), all of the second's (one pass), and the rest of
99% of the total for the third (about 1.7 epochs: repeated), so it packs the
training tokens a plain ``pack --input`` of all 8 shards with a 1% validation
split packs. Both run alternately (DirectRunner, multi_processing, N workers,
wall clock including job start-up, and the CPU time of all the job's
processes); the medians of each and their ratio are printed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile

from benchmarks.bench_pack import BEAM_BPE, add_shard_arguments, alternate, token_shards
from transforms.pack import describe_shards

SOURCES = {"web": slice(0, 3), "code": slice(3, 6), "books": slice(6, 8)}


def budgets(groups: dict[str, list[str]], total: int) -> dict[str, int]:
    tokens = {name: describe_shards(paths).tokens for name, paths in groups.items()}
    web, code = tokens["web"] // 2, tokens["code"]
    return {"web": web, "code": code, "books": int(total * 0.99) - web - code}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shard_arguments(parser, mb=200)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, alternating; the medians count")
    args = parser.parse_args(argv)

    shards = sorted(glob.glob(os.path.join(token_shards(args.mb, args.vocab, args.workers), "part-*.parquet")))
    if len(shards) != 8:
        sys.exit(f"expected the 8 benchmark shards, found {len(shards)}")
    total = describe_shards(shards).tokens
    work = tempfile.mkdtemp(prefix="bench-mixture-")
    groups = {}
    for name, part in SOURCES.items():  # each source its own directory of links to its shards
        os.makedirs(os.path.join(work, name))
        for path in shards[part]:
            os.symlink(path, os.path.join(work, name, os.path.basename(path)))
        groups[name] = sorted(glob.glob(os.path.join(work, name, "part-*.parquet")))
    budget = budgets(groups, total)
    common = ["--seq-len", str(args.seq_len), "--validation-fraction", "0.01", "--overwrite", "--no-progress",
              "--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}"]
    commands = {
        "pack": [*BEAM_BPE, "pack", *sum((["--input", p] for p in shards), []), "--output",
                 os.path.join(work, "plain"), *common],
        "pack --source x3": [*BEAM_BPE, "pack", *sum(([
            "--source", f"{name}={os.path.join(work, name)}", "--source-tokens", f"{name}={budget[name]}"]
            for name in SOURCES), []), "--output", os.path.join(work, "mixed"), *common],
    }
    print(f"load: {os.getloadavg()[0]:.2f} (1 min average) on {os.cpu_count()} cores; {args.mb:g} MB, "
          f"{total:,} tokens in 8 shards; budgets {budget}")
    seconds, cpu = alternate(commands, args.repeat)
    for label, out in (("pack", "plain"), ("pack --source x3", "mixed")):
        with open(os.path.join(work, out, "stats.json")) as f:
            stats = json.load(f)
        print(f"{label}: {stats['splits']['train']['tokens']:,} training tokens, "
              f"{stats['splits']['validation']['tokens']:,} validation, {stats['sequences']:,} sequences")
    with open(os.path.join(work, "mixed", "mixture.json")) as f:
        mixture = json.load(f)
    print("mixture: " + ", ".join(f"{name} {s['train']['tokens']:,} tokens ({s['epochs']:.2f} epochs)"
                                  for name, s in mixture["sources"].items()))
    wall = {label: statistics.median(s) for label, s in seconds.items()}
    work_cpu = {label: statistics.median(s) for label, s in cpu.items()}
    print(f"median of {args.repeat}: pack {wall['pack']:.2f} s (CPU {work_cpu['pack']:.2f} s); "
          f"pack --source x3 {wall['pack --source x3']:.2f} s (CPU {work_cpu['pack --source x3']:.2f} s); "
          f"ratio {wall['pack --source x3'] / wall['pack']:.2f}x wall, "
          f"{work_cpu['pack --source x3'] / work_cpu['pack']:.2f}x CPU (goal at most 1.2x)")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
