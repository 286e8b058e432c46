"""Drivers and the ``beam-bpe`` command line; they build Beam pipelines from transforms/."""
