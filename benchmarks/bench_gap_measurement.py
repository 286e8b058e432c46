"""What measuring an engine's Unicode gaps costs, on first use of a version pair.

    python -m benchmarks.bench_gap_measurement

For every installed accelerator, tiktoken's engine and gigatoken's piece
counter, and every preset pattern: the seconds ``unicode_gaps.guard_ranges``
takes with neither the shipped tables nor the cache knowing the versions (what
a user pays once, the first time an engine or ``regex`` release is used),
then again with the cache it wrote (what every later run pays). Our side of the
comparison (``regex``'s pieces merged by tiktoken) is made once per pattern and
process and shared by the engines measured there: the first engine of a
pattern pays it, and its column says so.
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile
import time

import bpe
from bpe.accelerators import unicode_gaps
from bpe.pretokenize import PRESETS


def _measurers(pattern: str) -> dict:
    """Engine name -> a call that returns its (ranges, why) for ``pattern``."""
    from bpe.accelerators import proof
    from bpe.training import gigatoken_counts

    tokenizer = bpe.Tokenizer([(104, 105)], pattern=pattern)
    measurers = {}
    for name in ("gigatoken", "fastokens", "splintr"):
        module = importlib.import_module(f"bpe.accelerators.{name}")
        measurers[name] = lambda module=module: module.build(tokenizer)[1] or "built"
    measurers["tiktoken"] = lambda: proof.tiktoken_gaps(pattern)[1] or "measured"
    if pattern == PRESETS["gpt2"]:
        measurers["gigatoken piece counter"] = lambda: gigatoken_counts.gaps()[1] or "measured"
    return measurers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--patterns", nargs="+", default=["gpt2", "cl100k", "o200k"])
    args = parser.parse_args(argv)
    unicode_gaps.SHIPPED.clear()  # as for a release no table ships
    print(f"load {os.getloadavg()[0]:.2f}; regex {unicode_gaps.installed_version('regex')}")
    print(f"{'pattern':<8} {'engine':<24} {'first use s':>11} {'cached s':>9}  result")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["BEAM_BPE_CACHE_DIR"] = cache
        for preset in args.patterns:
            for name, run in _measurers(PRESETS[preset]).items():
                unicode_gaps._measured.clear()
                started = time.perf_counter()
                result = run()
                first = time.perf_counter() - started
                unicode_gaps._measured.clear()  # a later process: only the cache on disk
                started = time.perf_counter()
                run()
                cached = time.perf_counter() - started
                print(f"{preset:<8} {name:<24} {first:>11.2f} {cached:>9.2f}  {result[:60]}", flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
