"""Tokenizers a process reads before its job asks for them.

    preloaded.load(path, preset)                # ahead of the job
    tokenizer = load_tokenizer(path, preset, proof, ...)  # in the job's step (transforms.tokenizer_loading)

A warm Beam worker (``pipeline.runtime.warm_workers``) holds the job's
tokenizers before the job starts, each one's engine built when the proof cache
(``bpe.proof_cache``) already holds its proof, so a step's setup finds the
tokenizer ready. A worker started as a new process reads them while it waits;
the command line reads them once before it forks its workers
(``load(..., engine=False)``, so the command itself, which needs no engine,
takes its own at once), and each copy builds the engines
(``build_engines``) while the command builds its job.

The first ``load`` installs ``take`` as the process's taker
(``transforms.tokenizer_loading.install_taker``): the steps and the commands
ask it before they read a file. Nothing else calls ``load``, so a process
whose start-up machinery is off (``pipeline.runtime.facade``) has no taker.

Each one is taken once, and only with the proof its engine was built from (or
any, when none was built); a second taker reads its own. Taking changes
nothing a step checks: it still holds the tokenizer against the job's proof
(``Tokenizer.use_proof``, by SHA-256), so a file changed after the worker read
it fails the job as any file changed during the job does.

Only local files, and without error: a tokenizer that cannot be read here is
read again by the step, which reports the problem.
"""

from __future__ import annotations

from bpe import proof_cache
from bpe.engines import EngineProof
from bpe.tokenizer import Tokenizer
from transforms.tokenizer_loading import install_taker

__all__ = ["build_engines", "load", "take"]

# (path, preset) -> (tokenizer, the proof its engine was built from, or None)
_kept: dict[tuple[str, str | None], tuple[Tokenizer, EngineProof | None]] = {}


def load(path: str, preset: str | None = None, engine: bool = True) -> None:
    """Reads the tokenizer at a local ``path`` (with ``preset`` for a rank file) and keeps
    it, with its engine built unless ``engine`` is False (``build_engines`` builds it later);
    ``take`` becomes the process's taker."""
    install_taker(take)
    try:
        tokenizer = Tokenizer.load(path, preset=preset)
    except Exception:  # noqa: BLE001 - the step reads it again and reports what is wrong
        return
    _kept[(path, preset)] = (tokenizer, None)
    if engine:
        _build((path, preset))


def build_engines() -> None:
    """Builds the engine of every kept tokenizer that has none yet."""
    for key in list(_kept):
        _build(key)


def _build(key: tuple[str, str | None]) -> None:
    """The engine of the tokenizer kept under ``key``, when the proof cache holds its proof."""
    tokenizer, built_from = _kept[key]
    if built_from is not None:
        return
    try:
        proof = proof_cache.cached(tokenizer)
        if proof is not None:
            tokenizer.use_proof(proof)
    except Exception:  # noqa: BLE001 - the step builds it again and reports what is wrong
        del _kept[key]
        return
    _kept[key] = (tokenizer, proof)


def take(path: str, preset: str | None, proof: EngineProof | None = None) -> Tokenizer | None:
    """The tokenizer ``load`` kept for (path, preset), once, unless its engine was built
    from another proof than ``proof`` (any, when None: a taker that finds or makes the
    proof itself next); None if there is none."""
    tokenizer, built_from = _kept.pop((path, preset), (None, None))
    if proof is not None and built_from is not None and built_from != proof:
        return None
    return tokenizer
