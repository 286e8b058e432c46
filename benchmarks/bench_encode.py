"""Encoding and stream-decoding throughput, side by side with tiktoken.

    python -m benchmarks.bench_encode [--mb 50] [--vocab 8192] [--workers 2] [--repeat 1]

1. ``beam-bpe encode`` (DirectRunner, multi_processing, N workers) on >= 50 MB of
   real text in 8 JSON Lines shards, wall clock including job start-up, reading
   and Parquet writing, with the accelerators and with the required
   dependencies only (``BEAM_BPE_ENGINES=tiktoken,python``); against tiktoken's
   single-thread ``encode_ordinary`` on the same documents with the same merges
   and pattern, the IDs compared on every document. Reports the ratio (and, with
   ``--repeat N``, the median of the ratios of each run to a tiktoken pass made just
   before it, which a machine whose speed drifts skews less), the fixed
   costs (the same job on one document, split at the moment the driver starts
   the pipeline) and the peak RSS of every process of the job (driver and workers).
   Beside it, the I/O limit: the same job on the same runner and worker count,
   built from the same transforms (``ReadDocuments``, ``WriteTokenShards``), with
   encoding replaced by a no-op that writes, for each document, the row the real
   run wrote (``ids``: what the job would cost if encoding cost nothing), and
   the same with as many zeros instead (``zeros``: Parquet compresses them to
   almost nothing, so it also leaves out most of the writer's work), start-up
   included; and the ratio encode / I/O limit. With ``--repeat N`` every job
   runs N times and the fastest run counts; each encode run with the
   accelerators is followed at once by its two I/O-limit runs, and the median of
   the ratios of those neighbours is reported too.
2. ``beam-bpe decode --stream`` fed the IDs through a pipe: tokens per second,
   start-up included.
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array

import bpe
from benchmarks.corpus import corpus_text, word_counts

BEAM_BPE = [sys.executable, "-m", "pipeline.cli"]
IO_LIMIT_JOB = [sys.executable, "-m", "benchmarks.bench_encode", "--io-limit-job"]


def descendants(root: int) -> list[int]:
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


class ProcessPoller:
    """Polls a process and all its descendants from a thread until ``stop``;
    subclasses say what to read from each (``sample``) and what to return."""

    INTERVAL = 0.2

    def __init__(self, pid: int):
        self.pid = pid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            for pid in descendants(self.pid):
                try:
                    self.sample(pid)
                except OSError:  # it has just ended
                    continue
            self._stop.wait(self.INTERVAL)

    def sample(self, pid: int) -> None:
        raise NotImplementedError

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.result()

    def result(self):
        raise NotImplementedError


class PeakMemory(ProcessPoller):
    """The peak RSS (VmHWM) of a process and all its descendants: {pid: (command line, bytes)}."""

    def __init__(self, pid: int):
        self.peaks: dict[int, tuple[str, int]] = {}
        super().__init__(pid)

    def sample(self, pid: int) -> None:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        hwm = int(fields.get("VmHWM", "0 kB").split()[0]) * 1024
        if hwm > self.peaks.get(pid, ("", 0))[1]:
            self.peaks[pid] = (cmd, hwm)

    def result(self) -> dict[int, tuple[str, int]]:
        return self.peaks


def run_job(tok_path: str, inputs: str, out: str, workers: int, engines_variable: str | None) -> dict:
    """Runs ``beam-bpe encode`` once; returns its wall-clock seconds, the seconds until the
    driver starts the pipeline (its "engine" line: imports, tokenizer, proof), stats.json
    and the peak RSS of its processes."""
    command = [
        *BEAM_BPE, "encode", "--tokenizer", tok_path, "--input", inputs,
        "--output", out, "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}",
    ]
    env = {k: v for k, v in os.environ.items() if k != "BEAM_BPE_ENGINES"}
    if engines_variable is not None:
        env["BEAM_BPE_ENGINES"] = engines_variable
    start = time.perf_counter()
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, env=env)
    memory = PeakMemory(proc.pid)
    lines, ready = [], None
    for line in proc.stderr:
        lines.append(line.decode(errors="replace"))
        if ready is None and b"beam-bpe encode: engine" in line:
            ready = time.perf_counter() - start
    proc.wait()
    seconds = time.perf_counter() - start
    peaks = memory.stop()
    if proc.returncode:
        sys.exit("beam-bpe encode failed:\n" + "".join(lines)[-3000:])
    with open(os.path.join(out, "stats.json")) as f:
        stats = json.load(f)
    engine = next((line.strip() for line in lines if "beam-bpe encode: engine" in line), "")
    return {"seconds": seconds, "ready": ready, "stats": stats, "peaks": peaks, "pid": proc.pid, "engine": engine,
            "out": out}


def real_rows(out: str) -> tuple[dict[str, tuple[int, int]], bytes, str]:
    """The rows of the shards in ``out``: {row id: (first, end) byte offsets into one buffer of
    every row's IDs}, that buffer, and the IDs' array typecode."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rows, parts, size, typecode = {}, [], 0, "H"
    for path in sorted(glob.glob(os.path.join(out, "part-*.parquet"))):
        table = pq.read_table(path)
        tokens = table.column("tokens").combine_chunks()
        values = tokens.flatten().to_numpy()
        typecode = "H" if values.itemsize == 2 else "I"
        ends = np.cumsum(pc.list_value_length(tokens).to_numpy()) * values.itemsize + size
        starts = np.concatenate([[size], ends[:-1]])
        rows.update(zip(table.column("id").to_pylist(), zip(starts.tolist(), ends.tolist())))
        parts.append(values.tobytes())
        size += len(parts[-1])
    return rows, b"".join(parts), typecode


def row_ids(out: str) -> dict[str, bytes]:
    """{row id: its IDs' bytes} of the shards in ``out``."""
    rows, buffer, _ = real_rows(out)
    return {row_id: buffer[first:end] for row_id, (first, end) in rows.items()}


def run_io_limit(kind: str, real_out: str, tok: bpe.Tokenizer, inputs: str, out: str, workers: int) -> float:
    """Runs the I/O-limit job (``io_limit_job``) of ``kind`` in its own process; returns its
    wall-clock seconds, less the time it takes to read the real run's rows before it starts."""
    command = [
        *IO_LIMIT_JOB, kind, real_out, tok.sha256, str(tok.vocab_size), inputs, out,
        "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}",
    ]
    start = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if proc.returncode:
        sys.exit("the I/O-limit job failed:\n" + proc.stderr.decode(errors="replace")[-3000:])
    return seconds - json.loads(proc.stdout)["preload_seconds"]


def io_limit_job(argv: list[str]) -> None:
    """``beam-bpe encode`` with encoding replaced by a no-op.

    The same transforms as ``pipeline.encode`` (``ReadDocuments``, documents in
    batches of ``EncodeDocuments``' size, ``WriteTokenShards``, ``WriteDeadLetters``),
    the same runner (``pipeline.command_machinery.runners``) and the same stats read back from the
    shards. Each document becomes the row the real run wrote for it (kind
    ``ids``: its IDs, looked up), or a row of as many zeros (kind ``zeros``,
    which Parquet compresses to almost nothing). It starts and ends as the
    command line does: the collector off while Beam is imported and the workers
    are made, then frozen; the process ended at once when the stats are written.
    Reading the real run's rows comes first, before the workers are made (they
    share them); it prints how long that took (``{"preload_seconds": S}``),
    which is not part of the job.
    """
    kind, real_out, sha256, vocab_size, inputs, out, *beam_args = argv
    from pipeline.cli import WORKER_MODULES
    from pipeline.runtime import beam_import, warm_workers

    gc.disable()
    beam_import.import_beam()
    start = time.perf_counter()
    # In a module the workers import by name (this one is __main__), so that Beam pickles
    # ``written_rows`` by reference and the forked workers find the rows already there.
    import benchmarks.bench_encode as this

    this.REAL_ROWS = real_rows(real_out)
    preload_seconds = time.perf_counter() - start
    warm_workers.start_for(["encode", *beam_args], WORKER_MODULES["encode"])
    gc.freeze()
    gc.enable()
    import apache_beam as beam

    from pipeline.command_machinery.runners import pipeline_options
    from pipeline.encode.job import collect_stats
    from pipeline.runtime import new_pipeline
    from transforms.dead_letters import WriteDeadLetters
    from transforms.encode import EncodeDocuments
    from transforms.read import ReadDocuments
    from transforms.shards import TokenRow
    from transforms.write_shards import WriteTokenShards

    batch_size = EncodeDocuments.__dataclass_fields__["batch_size"].default
    p = new_pipeline(pipeline_options(beam_args))
    read = p | "Read" >> ReadDocuments([inputs], id_field="id")
    rows_out = (
        read.documents
        | "Batch" >> beam.BatchElements(min_batch_size=batch_size, max_batch_size=batch_size, record_metrics=False)
        | "Written" >> beam.FlatMap(this.written_rows, kind).with_output_types(TokenRow)
    )
    _ = rows_out | "WriteShards" >> WriteTokenShards(out, sha256, int(vocab_size))
    _ = read.dead_letters | "WriteDeadLetters" >> WriteDeadLetters(out)
    p.run().wait_until_finish()
    with open(os.path.join(out, "stats.json"), "w") as f:
        json.dump(collect_stats(out, sha256), f)
    warm_workers.discard()
    print(json.dumps({"preload_seconds": preload_seconds}))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


REAL_ROWS = None  # real_rows() of the real run, in the I/O-limit job and its workers


def written_rows(documents, kind: str):
    """The I/O-limit job's rows of a batch of documents: the real run's row of each, or as many zeros."""
    from transforms.shards import TokenRow

    rows, buffer, typecode = REAL_ROWS
    for doc in documents:
        row_id = doc.doc_id if doc.doc_id is not None else f"{doc.file}:{doc.record}"
        first, end = rows[row_id]
        ids = array(typecode)
        ids.frombytes(memoryview(buffer)[first:end] if kind == "ids" else bytes(end - first))
        yield TokenRow(row_id, ids, len(doc.data), doc.file, doc.piece, doc.record)


def io_limit_run(kind: str, work: str, tok: bpe.Tokenizer, job: dict, corpus: str, workers: int, run: int) -> float:
    """The seconds of one run of the I/O-limit job of ``kind`` after ``job``; checks that it wrote
    as many documents and tokens (and, for ``ids``, every row's IDs as the real run did)."""
    out = os.path.join(work, f"io-limit-{kind}-{run}")
    seconds = run_io_limit(kind, job["out"], tok, corpus, out, workers)
    with open(os.path.join(out, "stats.json")) as f:
        stats = json.load(f)
    assert (stats["documents"], stats["tokens"]) == (job["stats"]["documents"], job["stats"]["tokens"]), stats
    if kind == "ids":
        assert row_ids(out) == row_ids(job["out"])
    return seconds


def tiktoken_pass(encoding, docs: list[str]) -> float:
    """Seconds tiktoken's ``encode_ordinary`` takes for every document, on this thread."""
    start = time.perf_counter()
    for doc in docs:
        encoding.encode_ordinary(doc)
    return time.perf_counter() - start


def fastest(run_once, repeat: int) -> dict:
    """The fastest (by wall clock) of ``repeat`` runs of ``run_once(run number)``."""
    return min((run_once(run) for run in range(repeat)), key=lambda job: job["seconds"])


def differing_documents(out: str, docs: list[str], expected: list[bytes]) -> int:
    """Documents whose IDs in the shards are not ``expected`` (uint32 bytes per document);
    part-S.jsonl record R is ``docs[S + 8 * (R - 1)]``."""
    import pyarrow.parquet as pq

    seen, wrong = 0, 0
    for path in sorted(glob.glob(os.path.join(out, "part-*.parquet"))):
        table = pq.read_table(path)
        for row_id, tokens in zip(table.column("id").to_pylist(), table.column("tokens").to_pylist()):
            name, record = row_id.rsplit(":", 1)
            shard = int(os.path.basename(name).split("-")[1].split(".")[0])
            index = shard + 8 * (int(record) - 1)
            seen += 1
            wrong += array("I", tokens).tobytes() != expected[index]
    return wrong + (len(docs) - seen)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--io-limit-job"]:
        return io_limit_job(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--decode-tokens", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every job this many times and report the fastest run (for a busy machine)")
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
    os.makedirs(os.path.join(work, "one"))
    with open(os.path.join(work, "one", "part-0.jsonl"), "w", encoding="utf-8") as f:
        f.write(json.dumps({"text": docs[0]}, ensure_ascii=False) + "\n")
    print(f"corpus: {len(docs)} documents, {total_bytes / 1e6:.1f} MB; tokenizer vocab {tok.vocab_size}; "
          f"load average {os.getloadavg()[0]:.1f}")

    encoding = tok.to_tiktoken()
    start = time.perf_counter()
    tiktoken_ids = [encoding.encode_ordinary(d) for d in docs]
    tiktoken_s = time.perf_counter() - start
    tiktoken_tokens = sum(map(len, tiktoken_ids))
    expected = [array("I", ids).tobytes() for ids in tiktoken_ids]
    del tiktoken_ids
    print(f"tiktoken encode_ordinary, 1 thread: {tiktoken_s:.2f} s, {total_bytes / 1e6 / tiktoken_s:.2f} MB/s, {tiktoken_tokens} tokens")

    corpus = os.path.join(work, "corpus", "*.jsonl")
    io_limits = None
    for label, variable in [("accelerators", None), ("required dependencies only", "tiktoken,python")]:
        name = f"{variable}".replace(",", "-")
        fixed = fastest(lambda run: run_job(tok_path, os.path.join(work, "one", "*.jsonl"),
                                            os.path.join(work, f"one-{name}-{run}"), args.workers, variable),
                        args.repeat)
        runs = []  # (tiktoken's seconds just before, the job), so that each ratio is of neighbouring runs
        io_runs = {"ids": [], "zeros": []}  # with the accelerators: each run's I/O-limit jobs, right after it
        for run in range(args.repeat):
            runs.append((tiktoken_pass(encoding, docs),
                         run_job(tok_path, corpus, os.path.join(work, f"out-{name}-{run}"), args.workers, variable)))
            if io_limits is None:
                for kind, seconds in io_runs.items():
                    seconds.append(io_limit_run(kind, work, tok, runs[-1][1], corpus, args.workers, run))
        job = min((job for _, job in runs), key=lambda job: job["seconds"])
        ratios = sorted(seconds / job["seconds"] for seconds, job in runs)
        stats = job["stats"]
        assert stats["tokens"] == tiktoken_tokens, (stats["tokens"], tiktoken_tokens)
        wrong = differing_documents(job["out"], docs, expected)
        beam_s = job["seconds"]
        print(
            f"\nbeam-bpe encode, {label}, DirectRunner {args.workers} workers: {beam_s:.2f} s, "
            f"{total_bytes / 1e6 / beam_s:.2f} MB/s (job start-up, reading, Parquet writing included); "
            f"ratio vs tiktoken: {tiktoken_s / beam_s:.2f}x; "
            f"median of {len(ratios)} (tiktoken's pass just before each run): {statistics.median(ratios):.2f}x "
            f"({', '.join(f'{r:.2f}' for r in ratios)}); documents whose IDs differ from tiktoken's: {wrong}; "
            f"verified by the reference: {stats.get('verified_documents')}"
        )
        print(f"  {job['engine']}")
        if io_limits is None:
            io_limits = {kind: min(seconds) for kind, seconds in io_runs.items()}
            for kind, what in [("ids", "writing the IDs the real run wrote"),
                               ("zeros", "writing as many zeros, which compress to almost nothing")]:
                print(
                    f"  I/O limit, {kind} (the same job, {args.workers} workers, encoding replaced by {what}; "
                    f"start-up included): {io_limits[kind]:.2f} s, {total_bytes / 1e6 / io_limits[kind]:.2f} MB/s"
                )
        print(f"  encode / I/O limit, fastest runs: {beam_s / io_limits['ids']:.2f}x with the same IDs "
              f"(goal: within 1.5x), {beam_s / io_limits['zeros']:.2f}x with zeros")
        if io_runs["ids"]:  # measured beside this configuration's runs
            paired = sorted(job["seconds"] / ids for (_, job), ids in zip(runs, io_runs["ids"]))
            print(f"  encode / I/O limit with the same IDs, median of {len(paired)} (each I/O-limit run right after "
                  f"its encode run): {statistics.median(paired):.2f}x ({', '.join(f'{r:.2f}' for r in paired)})")
        print(
            f"  fixed costs (the same job on one document): {fixed['seconds']:.2f} s, of which {fixed['ready']:.2f} s "
            f"before the driver starts the pipeline (imports, tokenizer, proof) and "
            f"{fixed['seconds'] - fixed['ready']:.2f} s for the pipeline (workers, one document, writing, stats.json)"
        )
        if beam_s > fixed["seconds"]:
            print(f"  without the fixed costs: {total_bytes / 1e6 / (beam_s - fixed['seconds']):.2f} MB/s")
        for pid, (cmd, peak) in sorted(job["peaks"].items()):
            if peak < 16 << 20:
                continue  # shell wrappers around the workers
            role = "driver" if pid == job["pid"] else "worker"
            print(f"  peak RSS pid {pid} ({role}): {peak / 2**20:.0f} MiB")

    print()
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
