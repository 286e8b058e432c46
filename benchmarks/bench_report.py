"""``beam-bpe report``: the job against ``beam-bpe encode``, and the page in headless Chromium.

    python -m benchmarks.bench_report [--mb 50] [--workers 2] [--repeat 1] [--page-vocab 100000] [--skip-job] [--skip-page]

1. ``beam-bpe report`` with two tokenizers (32k merges, gpt2 and cl100k
   patterns) on >= 50 MB of real text in 8 JSON Lines shards, DirectRunner
   with N workers, wall clock including start-up; against ``beam-bpe encode``
   of the same shards with one of them. The goal is a ratio of at most 1.5.
   Beside the wall clock, the CPU time of each command and its workers: on a
   shared machine their ratio moves less than the wall clock's. With
   ``--repeat N`` the two commands run N times in turn, and the ratio is that
   of the medians.
2. The page of a report made with a tokenizer of about ``--page-vocab`` IDs
   (trained with ``bpe.train`` on the corpus's word counts, cached): the time
   from navigation until the live box is ready, and the time to encode and show
   10 KB of pasted text (measured inside the page, cold piece cache).

Tokenizers are cached under ``benchmarks.corpus.CACHE_DIR``. Run ``uptime``
beside it: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import bpe
from benchmarks.corpus import CACHE_DIR, corpus_text, word_counts

BEAM_BPE = [sys.executable, "-m", "pipeline.cli"]


def cached_tokenizer(name: str, docs: list[str], vocab_size: int, pattern: str) -> str:
    """A tokenizer trained on the word counts of docs, cached by name; returns its directory."""
    path = CACHE_DIR / name
    if not (path / "tokenizer.json").exists():
        start = time.perf_counter()
        tok = bpe.train(word_counts(docs, pattern), vocab_size=vocab_size, pattern=pattern, special_tokens=("<|endoftext|>",))
        tok.save(str(path))
        print(f"trained {name} in {time.perf_counter() - start:.1f} s")
    return str(path)


def timed(command: list[str]) -> tuple[float, float]:
    """(wall clock, CPU seconds of the command and the processes it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.exit(f"{' '.join(command[:4])} failed:\n{proc.stderr.decode()[-3000:]}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def write_shards(docs: list[str], work: str) -> str:
    """The documents as 8 JSON Lines shards under ``work/corpus/``; returns their glob."""
    os.makedirs(os.path.join(work, "corpus"))
    for shard in range(8):
        with open(os.path.join(work, "corpus", f"part-{shard}.jsonl"), "w", encoding="utf-8") as f:
            for doc in docs[shard::8]:
                f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
    return os.path.join(work, "corpus", "*.jsonl")


def bench_job(docs: list[str], tokenizers: list[str], workers: int, work: str, repeat: int = 1) -> None:
    inputs = write_shards(docs, work)
    runner = ["--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]
    encodes, reports = [], []
    for run in range(repeat):
        for out in ("shards", "report"):
            shutil.rmtree(os.path.join(work, out), ignore_errors=True)
        encodes.append(timed([*BEAM_BPE, "encode", "--tokenizer", tokenizers[0], "--input", inputs,
                              "--output", os.path.join(work, "shards"), *runner]))
        reports.append(timed([*BEAM_BPE, "report", *(f"--tokenizer={t}" for t in tokenizers), "--input", inputs,
                              "--output", os.path.join(work, "report"), *runner]))
        if repeat > 1:
            print(f"run {run + 1}: encode {encodes[-1][0]:.2f} s, report {reports[-1][0]:.2f} s, "
                  f"ratio {reports[-1][0] / encodes[-1][0]:.2f}", flush=True)
    (encode_s, encode_cpu), (report_s, report_cpu) = _medians(encodes), _medians(reports)
    report = json.load(open(os.path.join(work, "report", "report.json")))
    stats = json.load(open(os.path.join(work, "shards", "stats.json")))
    assert report["tokenizers"][0]["total"]["tokens"] == stats["tokens"]
    mb = report["corpus"]["bytes"] / 1e6
    if repeat > 1:
        print(f"medians of {repeat} runs:")
    print(f"beam-bpe encode, 1 tokenizer, {workers} workers: {encode_s:.1f} s ({mb / encode_s:.2f} MB/s), "
          f"{encode_cpu:.1f} s CPU")
    print(f"beam-bpe report, {len(tokenizers)} tokenizers, {workers} workers: {report_s:.1f} s ({mb / report_s:.2f} MB/s), "
          f"{report_cpu:.1f} s CPU; ratio report/encode {report_s / encode_s:.2f} (goal <= 1.5), "
          f"CPU {report_cpu / encode_cpu:.2f}")


def _medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(s for s, _ in runs), statistics.median(c for _, c in runs)


def bench_page(docs: list[str], tokenizer: str, work: str) -> None:
    from benchmarks.chromium import Chromium

    sample = os.path.join(work, "page-corpus.jsonl")
    with open(sample, "w", encoding="utf-8") as f:
        for doc in docs[:2000]:
            f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
    out = os.path.join(work, "page")
    timed([*BEAM_BPE, "report", f"--tokenizer={tokenizer}", "--input", sample, "--output", out,
           "--direct_running_mode=in_memory", "--direct_num_workers=1"])
    page = os.path.join(out, "index.html")
    vocab = bpe.Tokenizer.load(tokenizer).vocab_size
    # 10 KB of text the page has not seen: the end of the corpus.
    paste = "".join(docs[-50:]).encode("utf-8")[:10_000].decode("utf-8", "ignore")
    with Chromium(tempfile.mkdtemp(prefix="bench-report-profile-")) as browser:
        browser.open(f"file://{page}")
        ready = browser.evaluate("new Promise(r => { const t = () => document.body.dataset.ready ? r(performance.now()) : setTimeout(t, 5); t(); })")
        timing = browser.evaluate(
            "(() => { const box = document.getElementById('live-input'); box.value = " + json.dumps(paste) + ";"
            "const t0 = performance.now(); window.liveEncoders[0].cache.clear(); const ids = window.liveEncoders[0].encode(box.value);"
            "const t1 = performance.now(); box.dispatchEvent(new Event('input')); const t2 = performance.now();"
            "return [t1 - t0, t2 - t1, ids.length]; })()"
        )
    print(f"page: {os.path.getsize(page) / 1e6:.1f} MB for vocab {vocab:,}; interactive {ready:.0f} ms after navigation start "
          f"(goal < 2000); 10 KB paste ({len(paste):,} chars, {timing[2]:,} tokens): encode {timing[0]:.1f} ms, "
          f"encode again and show {timing[1]:.1f} ms (goal < 100)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="run encode and report this many times in turn")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--page-vocab", type=int, default=100_000)
    parser.add_argument("--skip-job", action="store_true")
    parser.add_argument("--skip-page", action="store_true")
    args = parser.parse_args(argv)
    docs = corpus_text(int(args.mb * 1e6))
    print(f"corpus: {len(docs)} documents, {sum(len(d.encode()) for d in docs) / 1e6:.1f} MB")
    train_docs = docs[: max(1, len(docs) // 5)]
    work = tempfile.mkdtemp(prefix="bench-report-")
    if not args.skip_job:
        tokenizers = [cached_tokenizer(f"report-tokenizer-{args.vocab}-{p}", train_docs, args.vocab, p) for p in ("gpt2", "cl100k")]
        bench_job(docs, tokenizers, args.workers, work, args.repeat)
    if not args.skip_page:
        page_tokenizer = cached_tokenizer(f"report-tokenizer-{args.page_vocab}-gpt2", docs, args.page_vocab, "gpt2")
        bench_page(docs, page_tokenizer, work)


if __name__ == "__main__":
    main()
