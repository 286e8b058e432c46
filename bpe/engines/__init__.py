"""Optional accelerator engines: other libraries' encoders, each used only where
it gives exactly ``Tokenizer.encode``'s IDs.

Every adapter module here has the same two names:

    NAME = "gigatoken"
    def build(tokenizer) -> tuple[engine | None, str]

``build`` returns an engine whose ``encode(text: str)`` gives the IDs of
``tokenizer.encode(text)`` for any valid UTF-8 text (a ``str`` without lone
surrogates; special-token strings are ordinary text), or None and a one-line
reason: the package is not installed, the pattern is not one the engine runs
exactly, or its merge semantics could give other IDs for this vocabulary.
Engines pickle small (the vocabulary and the pattern) and rebuild the native
object where they are unpickled, so Beam can ship them to workers.

What "exactly" rests on, per engine (the module docstrings say more):

- merge semantics: engines that replay merge *pairs* in learned order
  (Hugging Face ``tokenizer.json`` semantics) are ours by construction;
  engines that merge by the rank of the concatenated bytes (tiktoken's
  semantics) are used only where ``_rank_mismatch`` proves them equal for the
  vocabulary at hand;
- pre-tokenization: equal pieces for the preset patterns, shown by the
  differential tests in tests/test_engines.py (every code point of every
  general category, whitespace runs, CR/LF mixes, long repeats, other scripts'
  digits, contractions, fuzzed strings, held-out multilingual text), run
  against the package versions the ``fast`` extra pins.

An adapter never trusts a package version it was not tested with less than any
other: the tests are what pins them, and ``ADAPTERS`` lists the modules in the
order of preference (fastest first, as measured by benchmarks/bench_engines.py).
"""

from __future__ import annotations

import importlib

ADAPTERS = ("gigatoken", "fastokens", "splintr")


def build_all(tokenizer) -> list[tuple[str, object | None, str]]:
    """(name, engine or None, reason) for every adapter, in order of preference."""
    built = []
    for module_name in ADAPTERS:
        adapter = importlib.import_module(f"bpe.engines.{module_name}")
        engine, reason = adapter.build(tokenizer)
        built.append((adapter.NAME, engine, reason))
    return built
