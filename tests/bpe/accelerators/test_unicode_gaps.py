"""The engines' Unicode gaps are measured, not assumed from version numbers
(bpe/accelerators/unicode_gaps.py, gap_measurement.py).

- A fresh measurement, for the installed engine and ``regex``, gives exactly the
  gaps shipped for the versions beam-bpe is tested with; when a new release of
  either classes code points differently, this names the code points.
- A version no table ships is measured once, announced on stderr, cached, and
  accepted when it behaves the same; a difference no code-point guard can hold
  refuses the engine with one line that says which.
"""

from __future__ import annotations

import importlib
import json

import pytest

import bpe
from bpe.accelerators import gap_measurement, proof, unicode_gaps
from bpe.accelerators.unicode_guard import parse_ranges
from bpe.pretokenize import PRESETS
from bpe.training import gigatoken_counts

PATTERNS = ("gpt2", "cl100k", "o200k")


def _points(ranges: str) -> set[int]:
    return {c for first, last in parse_ranges(ranges) for c in range(first, last + 1)}


def _newest_shipped(engine: str) -> tuple[tuple, str]:
    """The shipped table for the installed versions, else the one for the newest versions shipped."""
    version = unicode_gaps.installed_version(unicode_gaps._DISTRIBUTIONS[engine])
    regex_version = unicode_gaps.installed_version("regex")
    key = (engine, version, regex_version)
    if key in unicode_gaps.SHIPPED:
        return key, unicode_gaps.SHIPPED[key]
    newest = max((k for k in unicode_gaps.SHIPPED if k[0] == engine),
                 key=lambda k: [tuple(int(p) for p in v.split(".") if p.isdigit()) for v in k[1:]])
    return newest, unicode_gaps.SHIPPED[newest]


def _assert_same_as_shipped(engine: str, measured: set[int]) -> None:
    key, shipped = _newest_shipped(engine)
    sampled = {c for c in _points(shipped) if c in set(gap_measurement.probe_code_points())}
    added, gone = sorted(measured - sampled), sorted(sampled - measured)
    assert not added and not gone, (
        f"{engine} with regex {unicode_gaps.installed_version('regex')} classes code points unlike the table "
        f"shipped for {key}: now differing {unicode_gaps.format_ranges(added)!r}, no longer differing "
        f"{unicode_gaps.format_ranges(gone)!r}; ship the measured table for the installed versions")


def _unguarded(name: str):
    """The adapter's engine for a tokenizer, its guard off (as the measurement builds it)."""
    pytest.importorskip({"splintr": "splintr"}.get(name, name))
    module = importlib.import_module(f"bpe.accelerators.{name}")
    from bpe.accelerators.vocabulary_files import pair_rank_json, rank_file

    if name == "gigatoken":
        return lambda tok: module.GigatokenEngine("", pair_rank_json(tok, module._SCHEME_REGEX[tok.pattern]))
    if name == "fastokens":
        return lambda tok: module.FastokensEngine("", pair_rank_json(tok, module._ONIG_SPELLING[tok.pattern]))
    return lambda tok: module.SplintrEngine("", rank_file(tok), module._POSSESSIVE_FREE[tok.pattern])


@pytest.mark.parametrize("name", ["gigatoken", "fastokens", "splintr"])
def test_a_fresh_measurement_gives_the_shipped_gaps(name):
    make = _unguarded(name)
    measured = set()
    for preset in PATTERNS:
        pattern = PRESETS[preset]
        measurement = gap_measurement.measure(make(gap_measurement.measurement_tokenizer(pattern)).encode, pattern)
        assert not measurement.refused, measurement.refused
        measured |= set(measurement.gaps)
    _assert_same_as_shipped(name, measured)


