"""Beam PTransforms and DoFns for reading corpora, counting pre-tokens, encoding and decoding."""
