"""What every adapter checks before it hands out an engine.

1. The package, and ``regex``, are versions the differential tests
   (tests/bpe/accelerators/test_accelerators.py) ran against: pre-tokenizers and Unicode tables change
   between releases of both, and only the tested pair is known to split alike
   (the Unicode guards list the code points where they differ).
2. For engines that merge by the rank of the concatenated bytes (tiktoken's
   semantics), ``bpe.engines.rank_proof.rank_mismatch`` finds nothing for this
   vocabulary (the adapter runs it).
3. The lines of the verification sample (``bpe.engines.sample``) encode to
   the same IDs both ways (a last guard, cheap at build time); a line the
   engine declines (see ``unicode_guard``) is skipped.

``preset_spelling`` runs the first check and finds the engine's spelling of
the tokenizer's preset pattern (only the presets are tested); ``checked`` runs
the last check on a freshly built engine and gives the adapter's answer: the
engine and why it qualifies, or None and why not.
"""

from __future__ import annotations

from importlib import metadata
from typing import Callable, Mapping

from bpe.engines.sample import SAMPLE_LINES

__all__ = ["REGEX_VERSIONS", "checked", "preset_spelling", "sample_mismatch", "untested_version"]

# The ``regex`` releases whose Unicode tables the engines' guards were measured against.
REGEX_VERSIONS = ("2026.11.19",)


def untested_version(distribution: str, tested: tuple[str, ...]) -> str | None:
    """Why the installed ``distribution`` (or ``regex``) is not usable, or None
    if both are tested versions."""
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return f"{distribution} is not installed"
    if version not in tested:
        return f"{distribution} {version} is not a tested version ({', '.join(tested)})"
    if distribution != "regex":
        return untested_version("regex", REGEX_VERSIONS)
    return None


def preset_spelling(tokenizer, distribution: str, tested: tuple[str, ...], spellings: Mapping[str, str],
                    custom: str) -> tuple[str | None, str]:
    """(the engine's spelling of the tokenizer's pattern, "") when the installed ``distribution``
    is a tested version (``untested_version``) and the pattern is one of ``spellings``' presets;
    else (None, why not), ``custom`` for a pattern that is not one."""
    unusable = untested_version(distribution, tested)
    if unusable:
        return None, unusable
    spelling = spellings.get(tokenizer.pattern)
    if spelling is None:
        return None, custom
    return spelling, ""


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
