"""``beam-bpe encode`` side by side with datatrove's ``DocumentTokenizer``, alternating.

    python -m benchmarks.bench_datatrove [--mb 60] [--vocab 32000] [--runs 3] \
        [--datatrove-venv DIR] [--clean] [--parts] [--datatrove-shuffle]

The peer users compare the encode job with: datatrove's ``JsonlReader`` then
``DocumentTokenizer`` (Hugging Face tokenizers, ``encode_batch``) under
``LocalPipelineExecutor(tasks=8, workers=2)``, against ``beam-bpe encode
--direct_num_workers 2 --direct_running_mode multi_processing``, both appending
the EOS token, on the same tokenizer.json (trained here by beam-bpe on a tenth
of the documents) and the same 8 gzip JSON Lines shards of the benchmark text
(``benchmarks/corpus.py``, documents dealt round-robin to the shards, as in
``bench_encode``). Benchmark corpora hold some invalid UTF-8, and so does this
one: in four of the eight shards (the odd ones) one document, 40% of the way
through its shard, holds a line in Latin-1 (``caf\\xe9 cr\\xe8me br\\xfbl\\xe9e``).
With ``--clean`` the same runs are made on the same shards without it too.

beam-bpe runs twice per round: with the accelerators, and with the required
dependencies only (``BEAM_BPE_ENGINES=tiktoken,python``). datatrove keeps its
documents in input order (``shuffle_documents=False``; beam-bpe does not
shuffle); ``--datatrove-shuffle`` gives it its default, a shuffled copy of each
task's file. Each round runs every command once, in turn; the medians of
``--runs`` rounds are reported.

Per run: the wall time; the CPU seconds of the command's processes (the
benchmark is their child subreaper, so ``RUSAGE_CHILDREN`` also holds the
processes a command leaves to be reaped by others, such as datatrove's
forkserver workers) and of the whole machine (``/proc/stat``: every process);
the documents and tokens each tool wrote, counted from its output files (Parquet
rows and list lengths; datatrove's ``.ds.index`` entries and ``.ds`` bytes), not
from its logs. After the last round, the IDs of every document both wrote are
compared, and the documents datatrove did not write are listed by shard. With
``--parts``, each tool's reading and encoding are then timed alone, in one process.

datatrove runs in its own virtual environment (``--datatrove-venv``, made and
filled from PyPI on first use: ``datatrove==0.10.1 orjson tokenizers``): its
pins need not agree with beam-bpe's. This file runs there too, as the
datatrove job (``--datatrove-job``), so it imports nothing but the standard
library at the top.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DATATROVE_REQUIREMENTS = ["datatrove==0.10.1", "orjson", "tokenizers"]
DEFAULT_VENV = os.path.join(tempfile.gettempdir(), "beam-bpe-datatrove-venv")
SHARDS = 8
EOS = "<|endoftext|>"
# A line of a man page in an old encoding: Latin-1, not UTF-8.
LATIN1_LINE = "caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1")
BAD_SHARDS = (1, 3, 5, 7)
BAD_AT = 0.4  # how far through its shard the document with the Latin-1 line is


# --- the datatrove job (runs in the datatrove virtual environment) ---------------------------

def datatrove_job(argv: list[str]) -> None:
    """``--datatrove-job INPUT_DIR OUTPUT_DIR LOGS_DIR TOKENIZER_JSON TASKS WORKERS SHUFFLE``."""
    input_dir, output_dir, logs_dir, tokenizer, tasks, workers, shuffle = argv
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    executor = LocalPipelineExecutor(
        pipeline=[
            JsonlReader(input_dir, glob_pattern="*.jsonl.gz"),
            DocumentTokenizer(output_folder=output_dir, tokenizer_name_or_path=tokenizer, eos_token=EOS,
                              shuffle_documents=shuffle == "1", seed=0),
        ],
        tasks=int(tasks), workers=int(workers), logging_dir=logs_dir,
    )
    executor.run()


def datatrove_parts(argv: list[str]) -> None:
    """``--datatrove-parts INPUT_DIR TOKENIZER_JSON``: datatrove's two costs in one process, on
    one thread unless ``RAYON_NUM_THREADS`` allows more: reading the shards as ``JsonlReader``
    does (gzip, text mode, ``orjson.loads`` per line), then ``encode_batch`` with the tokenizer
    as ``DocumentTokenizer`` sets it up (EOS appended), in its batches of 10,000 documents.
    Prints JSON: wall and CPU seconds of each, and the tokens."""
    import orjson
    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing

    input_dir, tokenizer = argv
    wall, cpu = time.perf_counter(), time.process_time()
    texts = []
    for path in sorted(glob.glob(os.path.join(input_dir, "*.jsonl.gz"))):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            texts.extend(orjson.loads(line)["text"] for line in f)
    read = (time.perf_counter() - wall, time.process_time() - cpu)
    tok = Tokenizer.from_file(tokenizer)
    tok.post_processor = TemplateProcessing(single="$A <EOS>", special_tokens=[("<EOS>", tok.token_to_id(EOS))],
                                            pair=None)
    wall, cpu, tokens = time.perf_counter(), time.process_time(), 0
    for start in range(0, len(texts), 10_000):
        tokens += sum(len(e.ids) for e in tok.encode_batch(texts[start:start + 10_000]))
    encode = (time.perf_counter() - wall, time.process_time() - cpu)
    print(json.dumps({"read": read, "encode": encode, "tokens": tokens, "documents": len(texts)}))


def beam_parts(argv: list[str]) -> None:
    """``--beam-parts INPUT_DIR TOKENIZER_JSON``: the same two costs with beam-bpe's engine
    chain (as ``BEAM_BPE_ENGINES`` allows) and with tiktoken's ``encode_ordinary``, one document
    at a time; the shards read with ``json``. Prints JSON as ``--datatrove-parts`` does."""
    import bpe

    input_dir, tokenizer = argv
    wall, cpu = time.perf_counter(), time.process_time()
    texts = []
    for path in sorted(glob.glob(os.path.join(input_dir, "*.jsonl.gz"))):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            texts.extend(json.loads(line)["text"] for line in f)
    read = (time.perf_counter() - wall, time.process_time() - cpu)
    tok = bpe.Tokenizer.load(tokenizer)
    engine = tok.engine
    found = {"read": read, "documents": len(texts), "engine": getattr(engine, "name", type(engine).__name__)}
    encoding = tok.to_tiktoken()
    for name, encode in (("encode", engine.encode_array), ("tiktoken", encoding.encode_ordinary)):
        wall, cpu, tokens = time.perf_counter(), time.process_time(), 0
        for text in texts:
            tokens += len(encode(text)) + 1  # the EOS token
        found[name] = (time.perf_counter() - wall, time.process_time() - cpu)
        found[f"{name}_tokens"] = tokens
    print(json.dumps(found))


# --- the benchmark ---------------------------------------------------------------------------

def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _machine_cpu() -> float:
    """CPU seconds the whole machine spent so far (user, nice, system)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:4]
    return sum(map(int, fields)) / os.sysconf("SC_CLK_TCK")


