"""Assertions on ``ReadDocuments``: the exact Documents and dead letters a read yields."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import BeamAssertException, assert_that, equal_to

from transforms.read import Document, ReadDocuments

__all__ = ["check_read", "dead_letters_like", "text_documents"]


def dead_letters_like(expected):
    """An assert_that matcher for dead letters.

    Args:
      expected: (file, record, reason_substring) triples; each actual dead
        letter must match one, by file and record exactly and by a reason that
        contains the substring.
    """
    expected = sorted(expected)

    def match(actual):
        actual = sorted(actual)
        problems = []
        if len(actual) != len(expected):
            problems.append(f"expected {len(expected)} dead letters, got {len(actual)}")
        for want, got in zip(expected, actual):
            if (got.file, got.record) != want[:2] or want[2] not in got.reason:
                problems.append(f"expected {want}, got {tuple(got)}")
        if problems:
            raise BeamAssertException("; ".join(problems) + f"\nall: {actual}")

    return match


def check_read(patterns, documents, dead_letters=(), options=(), **kwargs):
    """Runs ReadDocuments(patterns, **kwargs) and asserts its two outputs.

    Args:
      documents: the exact Documents expected, in any order; their ``piece`` is
        not compared (it depends on how files are split, which
        ``test_read.py::test_documents_name_the_piece_they_were_read_in`` checks).
      dead_letters: (file, record, reason_substring) triples, as for
        ``dead_letters_like``.
      options: pipeline flags (e.g. the S3 fixture's).
    """
    with test_pipeline.TestPipeline(options=PipelineOptions(list(options))) as p:
        result = p | "Read" >> ReadDocuments(patterns, **kwargs)
        unpieced = result.documents | "NoPiece" >> beam.Map(lambda doc: doc._replace(piece=1))
        assert_that(unpieced, equal_to([doc._replace(piece=1) for doc in documents]), label="Documents")
        assert_that(result.dead_letters, dead_letters_like(dead_letters), label="DeadLetters")


def text_documents(path, lines, first=1):
    """The Documents of a text file's lines, numbered from ``first``."""
    return [Document(path, first + i, line, None) for i, line in enumerate(lines)]
