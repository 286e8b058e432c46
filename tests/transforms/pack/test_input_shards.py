"""What a worker checks again in the token shards it reads: no ID wraps, no null token passes;
and how it reads a local shard."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from transforms.pack.input_shards import (
    BadTokenShard, Unit, as_token_type, bad_token_shard, open_shard, read_batches,
)


def test_an_id_that_does_not_fit_the_token_type_is_refused_not_wrapped():
    assert as_token_type(np.array([1, 65_535], np.int64), np.uint16, "f").tolist() == [1, 65_535]
    for tokens in ([1, 65_536], [-1, 2]):
        with pytest.raises(BadTokenShard) as error:
            as_token_type(np.array(tokens, np.int64), np.uint16, "f.parquet")
        assert bad_token_shard(error.value).startswith("f.parquet holds token IDs outside 0..65535")


def test_a_null_token_read_by_a_worker_names_the_document(tmp_path):
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "tokens": pa.array([[1, 2], [3, None]], pa.list_(pa.int64()))}), path)
    with pytest.raises(BadTokenShard) as error:
        list(read_batches(Unit(0, str(path), 0)))
    wrapped = RuntimeError(f"Traceback ...\n{error.value} [while running 'Pack/Spill']\n")  # as a runner gives it
    assert bad_token_shard(wrapped) == f"{path}: document 'b' (row group 0) holds a null inside its token list; " \
                                       "a token shard holds token IDs only"
    assert bad_token_shard(RuntimeError("another failure")) is None


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc")
def test_a_local_shard_is_read_memory_mapped(tmp_path):
    """Read through a file handle, each row group left a few MiB in a worker's heap for the
    first few dozen row groups, so a worker's peak grew with the input (benchmarks/RESULTS.md,
    2026-12-03 11:29); memory-mapped, it does not."""
    path = tmp_path / "mapped-shard.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "tokens": pa.array([[1, 2], [3]], pa.list_(pa.uint16()))}), path)

    def mapped() -> bool:
        with open("/proc/self/maps") as f:
            return any(line.rstrip().endswith(str(path)) for line in f)

    assert not mapped()
    for name in (str(path), f"file://{path}"):
        shard = open_shard(name)
        assert mapped()
        assert shard.read_row_group(0).column("tokens").to_pylist() == [[1, 2], [3]]