def _become_subreaper() -> None:
    """Makes orphaned descendants this process's children (PR_SET_CHILD_SUBREAPER), so that
    reaping them adds their CPU time to RUSAGE_CHILDREN."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")


def _reap_all(limit: float = 30.0) -> int:
    """Waits for every remaining child (descendants left behind, adopted); returns how many."""
    reaped, deadline = 0, time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid:
            reaped += 1
        else:
            time.sleep(0.02)
    sys.exit(f"descendants still running {limit:.0f} s after their command ended")


def timed(command: list[str], env: dict, log: str) -> dict:
    """Runs ``command``; its wall seconds, CPU seconds (its processes, the machine) and exit code."""
    _reap_all()
    cpu, machine = _children_cpu(), _machine_cpu()
    start = time.perf_counter()
    with open(log, "wb") as err:
        code = subprocess.run(command, env=env, stdout=err, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - start
    left = _reap_all()
    return {"wall": wall, "cpu": _children_cpu() - cpu, "machine": _machine_cpu() - machine, "code": code,
            "left": left}


def ensure_datatrove(venv: str) -> str:
    """The datatrove virtual environment's python, made and filled on first use."""
    python = os.path.join(venv, "bin", "python")
    check = [python, "-c", "import datatrove, orjson, tokenizers; print(datatrove.__version__ "
                           "if hasattr(datatrove, '__version__') else '')"]
    if os.path.exists(python) and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(f"making the datatrove environment in {venv}: pip install {' '.join(DATATROVE_REQUIREMENTS)}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", *DATATROVE_REQUIREMENTS], check=True)
    subprocess.run(check, check=True, capture_output=True)
    return python