def test_a_fresh_measurement_of_tiktoken_gives_the_shipped_gaps(monkeypatch, tmp_path):
    monkeypatch.setenv("BEAM_BPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(unicode_gaps, "SHIPPED", {})
    monkeypatch.setattr(unicode_gaps, "_measured", {})
    measured = set()
    for preset in PATTERNS:
        ranges, why = proof.tiktoken_gaps(PRESETS[preset])
        assert ranges is not None, why
        measured |= _points(ranges)
    monkeypatch.undo()
    _assert_same_as_shipped("tiktoken", measured)


def test_a_fresh_measurement_of_gigatokens_piece_counter_gives_the_shipped_gaps():
    pytest.importorskip("gigatoken")
    measurement = gap_measurement.measure_pieces(gigatoken_counts._unguarded_counts, PRESETS["gpt2"])
    assert not measurement.refused, measurement.refused
    _assert_same_as_shipped("gigatoken-counts", set(measurement.gaps))


def _pretend_unshipped(monkeypatch, tmp_path, version: str = "9.9.9"):
    """Every engine reports ``version``, which no table ships: gaps are measured."""
    real = unicode_gaps.metadata.version
    monkeypatch.setattr(unicode_gaps.metadata, "version", lambda d: version if d != "regex" else real(d))
    monkeypatch.setenv("BEAM_BPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(unicode_gaps, "_measured", {})


def test_a_new_release_that_behaves_the_same_is_measured_once_and_used(monkeypatch, tmp_path, capfd):
    pytest.importorskip("gigatoken")
    _pretend_unshipped(monkeypatch, tmp_path)
    tokenizer = bpe.Tokenizer([(104, 105), (32, 256)], pattern="gpt2")
    adapter = importlib.import_module("bpe.accelerators.gigatoken")
    engine, why = adapter.build(tokenizer)
    assert engine is not None, why
    line = capfd.readouterr().err
    assert "beam-bpe: measuring where gigatoken 9.9.9 splits gpt2 pieces unlike regex" in line
    assert line.count("\n") == 1
    assert 0x558 in _points(engine.guard.ranges) <= _points(_shipped_for_installed("gigatoken"))
    assert engine.encode("x \u0558 y") is None  # a letter gigatoken's tables lack: declined
    # Kept: the next process reads it from the cache, without measuring.
    [cached] = (tmp_path / "unicode-gaps").iterdir()
    assert json.loads(cached.read_text())["ranges"] == engine.guard.ranges
    monkeypatch.setattr(unicode_gaps, "_measured", {})
    monkeypatch.setattr(proof, "measure", None)  # would fail if called
    again, _ = adapter.build(tokenizer)
    assert again is not None and again.guard.ranges == engine.guard.ranges
    assert "measuring" not in capfd.readouterr().err


def _shipped_for_installed(engine: str) -> str:
    return _newest_shipped(engine)[1]


def test_a_difference_no_guard_can_hold_refuses_the_engine_in_one_line(monkeypatch, tmp_path):
    """An engine that splits CR/LF runs unlike regex cannot be guarded by code point."""
    pytest.importorskip("gigatoken")
    _pretend_unshipped(monkeypatch, tmp_path)
    adapter = importlib.import_module("bpe.accelerators.gigatoken")
    real_encode = adapter.GigatokenEngine._encode

    def splits_crlf_apart(self, text):
        return real_encode(self, text.replace("\r\n", "\n\r"))  # other bytes: other IDs

    monkeypatch.setattr(adapter.GigatokenEngine, "_encode", splits_crlf_apart)
    tokenizer = bpe.Tokenizer([(104, 105)], pattern="gpt2")
    engine, why = adapter.build(tokenizer)
    assert engine is None
    assert why.startswith("gigatoken 9.9.9 with regex ") and "no code-point guard can hold" in why
    assert "\n" not in why


def test_a_gap_in_ascii_refuses_the_engine():
    """The guard lets ASCII text through unread: a difference on "~" cannot be held."""
    measurement = gap_measurement._measured(lambda text: "~" in text)
    assert measurement.gaps == (0x7E,)
    assert "U+007E" in measurement.refused and "ASCII" in measurement.refused


def test_a_missing_package_says_how_to_install_it(monkeypatch):
    def not_found(distribution):
        raise unicode_gaps.metadata.PackageNotFoundError(distribution)

    monkeypatch.setattr(unicode_gaps.metadata, "version", not_found)
    tokenizer = bpe.Tokenizer([(104, 105)], pattern="gpt2")
    for name, hint in (("gigatoken", "pip install 'beam-bpe[fast]'"), ("fastokens", "pip install fastokens"),
                       ("splintr", "pip install splintr-rs")):
        engine, why = importlib.import_module(f"bpe.accelerators.{name}").build(tokenizer)
        assert engine is None and why.endswith(f"is not installed ({hint})")


def test_format_ranges_is_what_the_guard_reads():
    points = [0x558, 0x58B, 0x58C, 0x1D6A6, 0x3D000, 0x3D001, 0x3D002]
    assert unicode_gaps.format_ranges(points) == "0558 058B-058C 1D6A6 3D000-3D002"
    assert _points(unicode_gaps.format_ranges(points)) == set(points)
    assert unicode_gaps.format_ranges([]) == ""
