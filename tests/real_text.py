"""Real text already on every machine of this kind: CPython's standard library and
Debian's man pages in several languages and scripts. Nothing is downloaded."""

from __future__ import annotations

import glob
import gzip
import os
import sysconfig

STDLIB = sysconfig.get_path("stdlib")
MAN_LANGUAGES = ("ja", "ru", "zh_CN", "ko", "uk", "de", "fr", "pl", "tr")


def stdlib_sources(count: int, start: int = 0) -> list[str]:
    """The text of ``count`` standard-library modules, in a stable order."""
    paths = sorted(glob.glob(os.path.join(STDLIB, "*.py")))[start : start + count]
    return [open(p, encoding="utf-8", errors="replace").read() for p in paths]


def man_pages(per_language: int, start: int = 0) -> dict[str, list[str]]:
    """Up to ``per_language`` man pages for each language present, decompressed."""
    pages = {}
    for lang in MAN_LANGUAGES:
        paths = sorted(glob.glob(f"/usr/share/man/{lang}/man*/*.gz"))[start : start + per_language]
        texts = []
        for path in paths:
            with gzip.open(path, "rb") as f:
                texts.append(f.read().decode("utf-8", errors="replace"))
        if texts:
            pages[lang] = texts
    return pages


def multilingual(per_language: int, start: int = 0) -> list[str]:
    """Documents interleaving code and man pages in many scripts."""
    docs = stdlib_sources(per_language, start)
    for texts in man_pages(per_language, start).values():
        docs.extend(texts)
    return docs
