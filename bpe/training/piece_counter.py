"""Counting the pre-token pieces of many documents, by the fastest engine proven exact.

``PieceCounter(pattern).tables(documents, max_unique)`` yields {piece bytes:
count} tables that together hold the count of every piece of the documents,
each with at most ``max_unique`` pieces, so memory stays bounded whatever the
documents hold. The pieces are exactly ``PreTokenizer(pattern).pieces`` of each
document, invalid UTF-8 and lone surrogates included.

Engines (``engine="auto"`` takes the first that can run the pattern):

* ``gigatoken`` (``bpe.training.gigatoken_counts``), for the gpt2 and hf-bytelevel
  patterns: counts in Rust, without a Python object per piece. Documents go in
  calls of at most ``call_bytes``; a table bigger than ``max_unique`` is handed
  on in slices. While a call runs, its memory grows with its unique pieces,
  which are at most its bytes. In a call it declines, the documents that are
  not valid UTF-8 are found one by one, those holding a code point its Unicode
  tables lack by halving the call; they are counted by regex. So are documents
  longer than ``call_bytes``, which regex counts piece by piece, and str
  documents that are not valid UTF-8 (lone surrogates).
* ``regex``: ``PreTokenizer``'s split and a ``Counter``, for every pattern and
  every input; the reference the other engines are tested against.
"""

from __future__ import annotations

import collections
import itertools
from typing import Iterable, Iterator

from bpe.pretokenize import PreTokenizer, to_text

ENGINES = ("auto", "gigatoken", "regex")
# The most document bytes the fast engine counts in one call, unless told. Bigger
# calls leave fewer partial tables to merge in Python, but while a call runs its
# memory grows with its unique pieces, which are at most its bytes.
CALL_BYTES = 64 << 20


