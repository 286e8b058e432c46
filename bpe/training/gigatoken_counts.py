"""gigatoken's GPT-2 pre-tokenizer as a piece counter, checked on every call.

gigatoken (PyPI ``gigatoken``, MIT) has no regex engine: it runs a hand-written
pre-tokenizer for the GPT-2 scheme, and ``pretokenized_counts`` counts the pieces
of many documents in one call, in Rust, returning only the unique pieces. It
gives ``regex``'s pieces for the ``gpt2`` and ``hf-bytelevel`` patterns on valid
UTF-8 holding no code point of its gaps (where it splits unlike the installed
``regex``: ``bpe.accelerators.unicode_gaps``, measured for the installed
versions); tests/bpe/training/test_piece_engines.py shows it for every code
point in many contexts, on fuzzed and on real text.

Each call checks what that claim needs, and declines the documents otherwise:

* the documents are joined with the byte 0xFF, which valid UTF-8 never holds,
  and gigatoken splits documents there; the join must hold exactly one 0xFF per
  gap between documents, so gigatoken's documents are ours;
* the pieces' bytes, times their counts, add up to the documents' bytes: the
  pieces cover the input, nothing dropped or repeated;
* every piece is valid UTF-8 (checked on the pieces joined by ``\\n``, an ASCII
  byte, so a sequence cut at a piece edge fails too); since the pieces cover the
  documents, the documents are valid UTF-8;
* no piece holds a code point of its gaps.

gigatoken writes two lines to stderr on every call. They are held back: file
descriptor 2 points at a temporary file during the call, and whatever else was
written there meanwhile is passed on to stderr afterwards.
"""

from __future__ import annotations

import operator
import os
import re
import sys
import tempfile
import threading

from bpe.accelerators.gap_measurement import measure_pieces
from bpe.accelerators.unicode_gaps import guard_ranges, installed_version
from bpe.accelerators.unicode_guard import CodePointGuard
from bpe.pretokenize import GPT2_PATTERN, PRESETS, resolve_pattern

# The patterns whose pieces gigatoken's GPT-2 pre-tokenizer gives (the two differ
# only in spelling: possessive quantifiers and ``\s++$`` change no piece).
PATTERNS = (GPT2_PATTERN, PRESETS["hf-bytelevel"])
SEPARATOR = b"\xff"

_NOTICES = re.compile(rb"Using \d+ threads for pretokenization\n|Pretokenization took [^\n]*\n")
_STDERR_LOCK = threading.Lock()
# The temporary file stderr points at during a call, and the process that made it
# (a forked child makes its own rather than share the parent's file offset).
_capture = None
_capture_pid = None


def unusable(pattern: str) -> str | None:
    """Why gigatoken cannot count ``pattern``'s pieces here, or None if it can."""
    if resolve_pattern(pattern) not in PATTERNS:
        return "gigatoken runs only the GPT-2 pre-tokenizer (patterns gpt2 and hf-bytelevel)"
    if installed_version("gigatoken") is None:
        return "gigatoken is not installed (pip install 'beam-bpe[fast]')"
    return gaps()[1] or None


def gaps() -> tuple[str | None, str]:
    """(the code point ranges where gigatoken's pieces are not ``regex``'s, "") or (None, why
    no guard can hold the difference), for the installed versions (``unicode_gaps``)."""
    return guard_ranges("gigatoken-counts", GPT2_PATTERN, lambda: measure_pieces(_unguarded_counts, GPT2_PATTERN))


def _unguarded_counts(text: str) -> dict[bytes, int]:
    from gigatoken.gigatoken_rs import pretokenized_counts

    return dict(_without_notices(pretokenized_counts, text.encode("utf-8"), SEPARATOR))


def _without_notices(call, *args):
    """``call(*args)`` with gigatoken's own stderr lines dropped and any other output kept."""
    global _capture, _capture_pid
    with _STDERR_LOCK:
        try:
            saved = os.dup(2)
        except OSError:  # no stderr at all: nothing to keep clean
            return call(*args)
        sys.stderr.flush()
        if _capture_pid != os.getpid():
            _capture, _capture_pid = tempfile.TemporaryFile(), os.getpid()
        os.dup2(_capture.fileno(), 2)
        try:
            return call(*args)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            _capture.seek(0)
            rest = _NOTICES.sub(b"", _capture.read())
            _capture.seek(0)
            _capture.truncate()
            if rest:
                os.write(2, rest)


class GigatokenCounts:
    """Counts GPT-2 pieces with gigatoken; pickles as its pattern.

    Raises ValueError if gigatoken cannot run the pattern (see ``unusable``).

    Args:
      pattern: ``gpt2`` or ``hf-bytelevel`` (or their regex).
    """

    def __init__(self, pattern: str = "gpt2"):
        why = unusable(pattern)
        if why:
            raise ValueError(why)
        from gigatoken.gigatoken_rs import pretokenized_counts

        self.pattern = resolve_pattern(pattern)
        self._pretokenized_counts = pretokenized_counts
        self._guard = CodePointGuard(gaps()[0])

    def __reduce__(self):
        return GigatokenCounts, (self.pattern,)

    def count(self, documents: list[bytes]) -> dict[bytes, int] | None:
        """{piece: count} over ``documents`` (bytes), or None when a check fails
        (invalid UTF-8, a 0xFF byte, a code point gigatoken lacks)."""
        if not documents:
            return {}
        joined = SEPARATOR.join(documents)
        gaps = len(documents) - 1
        if joined.count(SEPARATOR) != gaps:
            return None
        table = dict(_without_notices(self._pretokenized_counts, joined, SEPARATOR))
        if sum(map(operator.mul, map(len, table), table.values())) != len(joined) - gaps:
            return None
        try:
            text = b"\n".join(table).decode("utf-8")
        except UnicodeDecodeError:
            return None
        if self._guard.rejects(text):
            return None
        return table