def _version(python: str, package: str) -> str:
    out = subprocess.run([python, "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def make_inputs(mb: float, vocab: int, work: str) -> tuple[str, str, str, list[list[bytes]]]:
    """(tokenizer.json, shard folder with invalid bytes, the same without, the documents of each shard
    as written to the first) under ``work`` (built once, then reused)."""
    import bpe
    from benchmarks.corpus import corpus_text, word_counts

    docs = corpus_text(int(mb * 1e6))
    tok_dir = os.path.join(work, "tok")
    tok_json = os.path.join(tok_dir, "tokenizer.json")
    if not os.path.exists(tok_json):
        tok = bpe.train(word_counts(docs[: max(1, len(docs) // 10)]), vocab_size=vocab, special_tokens=(EOS,),
                        progress=False)
        tok.save(tok_dir + ".tmp")
        os.replace(tok_dir + ".tmp", tok_dir)
    shards: list[list[bytes]] = []
    for s in range(SHARDS):
        part = [doc.encode("utf-8") for doc in docs[s::SHARDS]]
        if s in BAD_SHARDS:
            i = int(len(part) * BAD_AT)
            lines = part[i].splitlines(keepends=True)
            lines.insert(len(lines) // 2, LATIN1_LINE)
            part[i] = b"".join(lines)
        shards.append(part)
    folders = []
    for name, bad in (("invalid", True), ("clean", False)):
        folder = os.path.join(work, f"shards-{name}")
        folders.append(folder)
        if os.path.exists(os.path.join(folder, "done")):
            continue
        os.makedirs(folder, exist_ok=True)
        for s, part in enumerate(shards):
            lines = []
            for doc in part:
                if not bad:
                    doc = doc.replace(LATIN1_LINE, b"")
                # JSON of the text with any invalid bytes left raw inside the string, as in real dumps.
                text = doc.decode("utf-8", "surrogateescape")
                line = json.dumps({"text": text}, ensure_ascii=False).encode("utf-8", "surrogateescape")
                assert b"\\udc" not in line, "a JSON escape of a lone surrogate in the benchmark text"
                lines.append(line + b"\n")
            with open(os.path.join(folder, f"part-{s}.jsonl.gz"), "wb") as f:
                f.write(gzip.compress(b"".join(lines), compresslevel=6, mtime=0))
        open(os.path.join(folder, "done"), "w").close()
    return tok_json, folders[0], folders[1], shards


def beam_command(tokenizer: str, inputs: str, out: str, workers: int) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "encode", "--tokenizer", tokenizer,
            "--input", os.path.join(inputs, "*.jsonl.gz"), "--output", out, "--append-eos", "--no-progress",
            "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]


def count_beam(out: str) -> tuple[int, int]:
    """(documents, tokens) in the Parquet shards of ``out``."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    docs = tokens = 0
    for path in glob.glob(os.path.join(out, "*.parquet")):
        column = pq.read_table(path, columns=["tokens"]).column("tokens")
        docs += len(column)
        tokens += sum(pc.sum(pc.list_value_length(chunk)).as_py() or 0 for chunk in column.chunks)
    return docs, tokens


def count_datatrove(out: str, token_size: int) -> tuple[int, int]:
    """(documents, tokens) in datatrove's output: 8-byte document ends in each ``.ds.index``,
    ``token_size`` bytes per token in each ``.ds``."""
    docs = sum(os.path.getsize(p) // 8 for p in glob.glob(os.path.join(out, "*.ds.index")))
    tokens = sum(os.path.getsize(p) // token_size for p in glob.glob(os.path.join(out, "*.ds")))
    return docs, tokens


def datatrove_documents(out: str, token_size: int) -> dict[int, list[bytes]]:
    """{task rank: the IDs (bytes) of each document it wrote, in order} (unshuffled output)."""
    from array import array

    found = {}
    for path in sorted(glob.glob(os.path.join(out, "*.ds"))):
        rank = int(os.path.basename(path).split("_")[0])
        with open(path + ".index", "rb") as f:
            ends = array("Q", f.read())
        with open(path, "rb") as f:
            data = f.read()
        starts = [0, *ends[:-1]]
        found[rank] = [data[a * token_size:b * token_size] for a, b in zip(starts, ends)]
    return found


def beam_documents(out: str, token_size: int) -> dict[str, bytes]:
    """{row id (file:record): the IDs as ``token_size``-byte integers} of beam-bpe's shards."""
    import numpy as np
    import pyarrow.parquet as pq

    found = {}
    dtype = np.uint16 if token_size == 2 else np.uint32
    for path in glob.glob(os.path.join(out, "*.parquet")):
        table = pq.read_table(path, columns=["id", "tokens"])
        for row_id, tokens in zip(table.column("id").to_pylist(), table.column("tokens").to_pylist()):
            found[row_id] = np.asarray(tokens, dtype=dtype).tobytes()
    return found


def compare(beam_out: str, datatrove_out: str, inputs: str, shards: list[list[bytes]], token_size: int,
            bad: bool) -> list[str]:
    """Lines describing which documents datatrove wrote and whether both tools' IDs agree."""
    beam = beam_documents(beam_out, token_size)
    by_file: dict[str, dict[int, bytes]] = {}
    for row_id, ids in beam.items():
        name, record = row_id.rsplit(":", 1)
        by_file.setdefault(os.path.basename(name), {})[int(record)] = ids
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(inputs, "*.jsonl.gz")))
    ours = datatrove_documents(datatrove_out, token_size)
    lines, same, differ = [], 0, 0
    for rank, name in enumerate(files):  # datatrove gives task r the r-th file in sorted order
        s = int(name.split("-")[1].split(".")[0])
        written = ours.get(rank, [])
        records = by_file.get(name, {})
        first_record = min(records) if records else 1
        for k, ids in enumerate(written):
            if records.get(first_record + k) == ids:
                same += 1
            else:
                differ += 1
        line = f"  {name}: {len(shards[s])} documents; beam-bpe wrote {len(records)}, datatrove {len(written)}"
        if bad and s in BAD_SHARDS:
            line += (f" (the Latin-1 line is in document {int(len(shards[s]) * BAD_AT) + 1}; "
                     f"datatrove stopped there)" if len(written) == int(len(shards[s]) * BAD_AT)
                     else f" (the Latin-1 line is in document {int(len(shards[s]) * BAD_AT) + 1})")
        lines.append(line)
    lines.append(f"  documents both wrote: IDs identical {same}, different {differ}")
    return lines


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--datatrove-job"]:
        return datatrove_job(argv[1:])
    if argv[:1] == ["--datatrove-parts"]:
        return datatrove_parts(argv[1:])
    if argv[:1] == ["--beam-parts"]:
        return beam_parts(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=60, help="MB of benchmark text (default 60)")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--runs", type=int, default=3, help="rounds of alternating runs; medians are reported")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=SHARDS, help="datatrove's tasks (default 8, one per shard)")
    parser.add_argument("--datatrove-venv", default=DEFAULT_VENV,
                        help=f"datatrove's virtual environment, made on first use (default {DEFAULT_VENV})")
    parser.add_argument("--datatrove-shuffle", action="store_true",
                        help="datatrove's default shuffled copy of each task's file")
    parser.add_argument("--clean", action="store_true",
                        help="also run everything on the same shards without the invalid bytes")
    parser.add_argument("--parts", action="store_true",
                        help="then, on the shards without the invalid bytes, each tool's reading and encoding "
                             "alone in one process (one thread, and datatrove's tokenizer on every core)")
    args = parser.parse_args(argv)

    _become_subreaper()
    python = ensure_datatrove(args.datatrove_venv)
    from benchmarks.corpus import CACHE_DIR

    inputs_dir = str(CACHE_DIR / f"datatrove-{args.mb:g}mb-{args.vocab}")
    tokenizer, invalid, clean, shards = make_inputs(args.mb, args.vocab, inputs_dir)
    token_size = 2 if args.vocab <= 65536 else 4
    total_docs = sum(map(len, shards))
    total_bytes = sum(len(d) for part in shards for d in part)
    import apache_beam
    import tokenizers

    print(f"corpus: {total_docs} documents, {total_bytes / 1e6:.1f} MB in {SHARDS} gzip JSON Lines shards "
          f"({sum(os.path.getsize(p) for p in glob.glob(os.path.join(invalid, '*.gz'))) / 1e6:.1f} MB); "
          f"Latin-1 line in one document of shards {', '.join(map(str, BAD_SHARDS))}; tokenizer {tokenizer} "
          f"(vocab {args.vocab})")
    print(f"versions: Python {sys.version.split()[0]}, apache-beam {apache_beam.__version__}, beam-bpe's "
          f"tokenizers {tokenizers.__version__}; datatrove {_version(python, 'datatrove')}, its tokenizers "
          f"{_version(python, 'tokenizers')}, orjson {_version(python, 'orjson')}; load "
          f"{os.getloadavg()[0]:.2f}", flush=True)

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = tempfile.mkdtemp(prefix="bench-datatrove-")
    base_env = {k: v for k, v in os.environ.items() if k != "BEAM_BPE_ENGINES"}
    datatrove_env = {k: v for k, v in base_env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    corpora = [("invalid", invalid)] + ([("clean", clean)] if args.clean else [])
    labels = ["datatrove", "beam-bpe, accelerators", "beam-bpe, tiktoken,python"]
    results: dict[tuple[str, str], list[dict]] = {(c, label): [] for c, _ in corpora for label in labels}
    last_out: dict[tuple[str, str], str] = {}
    for run in range(args.runs):
        for corpus, folder in corpora:
            for label in labels:
                out = os.path.join(work, f"{corpus}-{labels.index(label)}-{run}")
                log = out + ".log"
                if label == "datatrove":
                    command = [python, os.path.abspath(__file__), "--datatrove-job", folder, out, out + "-logs",
                               tokenizer, str(args.tasks), str(args.workers), "1" if args.datatrove_shuffle else "0"]
                    env = datatrove_env
                else:
                    command = beam_command(tokenizer, folder, out, args.workers)
                    env = dict(base_env, **({"BEAM_BPE_ENGINES": "tiktoken,python"} if "tiktoken" in label else {}))
                result = timed(command, env, log)
                if result["code"]:
                    with open(log, errors="replace") as f:
                        sys.exit(f"{label} failed (exit {result['code']}):\n{f.read()[-3000:]}")
                docs, tokens = count_datatrove(out, token_size) if label == "datatrove" else count_beam(out)
                result.update(docs=docs, tokens=tokens)
                results[(corpus, label)].append(result)
                if (corpus, label) in last_out:
                    shutil.rmtree(last_out[(corpus, label)], ignore_errors=True)
                last_out[(corpus, label)] = out
                left = f"; {result['left']} processes reaped after it ended" if result["left"] else ""
                print(f"run {run + 1} {corpus:7} {label:26} {result['wall']:6.2f} s wall, {result['cpu']:6.2f} s CPU "
                      f"(its processes), {result['machine']:6.2f} s CPU (machine); {docs} documents, {tokens} tokens"
                      f"{left} (load {os.getloadavg()[0]:.2f})", flush=True)

    for corpus, folder in corpora:
        print(f"\n{corpus} shards, medians of {args.runs} runs:")
        print("| | wall s | CPU s (its processes) | CPU s (machine) | documents written | tokens written |"
              " tokens/s (wall) |")
        print("|---|---|---|---|---|---|---|")
        med = {}
        for label in labels:
            runs = results[(corpus, label)]
            med[label] = {k: statistics.median(r[k] for r in runs) for k in ("wall", "cpu", "machine")}
            docs = sorted({r["docs"] for r in runs})
            tokens = sorted({r["tokens"] for r in runs})
            med[label].update(docs=docs[-1], tokens=tokens[-1])
            walls = ", ".join(f"{r['wall']:.2f}" for r in runs)
            print(f"| {label} | {med[label]['wall']:.2f} ({walls}) | {med[label]['cpu']:.2f} | "
                  f"{med[label]['machine']:.2f} | {'/'.join(map(str, docs))} of {total_docs} | "
                  f"{'/'.join(map(str, tokens))} | {tokens[-1] / med[label]['wall'] / 1e6:.2f} M |")
        dt = med["datatrove"]
        for label in labels[1:]:
            m = med[label]
            print(f"  {label} / datatrove: wall {m['wall'] / dt['wall']:.2f}x, CPU {m['cpu'] / dt['cpu']:.2f}x "
                  f"(machine {m['machine'] / dt['machine']:.2f}x); documents {m['docs'] / dt['docs']:.2f}x, "
                  f"tokens {m['tokens'] / dt['tokens']:.2f}x; tokens per wall second "
                  f"{(m['tokens'] / m['wall']) / (dt['tokens'] / dt['wall']):.2f}x")
        if not args.datatrove_shuffle:
            for line in compare(last_out[(corpus, "beam-bpe, accelerators")], last_out[(corpus, "datatrove")],
                                folder, shards, token_size, corpus == "invalid"):
                print(line)
        warnings = []
        log_dir = last_out[(corpus, "datatrove")] + "-logs"
        for path in sorted(glob.glob(os.path.join(log_dir, "logs", "*.log"))):
            with open(path, errors="replace") as f:
                warnings += [line.strip() for line in f if "WARNING" in line]
        print(f"  datatrove's warnings ({len(warnings)}):")
        for line in warnings:
            print(f"    {line[:300]}")
    if args.parts:
        print_parts(python, base_env, datatrove_env, clean, tokenizer)
    shutil.rmtree(work, ignore_errors=True)


def print_parts(python: str, base_env: dict, datatrove_env: dict, clean: str, tokenizer: str) -> None:
    """Each tool's reading and encoding alone, in one process (``--parts``)."""
    def parts(command: list[str], env: dict) -> dict:
        out = subprocess.run(command, env=env, capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"{' '.join(command[:3])} failed:\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    this = os.path.abspath(__file__)
    print("\nparts, one process, the shards without the invalid bytes (wall s / CPU s):")
    for threads in ("1", None):
        env = {k: v for k, v in datatrove_env.items() if k != "RAYON_NUM_THREADS"}
        if threads:
            env["RAYON_NUM_THREADS"] = threads
        found = parts([python, this, "--datatrove-parts", clean, tokenizer], env)
        what = "one thread" if threads else f"RAYON_NUM_THREADS unset ({os.cpu_count()} cores)"
        print(f"  datatrove's reading (gzip, orjson): {found['read'][0]:.2f} / {found['read'][1]:.2f}; "
              f"HF tokenizers encode_batch, {what}: {found['encode'][0]:.2f} / {found['encode'][1]:.2f} "
              f"({found['tokens']} tokens, {found['documents']} documents)")
    for engines in (None, "tiktoken,python"):
        env = dict(base_env, RAYON_NUM_THREADS="1")
        if engines:
            env["BEAM_BPE_ENGINES"] = engines
        found = parts([sys.executable, "-m", "benchmarks.bench_datatrove", "--beam-parts", clean, tokenizer], env)
        print(f"  beam-bpe's engine chain ({found['engine']}, BEAM_BPE_ENGINES={engines or 'unset'}), one thread: "
              f"{found['encode'][0]:.2f} / {found['encode'][1]:.2f} ({found['encode_tokens']} tokens); "
              f"tiktoken encode_ordinary: {found['tiktoken'][0]:.2f} / {found['tiktoken'][1]:.2f}; "
              f"reading (gzip, json): {found['read'][0]:.2f} / {found['read'][1]:.2f}")


if __name__ == "__main__":
    main()
