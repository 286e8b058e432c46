"""Packing throughput and memory: ``beam-bpe pack`` beside a one-core pyarrow + numpy flatten.

    python -m benchmarks.bench_pack [--mb 50] [--vocab 8192] [--workers 2] [--seq-len 2048]

1. Token shards of the benchmark corpus (``benchmarks.corpus``), made once by
   ``beam-bpe encode --append-eos`` into 8 shards and cached beside the corpus.
2. The floor: read every shard's tokens with pyarrow and write them as one flat
   array with numpy, on one core.
3. ``beam-bpe pack`` (DirectRunner, multi_processing, N workers, a validation
   split), wall clock including job start-up, on half of the shards and on all of
   them: tokens per second, the ratio to the floor, and the peak RSS of every
   process of the job (driver and workers); beside it, the time of an empty
   Beam job on the same runner (its start-up).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow.parquet as pq

import bpe
from benchmarks.bench_encode import PeakMemory
from benchmarks.corpus import CACHE_DIR, corpus_text, word_counts

# The CLI, with the pack command registered whether or not pipeline/cli.py lists it yet.
BEAM_BPE = [sys.executable, "-c", "import sys; from pipeline import cli; cli.COMMANDS.setdefault('pack', "
            "('pipeline.pack', 'pack token shards')); sys.exit(cli.main(sys.argv[1:]))"]
SHARDS = 8


def token_shards(mb: float, vocab: int, workers: int) -> str:
    """The directory of the corpus' token shards (built once, then cached)."""
    out = CACHE_DIR / f"pack-shards-{mb:g}mb-{vocab}"
    if (out / "stats.json").exists():
        return str(out)
    docs = corpus_text(int(mb * 1e6))
    work = tempfile.mkdtemp(prefix="bench-pack-")
    tok = bpe.train(word_counts(docs[: max(1, len(docs) // 10)]), vocab_size=vocab, special_tokens=("<|endoftext|>",))
    tok_path = tok.save(os.path.join(work, "tok"))
    with open(os.path.join(work, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for i, doc in enumerate(docs):
            f.write(json.dumps({"id": f"doc-{i}", "text": doc}, ensure_ascii=False) + "\n")
    subprocess.run([sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", tok_path, "--input", os.path.join(work, "corpus.jsonl"),
                    "--output", str(out), "--id-field", "id", "--append-eos", "--num-shards", str(SHARDS),
                    "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"], check=True)
    shutil.rmtree(work)
    return str(out)


def flatten_floor(paths: list[str], out: str) -> tuple[float, int]:
    """Seconds to read the shards' tokens with pyarrow and write one flat array with
    numpy (the best of three runs, so that files are in the page cache as for pack)."""
    return min(_flatten(paths, out) for _ in range(3))


def _flatten(paths: list[str], out: str) -> tuple[float, int]:
    start = time.perf_counter()
    parts = []
    for path in paths:
        tokens = pq.read_table(path, columns=["tokens"]).column("tokens").combine_chunks()
        parts.append(tokens.values.to_numpy())
    flat = np.concatenate(parts)
    flat.tofile(out)
    return time.perf_counter() - start, len(flat)


def run_pack(paths: list[str], out: str, args) -> tuple[float, dict, dict]:
    command = [*BEAM_BPE, "pack", *sum((["--input", p] for p in paths), []), "--seq-len", str(args.seq_len),
               "--output", out, "--validation-fraction", "0.01", "--overwrite",
               "--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}"]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stderr=subprocess.PIPE)
    memory = PeakMemory(proc.pid)
    _, err = proc.communicate()
    seconds = time.perf_counter() - start
    peaks = memory.stop()
    if proc.returncode:
        sys.exit(f"beam-bpe pack failed:\n{err.decode()[-3000:]}")
    with open(os.path.join(out, "stats.json")) as f:
        return seconds, json.load(f), {pid: (cmd, peak, pid == proc.pid) for pid, (cmd, peak) in peaks.items()}


def empty_job_seconds(workers: int) -> tuple[float, list[int]]:
    """Wall clock of a Beam job that does nothing, on the same runner (the start-up
    floor), and the peak RSS of its worker processes (the memory floor)."""
    code = ("import apache_beam as beam; from pipeline.runners import new_pipeline, pipeline_options\n"
            "import transforms.pack\n"
            "with new_pipeline(pipeline_options(['--direct_num_workers=%d'])) as p:\n"
            "    p | beam.Create([1, 2]) | beam.Map(lambda x: x)" % workers)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL)
    memory = PeakMemory(proc.pid)
    proc.wait()
    seconds = time.perf_counter() - start
    peaks = sorted(peak for pid, (_, peak) in memory.stop().items() if pid != proc.pid and peak >= 16 << 20)
    return seconds, peaks


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=2048)
    args = parser.parse_args(argv)

    shards = sorted(glob.glob(os.path.join(token_shards(args.mb, args.vocab, args.workers), "part-*.parquet")))
    work = tempfile.mkdtemp(prefix="bench-pack-")
    print(f"load: {os.getloadavg()[0]:.2f} (1 min average) on {os.cpu_count()} cores")
    seconds, peaks = empty_job_seconds(args.workers)
    print(f"an empty Beam job, {args.workers} workers: {seconds:.2f} s; peak RSS of its workers: "
          f"{', '.join(f'{p / 2**20:.0f} MiB' for p in peaks)}")
    for label, paths in (("half", shards[: len(shards) // 2]), ("all", shards)):
        floor_s, tokens = flatten_floor(paths, os.path.join(work, "flat.bin"))
        pack_s, stats, peaks = run_pack(paths, os.path.join(work, f"packed-{label}"), args)
        assert stats["tokens"] + stats["dropped_tokens"] == tokens
        print(
            f"{label} ({len(paths)} shards, {tokens} tokens): pyarrow read + numpy write, 1 core: {floor_s:.2f} s "
            f"({tokens / floor_s / 1e6:.1f} M tokens/s); beam-bpe pack, {args.workers} workers: {pack_s:.2f} s "
            f"({tokens / pack_s / 1e6:.2f} M tokens/s, start-up included), {pack_s / floor_s:.1f}x the floor; "
            f"{stats['sequences']} sequences"
        )
        for pid, (cmd, peak, is_driver) in sorted(peaks.items()):
            if peak >= 16 << 20:  # shell wrappers around the workers are smaller
                print(f"  peak RSS pid {pid} ({'driver' if is_driver else 'worker'}): {peak / 2**20:.0f} MiB")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
