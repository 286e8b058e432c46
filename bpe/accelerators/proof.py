"""What every adapter checks before it hands out an engine.

1. The package is installed, and the tokenizer's pattern is one of the
   presets, whose spelling for the engine the differential tests
   (tests/bpe/accelerators/test_accelerators.py) show to split as ``regex`` does.
2. The code points where the installed engine splits unlike the installed
   ``regex`` are measured (``unicode_gaps``: shipped for the tested versions,
   else measured once and cached), and the engine's guard declines texts
   holding one; a difference no guard can hold refuses the engine. No version
   is refused for being new.
3. For engines that merge by the rank of the concatenated bytes (tiktoken's
   semantics), ``bpe.engines.rank_proof.rank_mismatch`` finds nothing for this
   vocabulary (the adapter runs it).
4. The lines of the verification sample (``bpe.engines.sample``) encode to
   the same IDs both ways (a last guard, cheap at build time); a line the
   engine declines (see ``unicode_guard``) is skipped.

``preset_spelling`` runs the first check and finds the engine's spelling of
the tokenizer's preset pattern; ``measured_gaps`` the second; ``checked`` runs
the last check on a freshly built engine and gives the adapter's answer: the
engine and why it qualifies, or None and why not.
"""

from __future__ import annotations

from typing import Callable, Mapping

from bpe.accelerators.gap_measurement import measure, measure_classes, measurement_tokenizer
from bpe.accelerators.unicode_gaps import guard_ranges, installed_version
from bpe.engines.sample import SAMPLE_LINES

__all__ = ["checked", "measured_gaps", "preset_spelling", "sample_mismatch", "tiktoken_gaps"]

# How a user gets each accelerator's package.
_INSTALL = {"gigatoken": "pip install 'beam-bpe[fast]'", "fastokens": "pip install fastokens",
            "splintr-rs": "pip install splintr-rs"}


def preset_spelling(tokenizer, distribution: str, spellings: Mapping[str, str],
                    custom: str) -> tuple[str | None, str]:
    """(the engine's spelling of the tokenizer's pattern, "") when ``distribution`` is
    installed and the pattern is one of ``spellings``' presets; else (None, why not),
    ``custom`` for a pattern that is not one."""
    if installed_version(distribution) is None:
        return None, f"{distribution} is not installed ({_INSTALL.get(distribution, 'pip install ' + distribution)})"
    spelling = spellings.get(tokenizer.pattern)
    if spelling is None:
        return None, custom
    return spelling, ""


def measured_gaps(name: str, pattern: str, unguarded: Callable[[object], object]) -> tuple[str | None, str]:
    """(the code point ranges the engine ``name`` must decline with ``pattern``, "") or
    (None, why it cannot be made exact), for the installed versions (``unicode_gaps``).

    Args:
      unguarded: builds the engine, its guard off, for a tokenizer (called with
        the measurement's vocabulary, only when the gaps must be measured).
    """
    return guard_ranges(name, pattern,
                        lambda: measure(unguarded(measurement_tokenizer(pattern)).encode, pattern))


def tiktoken_gaps(pattern: str) -> tuple[str | None, str]:
    """``measured_gaps`` of tiktoken's engine, which runs the pattern itself: its regex
    classes are read off for every code point at once (``measure_classes``)."""

    def read_class(cls: str, text: str) -> str:
        import tiktoken

        single_bytes = {bytes([b]): b for b in range(256)}
        # tiktoken drops the text its pattern does not match: what is left is the class.
        encoding = tiktoken.Encoding("one-class", pat_str=cls, mergeable_ranks=single_bytes, special_tokens={})
        return bytes(encoding.encode_ordinary(text)).decode("utf-8")

    def run():
        encoding = measurement_tokenizer(pattern).to_tiktoken(special_tokens={})
        return measure_classes(read_class, encoding.encode_ordinary, pattern)

    return guard_ranges("tiktoken", pattern, run)


def sample_mismatch(tokenizer, engine, name: str) -> str | None:
    """Why ``engine`` fails the sample check, or None."""
    for line_number, line in enumerate(SAMPLE_LINES):
        try:
            theirs = engine.encode(line)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as e:  # a native failure, a Rust panic included, is a reason, not a crash
            return f"{name} failed on verification sample line {line_number}: {type(e).__name__}: {e}"
        if theirs is None:
            continue
        if [int(i) for i in theirs] != tokenizer.reference.encode(line):
            return f"{name} differs from our encoder on verification sample line {line_number}"
    return None


def checked(tokenizer, name: str, make: Callable[[], object], why: str) -> tuple[object | None, str]:
    """(the engine ``make`` builds, ``why``) when it builds and passes ``sample_mismatch``,
    else (None, why not); whatever the native loader raises means: not this engine (a Rust
    panic is a ``BaseException``, pyo3's ``PanicException``; only an interrupt or an exit
    goes on up)."""
    try:
        engine = make()
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # whatever the native loader rejects, or panics on, means: not this engine
        return None, f"{name} rejected the vocabulary: {type(e).__name__}: {e}"
    mismatch = sample_mismatch(tokenizer, engine, name)
    if mismatch:
        return None, mismatch
    return engine, why
