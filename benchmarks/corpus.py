"""Real multilingual benchmark text built from this machine, with no download.

Sources: the Debian man pages in many languages (``/usr/share/man/<lang>/``,
gzip-compressed roff), the English ones (``man1``..``man8``), the gettext
translation catalogs in ``/usr/share/locale`` (program messages in dozens of
languages and scripts) and the running Python's standard library sources.
Documents from the different sources and languages are interleaved, so any
prefix of the corpus is multilingual (about 40% non-ASCII bytes).

    from benchmarks.corpus import corpus_text, word_counts
    docs = corpus_text(50_000_000)     # >= 50 MB of UTF-8, cached under /tmp
    table = word_counts(docs)          # {piece bytes: count}
"""

from __future__ import annotations

import gettext
import gzip
import json
import os
import sysconfig
from collections import Counter
from pathlib import Path
from typing import Iterable

MAN_ROOT = Path("/usr/share/man")
LOCALE_ROOT = Path("/usr/share/locale")
# Bump the version when the sources change: every cache (the corpus, shards and
# tokenizers built from it by the benchmarks) lives under the versioned folder.
CORPUS_VERSION = 2
CACHE_DIR = Path(f"/tmp/beam-bpe-bench/v{CORPUS_VERSION}")


def _man_sources() -> dict[str, list[Path]]:
    """Man page files grouped by language ("en" for man1..man8), sorted for stability."""
    sources: dict[str, list[Path]] = {}
    if MAN_ROOT.is_dir():
        for entry in sorted(MAN_ROOT.iterdir()):
            if not entry.is_dir():
                continue
            lang = "en" if entry.name.startswith("man") else entry.name
            sources.setdefault(lang, []).extend(sorted(p for p in entry.rglob("*") if p.is_file()))
    return sources


def _catalog_sources() -> dict[str, list[Path]]:
    """gettext catalogs (.mo) grouped by language, sorted for stability."""
    sources: dict[str, list[Path]] = {}
    if LOCALE_ROOT.is_dir():
        for path in sorted(LOCALE_ROOT.rglob("*.mo")):
            lang = path.relative_to(LOCALE_ROOT).parts[0].split("_")[0].split("@")[0]
            sources.setdefault(lang, []).append(path)
    return sources


def _python_sources() -> list[Path]:
    stdlib = Path(sysconfig.get_path("stdlib"))
    return sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)


def _read(path: Path) -> str | None:
    """The text of one file (gunzipped if needed, a catalog's translations), or None
    if it is unusable."""
    if path.suffix == ".mo":
        try:
            with path.open("rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog
        except (OSError, UnicodeDecodeError, ValueError, KeyError, IndexError, SyntaxError):  # a catalog gettext cannot parse
            return None
        messages = [text for key, text in catalog.items() if key and isinstance(text, str)]
        return "\n".join(messages) + "\n" if messages else None
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    # Man pages in old encodings are skipped rather than decoded wrongly.
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text or None


def _interleaved(groups: list[list[Path]]) -> Iterable[Path]:
    """Round-robin over the groups: one file from each in turn, until all run out."""
    iterators = [iter(group) for group in groups]
    while iterators:
        alive = []
        for it in iterators:
            path = next(it, None)
            if path is not None:
                yield path
                alive.append(it)
        iterators = alive


def corpus_text(min_bytes: int) -> list[str]:
    """At least ``min_bytes`` of UTF-8 text as a list of documents (all there is, if less).

    Args:
      min_bytes: how much text is wanted, counted in UTF-8 bytes.

    The documents are cached as JSON lines under /tmp/beam-bpe-bench/, so later
    runs (and other benchmarks) use exactly the same text.
    """
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    cache = CACHE_DIR / f"corpus-{min_bytes}.jsonl"
    if cache.exists():
        with cache.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    groups = list(_man_sources().values()) + list(_catalog_sources().values()) + [_python_sources()]
    docs: list[str] = []
    total = 0
    for path in _interleaved(groups):
        text = _read(path)
        if text is None:
            continue
        docs.append(text)
        total += len(text.encode("utf-8"))
        if total >= min_bytes:
            break

    tmp = cache.with_suffix(f".tmp{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps(doc, ensure_ascii=False) + "\n")
    tmp.replace(cache)
    return docs


def word_counts(docs: Iterable[str], pattern: str = "gpt2") -> dict[bytes, int]:
    """The pre-token table of ``docs``: piece bytes -> count.

    Args:
      docs: the documents.
      pattern: a pre-tokenizer preset name or regex.
    """
    from bpe.pretokenize import PreTokenizer

    pretokenizer = PreTokenizer(pattern)
    counts: Counter = Counter()
    for doc in docs:
        counts.update(pretokenizer.pieces(doc))
    return dict(counts)
