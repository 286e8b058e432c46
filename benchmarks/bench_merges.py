"""The merge loop alone: the C loop beside its pure-Python twin, its scaling, and peers.

    python -m benchmarks.bench_merges compare --mb 50 --vocab-size 32000 --repeat 3
    python -m benchmarks.bench_merges scale --pieces 1000000 3000000 10000000 \\
        --vocab-size 32000 64000 128000 200000 --peers-up-to 3000000
    python -m benchmarks.bench_merges min-count --min-count 1 2 3 5 10

Every measurement runs in a fresh subprocess (``--child``), so each peak is its
own: peak RSS (VmHWM) minus the RSS with the table loaded, per unique piece,
and the seconds of ``train_merges`` alone (loading the table into the loop
included, counting the corpus not).

compare: the 50 MB benchmark table, each loop in turn, ``--repeat`` rounds
interleaved (C, Python, C, Python, ...); the best time of each is reported.

scale: tables of N unique pieces. The real part is the gpt2 piece table of
all the benchmark text this machine has (benchmarks/corpus.py), cut to the N
most frequent pieces when it is bigger. When it is smaller, the synthetic
extension tops it up: random words of a space and 3-10 Latin, Greek or
Cyrillic letters, count 1-3 (the long tail of a real table: rare words, little
shared structure), until the table has N pieces. Its text (``table_text``) is
every piece repeated its count times, so the peers (HF ``tokenizers``,
``rustbpe``) train on text whose gpt2 pieces are exactly this table; their time
includes their own counting, in parallel, which ours (the loop alone) does not.

min-count: the table of all the machine's text with the pieces seen fewer than
``--min-count`` times dropped (``beam-bpe train --min-word-count``): its size,
the loop's time and memory, and how many of the merges match the full table's
(the common prefix, and the learned tokens in common as a set).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import random
import subprocess
import sys
import time

from benchmarks.bench_memory import ALPHABET, peak_kib, rss_kib
from benchmarks.corpus import CACHE_DIR, corpus_text, word_counts

ALL_TEXT = 3_000_000_000  # more than the machine has: corpus_text returns all of it
SYNTHETIC_LETTERS = ALPHABET[: 26 + 25 + 32]  # Latin, Greek, Cyrillic


def _cached(name: str, build):
    path = CACHE_DIR / name
    if path.exists():
        with path.open("rb") as f:
            return pickle.load(f)
    value = build()
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.tmp{os.getpid()}", "wb") as f:
        pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(f"{path}.tmp{os.getpid()}", path)
    return value


def real_table(mb: float | None = None) -> dict[bytes, int]:
    """The gpt2 piece table of ``mb`` MB of the benchmark text (None: all of it)."""
    size = ALL_TEXT if mb is None else int(mb * 1e6)
    return _cached(f"merges-table-{size}.pickle", lambda: word_counts(corpus_text(size), "gpt2"))


def synthetic_words(n: int, seed: int = 0) -> dict[bytes, int]:
    """``n`` random words (a space, 3-10 letters), count 1-3, absent from nothing in particular."""
    rng = random.Random(seed)
    words: dict[bytes, int] = {}
    while len(words) < n:
        word = " " + "".join(rng.choices(SYNTHETIC_LETTERS, k=rng.randint(3, 10)))
        words.setdefault(word.encode("utf-8"), rng.randint(1, 3))
    return words


def scaled_table(n: int) -> tuple[dict[bytes, int], int]:
    """A table of ``n`` unique pieces and how many of them are real (see module doc)."""

    def build():
        real = real_table()
        if len(real) >= n:
            return dict(sorted(real.items(), key=lambda item: (-item[1], item[0]))[:n]), n
        table = dict(real)
        for word, count in synthetic_words(n - len(real), seed=n).items():
            table[word] = table.get(word, 0) + count
        extra = n - len(table)
        seed = n
        while extra > 0:  # a synthetic word can be a real one too: top up again
            seed += 1
            for word, count in synthetic_words(extra, seed=seed).items():
                table[word] = table.get(word, 0) + count
            extra = n - len(table)
        return table, len(real)

    return _cached(f"merges-scaled-{n}.pickle", build)


def table_text(n: int) -> list[str]:
    """Text whose gpt2 piece table is ``scaled_table(n)``: the real text, then the
    synthetic words each repeated its count times, in 1 MB documents."""
    table, real = scaled_table(n)
    if real == n and len(real_table()) > n:
        raise ValueError("a cut real table has no text of its own; peers need a table from whole text")
    docs = list(corpus_text(ALL_TEXT))
    real_words = real_table()
    pieces = []
    for word, count in table.items():
        extra = count - real_words.get(word, 0)
        pieces.extend([word.decode("utf-8")] * extra)
    random.Random(n).shuffle(pieces)
    for start in range(0, len(pieces), 100_000):
        docs.append("".join(pieces[start : start + 100_000]))
    return docs


# -- one measurement per child process ---------------------------------------------


def child(args: argparse.Namespace) -> dict:
    if args.side in ("c", "python"):
        from bpe import trainer

        table = scaled_table(args.n)[0] if args.n else real_table(args.mb or None)
        table = _min_count(table, args.min_count)
        if args.side == "python":
            trainer._merges = None
        elif trainer._merges is None:
            raise SystemExit("the C loop is not built: pip install -e .")
        baseline = rss_kib()
        start = time.perf_counter()
        merges = trainer.train_merges(table, args.vocab_size - 256, min_frequency=args.min_frequency, progress=False)
        seconds = time.perf_counter() - start
        result = {"merges": len(merges), "pieces": len(table), "digest": _digest(merges), "learned": merges}
    else:
        docs = table_text(args.n)
        baseline = rss_kib()
        start = time.perf_counter()
        result = {"merges": _peer(args.side, docs, args.vocab_size, args.min_frequency) - 256}
        seconds = time.perf_counter() - start
        result["pieces"] = args.n
    return {**result, "seconds": seconds, "baseline_kib": baseline, "peak_kib": peak_kib()}


def _min_count(table: dict[bytes, int], min_count: int) -> dict[bytes, int]:
    return table if min_count <= 1 else {w: c for w, c in table.items() if c >= min_count}


def _digest(merges) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(merges).encode()).hexdigest()[:16]


def _peer(side: str, docs: list[str], vocab_size: int, min_frequency: int) -> int:
    """Trains a peer on ``docs`` with the gpt2 pattern; returns its vocab size."""
    from bpe.pretokenize import PRESETS

    if side == "hf":
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(PRESETS["gpt2"]), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        tokenizer.train_from_iterator(docs, trainer)
        return tokenizer.get_vocab_size()
    import rustbpe  # a peer, installed only for benchmarks

    tokenizer = rustbpe.Tokenizer()
    tokenizer.train_from_iterator(iter(docs), vocab_size, pattern=PRESETS["gpt2"])
    return tokenizer.vocab_size


def measure(side: str, vocab_size: int, *, mb: float = 0, n: int = 0, min_count: int = 1, timeout: float = 600) -> dict:
    """One measurement in a fresh subprocess; {"error": ...} if it fails or runs too long."""
    command = [sys.executable, "-m", "benchmarks.bench_merges", "child", "--side", side, "--vocab-size", str(vocab_size)]
    command += ["--mb", str(mb), "--n", str(n), "--min-count", str(min_count)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["load"] = os.getloadavg()[0]
    return result


def _mib(kib: float) -> str:
    return f"{kib / 1024:.0f}"


def _row(label: str, r: dict) -> str:
    if "error" in r:
        return f"| {label} | - | - | - | {r['error']} |"
    extra_kib = r["peak_kib"] - r["baseline_kib"]
    per_piece = extra_kib * 1024 / max(1, r["pieces"])
    return (
        f"| {label} | {r['seconds']:.2f} | {_mib(extra_kib)} | {per_piece:.0f} | "
        f"{r['merges']} merges, load {r['load']:.2f} |"
    )


# -- the three runs ------------------------------------------------------------------


def run_compare(mb: float, vocab_size: int, repeat: int) -> None:
    real_table(mb)  # built once, before any timing
    runs: dict[str, list[dict]] = {"c": [], "python": []}
    for _ in range(repeat):
        for side in runs:
            runs[side].append(measure(side, vocab_size, mb=mb))
    print(f"## The merge loop on the {mb:g} MB table, vocab {vocab_size}, best of {repeat} (interleaved)")
    print("| loop | seconds | peak - table MiB | bytes per unique piece | notes |")
    print("|---|---:|---:|---:|---|")
    best = {}
    for side, results in runs.items():
        ok = [r for r in results if "error" not in r]
        best[side] = min(ok, key=lambda r: r["seconds"]) if ok else results[0]
        seconds = ", ".join(f"{r['seconds']:.2f}" for r in ok)
        print(_row(f"{side} (all runs: {seconds})", best[side]))
    if all("error" not in r for r in best.values()):
        print(f"\nC / Python: {best['c']['seconds'] / best['python']['seconds']:.2f}; same merges: "
              f"{best['c']['digest'] == best['python']['digest']}")


def run_scale(sizes: list[int], vocab_sizes: list[int], peers_up_to: int, timeout: float) -> None:
    print(f"## Scaling of the C merge loop (gpt2 pieces; real table of all benchmark text: {len(real_table())} pieces)")
    print("| unique pieces (real) | vocab | trainer | seconds | peak - table MiB | bytes per unique piece | notes |")
    print("|---|---:|---|---:|---:|---:|---|")
    times: dict[tuple[int, int], float] = {}
    for n in sizes:
        _, real = scaled_table(n)
        for vocab_size in vocab_sizes:
            sides = ["c"]
            if n <= peers_up_to and vocab_size == vocab_sizes[0] and (real < n or n == len(real_table())):
                sides += ["hf", "rustbpe"]
            for side in sides:
                r = measure(side, vocab_size, n=n, timeout=timeout)
                if side == "c" and "error" not in r:
                    times[(n, vocab_size)] = r["seconds"]
                print(_row(f"{n} ({real}) | {vocab_size} | {side}", r), flush=True)
    print()
    for vocab_size in vocab_sizes:
        points = [(n, times[(n, vocab_size)]) for n in sizes if (n, vocab_size) in times]
        if len(points) > 1:
            print(f"growth exponent in pieces at vocab {vocab_size}: {_slope(points):.2f}")
    for n in sizes:
        points = [(v, times[(n, v)]) for v in vocab_sizes if (n, v) in times]
        if len(points) > 1:
            print(f"growth exponent in vocab at {n} pieces: {_slope(points):.2f}")


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of log(seconds) over log(size)."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def run_min_count(min_counts: list[int], vocab_size: int, timeout: float) -> None:
    full = real_table()
    print(f"## --min-word-count on the table of all benchmark text ({len(full)} pieces), vocab {vocab_size}")
    print("| min count | unique pieces | share of piece occurrences kept | seconds | peak - table MiB | "
          "merges shared with the full table's (common prefix / as a set) |")
    print("|---:|---:|---:|---:|---:|---|")
    total = sum(full.values())
    reference = None
    for min_count in min_counts:
        r = measure("c", vocab_size, min_count=min_count, timeout=timeout)
        if "error" in r:
            print(f"| {min_count} | - | - | - | - | {r['error']} |")
            continue
        merges = [tuple(pair) for pair in r["learned"]]
        reference = reference or merges
        prefix = next((i for i, (a, b) in enumerate(zip(merges, reference)) if a != b), min(len(merges), len(reference)))
        in_set = len(_spelled(merges) & _spelled(reference))
        kept = sum(c for c in full.values() if c >= min_count) / total
        print(f"| {min_count} | {r['pieces']} | {kept:.4f} | {r['seconds']:.2f} | "
              f"{_mib(r['peak_kib'] - r['baseline_kib'])} | {prefix} / {in_set} of {len(merges)}, load {r['load']:.2f} |",
              flush=True)


def _spelled(merges) -> set[bytes]:
    token_bytes = [bytes([b]) for b in range(256)]
    for left, right in merges:
        token_bytes.append(token_bytes[left] + token_bytes[right])
    return set(token_bytes[256:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", choices=["compare", "scale", "min-count", "child"])
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--vocab-size", type=int, nargs="+", default=[32000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pieces", type=int, nargs="+", default=[1_000_000, 3_000_000, 10_000_000])
    parser.add_argument("--peers-up-to", type=int, default=3_000_000, help="run HF and rustbpe up to this many pieces")
    parser.add_argument("--min-count", type=int, nargs="+", default=[1, 2, 3, 5, 10])
    parser.add_argument("--min-frequency", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per measurement")
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.run == "child":
        args.vocab_size, args.min_count = args.vocab_size[0], args.min_count[0]
        print(json.dumps(child(args)))
        return
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    if args.run == "compare":
        run_compare(args.mb, args.vocab_size[0], args.repeat)
    elif args.run == "scale":
        run_scale(args.pieces, args.vocab_size, args.peers_up_to, args.timeout)
    else:
        run_min_count(args.min_count, args.vocab_size[0], args.timeout)


if __name__ == "__main__":
    main()
