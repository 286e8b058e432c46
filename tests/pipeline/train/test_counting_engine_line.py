"""``beam-bpe train`` says, in one line a user can act on, why gigatoken does not count
the pieces when it could (the pattern is gpt2 or hf-bytelevel), and says nothing when
gigatoken counts or cannot run the pattern at all."""

from __future__ import annotations

import pytest

from bpe.accelerators import unicode_gaps
from pipeline.train import count_job

pytest.importorskip("gigatoken")


def test_a_missing_gigatoken_is_named_with_its_install_command(monkeypatch, capsys):
    def not_found(distribution):
        raise unicode_gaps.metadata.PackageNotFoundError(distribution)

    monkeypatch.setattr(unicode_gaps.metadata, "version", not_found)
    count_job._say_why_pieces_are_counted_by_regex("gpt2")
    [line] = capsys.readouterr().err.splitlines()
    assert line == ("beam-bpe train: counting pieces with regex, not gigatoken (several times slower): "
                    "gigatoken is not installed (pip install 'beam-bpe[fast]')")


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", r"\w+|\s+"])
def test_nothing_is_said_when_there_is_nothing_to_do(pattern, capsys):
    count_job._say_why_pieces_are_counted_by_regex(pattern)
    assert capsys.readouterr().err == ""
