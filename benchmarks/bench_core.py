"""The core library side by side with the peers, in one run, on the same real text.

    python -m benchmarks.bench_core --mb 50 --vocab-size 32000

1. training: our merge loop on the word-count table vs HF ``tokenizers``'
   whole ``train_from_iterator`` (see benchmarks/bench_train.py);
2. encoding on one core (CPU time): ``Tokenizer.encode`` with the accelerators
   and with the required dependencies only, and its pure-Python reference
   (warm cache), vs tiktoken's ``encode_ordinary`` (single thread) and HF
   ``Tokenizer.encode`` (one call per document), all with the merges we
   trained, on held-out documents, their mostly-ASCII part and Python sources;
3. stream decoding: ``stream_decoder().step`` vs ``tokenizers.decoders.DecodeStream``;
4. the 1 MB single-piece cases: one letter repeated, CJK without spaces.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # the Rust engines' thread pools: one core

import bpe  # noqa: E402
from bpe import engines  # noqa: E402
from benchmarks.bench_accelerators import python_sources  # noqa: E402
from benchmarks.bench_train import bench_train, format_table  # noqa: E402
from benchmarks.corpus import CACHE_DIR, corpus_text, word_counts  # noqa: E402


def timed(fn, *args) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def trained_tokenizer(docs: list[str], vocab_size: int, pattern: str, tag: str) -> bpe.Tokenizer:
    """The tokenizer trained on ``docs``, cached on disk between runs."""
    path = os.path.join(CACHE_DIR, f"tokenizer-{tag}-{vocab_size}-{pattern}")
    if not os.path.exists(os.path.join(path, "tokenizer.json")):
        bpe.train(word_counts(docs, pattern), vocab_size, pattern=pattern, progress=False).save(path)
    return bpe.Tokenizer.load(path)


def engine_tokenizer(tok: bpe.Tokenizer, engines_variable: str | None) -> bpe.Tokenizer:
    """A fresh copy of ``tok`` whose engine chain is decided under ``BEAM_BPE_ENGINES=engines_variable``
    (None: unset, every installed engine)."""
    copy = bpe.Tokenizer.from_json(tok.to_json())
    saved = os.environ.pop(engines.ENGINES_VARIABLE, None)
    if engines_variable is not None:
        os.environ[engines.ENGINES_VARIABLE] = engines_variable
    try:
        copy.engine  # decided here, and kept
    finally:
        os.environ.pop(engines.ENGINES_VARIABLE, None)
        if saved is not None:
            os.environ[engines.ENGINES_VARIABLE] = saved
    return copy


def bench_encode(tok: bpe.Tokenizer, docs: list[str], warm_up: list[str]) -> list[tuple[str, float]]:
    """MB/s (CPU time, one core, one call per document) for each encoder, and the
    ratio to tiktoken; checks that every encoder gives tiktoken's IDs on every document.

    ``Tokenizer.encode`` twice: with every installed engine (the accelerators)
    and with the required dependencies only (``BEAM_BPE_ENGINES=tiktoken,python``);
    its reference (``tokenizer.reference.encode``, pure Python). Encoders with
    a cache (the reference's piece cache, gigatoken's) first see ``warm_up``
    (other text), as a worker's cache has after its first documents.
    """
    import tokenizers

    mb = sum(len(d.encode()) for d in docs) / 1e6
    enc = tok.to_tiktoken()
    hf = tokenizers.Tokenizer.from_file(tok.save(os.path.join(CACHE_DIR, "encode-bench")))
    accelerated = engine_tokenizer(tok, None)
    arrays = engine_tokenizer(tok, None)  # its own gigatoken cache: not warmed on ``docs`` by the run before
    required = engine_tokenizer(tok, "tiktoken,python")
    warm = bpe.Tokenizer.from_json(tok.to_json()).reference
    for doc in warm_up:  # every encoder with a cache gets the same start
        for encoder in (warm, accelerated, arrays, required):
            encoder.encode(doc)
    runs = [
        ("tiktoken encode_ordinary (1 thread)", lambda: [enc.encode_ordinary(d) for d in docs]),
        (f"beam-bpe Tokenizer.encode [{accelerated.engine.name}]", lambda: [accelerated.encode(d) for d in docs]),
        (f"beam-bpe engine.encode_array, the encode DoFn's call [{accelerated.engine.name}]",
         lambda: [arrays.engine.encode_array(d) for d in docs]),
        (f"beam-bpe Tokenizer.encode, required deps only [{required.engine.name}]", lambda: [required.encode(d) for d in docs]),
        ("beam-bpe reference (pure Python, warm cache)", lambda: [warm.encode(d) for d in docs]),
        ("HF tokenizers encode (1 call per doc)", lambda: [hf.encode(d, add_special_tokens=False).ids for d in docs]),
    ]
    rows, outputs, tiktoken_seconds = [], [], None
    for name, run in runs:
        start = time.process_time()
        ids = run()
        seconds = time.process_time() - start
        tiktoken_seconds = tiktoken_seconds or seconds
        rows.append((f"{name} ({tiktoken_seconds / seconds:.2f}x tiktoken)", mb / seconds))
        outputs.append(ids)
    for (name, _), ids in zip(runs[1:], outputs[1:]):
        mismatches = sum(a != list(b) for a, b in zip(outputs[0], ids))
        rows.append((f"documents of {len(docs)} where {name.split(' (')[0]} differs from tiktoken: {mismatches}", float("nan")))
    for label, t in [("accelerated", accelerated), ("required deps only", required)]:
        rows.append((f"engine, {label}: {t.engine.reason}; documents not taken by its first engine: {t.engine.fallbacks}", float("nan")))
    return rows


def bench_stream(tok: bpe.Tokenizer, docs: list[str]) -> list[tuple[str, float]]:
    """Tokens per second through each stream decoder, one step per token."""
    import tokenizers
    from tokenizers.decoders import DecodeStream

    ids = [i for d in docs for i in tok.encode(d)]
    hf = tokenizers.Tokenizer.from_file(tok.save(os.path.join(CACHE_DIR, "stream-bench")))

    def ours():
        dec = tok.stream_decoder()
        step = dec.step
        return "".join([step(i) for i in ids]) + dec.flush()

    def theirs():
        stream = DecodeStream(skip_special_tokens=False)
        out = [stream.step(hf, i) for i in ids]
        return "".join(s for s in out if s is not None)

    seconds_ours, text_ours = timed(ours)
    seconds_hf, text_hf = timed(theirs)
    assert text_ours == tok.decode(ids)
    return [
        ("beam-bpe stream_decoder().step", len(ids) / seconds_ours),
        ("HF tokenizers DecodeStream.step", len(ids) / seconds_hf),
        (f"same text: {text_ours == text_hf}", float("nan")),
    ]


def bench_long_pieces(tok: bpe.Tokenizer) -> list[tuple[str, float]]:
    """Seconds to encode 1 MB that is a single piece."""
    import tokenizers

    hf = tokenizers.Tokenizer.from_file(tok.save(os.path.join(CACHE_DIR, "long-bench")))
    cjk = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 400))
    cases = {"1 MB of 'a'": "a" * 1_000_000, "1 MB of CJK, no spaces": (cjk * 1000)[:333_334]}
    rows = []
    for name, text in cases.items():
        seconds, ids = timed(tok.encode, text)
        hf_seconds, hf_ids = timed(lambda: hf.encode(text, add_special_tokens=False).ids)
        rows.append((f"{name}: beam-bpe (s)", seconds))
        rows.append((f"{name}: HF tokenizers (s); same IDs: {ids == hf_ids}", hf_seconds))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50, help="training corpus size in MB")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--pattern", default="gpt2")
    parser.add_argument("--encode-mb", type=float, default=10, help="held-out text to encode, in MB")
    parser.add_argument("--sections", default="train,encode,stream,long", help="which sections to run")
    args = parser.parse_args(argv)
    sections = set(args.sections.split(","))

    docs = corpus_text(int((args.mb + args.encode_mb) * 1e6))
    cut, total = 0, 0
    while cut < len(docs) and total < args.mb * 1e6:
        total += len(docs[cut].encode())
        cut += 1
    train_docs, held_out = docs[:cut], docs[cut:]

    if "train" in sections:
        print("== 1. training ==")
        print(format_table(bench_train(train_docs, args.vocab_size, args.pattern, memory=False)))
    tok = trained_tokenizer(train_docs, args.vocab_size, args.pattern, tag=f"{args.mb:g}mb")

    # Pure-Python encoding costs little per cached piece and a lot per new one, so
    # the speed depends on how often pieces repeat: report the mostly-English part
    # (code, English man pages) apart from the whole multilingual held-out text.
    mostly_ascii = [d for d in held_out if len(d.encode()) < 1.05 * len(d)]
    subsets = [
        ("all held-out text", held_out),
        ("its mostly-ASCII documents", mostly_ascii),
        ("Python sources (stdlib)", python_sources(train_docs, args.encode_mb / 2)),
    ]
    for title, docs_to_encode in subsets if "encode" in sections else []:
        mb = sum(len(d.encode()) for d in docs_to_encode) / 1e6
        print(f"\n== 2. encoding on one core: {title} ({mb:.1f} MB; load average {os.getloadavg()[0]:.1f}) ==")
        for name, value in bench_encode(tok, docs_to_encode, warm_up=train_docs[: len(docs_to_encode)]):
            print(f"{name:<80} {value:>8.2f} MB/s" if value == value else name)

    if "stream" in sections:
        print("\n== 3. stream decoding ==")
        for name, value in bench_stream(tok, held_out[: max(1, len(held_out) // 4)]):
            print(f"{name:<56} {value / 1e6:>8.2f} M tokens/s" if value == value else name)

    if "long" in sections:
        print("\n== 4. 1 MB single pieces ==")
        for name, value in bench_long_pieces(tok):
            print(f"{name:<64} {value:>8.2f}")


if __name__ == "__main__":
    main()
