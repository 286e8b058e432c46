"""Encoding and stream-decoding throughput, side by side with tiktoken.

    python -m benchmarks.bench_encode [--mb 50] [--vocab 8192] [--workers 2]

1. ``beam-bpe encode`` (DirectRunner, multi_processing, N workers) on >= 50 MB of
   real text in 8 JSON Lines shards, wall clock including job start-up, reading
   and Parquet writing; against tiktoken's single-thread ``encode_ordinary`` on
   the same documents with the same merges and pattern. Reports the ratio and the
   peak RSS of every process of the job (driver and workers).
2. ``beam-bpe decode --stream`` fed the IDs through a pipe: tokens per second,
   start-up included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import bpe
from benchmarks.corpus import corpus_text, word_counts

BEAM_BPE = [sys.executable, "-m", "pipeline.cli"]


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


class PeakMemory:
    """Polls the peak RSS (VmHWM) of a process and all its descendants."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peaks: dict[int, tuple[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            for pid in _descendants(self.pid):
                try:
                    with open(f"/proc/{pid}/status") as f:
                        fields = dict(line.split(":", 1) for line in f if ":" in line)
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                hwm = int(fields.get("VmHWM", "0 kB").split()[0]) * 1024
                if hwm > self.peaks.get(pid, ("", 0))[1]:
                    self.peaks[pid] = (cmd, hwm)
            self._stop.wait(0.2)

    def stop(self) -> dict[int, tuple[str, int]]:
        self._stop.set()
        self._thread.join()
        return self.peaks


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--decode-tokens", type=int, default=5_000_000)
    args = parser.parse_args(argv)

    docs = corpus_text(int(args.mb * 1e6))
    total_bytes = sum(len(d.encode("utf-8")) for d in docs)
    work = tempfile.mkdtemp(prefix="bench-encode-")
    tok = bpe.train(word_counts(docs[: max(1, len(docs) // 10)]), vocab_size=args.vocab, special_tokens=("<|endoftext|>",))
    tok_path = tok.save(os.path.join(work, "tok"))
    tok = bpe.Tokenizer.load(tok_path)
    os.makedirs(os.path.join(work, "corpus"))
    for shard in range(8):
        with open(os.path.join(work, "corpus", f"part-{shard}.jsonl"), "w", encoding="utf-8") as f:
            for doc in docs[shard::8]:
                f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
    print(f"corpus: {len(docs)} documents, {total_bytes / 1e6:.1f} MB; tokenizer vocab {tok.vocab_size}")

    encoding = tok.to_tiktoken()
    start = time.perf_counter()
    tiktoken_tokens = sum(len(encoding.encode_ordinary(d)) for d in docs)
    tiktoken_s = time.perf_counter() - start
    print(f"tiktoken encode_ordinary, 1 thread: {tiktoken_s:.2f} s, {total_bytes / 1e6 / tiktoken_s:.2f} MB/s, {tiktoken_tokens} tokens")

    out = os.path.join(work, "shards")
    command = [
        *BEAM_BPE, "encode", "--tokenizer", tok_path, "--input", os.path.join(work, "corpus", "*.jsonl"),
        "--output", out, "--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}",
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stderr=subprocess.PIPE)
    memory = PeakMemory(proc.pid)
    _, err = proc.communicate()
    beam_s = time.perf_counter() - start
    peaks = memory.stop()
    if proc.returncode:
        sys.exit(f"beam-bpe encode failed:\n{err.decode()[-3000:]}")
    stats = json.load(open(os.path.join(out, "stats.json")))
    assert stats["tokens"] == tiktoken_tokens, (stats["tokens"], tiktoken_tokens)
    print(
        f"beam-bpe encode, DirectRunner {args.workers} workers: {beam_s:.2f} s, {total_bytes / 1e6 / beam_s:.2f} MB/s "
        f"(job start-up, reading, Parquet writing included); ratio vs tiktoken: {tiktoken_s / beam_s:.2f}x"
    )
    for pid, (cmd, peak) in sorted(peaks.items()):
        if peak < 16 << 20:
            continue  # shell wrappers around the workers
        role = "driver" if pid == proc.pid else "worker"
        print(f"  peak RSS pid {pid} ({role}): {peak / 2**20:.0f} MiB")

    ids = []
    for doc in docs:
        ids.extend(encoding.encode_ordinary(doc))
        if len(ids) >= args.decode_tokens:
            break
    payload = " ".join(map(str, ids)).encode()
    start = time.perf_counter()
    subprocess.run([*BEAM_BPE, "decode", "--tokenizer", tok_path, "--stream"], input=b"", check=True)
    startup_s = time.perf_counter() - start
    start = time.perf_counter()
    result = subprocess.run([*BEAM_BPE, "decode", "--tokenizer", tok_path, "--stream"], input=payload, capture_output=True)
    decode_s = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    assert result.stdout == tok.decode_bytes(ids).decode("utf-8", "replace").encode()
    print(
        f"beam-bpe decode --stream: {len(ids)} tokens in {decode_s:.2f} s = {len(ids) / decode_s / 1e6:.2f} M tokens/s "
        f"(start-up included); without the {startup_s:.2f} s start-up: "
        f"{len(ids) / max(decode_s - startup_s, 1e-9) / 1e6:.2f} M tokens/s"
    )


if __name__ == "__main__":
    main()
