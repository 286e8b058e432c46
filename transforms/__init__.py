"""Beam PTransforms and DoFns: the steps the ``beam-bpe`` commands build their jobs from.

Features with several modules are packages, each re-exporting its public names:

- ``read/``: ``ReadDocuments``, corpora -> documents and dead letters.
- ``pack/``: ``PackSequences`` and ``WriteSequences``, token shards -> training files.
- ``report/``: ``MeasureTokenizers``, documents -> the measures of ``beam-bpe report``.

The steps of one module each:

- ``count``: ``CountPreTokenTables``, documents -> pre-token counts (training).
- ``encode``: ``EncodeDocuments``, documents -> ``TokenRow``s.
- ``shards``: the token shard format and ``TokenRow``.
- ``write_shards``: ``WriteTokenShards``, TokenRows -> shards in input order, the same on
  every run; ``shard_layout``, its pure plan of which rows make which shard.
- ``decode``: ``DecodeShards``, shard rows -> the documents' bytes.
- ``dead_letters``: ``WriteDeadLetters``, what could not be read, as JSON Lines.
- ``parquet``: ``WriteParquetTables``, Arrow tables -> Parquet files.
- ``sink_write``: ``WriteWithSink``, the committing writer under ``parquet``.
- ``coders`` and ``metrics``: the element coders and the counters every step shares.

Imports ``bpe``, never ``pipeline``.
"""
