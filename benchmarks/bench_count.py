"""Counting and end-to-end training benchmark: the Beam pipeline against plain loops and HF.

What is timed, on the same documents (benchmarks.corpus: real multilingual man
pages and Python sources from this machine), written as 8 JSON Lines shards:

* (a) bare loop: ``regex.findall`` + ``Counter.update`` over the documents in
  this process (what counting costs without a faster engine);
* (a') ``bpe.piece_counter.PieceCounter.tables`` over the same documents in
  batches, in this process: the count DoFn's engine without Beam, its tables
  checked equal to (a)'s counts;
* (b) the counting job (ReadDocuments -> CountPreTokens -> word_counts.parquet)
  on DirectRunner with 1 worker process, then with 2, as ``beam-bpe train``
  runs it (its own process, warm workers forked once Beam is imported); wall
  time from the workers' start to the table written. Goals: (b, 1 worker) >= 2x the throughput of (a);
  2 workers >= 1.8x 1 worker (needs 2 idle cores);
* (c) ``beam-bpe train`` end to end (a subprocess, DirectRunner, 2 workers)
  against HF ``tokenizers`` ``train_from_iterator`` and rustbpe's (when
  installed: ``pip install rustbpe``) on the same documents, vocabulary and
  pattern. Goals: (c, beam-bpe) < (c, HF), and under 0.6x rustbpe's time.

Each timing is the best of ``--repeat`` runs (wall and CPU time taken from the
same run). On a shared machine CPU time (this process and its finished
children, Beam's worker processes) is what the work itself costs; the load
average is printed before and after. gigatoken uses a thread per core unless
``RAYON_NUM_THREADS`` says otherwise: set it to 1 to measure one core per worker.

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
from bpe.training.piece_counter import PieceCounter
from bpe.pretokenize import resolve_pattern
from transforms.count import CountPreTokenTables

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


def best_of(repeat: int, run) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds, result) of the fastest of ``repeat`` runs of ``run()``."""
    best = None
    for _ in range(repeat):
        started, cpu = time.perf_counter(), cpu_seconds()
        result = run()
        timing = (time.perf_counter() - started, cpu_seconds() - cpu, result)
        if best is None or timing[0] < best[0]:
            best = timing
    return best


def bare_count(docs: list[str], pattern: str) -> collections.Counter:
    findall = regex.compile(resolve_pattern(pattern)).findall
    counts: collections.Counter = collections.Counter()
    for doc in docs:
        counts.update(findall(doc))
    return counts


def engine_count(data: list[bytes], pattern: str, batch_bytes: int) -> tuple[str, dict[bytes, int]]:
    """(engine name, counts): the count DoFn's engine over batches of about batch_bytes."""
    counter = PieceCounter(pattern)
    total: collections.Counter = collections.Counter()
    batch, size = [], 0
    for doc in data + [None]:
        if doc is None or size >= batch_bytes:
            for table in counter.tables(batch, max_unique=CountPreTokenTables.max_batch_pieces):
                total.update(table)
            batch, size = [], 0
        if doc is not None:
            batch.append(doc)
            size += len(doc)
    return counter.engine, total


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# The counting job as ``beam-bpe train`` runs it, in a process of its own: Beam
# imported, the warm workers made (forked, on Linux), then the job, timed from
# there; CPU of the process and of its workers over the same span.
_COUNT_JOB = """
import argparse, json, resource, sys, time
from pipeline.runtime import beam_import, warm_workers
beam_import.import_beam()
from pipeline.cli import WORKER_MODULES
shards, pattern, workers, output = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def cpu():
    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
started, cpu_before = time.perf_counter(), cpu()
warm_workers.start_for(["train", f"--direct_num_workers={workers}"], WORKER_MODULES["train"])
from pipeline.command_machinery.runners import pipeline_options
from pipeline.train.count_job import run_count_job
options = pipeline_options([f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"])
args = argparse.Namespace(input=[shards], format="jsonl", text_field="text", pattern=pattern, min_word_count=1,
                          no_progress=True, progress_every=10.0)
run_count_job(args, output, options)
print(json.dumps({"seconds": time.perf_counter() - started, "cpu": cpu() - cpu_before}))
"""


