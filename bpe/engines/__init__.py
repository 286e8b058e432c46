"""Encoding engines behind one interface, and the proof that picks one for a tokenizer.

A tokenizer's ordinary text is encoded by a chain of engines, fastest first:
an optional accelerator (``bpe.accelerators``), tiktoken's engine, and the
reference, which encodes anything byte for byte. A faster engine is in the
chain only once it is proven to give the reference's IDs for that tokenizer.

- ``chain``: the engines (``PythonEngine``, ``TiktokenEngine``,
  ``AcceleratedEngine``, ``NormalizingEngine``) and how a text goes down the chain.
- ``choice``: ``choose`` (runs the proofs) and ``from_proof`` (rebuilds a proven
  chain in a worker), ``allowed_engines`` (``BEAM_BPE_ENGINES``).
- ``engine_proof``: ``EngineProof``, the small picklable record of a choice.
- ``tiktoken_check``: when tiktoken's engine gives a tokenizer's IDs.
- ``rank_proof``: ``rank_mismatch``, the O(vocabulary) proof that rank-of-bytes
  merging (tiktoken's rule) gives our IDs for a vocabulary.
- ``sample``: the verification sample every engine must encode as the reference does.
- ``tokenizer_like``: what the engines read of a tokenizer.

    from bpe import engines
    chain = engines.choose(tokenizer)          # tokenizer.engine does this once
    chain.proof.reason                         # which engines, and why not the others
"""

from bpe.engines.chain import AcceleratedEngine, Engine, NormalizingEngine, PythonEngine, TiktokenEngine
from bpe.engines.choice import allowed_engines, choose, from_proof
from bpe.engines.engine_proof import ACCELERATORS, ENGINES, ENGINES_VARIABLE, EngineProof, ProofMismatch, check
from bpe.engines.rank_proof import rank_mismatch
from bpe.engines.sample import SAMPLE_LINES, VERIFICATION_SAMPLE
from bpe.engines.tiktoken_check import TIKTOKEN_PATTERNS
from bpe.engines.tokenizer_like import TokenizerLike

__all__ = [
    "ACCELERATORS",
    "ENGINES",
    "ENGINES_VARIABLE",
    "SAMPLE_LINES",
    "TIKTOKEN_PATTERNS",
    "VERIFICATION_SAMPLE",
    "AcceleratedEngine",
    "Engine",
    "EngineProof",
    "NormalizingEngine",
    "ProofMismatch",
    "PythonEngine",
    "TiktokenEngine",
    "TokenizerLike",
    "allowed_engines",
    "check",
    "choose",
    "from_proof",
    "rank_mismatch",
]
