"""Engine proofs kept between runs: ``proven(tokenizer)``.

A job's driver proves once which engines give a tokenizer's IDs
(``Tokenizer.prove``, O(vocabulary)). The result depends only on the
tokenizer's bytes, the engines a process may use (``BEAM_BPE_ENGINES``), the
installed versions of the engines and of ``regex``, and this package's own
code; the cache key is a SHA-256 of all of them, so any change proves again.
A cached proof is what the driver hands to the workers, which still rebuild
each engine and run its cheap checks (``engines.from_proof``), and
``--verify-fraction`` still compares a sample of documents with the reference.

The cache lives in ``bpe.cache_directory`` (``$BEAM_BPE_CACHE_DIR`` or
``~/.cache/beam-bpe``), one small JSON file per key under ``proofs/``. A cache
that cannot be read or written is no cache: the proof is made again, never
trusted half-written (files are replaced atomically).
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import sys
from functools import lru_cache
from importlib import metadata

from bpe import engines
from bpe.atomic_write import replace_file
from bpe.cache_directory import CACHE_VARIABLE, cache_directory
from bpe.engines import EngineProof

__all__ = ["CACHE_VARIABLE", "cache_directory", "cached", "proven"]

# The distributions whose versions can change what a proof concludes.
_DISTRIBUTIONS = ("tiktoken", "regex", "gigatoken", "fastokens", "splintr-rs")


def proven(tokenizer) -> EngineProof:
    """The tokenizer's engine proof, from the cache when a run with everything the same made it."""
    proof = cached(tokenizer)
    if proof is None:
        proof = tokenizer.prove()
        _write(_path(tokenizer), proof)
    return proof


def cached(tokenizer) -> EngineProof | None:
    """The tokenizer's engine proof if the cache holds it, else None (nothing is proven)."""
    return _read(_path(tokenizer), tokenizer.sha256)


def _path(tokenizer) -> pathlib.Path:
    return cache_directory() / "proofs" / f"{_key(tokenizer)}.json"


def _key(tokenizer) -> str:
    parts = {
        "tokenizer": tokenizer.sha256,
        "engines": os.environ.get(engines.ENGINES_VARIABLE, ""),
        "versions": {name: _version(name) for name in _DISTRIBUTIONS},
        "python": sys.version,
        "code": _code_sha256(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=None)
def _code_sha256() -> str:
    """A SHA-256 of this package's source files: an edited checkout proves again."""
    root = pathlib.Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode("utf-8") + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _read(path: pathlib.Path, sha256: str) -> EngineProof | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        proof = EngineProof(
            tokenizer_sha256=data["tokenizer_sha256"],
            engine=data["engine"],
            rejected=tuple((str(name), str(why)) for name, why in data["rejected"]),
            chain=tuple(str(name) for name in data["chain"]),
        )
    except (OSError, ValueError, KeyError, TypeError):  # missing or damaged: prove again
        return None
    if proof.tokenizer_sha256 != sha256 or any(name not in engines.ENGINES for name in (proof.engine, *proof.chain)):
        return None
    return proof


def _write(path: pathlib.Path, proof: EngineProof) -> None:
    data = {"tokenizer_sha256": proof.tokenizer_sha256, "engine": proof.engine,
            "rejected": [list(item) for item in proof.rejected], "chain": list(proof.chain)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(str(path), json.dumps(data).encode("utf-8"))
    except OSError:  # a read-only home or a full disk: the job goes on without a cache
        pass