def choose_engine(pattern: str, engine: str = "auto") -> tuple[str, str]:
    """(engine name, why): the engine that counts ``pattern``'s pieces.

    ``auto`` takes gigatoken where it can run the pattern, else regex; naming
    an engine that cannot run the pattern is a ValueError saying why.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown piece-counting engine {engine!r} (one of {', '.join(ENGINES)})")
    if engine == "regex":
        return "regex", "asked for"
    from bpe.training.gigatoken_counts import unusable

    why_not = unusable(pattern)
    if why_not is None:
        return "gigatoken", "gigatoken's GPT-2 pre-tokenizer, proven for this pattern"
    if engine == "gigatoken":
        raise ValueError(f"gigatoken cannot count these pieces: {why_not}")
    return "regex", why_not


class _RegexCounts:
    """Counts documents with the regex pre-tokenizer; ``add`` yields a table each
    time ``max_unique`` pieces are held, ``flush`` the rest."""

    def __init__(self, pre_tokenizer: PreTokenizer, max_unique: int):
        self._pre_tokenizer = pre_tokenizer
        self._max_unique = max_unique
        # One counter per decoding error handler: the same str piece stands for
        # different bytes when decoded with surrogateescape (raw invalid bytes)
        # than with surrogatepass (str input holding lone surrogates), so keys
        # are only turned into bytes with the handler they were decoded with.
        self._by_handler: dict[str, collections.Counter[str]] = {}
        self._unique = 0

    def add(self, data: bytes | str) -> Iterator[dict[bytes, int]]:
        text, errors = to_text(data)
        cap = self._max_unique
        # A text with fewer characters than the cap has fewer pieces: split it in
        # one C call. A longer one is walked piece by piece, at most (cap -
        # unique) pieces at a time, so the counter never holds more than `cap`
        # keys, even inside one huge document.
        if len(text) <= cap - self._unique:
            found, rest = self._pre_tokenizer.split(text), None
        else:
            rest = self._pre_tokenizer.iter_split(text)
            found = list(itertools.islice(rest, cap - self._unique))
        while found:
            counter = self._by_handler.get(errors)
            if counter is None:
                counter = self._by_handler[errors] = collections.Counter()
            before = len(counter)
            counter.update(found)
            self._unique += len(counter) - before
            if self._unique >= cap:
                yield self.flush()
            found = list(itertools.islice(rest, cap - self._unique)) if rest is not None else None

    def flush(self) -> dict[bytes, int]:
        """The pieces counted since the last flush, as bytes (empty if none)."""
        table: dict[bytes, int] = {}
        for errors, counter in self._by_handler.items():
            pieces = [text.encode("utf-8", errors) for text in counter]
            if not table:
                # Within one handler distinct str pieces are distinct bytes.
                table = dict(zip(pieces, counter.values()))
            else:
                for piece, count in zip(pieces, counter.values()):
                    table[piece] = table.get(piece, 0) + count
        self._by_handler = {}
        self._unique = 0
        return table


class PieceCounter:
    """Counts pre-token pieces with the engine ``choose_engine`` picks.

    Attributes:
      engine: the engine's name; ``why`` says why it was chosen.
      regex_documents: documents counted by regex so far (all of them for the
        regex engine; for the others, the ones they declined).

    Args:
      pattern: a preset name or a regex.
      engine: ``auto``, ``gigatoken`` or ``regex``.
    """

    def __init__(self, pattern: str = "gpt2", engine: str = "auto"):
        self.pre_tokenizer = PreTokenizer(pattern)
        self.engine, self.why = choose_engine(pattern, engine)
        self._fast = None
        if self.engine == "gigatoken":
            from bpe.training.gigatoken_counts import GigatokenCounts

            self._fast = GigatokenCounts(pattern)
        self.regex_documents = 0

    def count(self, documents: Iterable[bytes | str]) -> dict[bytes, int]:
        """{piece bytes: count} over all ``documents``, in one table."""
        total: collections.Counter[bytes] = collections.Counter()
        for table in self.tables(documents, max_unique=1 << 62):
            total.update(table)
        return dict(total)

    def tables(
        self, documents: Iterable[bytes | str], max_unique: int, call_bytes: int = CALL_BYTES
    ) -> Iterator[dict[bytes, int]]:
        """Tables of {piece bytes: count}, each of at most ``max_unique`` pieces,
        that sum to the count of ``documents``' pieces. The fast engine takes the
        documents in calls of at most ``call_bytes``."""
        if max_unique < 1 or call_bytes < 1:
            raise ValueError(f"max_unique and call_bytes must be at least 1, not {max_unique}, {call_bytes}")
        slow = _RegexCounts(self.pre_tokenizer, max_unique)
        if self._fast is None:
            for data in documents:
                self.regex_documents += 1
                yield from slow.add(data)
        else:
            for counts in self._fast_tables(documents, call_bytes, slow):
                yield from _slices(counts, max_unique)
        table = slow.flush()
        if table:
            yield table

    def _fast_tables(self, documents, call_bytes: int, slow: _RegexCounts) -> Iterator[dict[bytes, int]]:
        if (
            isinstance(documents, list)
            and str not in set(map(type, documents))
            and sum(map(len, documents)) <= call_bytes
        ):
            # The usual batch: bytes that fit one call, with no work per document here.
            yield from self._group_counts(documents, slow)
            return
        group: list[bytes] = []
        group_bytes = 0
        for data in documents:
            if isinstance(data, str):
                try:
                    data = data.encode("utf-8")
                except UnicodeEncodeError:  # lone surrogates: regex keeps them as they are
                    self.regex_documents += 1
                    yield from slow.add(data)
                    continue
            if len(data) > call_bytes:
                self.regex_documents += 1
                yield from slow.add(data)
                continue
            if group_bytes + len(data) > call_bytes:
                yield from self._group_counts(group, slow)
                group, group_bytes = [], 0
            group.append(data)
            group_bytes += len(data)
        yield from self._group_counts(group, slow)

    def _group_counts(self, group: list[bytes], slow: _RegexCounts) -> Iterator[dict[bytes, int]]:
        """The fast engine's tables for ``group``; the documents it declines are
        counted by ``slow`` (whose full tables are yielded too: they hold regex
        counts, which sum like any other). Invalid UTF-8 is found document by
        document; what the engine still declines (a code point it lacks) is
        found by halving the group."""
        if not group:
            return
        counts = self._fast.count(group)
        if counts is not None:
            yield counts
            return
        if len(group) == 1:
            self.regex_documents += 1
            yield from slow.add(group[0])
            return
        valid = []
        for data in group:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                self.regex_documents += 1
                yield from slow.add(data)
            else:
                valid.append(data)
        if len(valid) < len(group):
            yield from self._group_counts(valid, slow)
        else:
            half = len(group) // 2
            yield from self._group_counts(group[:half], slow)
            yield from self._group_counts(group[half:], slow)


def _slices(table: dict[bytes, int], size: int) -> Iterator[dict[bytes, int]]:
    """``table`` itself if it has at most ``size`` pieces, else its pieces in
    tables of ``size``; nothing for an empty table."""
    if not table:
        return
    if len(table) <= size:
        yield table
        return
    items = iter(table.items())
    while chunk := dict(itertools.islice(items, size)):
        yield chunk
