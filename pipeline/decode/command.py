"""``beam-bpe decode``: token shards -> documents, or a live stream of IDs -> text.

    beam-bpe decode --tokenizer out/ --input 'shards/part-*.parquet' [--id ID] [--jsonl]
    beam-bpe decode --tokenizer out/ --input shards/          # the token shards in a directory
    model | beam-bpe decode --tokenizer out/ --stream [--strict] [--skip-special]
    model | beam-bpe decode --tokenizer cl100k_base.tiktoken --tokenizer-preset cl100k_base --stream

Shards: every document's exact bytes go to stdout, in shard order, with nothing
added (the EOS and BOS tokens ``--append-eos`` / ``--prepend-bos`` added at encode
time, which the shards' metadata records, are removed). The shards' recorded
tokenizer SHA-256 must match the tokenizer given. A directory given as input
means the token shards in it (``part-*-of-*.parquet``), not the other files
beam-bpe keeps beside them (``.beam-bpe-output.json``, ``stats.json``). With
``--jsonl`` each document is one line ``{"id": ..., "text": ...}`` instead: the
text decoded as the stream decoder decodes it (invalid UTF-8 becomes U+FFFD),
JSON-escaped, non-ASCII as is. ``--id X`` writes the documents whose id is X; where
X names several (ids repeated across files), all of them, and one line on stderr says so.

Stream: whitespace-separated IDs are read from stdin as they arrive and text is
written as soon as whole characters exist: an incomplete UTF-8 tail is held back
and bytes known to be invalid become U+FFFD at once (the same output as
``Tokenizer.stream_decoder``). At the end a held-back tail becomes U+FFFD, or
with --strict any invalid UTF-8 is an error naming the token position. IDs are
parsed and range-checked a whole read at a time, not one by one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import BinaryIO, Iterator

import pyarrow.compute as pc
import pyarrow.parquet as pq

from bpe.tokenizer import Tokenizer
from pipeline.command_machinery import outputs, tokenizer_flags
from pipeline.command_machinery.errors import UserError
from transforms.decode import decode_tokens, document_span
from transforms.read import match_inputs
from transforms.read.records import is_unicode
from transforms.shards import SHARD_GLOB, shard_bos_id, shard_eos_id, shard_schema_problem, shard_tokenizer_sha256

READ_SIZE = 1 << 16
# No valid ID is longer than this many digits; a longer run is reported at once
# instead of being buffered without limit.
MAX_ID_DIGITS = 20
# A shard is read this many rows at a time, and a document decoded this many
# tokens at a time: memory stays bounded however long a document is.
DECODE_ROWS = 256
DECODE_IDS = 1 << 16
BEAM_OPTIONS = False  # not a Beam job: every argument is one of ours (see pipeline.cli)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    tokenizer_flags.add_arguments(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", nargs="+", action="extend", metavar="GLOB",
                        help="token shard globs, paths or directories of them (several, or repeated): print the "
                        "documents")
    source.add_argument("--stream", action="store_true", help="decode whitespace-separated IDs from stdin as they arrive")
    parser.add_argument("--id", default=None, help="with --input: print only the document with this id")
    parser.add_argument("--jsonl", action="store_true",
                        help='with --input: one JSON object per line, {"id": ..., "text": ...}; '
                        "invalid UTF-8 in a text becomes U+FFFD")
    parser.add_argument("--strict", action="store_true", help="with --stream: invalid or incomplete UTF-8 is an error")
    parser.add_argument(
        "--skip-special", action="store_true", help="with --stream: special tokens (EOS, ...) give no text"
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    if beam_args:
        raise UserError(f"unrecognized arguments: {' '.join(beam_args)}")
    if args.stream and args.id is not None:
        raise UserError("--id goes with --input, not --stream")
    if args.id is not None and not is_unicode(args.id):
        raise UserError(f"--id {args.id!r} is not valid Unicode, and no stored id is: ids are UTF-8 text (a record "
                        "whose id is not valid Unicode is a dead letter)")
    if args.jsonl and args.stream:
        raise UserError("--jsonl goes with --input, not --stream")
    if args.strict and not args.stream:
        raise UserError("--strict goes with --stream")
    if args.skip_special and not args.stream:
        raise UserError("--skip-special goes with --stream")
    tokenizer = tokenizer_flags.load(args)
    out = sys.stdout.buffer
    try:
        if args.stream:
            decode_stream(tokenizer, sys.stdin.fileno(), out, strict=args.strict, skip_special=args.skip_special)
        else:
            decode_shards(tokenizer, args.input, out, only_id=args.id, jsonl=args.jsonl)
    except BrokenPipeError:
        # The reader went away (`| head`): not an error; silence the final flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    return 0


def decode_shards(tokenizer: Tokenizer, patterns: list[str], out: BinaryIO, only_id: str | None = None,
                  jsonl: bool = False) -> int:
    """Writes the documents of the shards to ``out`` (as JSON lines with ``jsonl``); returns how many."""
    try:
        paths = match_inputs([_shards_pattern(pattern) for pattern in patterns])
    except FileNotFoundError as e:
        raise UserError(str(e)) from None
    written = 0
    for path in sorted(paths):
        try:
            f = outputs.open_read(path)
        except Exception as e:  # noqa: BLE001 - FileSystems wraps OS and cloud errors in several types
            raise UserError(f"cannot read {path}: {type(e).__name__}") from None
        with f:
            written += _decode_shard(tokenizer, path, _open_shard(tokenizer, path, f), out, only_id, jsonl)
    if only_id is not None and not written:
        raise UserError(f"no document with id {only_id!r} in {', '.join(patterns)}")
    if only_id is not None and written > 1:
        # Ids may repeat across files (corpora numbered per file): all are written, in shard order.
        print(f"beam-bpe decode: id {only_id!r} names {written:,} documents; all are written, in shard order",
              file=sys.stderr)
    return written


def _shards_pattern(pattern: str) -> str:
    """The pattern itself, or for a directory (local, or any path ending in "/") the
    token shards in it."""
    if pattern.endswith("/") or ("://" not in pattern and os.path.isdir(pattern)):
        return pattern.rstrip("/") + "/" + SHARD_GLOB
    return pattern


def _open_shard(tokenizer: Tokenizer, path: str, f) -> pq.ParquetFile:
    """The shard as a ParquetFile, checked: a token shard written by ``tokenizer``."""
    try:
        parquet = pq.ParquetFile(f)
    except Exception as e:  # noqa: BLE001 - ArrowInvalid and OSError: not Parquet
        raise UserError(f"{path} is not a Parquet file: {e}") from None
    sha = shard_tokenizer_sha256(parquet.schema_arrow)
    if sha != tokenizer.sha256:
        raise UserError(
            f"{path} was written by tokenizer {sha or '(unknown)'}, not by "
            f"{tokenizer.sha256} given with --tokenizer"
        )
    problem = shard_schema_problem(parquet.schema_arrow)
    if problem:
        raise UserError(f"{path} is not a token shard: {problem}")
    return parquet


def _decode_shard(tokenizer: Tokenizer, path: str, parquet: pq.ParquetFile, out: BinaryIO,
                  only_id: str | None, jsonl: bool = False) -> int:
    """Writes one shard's documents (or the one with ``only_id``) to ``out``; returns how many."""
    eos_id, bos_id = shard_eos_id(parquet.schema_arrow), shard_bos_id(parquet.schema_arrow)
    row = written = 0
    for batch in parquet.iter_batches(columns=["id", "tokens"], batch_size=DECODE_ROWS):
        if only_id is not None:
            batch = batch.filter(pc.equal(batch.column(0), only_id))
        ids, tokens = batch.column(0), batch.column(1)
        for i in range(batch.num_rows):
            row += 1
            try:
                if jsonl:
                    _write_json_document(tokenizer, ids[i].as_py(), tokens[i].values, eos_id, bos_id, out)
                else:
                    _write_document(tokenizer, tokens[i].values, eos_id, bos_id, out)
            except ValueError as e:  # an ID outside the vocabulary: a damaged or foreign shard
                doc_id = ids[i].as_py()
                where = f"document {doc_id!r}" if only_id is not None else f"row {row} (id {doc_id!r})"
                raise UserError(f"{path}, {where}: {e}") from None
            written += 1
    out.flush()
    return written


