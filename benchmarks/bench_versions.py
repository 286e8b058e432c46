"""``beam-bpe encode`` with two checkouts of beam-bpe, alternating, on the same corpus.

    python -m benchmarks.bench_versions --before ../old-checkout --after . \
        --tokenizer tok/ --input 'corpus/*.jsonl' --runs 3

Measures what a change costs the encode job: each run is one ``beam-bpe encode
--append-eos`` on 2 workers with the checkout first on ``PYTHONPATH`` (the same
installed dependencies), alternating before/after so that a drift of the
machine's speed falls on both. Reports per run the wall time, the CPU seconds
of the command's processes (``RUSAGE_CHILDREN``: the processes it waited for)
and of the whole machine (``/proc/stat``: every process, on an otherwise idle
machine the fairer figure), then the medians and their ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _machine_cpu() -> float:
    """CPU seconds the whole machine spent so far (user, nice, system)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:4]
    return sum(map(int, fields)) / os.sysconf("SC_CLK_TCK")


def run_once(tree: str, tokenizer: str, corpus: str, output: str, workers: int) -> tuple[float, float, float]:
    """(wall, CPU of the command's processes, CPU of the machine) of one encode with ``tree``'s code."""
    shutil.rmtree(output, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    wall, cpu, machine = time.perf_counter(), _children_cpu(), _machine_cpu()
    subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", tokenizer, "--input", corpus, "--output",
         output, "--append-eos", "--no-progress", "--direct_running_mode=multi_processing",
         f"--direct_num_workers={workers}"],
        env=env, check=True, cwd=tree, stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - wall, _children_cpu() - cpu, _machine_cpu() - machine


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the checkout before the change")
    parser.add_argument("--after", required=True, help="the checkout after the change")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    tokenizer, corpus = os.path.abspath(args.tokenizer), os.path.abspath(args.input)
    results: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.runs):
            for name in results:
                tree = getattr(args, name)
                results[name].append(run_once(tree, tokenizer, corpus, os.path.join(scratch, name), args.workers))
                wall, cpu, machine = results[name][-1]
                print(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU (its processes), {machine:.2f} s CPU (machine)",
                      flush=True)
    medians = {name: [statistics.median(run[i] for run in runs) for i in range(3)] for name, runs in results.items()}
    for i, label in enumerate(("wall", "CPU (its processes)", "CPU (machine)")):
        before, after = medians["before"][i], medians["after"][i]
        print(f"median {label}: before {before:.2f} s, after {after:.2f} s: {after / before:.2f}x")


if __name__ == "__main__":
    main()
