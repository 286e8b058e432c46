"""beam-bpe on a Flink cluster of two TaskManagers against DirectRunner, on one 2-core machine.

    python -m benchmarks.bench_cluster [--mb 60] [--copies 4 16] [--repeat 3] [--state-dir /var/tmp/beam-bpe-cluster]

Run as root from the repository root (the cluster: ``python -m tests.cluster``, started here
as a command, brought up if it is not). Measures, side by side in one run:

- marginal CPU-seconds per GB of ``encode`` and of ``train``'s count, between the corpus
  (``--mb``) taken ``--copies`` times, twice (by default 240 MB and 960 MB): the fixed cost cancels. CPU is that of every process: on
  the cluster the JVMs, worker pools and SDK workers in the hosts' namespaces, the job server
  and the client; on DirectRunner the command and its workers;
- the fixed cost: the fit's intercept (CPU-seconds at zero bytes);
- a one-document encode on the running cluster, end to end (the command's wall time);
- the encode's wall time on both runners at both sizes.

Each job runs ``--repeat`` times, the runners and commands taking turns. A marginal figure is
the median over the repeats of (large - small) / GB, each repeat's two runs taken together; wall
times are the least of the repeats (the run least disturbed by anything else on the machine).

A cluster that was not up is stopped at the end (`down`); one that was up stays up.

Outputs are checked equal (shards and stats.json byte for byte) before a figure is printed.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from benchmarks.corpus import CACHE_DIR, corpus_text

BEAM_BPE = str(Path(sys.executable).with_name("beam-bpe"))
TICKS = os.sysconf("SC_CLK_TCK")


def cluster(state_dir: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.cluster", *args, "--state-dir", state_dir],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}


def _cpu_of(pid: int) -> float:
    """utime + stime + the reaped children's, in seconds (0 for a process that has gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / TICKS


def cluster_cpu(state_dir: str) -> float:
    """CPU-seconds so far of every process in the cluster's namespaces and of its job server."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    pids = []
    for name in names:
        if name.startswith("bbc-flink-"):
            pids += [int(p) for p in subprocess.run(["ip", "netns", "pids", name], capture_output=True,
                                                    text=True).stdout.split()]
    jobserver = Path(state_dir, "run", "flink", "js", "jobserver.pid").read_text().split()[0]
    pids.append(int(jobserver))
    return sum(_cpu_of(pid) for pid in pids)


def run(argv: list[str], state_dir: str | None) -> tuple[float, float]:
    """Runs beam-bpe; (wall seconds, CPU-seconds of it, its workers and, given state_dir, the cluster)."""
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    before_cluster = cluster_cpu(state_dir) if state_dir else 0.0
    start = time.perf_counter()
    subprocess.run([BEAM_BPE, *argv], check=True, capture_output=True)
    wall = time.perf_counter() - start
    if state_dir:
        time.sleep(2)  # SDK workers of the job end and are reaped by their pool
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    client = (after.ru_utime - before_children.ru_utime) + (after.ru_stime - before_children.ru_stime)
    return wall, client + ((cluster_cpu(state_dir) - before_cluster) if state_dir else 0.0)


def last_job_seconds(rest: str) -> float:
    """How long the cluster's latest job took, from its creation to its end (Flink's REST API)."""
    with urllib.request.urlopen(f"{rest}/jobs/overview", timeout=5) as answer:
        jobs = json.load(answer)["jobs"]
    return max(jobs, key=lambda job: job["start-time"])["duration"] / 1000


def write_corpus(directory: Path, docs: list[str], copies: int) -> int:
    """``copies`` copies of the documents as JSON Lines, 4 files a copy; returns the bytes of text."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for copy in range(copies):
        for shard in range(4):
            with open(directory / f"part-{copy}-{shard}.jsonl", "w", encoding="utf-8") as f:
                for i in range(shard, len(docs), 4):
                    f.write(json.dumps({"id": f"{copy}-{i}", "text": docs[i]}, ensure_ascii=False) + "\n")
    return copies * sum(len(d.encode("utf-8")) for d in docs)


def same_output(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir() if p.is_file())
    return names == sorted(p.name for p in b.iterdir() if p.is_file()) and \
        not filecmp.cmpfiles(a, b, names, shallow=False)[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=60)
    parser.add_argument("--copies", type=int, nargs=2, default=[4, 16])
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one-document-runs", type=int, default=5)
    parser.add_argument("--state-dir", default="/var/tmp/beam-bpe-cluster")
    args = parser.parse_args(argv)
    was_up = Path(args.state_dir, "run", "flink.json").is_file()
    flink = cluster(args.state_dir, "up", "--engine", "flink", "--taskmanagers", "2")
    try:
        measure(args, flink)
    finally:
        if not was_up:  # a cluster this command started, it stops
            cluster(args.state_dir, "down", "--engine", "flink")


