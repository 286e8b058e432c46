"""Packing throughput and memory: ``beam-bpe pack`` beside a one-core pyarrow + numpy flatten.

    python -m benchmarks.bench_pack [--mb 50] [--vocab 8192] [--workers 2] [--seq-len 2048] [--encode]
    python -m benchmarks.bench_pack --formats parquet,megatron [--mb 50] [--repeat 3]

1. Token shards of the benchmark corpus (``benchmarks.corpus``), made once by
   ``beam-bpe encode --append-eos`` into 8 shards and cached beside the corpus.
2. The floor: read every shard's tokens with pyarrow and write them as one flat
   array with numpy, on one core.
3. ``beam-bpe pack`` (DirectRunner, multi_processing, N workers, a validation
   split), wall clock including job start-up, on half of the shards and on all of
   them: tokens per second, the ratio to the floor, the CPU time of all the
   job's processes (``CpuTime``: on a shared machine it moves far less than the
   wall clock) and the peak RSS of every process of the job (driver and
   workers); beside it, the time of an empty Beam job on the same runner (its
   start-up).
4. With ``--encode``: ``beam-bpe encode`` and ``beam-bpe encode --pack`` on the
   corpus, one after the other, and what packing adds, in wall clock and CPU.
5. With ``--formats A,B``: ``beam-bpe pack --format A`` beside ``--format B`` on all
   the shards (``megatron`` without ``--seq-len``: whole documents), alternating,
   ``--repeat`` runs of each: wall clock, CPU and the largest peak RSS of a worker,
   the fastest run of each and the ratios.
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
from typing import NamedTuple

import numpy as np
import pyarrow.parquet as pq

import bpe
from benchmarks.bench_encode import PeakMemory, ProcessPoller
from benchmarks.corpus import CACHE_DIR, corpus_text, word_counts

BEAM_BPE = [sys.executable, "-m", "pipeline.cli"]
SHARDS = 8


class CpuTime(ProcessPoller):
    """The CPU time (user + system) of a process and all its descendants: the sum
    over every process of the last figure seen, so the work a job does, about the
    same on a busy machine as on a quiet one."""

    INTERVAL = 0.1
    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, pid: int):
        self.seconds: dict[int, float] = {}
        super().__init__(pid)

    def sample(self, pid: int) -> None:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        self.seconds[pid] = (int(fields[11]) + int(fields[12])) / self.TICK  # utime, stime

    def result(self) -> float:
        return sum(self.seconds.values())


class Run(NamedTuple):
    seconds: float  # wall clock
    cpu: float  # CPU seconds of all its processes
    peaks: dict  # {pid: (command line, peak RSS)}
    pid: int  # of the command itself
    code: int
    err: bytes


def timed_run(command: list[str]) -> Run:
    start = time.perf_counter()
    proc = subprocess.Popen(command, stderr=subprocess.PIPE)
    memory, cpu = PeakMemory(proc.pid), CpuTime(proc.pid)
    _, err = proc.communicate()
    seconds = time.perf_counter() - start
    return Run(seconds, cpu.stop(), memory.stop(), proc.pid, proc.returncode, err)


def encode_inputs(mb: float, vocab: int) -> tuple[str, str]:
    """(tokenizer, corpus.jsonl) of the benchmark corpus (built once, then cached)."""
    work = CACHE_DIR / f"pack-inputs-{mb:g}mb-{vocab}"
    corpus = work / "corpus.jsonl"
    if not corpus.exists():
        docs = corpus_text(int(mb * 1e6))
        tok = bpe.train(word_counts(docs[: max(1, len(docs) // 10)]), vocab_size=vocab,
                        special_tokens=("<|endoftext|>",))
        work.mkdir(parents=True, exist_ok=True)
        tok.save(str(work / "tok"))
        with open(work / "corpus.tmp", "w", encoding="utf-8") as f:
            for i, doc in enumerate(docs):
                f.write(json.dumps({"id": f"doc-{i}", "text": doc}, ensure_ascii=False) + "\n")
        os.replace(work / "corpus.tmp", corpus)
    return str(work / "tok"), str(corpus)


def encode_command(mb: float, vocab: int, out: str, workers: int, shards: int = SHARDS) -> list[str]:
    tok_path, corpus = encode_inputs(mb, vocab)
    return [*BEAM_BPE, "encode", "--tokenizer", tok_path, "--input", corpus, "--output", out, "--id-field", "id",
            "--append-eos", "--num-shards", str(shards), "--overwrite",
            "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]


def token_shards(mb: float, vocab: int, workers: int) -> str:
    """The directory of the corpus' token shards (built once, then cached)."""
    out = CACHE_DIR / f"pack-shards-{mb:g}mb-{vocab}"
    if not (out / "stats.json").exists():
        subprocess.run(encode_command(mb, vocab, str(out), workers), check=True)
    return str(out)


