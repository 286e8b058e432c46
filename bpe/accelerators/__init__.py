"""Optional accelerator engines: other libraries' encoders, each used only where
it gives exactly the reference encoder's IDs.

Every adapter module here has the same two names:

    NAME = "gigatoken"
    def build(tokenizer, proven=False) -> tuple[engine | None, str]

``build`` returns (None, a one-line reason a user can act on) when the package
is not installed, the pattern is not one the engine runs exactly, its merge
semantics could give other IDs for this vocabulary, or the installed engine
splits text unlike the installed ``regex`` in a way no guard can hold.
Otherwise it returns an engine and why it qualifies (``proven``: a proof made
for a tokenizer with this SHA-256 already passed; an adapter that runs an
O(vocabulary) proof skips it). The engine's ``encode(text: str)`` gives the
reference's ``tokenizer.reference.encode(text)`` IDs (a list, an ``array("I")``
or a numpy array) for valid UTF-8 text: a ``str`` without lone surrogates,
special-token strings being ordinary text. For a text it is not proven on, one
holding a code point that its Unicode tables class differently from ``regex``
(its gaps: ``unicode_gaps``, guarded by ``unicode_guard``), ``encode`` returns
None: that text goes to the next engine down. Engines pickle small (the gaps,
the vocabulary and the pattern) and rebuild the native object where they are
unpickled, so Beam ships them to workers.

What "exactly" rests on:

- merge semantics: engines that replay merge *pairs* in learned order (Hugging
  Face ``tokenizer.json`` semantics) are ours by construction; engines that
  merge by the rank of the concatenated bytes (tiktoken's semantics) are used
  only where ``proof.rank_mismatch`` finds nothing for the vocabulary at hand;
- pre-tokenization: equal IDs for the preset patterns, shown by the
  differential tests in tests/bpe/accelerators/test_accelerators.py (every code point of every
  general category in contexts, whitespace runs, CR/LF mixes, long repeats,
  other scripts' digits, contractions, fuzzed strings, held-out multilingual
  text), except on the code points the engine's gaps list; for versions the
  tests have not seen, the gaps are measured where the engine is first used
  (``gap_measurement``), and a difference outside code points refuses it.

``ADAPTERS`` lists the modules in order of preference, fastest first
(benchmarks/bench_accelerators.py); ``bpe.engines`` puts the first that builds
at the head of a tokenizer's chain of engines.
"""

from __future__ import annotations

import importlib

ADAPTERS = ("gigatoken", "fastokens", "splintr")


def build_all(tokenizer) -> list[tuple[str, object | None, str]]:
    """(name, engine or None, reason) for every adapter, in order of preference."""
    built = []
    for module_name in ADAPTERS:
        adapter = importlib.import_module(f"bpe.accelerators.{module_name}")
        engine, reason = adapter.build(tokenizer)
        built.append((adapter.NAME, engine, reason))
    return built