def pipeline_count(shards: str, pattern: str, workers: int, output: str) -> tuple[float, float, int]:
    """Runs the counting job; returns (wall seconds, CPU seconds of all processes, table rows)."""
    run = subprocess.run([sys.executable, "-c", _COUNT_JOB, shards, pattern, str(workers), output],
                         capture_output=True, text=True, check=False)
    if run.returncode:
        sys.exit(f"the counting job failed:\n{run.stderr[-3000:]}")
    timing = json.loads(run.stdout.splitlines()[-1])
    rows = pq.read_metadata(os.path.join(output, "word_counts.parquet")).num_rows
    return timing["seconds"], timing["cpu"], rows


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
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing; the fastest counts (default 3)")
    args = parser.parse_args(argv)

    min_bytes = int(args.mb * 1e6)
    docs = corpus_text(min_bytes)
    size = sum(len(d.encode("utf-8")) for d in docs)
    shards = write_shards(docs, CACHE_DIR / f"count-shards-{min_bytes}")
    mb = size / 1e6
    print(f"corpus: {mb:.1f} MB, {len(docs)} documents in {SHARDS} jsonl shards, pattern {args.pattern}, "
          f"{os.cpu_count()} cores, RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'unset')}, "
          f"best of {args.repeat}, load {load()}")
    print(f"{'stage':<52} {'wall s':>8} {'MB/s':>7} {'CPU s':>7}")

    def row(name: str, seconds: float, cpu: float | None = None, extra: str = "") -> None:
        cpu_text = f"{cpu:>7.2f}" if cpu is not None else f"{'':>7}"
        print(f"{name:<52} {seconds:>8.2f} {mb / seconds:>7.2f} {cpu_text}  {extra}", flush=True)

    results = {"mb": mb}
    if not args.no_count:
        bare_s, bare_cpu, bare = best_of(args.repeat, lambda: bare_count(docs, args.pattern))
        expected = {piece.encode("utf-8"): n for piece, n in bare.items()}
        results["bare_s"] = bare_s
        row("(a) bare regex.findall + Counter, 1 process", bare_s, bare_cpu, f"{len(bare)} unique")
        data = [doc.encode("utf-8") for doc in docs]
        batch_bytes = CountPreTokenTables.batch_bytes
        engine_s, engine_cpu, (engine, counts) = best_of(
            args.repeat, lambda: engine_count(data, args.pattern, batch_bytes))
        assert counts == expected, "the engine's counts differ from the bare loop's"
        row(f"(a') PieceCounter ({engine}), 1 process", engine_s, engine_cpu,
            f"{bare_s / engine_s:.2f}x bare wall, {bare_cpu / engine_cpu:.2f}x bare CPU")
        for workers in (1, 2):
            def job():
                out = tempfile.mkdtemp(prefix="bench-count-")
                try:
                    return pipeline_count(shards, args.pattern, workers, out)
                finally:
                    shutil.rmtree(out, ignore_errors=True)

            _, _, (seconds, cpu, rows) = best_of(args.repeat, job)
            assert rows == len(bare), f"pipeline table has {rows} rows, plain count {len(bare)}"
            results[f"count_{workers}_s"] = seconds
            row(f"(b) counting job, DirectRunner, {workers} worker(s)", seconds, cpu,
                f"{bare_s / seconds:.2f}x bare wall, {bare_cpu / cpu:.2f}x bare CPU")
        print(f"2 workers / 1 worker speed-up: {results['count_1_s'] / results['count_2_s']:.2f}x; load {load()}")
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
        rust_s = rustbpe_train(docs, args.vocab_size, args.pattern)
        if rust_s is not None:
            row(f"(c) rustbpe train_from_iterator, vocab {args.vocab_size}", rust_s, None, "all cores")
            print(f"beam-bpe train / rustbpe time: {beam_s / rust_s:.2f}")


def rustbpe_train(docs: list[str], vocab_size: int, pattern: str) -> float | None:
    """Seconds rustbpe takes to train on ``docs`` (its own counting included), or None
    when it is not installed (a peer, installed only for benchmarks)."""
    try:
        import rustbpe
    except ImportError:
        print("(c) rustbpe: not installed (pip install rustbpe)")
        return None
    started = time.perf_counter()
    rustbpe.Tokenizer().train_from_iterator(iter(docs), vocab_size, pattern=resolve_pattern(pattern))
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