def measure(args: argparse.Namespace, flink: dict) -> None:
    """The runs and the figures, on the running cluster ``flink`` (`up`'s description)."""
    work = Path(flink["shared_dir"]) / "bench"
    docs = corpus_text(int(args.mb * 1e6))
    sizes = {"small": write_corpus(work / "small", docs, args.copies[0]),
             "large": write_corpus(work / "large", docs, args.copies[1])}
    write_corpus(work / "one", docs[:1], 1)
    write_corpus(work / "once", docs, 1)  # what the tokenizer learns from
    tok = work / "tok"
    shutil.rmtree(tok, ignore_errors=True)
    run(["train", "--input", f"{work}/once/*.jsonl", "--vocab-size", str(args.vocab_size), "--output", str(tok)], None)
    print(f"inputs: {sizes['small'] / 1e6:.1f} MB and {sizes['large'] / 1e6:.1f} MB of text; "
          f"vocab {args.vocab_size}; cluster: {' '.join(flink['beam_args'])}")
    # A first job warms the cluster's JVMs, as any job after the first finds them.
    run(["encode", "--tokenizer", str(tok), "--input", f"{work}/one/*.jsonl", "--output", str(work / "warm"),
         *flink["beam_args"]], args.state_dir)
    measured: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for _ in range(args.repeat):
        for size in ("small", "large"):
            for runner in ("flink", "direct"):
                flags, state = (flink["beam_args"], args.state_dir) if runner == "flink" else ([], None)
                for command in ("encode", "count"):
                    out = work / f"{command}-{size}-{runner}"
                    shutil.rmtree(out, ignore_errors=True)
                    job = (["encode", "--tokenizer", str(tok)] if command == "encode"
                           else ["train", "--vocab-size", "257"])  # a 1-merge train: the count job alone, nearly
                    wall, cpu = run([*job, "--input", f"{work}/{size}/*.jsonl", "--output", str(out), *flags], state)
                    measured.setdefault((command, size, runner), []).append((wall, cpu))
                    print(f"{command:6} {size:5} {runner:6} wall {wall:6.1f} s  CPU {cpu:6.1f} s", flush=True)
                if runner == "direct":
                    assert same_output(work / f"encode-{size}-flink", work / f"encode-{size}-direct")
    gb = (sizes["large"] - sizes["small"]) / 1e9
    print(f"\nmarginal CPU-seconds per GB (between {sizes['small'] / 1e6:.0f} and {sizes['large'] / 1e6:.0f} MB), "
          f"median of {args.repeat} repeats:")
    for command in ("encode", "count"):
        per_gb = {}
        for runner in ("flink", "direct"):
            small, large = measured[(command, "small", runner)], measured[(command, "large", runner)]
            per_gb[runner] = statistics.median((big[1] - little[1]) / gb for little, big in zip(small, large))
            fixed = statistics.median(little[1] for little in small) - per_gb[runner] * sizes["small"] / 1e9
            print(f"  {command:6} {runner:6} {per_gb[runner]:6.1f} CPU-s/GB, fixed {fixed:5.1f} CPU-s")
        print(f"  {command:6} ratio flink/direct {per_gb['flink'] / per_gb['direct']:.2f}")
    walls, in_flink = [], []
    for k in range(args.one_document_runs):
        out = work / f"one-{k}"
        shutil.rmtree(out, ignore_errors=True)
        walls.append(run(["encode", "--tokenizer", str(tok), "--input", f"{work}/one/*.jsonl", "--output", str(out),
                          *flink["beam_args"]], args.state_dir))
        in_flink.append(last_job_seconds(flink["rest"]))
    print("one-document encode on the running cluster, end to end: "
          + ", ".join(f"{wall:.1f} s ({cpu:.1f} CPU-s)" for wall, cpu in walls)
          + "; of which the Flink job (created to finished, its REST API): "
          + ", ".join(f"{seconds:.1f} s" for seconds in in_flink))
    for size in ("small", "large"):
        flink_wall, direct_wall = (min(wall for wall, _ in measured[("encode", size, runner)])
                                   for runner in ("flink", "direct"))
        print(f"{sizes[size] / 1e6:.0f} MB encode wall (least of {args.repeat}): flink {flink_wall:.1f} s, "
              f"direct {direct_wall:.1f} s, ratio {flink_wall / direct_wall:.2f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
