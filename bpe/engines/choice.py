"""Which chain of engines a tokenizer gets: ``choose`` proves it, ``from_proof`` rebuilds it.

A tokenizer's engine is a chain (``bpe.engines.chain``): the first accelerator
that builds and qualifies (``bpe.accelerators``), then tiktoken's engine if it
qualifies (``bpe.engines.tiktoken_check``), then the reference. Only the first
accelerator is in the chain: the texts one declines hold code points the
others' Unicode tables lack too. ``BEAM_BPE_ENGINES`` (e.g. ``tiktoken,python``)
names the engines a process may use; the others are rejected as switched off.

A faster engine is used for a tokenizer only once it is **proven** to give the
reference's IDs on every input it takes. ``choose(tokenizer)`` runs the proofs
and returns the chain, whose ``.proof`` (an ``EngineProof``: the chain and why
every other engine is not in it) is small and picklable: a job's driver proves
once and passes the proof on, and ``from_proof`` in each worker checks it
against the worker's own tokenizer by SHA-256 and trusts it, rebuilding the
chain without the O(vocabulary) steps. ``beam-bpe encode --verify-fraction``
checks a sample of documents against the reference while the job runs
(``transforms.encode``).
"""

from __future__ import annotations

import os

from bpe.engines.chain import AcceleratedEngine, Engine, NormalizingEngine, PythonEngine, TiktokenEngine
from bpe.engines.engine_proof import ACCELERATORS, ENGINES, ENGINES_VARIABLE, EngineProof, check
from bpe.engines.tiktoken_check import tiktoken_engine
from bpe.engines.tokenizer_like import TokenizerLike

__all__ = ["allowed_engines", "choose", "from_proof"]


def allowed_engines() -> tuple[str, ...]:
    """The engines ``BEAM_BPE_ENGINES`` allows (all when unset); the reference always.

    Raises:
      ValueError: the variable names an engine that does not exist.
    """
    value = os.environ.get(ENGINES_VARIABLE, "").strip()
    if not value:
        return ENGINES
    names = {name.strip() for name in value.split(",") if name.strip()}
    unknown = sorted(names - set(ENGINES))
    if unknown:
        raise ValueError(f"{ENGINES_VARIABLE} names unknown engines {unknown}; the engines are {', '.join(ENGINES)}")
    return tuple(name for name in ENGINES if name in names or name == "python")


def choose(tokenizer: TokenizerLike) -> Engine:
    """The fastest chain of engines proven identical for this tokenizer; runs every proof it needs.

    The chain is the first accelerator that builds and qualifies (in
    ``ACCELERATORS`` order), then tiktoken's engine if it qualifies, then the
    reference. Engines ``BEAM_BPE_ENGINES`` leaves out are rejected as switched off.
    """
    allowed = allowed_engines()
    rejected: list[tuple[str, str]] = []
    switched_off = f"switched off by {ENGINES_VARIABLE}={os.environ.get(ENGINES_VARIABLE, '')}"
    accelerator = None
    for name in ACCELERATORS:
        if name not in allowed:
            rejected.append((name, switched_off))
        elif accelerator is None:
            accelerator, why = _build_accelerator(tokenizer, name, proven=False)
            if accelerator is None:
                rejected.append((name, why))
            else:
                chosen = name
    tiktoken, why = tiktoken_engine(tokenizer, proven=False) if "tiktoken" in allowed else (None, switched_off)
    if tiktoken is None:
        rejected.append(("tiktoken", why))
    chain = (*([chosen] if accelerator is not None else []), *(["tiktoken"] if tiktoken else []), "python")
    return _chain(tokenizer, EngineProof(tokenizer.sha256, chain[0], tuple(rejected), chain), accelerator, tiktoken)


def _build_accelerator(tokenizer: TokenizerLike, name: str, proven: bool):
    """(the accelerator ``name``'s engine, why) or (None, why not); never raises."""
    import importlib

    if tokenizer.kind == "tiktoken" and name != "gigatoken":
        return None, f"only gigatoken is proven for tiktoken rank files, not {name}"
    if tokenizer.kind not in ("beam-bpe", "tiktoken"):
        return None, "the accelerators are proven for beam-bpe's own tokenizers and tiktoken rank files only"
    try:
        adapter = importlib.import_module(f"bpe.accelerators.{name}")
        return adapter.build(tokenizer, proven=proven)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # an adapter that fails to load, or panics, means: not this engine
        return None, f"{name} failed to build: {type(e).__name__}: {e}"


def _chain(tokenizer: TokenizerLike, proof: EngineProof, accelerator, tiktoken: TiktokenEngine | None) -> Engine:
    """The engine objects of a proof's chain, from the engines already built."""
    reference = PythonEngine(*tokenizer.reference_parts(), proof)
    engine: Engine = reference
    if tiktoken is not None:
        tiktoken.proof = proof
        engine = tiktoken if tokenizer.normalizer is None else NormalizingEngine(tiktoken)
    if accelerator is not None:
        engine = AcceleratedEngine(proof.engine, accelerator, engine, proof)
    return engine


def from_proof(tokenizer: TokenizerLike, proof: EngineProof) -> Engine:
    """The chain of engines a proof names, for the tokenizer it was made for, without re-proving it.

    The O(vocabulary) proofs are trusted; the cheap checks still run (the
    engine is importable, takes the vocabulary and encodes the samples alike).
    An engine that fails one here is left out of the chain, with its reason.

    Raises:
      ProofMismatch: the proof is for a tokenizer with another SHA-256.
    """
    check(tokenizer, proof)
    chain, rejected = proof.engines, list(proof.rejected)
    accelerator = tiktoken = None
    if chain[0] in ACCELERATORS:
        accelerator, why = _build_accelerator(tokenizer, chain[0], proven=True)
        if accelerator is None:
            rejected.append((chain[0], why))
    if "tiktoken" in chain:
        tiktoken, why = tiktoken_engine(tokenizer, proven=True)
        if tiktoken is None:
            rejected.append(("tiktoken", why))
    built = {"python", *(["tiktoken"] if tiktoken is not None else []), *([chain[0]] if accelerator is not None else [])}
    rebuilt = tuple(name for name in chain if name in built)
    if rebuilt != chain:
        proof = EngineProof(proof.tokenizer_sha256, rebuilt[0], tuple(rejected), rebuilt)
    return _chain(tokenizer, proof, accelerator, tiktoken)