def _document_pieces(tokens, eos_id: int | None, bos_id: int | None) -> Iterator[list[int]]:
    """A row's token IDs without the EOS and BOS that encoding added, ``DECODE_IDS`` at a
    time (an Arrow array stays 4 bytes per token; a Python list of a huge document would not)."""
    n = len(tokens)
    ends = (tokens[0].as_py(), tokens[n - 1].as_py()) if n else (None, None)
    first, end = document_span(n, *ends, eos_id, bos_id)
    for start in range(first, end, DECODE_IDS):
        yield tokens.slice(start, min(DECODE_IDS, end - start)).to_pylist()


def _write_document(tokenizer: Tokenizer, tokens, eos_id: int | None, bos_id: int | None, out: BinaryIO) -> None:
    """Writes one row's document, without the EOS and BOS that encoding added."""
    for ids in _document_pieces(tokens, eos_id, bos_id):
        out.write(decode_tokens(tokenizer, ids))


def _write_json_document(tokenizer: Tokenizer, doc_id: str, tokens, eos_id: int | None, bos_id: int | None,
                         out: BinaryIO) -> None:
    """Writes one row's document as a line ``{"id": ..., "text": ...}`` (what ``json.dumps``
    of that object with ``ensure_ascii=False`` gives), without the EOS and BOS that encoding
    added. The text is the stream decoder's (invalid UTF-8 becomes U+FFFD), escaped
    ``DECODE_IDS`` tokens at a time: JSON escapes each character on its own, so the
    pieces make the whole string."""
    decoder = tokenizer.stream_decoder()
    out.write(f'{{"id": {json.dumps(doc_id, ensure_ascii=False)}, "text": "'.encode("utf-8"))
    for ids in _document_pieces(tokens, eos_id, bos_id):
        text = decoder.feed(ids)
        out.write(json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8"))
    out.write(json.dumps(decoder.flush(), ensure_ascii=False)[1:-1].encode("utf-8") + b'"}\n')


class _StreamState:
    """Where the stream is: tokens and bytes so far, and the last few tokens' spans."""

    def __init__(self):
        self.tokens = 0  # tokens decoded before the current read
        self.bytes = 0  # bytes those tokens stand for
        self.recent: list[tuple[int, int, int]] = []  # (position, first byte, end byte)

    def position_of_byte(self, offset: int, ids: list[int], table: list[bytes]) -> int:
        """The position of the token holding byte ``offset`` (recent tokens or ``ids``)."""
        spans = list(self.recent)
        start = self.bytes
        for i, token_id in enumerate(ids):
            end = start + len(table[token_id])
            spans.append((self.tokens + i, start, end))
            start = end
        for position, first, end in spans:
            if first <= offset < end:
                return position
        return spans[-1][0] if spans else 0

    def advance(self, ids: list[int], data_len: int, table: list[bytes]) -> None:
        start = self.bytes
        tail = ids[-4:]
        spans = []
        end = self.bytes + data_len
        for i in range(len(tail) - 1, -1, -1):
            first = end - len(table[tail[i]])
            spans.append((self.tokens + len(ids) - len(tail) + i, first, end))
            end = first
        self.recent = (self.recent + spans[::-1])[-4:]
        self.tokens += len(ids)
        self.bytes = start + data_len


def decode_stream(tokenizer: Tokenizer, fd: int, out: BinaryIO, strict: bool = False,
                  skip_special: bool = False) -> None:
    """Decodes whitespace-separated IDs read from file descriptor ``fd`` into ``out``.

    ``skip_special``: special tokens give no text.

    Raises:
      UserError: an ID that is not a decimal integer or not in the vocabulary, or
        (strict) invalid or incomplete UTF-8; text before it has been written.
    """
    vocab_size = tokenizer.vocab_size
    table = _token_table(tokenizer, skip_special)  # to find token positions
    decoder = tokenizer.stream_decoder(skip_special_tokens=skip_special, errors="strict" if strict else "replace")
    state = _StreamState()
    written = 0  # bytes written; with --strict exactly the stream's bytes so far
    carry = b""  # digits of an ID that may continue in the next read
    while True:
        chunk = os.read(fd, READ_SIZE)
        final = not chunk
        buf = carry + chunk
        parts = buf.split()
        carry = b""
        if not final and parts and not buf[-1:].isspace():
            carry = parts.pop()
        ids, problem = _parse_ids(parts, table)
        try:
            # The stream decoder holds back an incomplete character; at the end
            # it becomes U+FFFD, or an error with --strict.
            written += _write(out, decoder.feed(ids).encode("utf-8"))
            state.advance(ids, sum(len(table[i]) for i in ids), table)
            ids = []  # all decoded: a failure from here on is in the held-back tail
            if final:
                written += _write(out, decoder.flush().encode("utf-8"))
        except UnicodeDecodeError as e:
            valid = e.object[: e.start]  # decodable bytes before the error, not yet written
            _write(out, valid)
            position = state.position_of_byte(written + len(valid), ids, table)
            what = "incomplete" if e.reason == "unexpected end of data" else "invalid"
            raise UserError(f"{what} UTF-8 in the bytes of the token at position {position} (--strict)") from None
        if problem:
            raise UserError(_token_error(problem, state.tokens, vocab_size))
        if len(carry) > MAX_ID_DIGITS:
            raise UserError(_token_error(carry, state.tokens, vocab_size))
        if final:
            return


def _token_table(tokenizer: Tokenizer, skip_special: bool) -> list[bytes | None]:
    """The bytes each ID streams out as (b"" for a skipped special token), None where
    the vocabulary has no such ID (cl100k has gaps)."""
    table: list[bytes | None] = [None] * tokenizer.vocab_size
    for token_id in range(tokenizer.vocab_size):
        try:
            table[token_id] = tokenizer.token_bytes(token_id)
        except ValueError:
            pass
    if skip_special:
        for token_id in tokenizer.special_tokens.values():
            table[token_id] = b""
    return table


def _write(out: BinaryIO, data: bytes) -> int:
    """Writes and flushes at once (a reader is waiting); returns the bytes written."""
    if data:
        out.write(data)
        out.flush()
    return len(data)


def _parse_ids(parts: list[bytes], table: list[bytes | None]) -> tuple[list[int], bytes | None]:
    """The IDs of ``parts`` up to the first bad one, and the bad one (or None)."""
    vocab_size = len(table)
    if parts and b"".join(parts).isdigit() and max(map(len, parts)) <= MAX_ID_DIGITS:
        ids = list(map(int, parts))
        if max(ids) < vocab_size and None not in map(table.__getitem__, ids):
            return ids, None  # the usual read: checked as a whole
    good = 0
    while good < len(parts) and _is_id(parts[good], vocab_size) and table[int(parts[good])] is not None:
        good += 1
    return list(map(int, parts[:good])), parts[good] if good < len(parts) else None


def _is_id(part: bytes, vocab_size: int) -> bool:
    # Digits first: int() of thousands of digits is slow, and refused past Python's limit.
    return part.isdigit() and len(part) <= MAX_ID_DIGITS and int(part) < vocab_size


def _token_error(token: bytes, position: int, vocab_size: int) -> str:
    shown = token[:40].decode("utf-8", "replace") + ("..." if len(token) > 40 else "")
    if _is_id(token, vocab_size):
        return f"token ID {int(token)} at position {position} is not in the vocabulary (it has no token with this ID)"
    if token.isdigit():
        number = str(int(token)) if len(token) <= MAX_ID_DIGITS else f"{shown} ({len(token)} digits)"
        return (
            f"token ID {number} at position {position} is out of range: "
            f"the vocabulary has {vocab_size} tokens (IDs 0..{vocab_size - 1})"
        )
    return f"token {shown!r} at position {position} is not a non-negative integer ID"
