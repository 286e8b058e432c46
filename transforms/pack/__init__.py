"""Packing token shards into shuffled fixed-length sequences, by split, and writing them as training files.

    units = p | beam.Create(shard_units(paths))
    packed = units | PackSequences(scratch_dir, seq_len=2048)
    packed.blocks | WriteSequences(output_dir, format="parquet")

The Beam parts are named after the PTransforms they hold:

- ``pack_sequences``: ``PackSequences`` and ``ShardUnits`` (token shards -> ``SequenceBlock``s).
- ``mix_sources``: ``MixSources`` (a mixture's units -> the units of its stream, by budget).
- ``write_sequences``: ``WriteSequences`` and ``WriteFiles`` (blocks -> files), ``written_counts``.
- ``megatron_documents``: ``WriteMegatronDocuments`` (whole documents, shuffled -> one
  Megatron-LM dataset per split).

Pure, without Beam (numpy and Arrow), what those run on workers:

- ``packing_algorithm``: positions, pieces, best fit and assembly of sequences.
- ``sequence_order``: which split a document goes to, and the shuffle of sequences.
- ``sequence_formats``: the bytes of Parquet, llm.c and MDS files (``mds_format``), and the formats.
- ``megatron_index``: Megatron-LM's ``.idx``, written as a stream.
- ``mixture_plan``: which training documents of named sources a token budget takes, how often.

Plain functions that read and write files through Beam's filesystems (no PTransforms):

- ``input_shards``: the input token shards' footers and row groups.
- ``spill``: the token streams set aside between the first pass and assembly.
"""

from transforms.pack.input_shards import ShardsInfo, bad_token_shard, describe_shards
from transforms.pack.megatron_documents import PARTS_DIR, WriteMegatronDocuments, split_files
from transforms.pack.mixture_plan import MixtureSpec, plan_mixture_json, weighted_budgets
from transforms.pack.pack_sequences import (
    PackedSequences, PackSequences, ShardUnits, SourceUnits, shard_units, source_units,
)
from transforms.pack.sequence_formats import FILE_TOKEN_LIMITS, FORMATS, SEQUENCE_FORMATS, SUFFIXES, check_format
from transforms.pack.sequence_order import SPLITS
from transforms.pack.write_sequences import WriteFiles, WriteSequences, written_counts

__all__ = [
    "PackSequences", "PackedSequences", "ShardUnits", "SourceUnits", "shard_units", "source_units", "MixtureSpec",
    "plan_mixture_json", "weighted_budgets", "ShardsInfo", "bad_token_shard", "describe_shards",
    "SPLITS", "WriteSequences", "WriteFiles", "written_counts", "FORMATS", "SUFFIXES", "check_format",
    "SEQUENCE_FORMATS", "FILE_TOKEN_LIMITS", "PARTS_DIR", "WriteMegatronDocuments", "split_files",
]