def alternate(commands: dict[str, list[str]], repeat: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Runs the commands one after the other, ``repeat`` times: ({label: wall clock
    of each run}, {label: CPU time of each run}); a failed run ends the benchmark."""
    seconds = {label: [] for label in commands}
    cpu = {label: [] for label in commands}
    for _ in range(repeat):
        for label, command in commands.items():
            run = timed_run(command)
            if run.code:
                sys.exit(f"{label} failed:\n{run.err.decode()[-3000:]}")
            seconds[label].append(run.seconds)
            cpu[label].append(run.cpu)
            print(f"  {label}: {run.seconds:.2f} s, CPU {run.cpu:.2f} s (load {os.getloadavg()[0]:.2f})")
    return seconds, cpu


def compare_encode(args, work: str) -> None:
    """``encode`` beside ``encode --pack``, alternating, best of ``--repeat``."""
    base = encode_command(args.mb, args.vocab, os.path.join(work, "encoded"), args.workers)
    packed = [*encode_command(args.mb, args.vocab, os.path.join(work, "packed"), args.workers),
              "--pack", str(args.seq_len), "--validation-fraction", "0.01"]
    seconds, cpu = alternate({"encode": base, "encode --pack": packed}, args.repeat)
    best = {label: min(s) for label, s in seconds.items()}
    least = {label: min(s) for label, s in cpu.items()}
    print(f"encode: {best['encode']:.2f} s; encode --pack {args.seq_len}: {best['encode --pack']:.2f} s "
          f"(+{100 * (best['encode --pack'] / best['encode'] - 1):.0f}%), best of {args.repeat}; CPU "
          f"{least['encode']:.2f} s and {least['encode --pack']:.2f} s "
          f"(+{100 * (least['encode --pack'] / least['encode'] - 1):.0f}%)")


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


def run_pack(paths: list[str], out: str, args, format: str = "parquet") -> tuple[float, float, dict, dict]:
    shape = ["--format", "megatron"] if format == "megatron" else ["--format", format, "--seq-len", str(args.seq_len)]
    command = [*BEAM_BPE, "pack", *sum((["--input", p] for p in paths), []), *shape,
               "--output", out, "--validation-fraction", "0.01", "--overwrite",
               "--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}"]
    run = timed_run(command)
    if run.code:
        sys.exit(f"beam-bpe pack failed:\n{run.err.decode()[-3000:]}")
    with open(os.path.join(out, "stats.json")) as f:
        stats = json.load(f)
    return run.seconds, run.cpu, stats, {pid: (cmd, peak, pid == run.pid) for pid, (cmd, peak) in run.peaks.items()}


def compare_formats(shards: list[str], work: str, args) -> None:
    """``pack --format A`` beside ``--format B``, alternating, ``--repeat`` runs of each."""
    formats = args.formats.split(",")
    runs = {fmt: [] for fmt in formats}
    for _ in range(args.repeat):
        for fmt in formats:
            seconds, cpu, stats, peaks = run_pack(shards, os.path.join(work, fmt), args, fmt)
            worker = max(peak for cmd, peak, is_driver in peaks.values() if not is_driver)
            runs[fmt].append((seconds, cpu, worker))
            print(f"  --format {fmt}: {seconds:.2f} s, CPU {cpu:.2f} s, largest worker peak RSS "
                  f"{worker / 2**20:.0f} MiB; {stats['tokens']} tokens, {stats['sequences']} sequences "
                  f"(load {os.getloadavg()[0]:.2f})")
            shutil.rmtree(os.path.join(work, fmt))
    best = {fmt: min(r) for fmt, r in runs.items()}
    least = {fmt: min(c for _, c, _ in r) for fmt, r in runs.items()}
    peak = {fmt: max(m for _, _, m in r) for fmt, r in runs.items()}
    a, b = formats
    print(f"{args.mb:g} MB, {len(shards)} shards, {args.workers} workers, fastest of {args.repeat}: "
          + "; ".join(f"--format {fmt} {best[fmt][0]:.2f} s (CPU {least[fmt]:.2f} s, worker peak "
                      f"{peak[fmt] / 2**20:.0f} MiB)" for fmt in formats)
          + f"; {b} / {a}: {best[b][0] / best[a][0]:.2f}x the time, {least[b] / least[a]:.2f}x the CPU")


def empty_job(workers: int) -> tuple[float, float, list[int]]:
    """Wall clock and CPU time of a Beam job that does nothing, on the same runner
    (the start-up floor), and the peak RSS of its worker processes (the memory floor)."""
    code = ("import apache_beam as beam; from pipeline.command_machinery.runners import pipeline_options; from pipeline.runtime import new_pipeline\n"
            "import transforms.pack\n"
            "with new_pipeline(pipeline_options(['--direct_num_workers=%d'])) as p:\n"
            "    p | beam.Create([1, 2]) | beam.Map(lambda x: x)" % workers)
    run = timed_run([sys.executable, "-c", code])
    peaks = sorted(peak for pid, (_, peak) in run.peaks.items() if pid != run.pid and peak >= 16 << 20)
    return run.seconds, run.cpu, peaks


def add_shard_arguments(parser: argparse.ArgumentParser, mb: float) -> None:
    """The flags of the benchmark's token shards and of the pack jobs on them."""
    parser.add_argument("--mb", type=float, default=mb)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=2048)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shard_arguments(parser, mb=50)
    parser.add_argument("--encode", action="store_true", help="only compare encode with encode --pack")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --encode or --formats: runs of each, the best counts")
    parser.add_argument("--formats", default="", help="two output formats to compare, e.g. parquet,megatron")
    args = parser.parse_args(argv)
    if args.encode:
        work = tempfile.mkdtemp(prefix="bench-pack-")
        print(f"load: {os.getloadavg()[0]:.2f} (1 min average) on {os.cpu_count()} cores")
        compare_encode(args, work)
        shutil.rmtree(work)
        return

    shards = sorted(glob.glob(os.path.join(token_shards(args.mb, args.vocab, args.workers), "part-*.parquet")))
    work = tempfile.mkdtemp(prefix="bench-pack-")
    print(f"load: {os.getloadavg()[0]:.2f} (1 min average) on {os.cpu_count()} cores")
    if args.formats:
        compare_formats(shards, work, args)
        shutil.rmtree(work)
        return
    seconds, cpu, peaks = empty_job(args.workers)
    print(f"an empty Beam job, {args.workers} workers: {seconds:.2f} s, CPU {cpu:.2f} s; peak RSS of its workers: "
          f"{', '.join(f'{p / 2**20:.0f} MiB' for p in peaks)}")
    for label, paths in (("half", shards[: len(shards) // 2]), ("all", shards)):
        floor_s, tokens = flatten_floor(paths, os.path.join(work, "flat.bin"))
        pack_s, pack_cpu, stats, peaks = run_pack(paths, os.path.join(work, f"packed-{label}"), args)
        assert stats["tokens"] + stats["dropped_tokens"] == tokens
        print(
            f"{label} ({len(paths)} shards, {tokens} tokens): pyarrow read + numpy write, 1 core: {floor_s:.2f} s "
            f"({tokens / floor_s / 1e6:.1f} M tokens/s); beam-bpe pack, {args.workers} workers: {pack_s:.2f} s "
            f"({tokens / pack_s / 1e6:.2f} M tokens/s, start-up included), {pack_s / floor_s:.1f}x the floor, "
            f"CPU {pack_cpu:.2f} s of all its processes; "
            f"{stats['sequences']} sequences"
        )
        for pid, (cmd, peak, is_driver) in sorted(peaks.items()):
            if peak >= 16 << 20:  # shell wrappers around the workers are smaller
                print(f"  peak RSS pid {pid} ({'driver' if is_driver else 'worker'}): {peak / 2**20:.0f} MiB")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
