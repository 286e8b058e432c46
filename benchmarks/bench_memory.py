"""Bounded memory: peak RSS of encoding, counting and training, each measured in a
fresh subprocess so that one measurement's peak never leaks into the next.

    python -m benchmarks.bench_memory                       # everything, default sizes
    python -m benchmarks.bench_memory --only encode --encode-mb 20 100 200
    python -m benchmarks.bench_memory --only document --document-mb 20 41

1. encoding random unique strings (nearly every piece is new, the worst case for
   the piece cache) with a tokenizer trained on real text: peak RSS at 20, 100
   and 200 MB of input should be flat, the cache never above its cap. One run
   with the cap lifted shows what the cap prevents.
2. the count DoFn (transforms/count.py ``_CountBatchFn.process``) on random
   unique strings fed as one endless batch of 1 MB documents: its dict is
   flushed at ``max_batch_pieces``, so peak RSS should be flat too. The cap is
   checked between documents, so one huge document is bounded by its own size
   (shown with a single 50 MB document).
3. the trainer on tables of N unique pieces: peak RSS minus the RSS with the
   table loaded, per unique piece, for the C merge loop and its pure-Python
   twin, next to Hugging Face ``tokenizers``.

How the HF comparison is made fair: HF's ``BpeTrainer`` cannot take a count
table, only text. Feeding each piece ``count`` times would give HF the whole
corpus instead of the table, so each side gets the same N unique pieces: HF
gets every piece once, as its own "document", with a ByteLevel pre-tokenizer
that does not split (``use_regex=False``), so its word table has exactly our N
entries; ours gets the table with its counts (the counts are ints of the same
size whatever their value, so they do not change memory). Same number of
merges, min_frequency 1, one thread for HF (``RAYON_NUM_THREADS=1``: its
per-thread buffers would otherwise count against it). Baselines: ours is
measured after the table dict is built, HF's after the list of pieces is built,
so neither input is counted.
4. ``beam-bpe encode`` of one huge document (one Parquet row of real text
   repeated, vocab 2000, the in-memory runner): the whole command's peak RSS at
   each size, and its growth per input byte between the sizes, which should be
   a small constant (the document, its IDs at the shard's width, and the
   Parquet writer's buffers for one row). One row per run; the engines are
   whatever ``BEAM_BPE_ENGINES`` allows.

Peak RSS is ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (KiB on Linux), the
baseline is VmRSS from /proc/self/status just before the measured work.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import subprocess
import sys
import time
from typing import Iterator

from benchmarks.corpus import CACHE_DIR, corpus_text, word_counts

# A big alphabet (Latin, Greek, Cyrillic, 2000 CJK ideographs, 2000 Hangul
# syllables): random words of 3-10 of these are all letters, so each word is one
# piece, and they are practically never repeated.
ALPHABET = (
    [chr(c) for c in range(ord("a"), ord("z") + 1)]
    + [chr(c) for c in range(0x3B1, 0x3CA)]
    + [chr(c) for c in range(0x430, 0x450)]
    + [chr(c) for c in range(0x4E00, 0x4E00 + 2000)]
    + [chr(c) for c in range(0xAC00, 0xAC00 + 2000)]
)
DOC_BYTES = 1 << 20


def random_documents(total_bytes: int, seed: int = 0, doc_bytes: int = DOC_BYTES) -> Iterator[str]:
    """Documents of about ``doc_bytes`` of random unique words, ``total_bytes`` in all,
    generated on the fly (never all in memory)."""
    rng = random.Random(seed)
    produced = 0
    while produced < total_bytes:
        words = []
        size = 0
        while size < min(doc_bytes, total_bytes - produced):
            lengths = rng.choices(range(3, 11), k=1000)
            chars = "".join(rng.choices(ALPHABET, k=sum(lengths)))
            start = 0
            for length in lengths:
                words.append(chars[start : start + length])
                start += length
            size += len(chars.encode("utf-8")) + len(lengths)
        doc = " ".join(words) + "\n"
        produced += len(doc.encode("utf-8"))
        yield doc


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def rss_kib() -> int:
    """Current resident set size in KiB."""
    return _status_kib("VmRSS")


def peak_kib() -> int:
    """Peak resident set size of this process in KiB.

    VmHWM, not ``ru_maxrss``: on Linux ``ru_maxrss`` carries over across exec
    the peak of the process that spawned us (the kernel folds the old address
    space's high-water mark into it), so a child of a big parent reports the
    parent's peak. VmHWM belongs to this process image alone. (The parent also
    stays small: all preparation runs in children.)"""
    return _status_kib("VmHWM")


def measured(baseline_kib: int, start: float) -> dict:
    """What every child reports: memory before and at peak, and the seconds since ``start``."""
    return {
        "baseline_kib": baseline_kib,
        "peak_kib": peak_kib(),
        "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "seconds": time.perf_counter() - start,
    }


# -- the measurements, each run in a child process ----------------------------------


def tokenizer_path(vocab_size: int = 8192) -> str:
    """A tokenizer trained on 10 MB of real text, cached on disk (built by the parent)."""
    import bpe

    path = os.path.join(CACHE_DIR, f"memory-tokenizer-{vocab_size}")
    if not os.path.exists(os.path.join(path, "tokenizer.json")):
        table = word_counts(corpus_text(10_000_000), "gpt2")
        bpe.train(table, vocab_size, pattern="gpt2", progress=False).save(path)
    return path


def child_encode(mb: float, cache_size: int | None) -> dict:
    import bpe
    from bpe.encoder import PieceEncoder

    tok = bpe.Tokenizer.load(tokenizer_path())
    if cache_size is not None:
        tok._encoder = PieceEncoder(tok.merges, cache_size=cache_size)
    docs = random_documents(int(mb * 1e6))
    first = tok.encode(next(docs))  # warm up imports and regex before the baseline
    baseline = rss_kib()
    start = time.perf_counter()
    tokens = len(first)
    for doc in docs:
        tokens += len(tok.encode(doc))
    return {
        **measured(baseline, start),
        "tokens": tokens,
        "cache_entries": len(tok._encoder._cache),
        "cache_limit": tok._encoder._cache.limit,
    }


def child_count(mb: float, max_batch_pieces: int, doc_bytes: int) -> dict:
    from transforms.count import _CountBatchFn

    fn = _CountBatchFn("gpt2", max_batch_pieces=max_batch_pieces, num_partitions=64)
    fn.setup()
    list(fn.process(["warm up the regex"]))
    docs = random_documents(int(mb * 1e6), doc_bytes=doc_bytes)
    baseline = rss_kib()
    start = time.perf_counter()
    flushes = rows = 0
    # One batch holding all the documents: only the cap can bound the dict. The
    # emitted partitions go downstream (to the shuffle); here they are dropped.
    for _, partition in fn.process(docs):
        flushes += 1
        rows += len(partition)
    return {
        **measured(baseline, start),
        "partitions_emitted": flushes,
        "rows_emitted": rows,
    }


@functools.lru_cache(maxsize=None)
def real_table() -> dict[bytes, int]:
    """The gpt2 piece table of the 50 MB real corpus (built by the parent)."""
    table = word_counts(corpus_text(50_000_000), "gpt2")
    return table


def table_path(n: int) -> str:
    """word_counts.parquet with N unique pieces: the real table's most frequent ones,
    topped up with random unique words (count 1..3, like a real table's long tail)
    if it has fewer. Built once by the parent; the "real" count is in the name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = [f for f in os.listdir(CACHE_DIR) if f.startswith(f"memory-table-{n}-real")]
    if done:
        return os.path.join(CACHE_DIR, done[0])
    real = real_table()
    table = dict(sorted(real.items(), key=lambda item: (-item[1], item[0]))[:n])
    real_count = len(table)
    rng = random.Random(n)
    latin_greek_cyrillic = ALPHABET[: 26 + 25 + 32]
    while len(table) < n:
        word = " " + "".join(rng.choices(latin_greek_cyrillic, k=rng.randint(3, 10)))
        table.setdefault(word.encode("utf-8"), rng.randint(1, 3))
    path = os.path.join(CACHE_DIR, f"memory-table-{n}-real{real_count}.parquet")
    pq.write_table(pa.table({"word": list(table), "count": list(table.values())}), path + ".tmp")
    os.replace(path + ".tmp", path)
    return path


def read_table(path: str) -> dict[bytes, int]:
    """The table, read in small batches so reading it leaves no peak of its own."""
    import pyarrow.parquet as pq

    table: dict[bytes, int] = {}
    for batch in pq.ParquetFile(path).iter_batches(batch_size=10_000):
        columns = batch.to_pydict()
        table.update(zip(columns["word"], columns["count"]))
    return table


def child_train(n: int, num_merges: int, side: str) -> dict:
    path = table_path(n)
    real = int(path.rsplit("-real", 1)[1].split(".")[0])
    table = read_table(path)
    if side.startswith("beam-bpe"):
        from bpe import trainer
        from bpe.training.trainer import train_merges

        if side == "beam-bpe pure Python":
            trainer._merges = None
        baseline = rss_kib()
        start = time.perf_counter()
        merges = len(train_merges(table, num_merges, min_frequency=1, progress=False))
    else:
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        # Each piece once, as text (the rare piece that is not valid UTF-8 gets a
        # U+FFFD: still one unique word, so HF's table has N words too).
        texts = [word.decode("utf-8", "replace") for word in table]
        del table
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        trainer = trainers.BpeTrainer(
            vocab_size=256 + num_merges,
            min_frequency=1,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        baseline = rss_kib()
        start = time.perf_counter()
        tokenizer.train_from_iterator(texts, trainer)
        merges = tokenizer.get_vocab_size() - 256
    return {
        **measured(baseline, start),
        "merges": merges,
        "real_pieces": real,
    }


def document_path(mb: float) -> str:
    """One Parquet row of ``mb`` MB of real text (the start of the corpus, repeated), cached."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(CACHE_DIR, f"memory-document-{mb:g}mb.parquet")
    if not os.path.exists(path):
        size = int(mb * 1e6)
        text = "".join(corpus_text(10_000_000)).encode("utf-8")
        text = (text * (size // len(text) + 1))[:size].decode("utf-8", "ignore")
        pq.write_table(pa.table({"text": [text], "id": ["huge"]}), path + ".tmp")
        os.replace(path + ".tmp", path)
    return path


def child_document(mb: float) -> dict:
    """Runs ``beam-bpe encode`` of the document in this process; its peak RSS."""
    import tempfile

    import pyarrow.parquet as pq

    from pipeline import cli

    baseline = rss_kib()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        rc = cli.main(["encode", "--tokenizer", tokenizer_path(2000), "--input", document_path(mb),
                       "--output", os.path.join(out, "shards"),
                       "--direct_running_mode=in_memory", "--direct_num_workers=1"])
        if rc != 0:
            raise RuntimeError(f"beam-bpe encode exited {rc}")
        metadata = pq.ParquetFile(os.path.join(out, "shards", "part-00000-of-00001.parquet")).metadata
        tokens = sum(metadata.row_group(i).column(1).num_values for i in range(metadata.num_row_groups))
    return {**measured(baseline, start), "tokens": tokens}


# -- the parent: one subprocess per measurement -----------------------------------


def measure(*args: str) -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_memory", "--child", *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def mib(kib: float) -> str:
    return f"{kib / 1024:8.1f}"


def run_encode(sizes: list[float]) -> None:
    measure("prepare-tokenizer")
    print("\n## 1. Encoding random unique strings (gpt2 pattern, vocab 8192 trained on real text)")
    print("| input MB | cache cap | baseline RSS MiB | peak RSS MiB | peak - baseline MiB | cache entries at end | MB/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    runs = [(mb, None) for mb in sizes] + [(min(sizes), 1 << 40)]
    for mb, cap in runs:
        args = ["encode", "--mb", str(mb)] + ([] if cap is None else ["--cache-size", str(cap)])
        r = measure(*args)
        cap_text = "none (lifted)" if cap else str(r["cache_limit"])
        print(
            f"| {mb:g} | {cap_text} | {mib(r['baseline_kib'])} | {mib(r['peak_kib'])} | "
            f"{mib(r['peak_kib'] - r['baseline_kib'])} | {r['cache_entries']} | {mb / r['seconds']:.2f} |",
            flush=True,
        )


def run_count(sizes: list[float], cap: int, single_doc_mb: float) -> None:
    print(f"\n## 2. Count DoFn on random unique strings (one batch, 1 MB documents, max_batch_pieces={cap})")
    print("| input MB | documents | cap | baseline RSS MiB | peak RSS MiB | peak - baseline MiB | partitions emitted | MB/s |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    runs = [(mb, cap, DOC_BYTES) for mb in sizes]
    runs += [(min(sizes), 1 << 40, DOC_BYTES), (single_doc_mb, cap, 10**10)]
    for mb, run_cap, doc_bytes in runs:
        r = measure("count", "--mb", str(mb), "--max-batch-pieces", str(run_cap), "--doc-bytes", str(doc_bytes))
        docs = "1 MB each" if doc_bytes == DOC_BYTES else "one document"
        cap_text = "none (lifted)" if run_cap == 1 << 40 else str(run_cap)
        print(
            f"| {mb:g} | {docs} | {cap_text} | {mib(r['baseline_kib'])} | {mib(r['peak_kib'])} | "
            f"{mib(r['peak_kib'] - r['baseline_kib'])} | {r['partitions_emitted']} | {mb / r['seconds']:.2f} |",
            flush=True,
        )


def run_train(sizes: list[int], num_merges: int, hf: bool) -> None:
    for n in sizes:
        measure("prepare-table", "--n", str(n))
    print(f"\n## 3. Trainer memory for N unique pieces ({num_merges} merges, min_frequency 1)")
    print("| N unique pieces | of which real | trainer | peak - baseline MiB | bytes per unique piece | seconds |")
    print("|---:|---:|---|---:|---:|---:|")
    for n in sizes:
        for side in ["beam-bpe", "beam-bpe pure Python"] + (["HF tokenizers"] if hf else []):
            r = measure("train", "--n", str(n), "--merges", str(num_merges), "--side", side)
            extra = (r["peak_kib"] - r["baseline_kib"]) * 1024
            print(
                f"| {n} | {r['real_pieces']} | {side} | {mib(extra / 1024)} | {extra / n:.0f} | {r['seconds']:.1f} |",
                flush=True,
            )


def run_document(sizes: list[float]) -> None:
    measure("prepare-tokenizer", "--vocab", "2000")
    for mb in sizes:
        measure("prepare-document", "--mb", str(mb))
    print("\n## 4. beam-bpe encode of one huge document (one Parquet row, vocab 2000, in-memory runner)")
    print(f"engines: {os.environ.get('BEAM_BPE_ENGINES') or 'all'}")
    print("| document MB | tokens | peak RSS MiB | growth per input byte since the previous size | seconds |")
    print("|---:|---:|---:|---:|---:|")
    previous = None
    for mb in sizes:
        r = measure("document", "--mb", str(mb))
        growth = "" if previous is None else f"{(r['peak_kib'] - previous[1]) * 1024 / ((mb - previous[0]) * 1e6):.1f}"
        print(f"| {mb:g} | {r['tokens']} | {mib(r['peak_kib'])} | {growth} | {r['seconds']:.1f} |", flush=True)
        previous = (mb, r["peak_kib"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["encode", "count", "train", "document"], action="append")
    parser.add_argument("--encode-mb", type=float, nargs="+", default=[20, 100, 200])
    parser.add_argument("--count-mb", type=float, nargs="+", default=[20, 100, 200])
    parser.add_argument("--max-batch-pieces", type=int, default=500_000)
    parser.add_argument("--single-doc-mb", type=float, default=50)
    parser.add_argument("--train-n", type=int, nargs="+", default=[100_000, 500_000, 1_000_000])
    parser.add_argument("--merges", type=int, default=10_000)
    parser.add_argument("--no-hf", action="store_true")
    parser.add_argument("--document-mb", type=float, nargs="+", default=[20, 41])
    # Child mode (internal): one measurement, printed as a JSON line.
    children = ["encode", "count", "train", "document", "prepare-tokenizer", "prepare-table", "prepare-document"]
    parser.add_argument("--child", choices=children, help=argparse.SUPPRESS)
    parser.add_argument("--vocab", type=int, default=8192, help=argparse.SUPPRESS)
    parser.add_argument("--mb", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--cache-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--doc-bytes", type=int, default=DOC_BYTES, help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child == "prepare-tokenizer":
        print(json.dumps(tokenizer_path(args.vocab)))
    elif args.child == "prepare-document":
        print(json.dumps(document_path(args.mb)))
    elif args.child == "document":
        print(json.dumps(child_document(args.mb)))
    elif args.child == "prepare-table":
        print(json.dumps(table_path(args.n)))
    elif args.child == "encode":
        print(json.dumps(child_encode(args.mb, args.cache_size)))
    elif args.child == "count":
        print(json.dumps(child_count(args.mb, args.max_batch_pieces, args.doc_bytes)))
    elif args.child == "train":
        print(json.dumps(child_train(args.n, args.merges, args.side)))
    else:
        parts = args.only or ["encode", "count", "train", "document"]
        print(f"# beam-bpe memory benchmark ({sys.executable}, pid {os.getpid()})")
        if "encode" in parts:
            run_encode(args.encode_mb)
        if "count" in parts:
            run_count(args.count_mb, args.max_batch_pieces, args.single_doc_mb)
        if "train" in parts:
            run_train(args.train_n, args.merges, not args.no_hf)
        if "document" in parts:
            run_document(args.document_mb)


if __name__ == "__main__":
    main()
