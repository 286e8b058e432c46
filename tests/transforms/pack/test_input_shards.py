"""What a worker checks again in the token shards it reads: no ID wraps, no null token passes."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from transforms.pack.input_shards import BadTokenShard, Unit, as_token_type, bad_token_shard, read_batches


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
