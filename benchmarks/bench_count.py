"""Counting and end-to-end training benchmark: the Beam pipeline against plain loops and HF.

What is timed, on the same documents (benchmarks.corpus: real multilingual man
pages and Python sources from this machine), written as 8 JSON Lines shards:

* (a) bare loop: ``regex.findall`` + ``Counter.update`` over the documents in
  this process (the floor any counting pipeline pays);
* (b) the counting job (ReadDocuments -> CountPreTokens -> word_counts.parquet)
  on DirectRunner with 1 worker process, then with 2; wall time including
  Beam's start-up. Goals: (b, 1 worker) >= 0.8x the throughput of (a);
  2 workers >= 1.7x 1 worker (needs 2 idle cores);
* (c) ``beam-bpe train`` end to end (a subprocess, DirectRunner, 2 workers)
  against HF ``tokenizers`` ``train_from_iterator`` on the same documents and
  vocabulary. Goal: (c, beam-bpe) < (c, HF).

    python -m benchmarks.bench_count --mb 50 --vocab-size 32000
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import regex

from benchmarks.bench_train import hf_train
from benchmarks.corpus import CACHE_DIR, corpus_text
from bpe.pretokenize import resolve_pattern
from pipeline.runners import pipeline_options
from pipeline.train import run_count_job

SHARDS = 8


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (Beam's worker processes).

    On a shared machine wall time mostly measures the neighbours; CPU time is
    what the work itself costs.
    """
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def write_shards(docs: list[str], directory: Path) -> str:
    """Writes the documents as SHARDS jsonl files ({"text": ...}); returns their glob."""
    if not (directory / "done").exists():
        directory.mkdir(parents=True, exist_ok=True)
        for shard in range(SHARDS):
            with open(directory / f"part-{shard}.jsonl", "w", encoding="utf-8") as f:
                for doc in docs[shard::SHARDS]:
                    f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
        (directory / "done").touch()
    return str(directory / "part-*.jsonl")


def bare_count(docs: list[str], pattern: str) -> tuple[float, float, int]:
    """Returns (wall seconds, CPU seconds, unique pieces)."""
    findall = regex.compile(resolve_pattern(pattern)).findall
    started, cpu = time.perf_counter(), cpu_seconds()
    counts: collections.Counter = collections.Counter()
    for doc in docs:
        counts.update(findall(doc))
    return time.perf_counter() - started, cpu_seconds() - cpu, len(counts)


def pipeline_count(shards: str, pattern: str, workers: int, output: str) -> tuple[float, float, int]:
    """Runs the counting job; returns (wall seconds, CPU seconds of all processes, table rows)."""
    options = pipeline_options(
        [f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"]
    )
    args = argparse.Namespace(input=[shards], format="jsonl", text_field="text", pattern=pattern, min_word_count=1)
    started, cpu = time.perf_counter(), cpu_seconds()
    run_count_job(args, output, options)  # the job `beam-bpe train` runs
    seconds = time.perf_counter() - started
    return seconds, cpu_seconds() - cpu, pq.read_metadata(os.path.join(output, "word_counts.parquet")).num_rows


def train_end_to_end(shards: str, vocab_size: int, output: str, workers: int) -> float:
    command = [
        os.path.join(os.path.dirname(sys.executable), "beam-bpe"), "train",
        "--input", shards, "--vocab-size", str(vocab_size), "--output", output, "--no-progress",
        f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing",
    ]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=50, help="corpus size in MB (default 50)")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--pattern", default="gpt2")
    parser.add_argument("--no-count", action="store_true", help="skip the counting comparison")
    parser.add_argument("--no-e2e", action="store_true", help="skip beam-bpe train vs HF")
    args = parser.parse_args(argv)

    min_bytes = int(args.mb * 1e6)
    docs = corpus_text(min_bytes)
    size = sum(len(d.encode("utf-8")) for d in docs)
    shards = write_shards(docs, CACHE_DIR / f"count-shards-{min_bytes}")
    mb = size / 1e6
    print(f"corpus: {mb:.1f} MB, {len(docs)} documents in {SHARDS} jsonl shards, pattern {args.pattern}, "
          f"{os.cpu_count()} cores")
    print(f"{'stage':<52} {'wall s':>8} {'MB/s':>7} {'CPU s':>7}")

    def row(name: str, seconds: float, cpu: float | None = None, extra: str = "") -> None:
        cpu_text = f"{cpu:>7.2f}" if cpu is not None else f"{'':>7}"
        print(f"{name:<52} {seconds:>8.2f} {mb / seconds:>7.2f} {cpu_text}  {extra}", flush=True)

    results = {"mb": mb}
    if not args.no_count:
        bare_s, bare_cpu, bare_unique = bare_count(docs, args.pattern)
        results["bare_s"] = bare_s
        row("(a) bare regex.findall + Counter, 1 process", bare_s, bare_cpu, f"{bare_unique} unique")
        for workers in (1, 2):
            out = tempfile.mkdtemp(prefix="bench-count-")
            try:
                seconds, cpu, rows = pipeline_count(shards, args.pattern, workers, out)
            finally:
                shutil.rmtree(out, ignore_errors=True)
            assert rows == bare_unique, f"pipeline table has {rows} rows, plain count {bare_unique}"
            results[f"count_{workers}_s"] = seconds
            row(f"(b) counting job, DirectRunner, {workers} worker(s)", seconds, cpu,
                f"{bare_s / seconds:.2f}x bare wall, {bare_cpu / cpu:.2f}x bare CPU")
        print(f"2 workers / 1 worker speed-up: {results['count_1_s'] / results['count_2_s']:.2f}x")
    if not args.no_e2e:
        out = tempfile.mkdtemp(prefix="bench-train-")
        try:
            beam_s = train_end_to_end(shards, args.vocab_size, out, workers=2)
            with open(os.path.join(out, "train_stats.json"), encoding="utf-8") as f:
                stats = json.load(f)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        row(f"(c) beam-bpe train, vocab {args.vocab_size}, 2 workers", beam_s, None,
            f"count {stats['seconds']['count']:.1f} s + merges {stats['seconds']['train']:.1f} s")
        started = time.perf_counter()
        hf_train(docs, args.vocab_size, args.pattern)
        hf_s = time.perf_counter() - started
        row(f"(c) HF tokenizers train_from_iterator, vocab {args.vocab_size}", hf_s, None, "all cores")
        print(f"beam-bpe train / HF time: {beam_s / hf_s:.2f}")


if __name__ == "__main__":
    main()
