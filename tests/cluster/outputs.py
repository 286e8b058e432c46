"""The cluster tests' inputs and what "the same output" means for them."""

from __future__ import annotations

import filecmp
import json
import pathlib
import sysconfig

import pyarrow.parquet as pq


def write_corpus(directory: pathlib.Path, copies: int) -> pathlib.Path:
    """Standard-library modules as JSON Lines, 3 files per copy, ids unique across copies."""
    modules = sorted(pathlib.Path(sysconfig.get_path("stdlib")).glob("*.py"))[:120]
    texts = [(m.stem, m.read_text(encoding="utf-8", errors="replace")) for m in modules]
    directory.mkdir(parents=True)
    for copy in range(copies):
        for k in range(3):
            with open(directory / f"part-{copy}-{k}.jsonl", "w", encoding="utf-8") as out:
                for name, text in texts[k::3]:
                    out.write(json.dumps({"id": f"{copy}-{name}", "text": text}) + "\n")
    return directory


def same_files(a: pathlib.Path, b: pathlib.Path, skip: tuple[str, ...] = ()) -> None:
    """Every file under ``a`` and ``b`` is there in both, with the same bytes."""
    names_a = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file() and p.name not in skip)
    names_b = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file() and p.name not in skip)
    assert names_a == names_b
    _, mismatch, errors = filecmp.cmpfiles(a, b, names_a, shallow=False)
    assert mismatch == [] and errors == []


def same_training(a: pathlib.Path, b: pathlib.Path) -> None:
    """The same tokenizer.json and word-count table, byte for byte (the table is sorted by its one
    writer, whatever the runner), and a table with each word once."""
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    assert (a / "word_counts.parquet").read_bytes() == (b / "word_counts.parquet").read_bytes()
    words = pq.read_table(a / "word_counts.parquet", columns=["word"]).column("word").to_pylist()
    assert len(words) == len(set(words)) > 0
