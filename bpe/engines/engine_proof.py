"""The engines' names and ``EngineProof``: which engines give a tokenizer's IDs, small enough to pass on.

A job's driver proves once which chain of engines gives a tokenizer's IDs
(``bpe.engines.choice.choose``); its ``EngineProof`` pickles small, and each
worker checks it against its own tokenizer by SHA-256 (``check``) and rebuilds
the chain from it without the O(vocabulary) steps (``choice.from_proof``).
"""

from __future__ import annotations

import dataclasses

from bpe.engines.tokenizer_like import TokenizerLike

__all__ = ["ACCELERATORS", "ENGINES", "ENGINES_VARIABLE", "EngineProof", "ProofMismatch", "check"]

# Engine names, fastest first; the last one, the reference, encodes anything.
# The first three are the optional accelerators (``bpe.accelerators.ADAPTERS``).
ENGINES = ("gigatoken", "fastokens", "splintr", "tiktoken", "python")
ACCELERATORS = ENGINES[:3]
# Names the engines a process may use, e.g. "tiktoken,python" (the reference is always allowed).
ENGINES_VARIABLE = "BEAM_BPE_ENGINES"


class ProofMismatch(ValueError):
    """An EngineProof given to a tokenizer it was not made for."""


@dataclasses.dataclass(frozen=True)
class EngineProof:
    """Which engine is proven to give a tokenizer's IDs, and why the faster ones are not.

    Attributes:
      tokenizer_sha256: the SHA-256 of the tokenizer the proof is for.
      engine: the fastest engine proven identical (a name in ``ENGINES``).
      rejected: (engine, why not) for every engine not in the chain.
      chain: the engines a text tries in turn, ``engine`` first and the
        reference last; () means ``engine`` and then the reference.
    """

    tokenizer_sha256: str
    engine: str
    rejected: tuple[tuple[str, str], ...] = ()
    chain: tuple[str, ...] = ()

    @property
    def engines(self) -> tuple[str, ...]:
        """The chain, spelt out: ``engine`` first, the reference last."""
        if self.chain:
            return self.chain
        return (self.engine,) if self.engine == "python" else (self.engine, "python")

    @property
    def reason(self) -> str:
        """One line: the engines chosen and why the others were not."""
        chain = self.engines
        head = self.engine if len(chain) <= 2 else f"{self.engine} (then {', then '.join(chain[1:])})"
        if not self.rejected:
            return f"{head}: proven identical for this tokenizer"
        why = "; ".join(f"not {name}: {reason}" for name, reason in self.rejected)
        return f"{head}: {why}"


def check(tokenizer: TokenizerLike, proof: EngineProof) -> None:
    """Raises ProofMismatch unless the proof was made for this tokenizer (same SHA-256)."""
    if not isinstance(proof, EngineProof):
        raise TypeError(f"expected an EngineProof, got {type(proof).__name__}")
    if proof.tokenizer_sha256 != tokenizer.sha256:
        raise ProofMismatch(
            f"the engine proof is for tokenizer {proof.tokenizer_sha256}, not for this one ({tokenizer.sha256})"
        )
    for name in (proof.engine, *proof.chain):
        if name not in ENGINES:
            raise ProofMismatch(f"the engine proof names {name!r}, not one of {', '.join(ENGINES)}")
