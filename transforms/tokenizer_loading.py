"""How a step gets its tokenizer: from the file, or from a taker the process installed.

    tokenizer = load_tokenizer(path, preset, proof, transport_params)   # in a DoFn's setup
    tokenizer, engine = load_proven(path, preset, proof)                # and the engine the proof names
    install_taker(take)                                                 # once, by the process

A step's ``setup`` reads its tokenizer with ``Tokenizer.load``, so local,
``gs://`` and ``s3://`` paths work on any runner. A process may have read it
already, before the job asked for it: then it installs a taker, a function
``take(path, preset, proof)`` that hands over such a tokenizer or returns None
(``pipeline.runtime.preloaded``, which the start-up machinery of beam-bpe's
own commands installs in their worker processes). Taking changes nothing a
step checks: the step still holds the tokenizer against the job's proof
(``Tokenizer.use_proof``, by SHA-256), whichever way it came.

Without a taker (any runner's worker, a test, plain Beam) every step reads the
file.
"""

from __future__ import annotations

from typing import Callable, Optional

from bpe.engines import Engine, EngineProof, ProofMismatch
from bpe.tokenizer import Tokenizer

__all__ = ["Taker", "install_taker", "load_proven", "load_tokenizer"]

# take(path, preset, proof): a tokenizer read ahead for (path, preset), or None.
Taker = Callable[[str, Optional[str], Optional[EngineProof]], Optional[Tokenizer]]

_taker: Taker | None = None


def install_taker(take: Taker | None) -> None:
    """Makes ``take`` the process's source of tokenizers read ahead (None: there is none)."""
    global _taker
    _taker = take


def load_tokenizer(path: str, preset: str | None = None, proof: EngineProof | None = None,
                   transport_params: dict | None = None) -> Tokenizer:
    """The tokenizer at ``path`` (with ``preset`` for a rank file): the one the installed
    taker holds for it and ``proof`` (any proof when None), else read from the file.

    Raises:
      TokenizerFileError: as ``Tokenizer.load``, when the file is read.
    """
    taken = _taker(path, preset, proof) if _taker is not None else None
    if taken is not None:
        return taken
    return Tokenizer.load(path, transport_params, preset=preset)


def load_proven(path: str, preset: str | None, proof: EngineProof,
                transport_params: dict | None = None) -> tuple[Tokenizer, Engine]:
    """``load_tokenizer`` and the engine ``proof`` names for it (``Tokenizer.use_proof``).

    Raises:
      RuntimeError: the file is not the one the proof was made for (it changed while the job ran).
    """
    tokenizer = load_tokenizer(path, preset, proof, transport_params)
    try:
        return tokenizer, tokenizer.use_proof(proof)
    except ProofMismatch:
        raise RuntimeError(
            f"tokenizer {path} changed while the job ran: SHA-256 {tokenizer.sha256}, "
            f"the job started with {proof.tokenizer_sha256}"
        ) from None
