"""Each engine's Unicode gaps for the installed versions: ``guard_ranges``.

An engine's gaps are the code points where its pre-tokenizer splits text
unlike ``regex``'s (``bpe.accelerators.gap_measurement``); its guard
(``bpe.accelerators.unicode_guard``) declines a text holding one. They depend
on the installed versions of the engine and of ``regex``, so for each pair
they come from, in order:

1. ``SHIPPED``: the gaps measured for the versions beam-bpe is tested with
   (tests/bpe/accelerators/test_unicode_gaps.py measures them afresh and
   compares, naming any code point that differs);
2. the cache (``bpe.cache_directory``, folder ``unicode-gaps/``), one small
   JSON file per engine, pattern and version pair;
3. a measurement, on first use of a version pair: a few seconds, announced by
   one line on stderr, then written to the cache.

An engine is refused only when the measurement finds a difference no code-point
guard can hold, never because a version is new.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys
import time
from importlib import metadata
from typing import Callable

from bpe.accelerators.gap_measurement import Measurement
from bpe.atomic_write import replace_file
from bpe.cache_directory import cache_directory
from bpe.pretokenize import PRESETS

__all__ = ["SHIPPED", "format_ranges", "guard_ranges", "installed_version"]

# Code points ``regex`` 2026.12.2 (Unicode 17) assigns as letters,
# marks or numbers that gigatoken 0.10.0's tables lack.
_GIGATOKEN = (
    "0558 058B-058C 05C8-05C9 0B53-0B54 1ADE-1ADF 1AEC-1AF0 208F 209D-209F A7DD A7E2 AB6C-AB6D "
    "107BB-107BF 10ECB-10ECF 10ED9-10EEE 10EF0-10EF9 11B0A 11DF0-11DF1 1246F 12475-1247F 12550-12686 "
    "18CD6-18CDA 18D1F-18D20 18E00-19191 191A0-191D2 1B123-1B128 1B168 1D127-1D128 1D250-1D252 "
    "1D25B-1D25C 1D25F 1D280-1D281 1D6A6 1DF1F-1DF24 1DF2B-1DF81 1DF90-1DF96 1DFCD-1DFFF 2B81E 3D000-3FC3F"
)

# Those that tiktoken 0.14.0's regex engine and the PCRE2 builds in fastokens
# 0.3.5 and splintr-rs 0.22.0 all lack, and U+0295, a lowercase letter in their
# tables and another letter in ``regex``'s (o200k's pattern tells the cases apart).
_TIKTOKEN = (
    "0295 0558 058B-058C 05C8-05C9 088F 0B53-0B54 0C5C 0CDC 1ACF-1AF0 208F 209D-209F A7CE-A7CF A7D2 A7D4 "
    "A7DD A7E2 A7F1 AB6C-AB6D 107BB-107BF 10940-10959 10EC5-10EC7 10ECB-10ECF 10ED9-10EEE "
    "10EF0-10EFB 11B0A 11B60-11B67 11DB0-11DDB 11DE0-11DE9 11DF0-11DF1 1246F 12475-1247F 12550-12686 "
    "16EA0-16EB8 16EBB-16ED3 16FF2-16FF6 187F8-187FF 18CD6-18CDA 18D09-18D20 18D80-18DF2 18E00-19191 "
    "191A0-191D2 1B123-1B128 1B168 1D127-1D128 1D250-1D252 1D25B-1D25C 1D25F 1D280-1D281 1D6A6 "
    "1DF1F-1DF24 1DF2B-1DF81 1DF90-1DF96 1DFCD-1DFFF 1E6C0-1E6DE 1E6E0-1E6F5 1E6FE-1E6FF 2B73A-2B73F "
    "2B81E 2CEA2-2CEAD 323B0-33479 3D000-3FC3F"
)

# PCRE2: those, and U+180E (MONGOLIAN VOWEL SEPARATOR), which PCRE2's \s matches
# and ``regex``'s does not.
_PCRE2 = f"180E {_TIKTOKEN}"

# Where gigatoken 0.10.0's piece counter (``bpe.training.gigatoken_counts``) gives
# other pieces than ``regex`` with the gpt2 pattern: fewer than its encoder.
_GIGATOKEN_COUNTS = (
    "0558 058B-058C 208F 209D-209F A7DD A7E2 AB6C-AB6D 107BB-107BF 10ED9-10EEE 11B0A 11DF1 1246F "
    "12475-1247F 12550-12686 18CD6-18CDA 18D1F-18D20 18E00-19191 191A0-191D2 1B123-1B128 1B168 1D6A6 "
    "1DF1F-1DF24 1DF2B-1DF81 1DF90-1DF96 1DFCD-1DFFF 2B81E 3D000-3FC3F"
)

# (engine, its version, regex's version) -> the gaps measured there, over every preset pattern.
SHIPPED = {
    ("gigatoken", "0.10.0", "2026.12.2"): _GIGATOKEN,
    ("gigatoken-counts", "0.10.0", "2026.12.2"): _GIGATOKEN_COUNTS,
    ("fastokens", "0.3.5", "2026.12.2"): _PCRE2,
    ("splintr", "0.22.0", "2026.12.2"): _PCRE2,
    ("tiktoken", "0.14.0", "2026.12.2"): _TIKTOKEN,
}

# The engines' distributions on PyPI.
_DISTRIBUTIONS = {"gigatoken": "gigatoken", "gigatoken-counts": "gigatoken", "fastokens": "fastokens",
                  "splintr": "splintr-rs", "tiktoken": "tiktoken"}

_measured: dict[tuple, tuple[str | None, str]] = {}


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def guard_ranges(engine: str, pattern: str, measure: Callable[[], Measurement]) -> tuple[str | None, str]:
    """(the code point ranges ``engine``'s guard must decline with ``pattern``, "") or
    (None, why no guard can make the engine exact), for the installed versions.

    Args:
      engine: a key of ``_DISTRIBUTIONS`` ("gigatoken", "tiktoken", ...).
      pattern: the tokenizer's pre-tokenizer regex (a preset).
      measure: runs the measurement (``gap_measurement.measure`` with the engine's
        unguarded encoder); called only when neither ``SHIPPED`` nor the cache knows
        these versions.
    """
    version, regex_version = installed_version(_DISTRIBUTIONS[engine]), installed_version("regex")
    shipped = SHIPPED.get((engine, version, regex_version))
    if shipped is not None:
        return shipped, ""
    key = (engine, version, regex_version, pattern)
    if key not in _measured:
        path = cache_directory() / "unicode-gaps" / f"{_cache_key(key)}.json"
        _measured[key] = _read(path) or _measure_and_keep(path, key, measure)
    return _measured[key]


def format_ranges(code_points) -> str:
    """[0x558, 0x58B, 0x58C] -> "0558 058B-058C": the form ``unicode_guard`` reads."""
    ranges: list[list[int]] = []
    for c in sorted(code_points):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return " ".join(f"{first:04X}" if first == last else f"{first:04X}-{last:04X}" for first, last in ranges)


def _measure_and_keep(path: pathlib.Path, key: tuple, measure: Callable[[], Measurement]) -> tuple[str | None, str]:
    engine, version, regex_version, pattern = key
    name = next((preset for preset, regex in PRESETS.items() if regex == pattern), "custom")
    # The package a user would upgrade, by its name on PyPI.
    label = f"{_DISTRIBUTIONS[engine]} {version}" + ("'s piece counter" if engine.endswith("-counts") else "")
    # A few seconds, once per version pair: say so, or a first run looks stuck.
    print(f"beam-bpe: measuring where {label} splits {name} pieces unlike regex {regex_version} "
          "(once for these versions) ...", end="", file=sys.stderr, flush=True)
    started = time.perf_counter()
    try:
        measurement = measure()
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # the engine (or tiktoken, whose merge ours uses) changed its interface
        print(" failed", file=sys.stderr, flush=True)
        return None, f"{label}: its gaps could not be measured: {type(e).__name__}: {e}"
    print(f" {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    if measurement.refused:
        result = None, f"{label} with regex {regex_version}: {measurement.refused}"
    else:
        result = format_ranges(measurement.gaps), ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(str(path), json.dumps({"key": list(key), "ranges": result[0], "refused": result[1]}).encode())
    except OSError:  # a read-only home or a full disk: measured again next time
        pass
    return result


def _read(path: pathlib.Path) -> tuple[str | None, str] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        ranges, refused = data["ranges"], data["refused"]
    except (OSError, ValueError, KeyError, TypeError):  # missing or damaged: measure again
        return None
    if not (isinstance(ranges, str) or (ranges is None and isinstance(refused, str) and refused)):
        return None
    return ranges, refused


def _cache_key(key: tuple) -> str:
    """A SHA-256 of the engine, versions and pattern, and of the measurement's own code."""
    code = (pathlib.Path(__file__).parent / "gap_measurement.py").read_bytes()
    return hashlib.sha256(json.dumps(list(key)).encode("utf-8") + b"\0" + code).hexdigest()
