"""EncodeDocuments, WriteTokenShards and DecodeShards as Beam transforms."""

import glob
import random
import sys
from array import array

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

import bpe
from tests.helpers import IN_MEMORY, train_small
from tests.real_text import multilingual
from transforms.decode import DecodeShards
from bpe.tiktoken_core import fast_encoder
from transforms.encode import EncodeDocuments, TokenRow, read_tokenizer
from transforms.read import Document
from transforms.shards import EOS_KEY, INPUT_BYTES_KEY, SHA256_KEY, VOCAB_SIZE_KEY, WriteTokenShards, rows_to_table, shard_schema



@pytest.fixture(scope="module")
def texts():
    return multilingual(2)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory, texts):
    path = tmp_path_factory.mktemp("tok")
    train_small(texts).save(str(path))
    return str(path)


def documents(texts):
    docs = [Document("mem.jsonl", i + 1, t.encode("utf-8"), f"doc{i}") for i, t in enumerate(texts)]
    # Invalid UTF-8 and edge cases go through our own encoder, never tiktoken.
    docs += [
        Document("raw.txt", 1, b"caf\xc3\xa9 \xff\xfe broken \xe2\x82", None),
        Document("raw.txt", 2, b"", None),
        Document("raw.txt", 3, b"<|endoftext|> is ordinary text here\n", None),
    ]
    return docs


@pytest.mark.parametrize("use_tiktoken", [True, False])
@pytest.mark.parametrize("append_eos", [False, True])
def test_encode_documents_gives_tokenizer_ids(tokenizer_dir, texts, use_tiktoken, append_eos):
    tok = read_tokenizer(tokenizer_dir)
    docs = documents(texts)
    eos = [tok.special_tokens["<|endoftext|>"]] if append_eos else []
    expected = [
        TokenRow(d.doc_id if d.doc_id is not None else f"{d.file}:{d.record}", tok.encode(d.data) + eos, len(d.data))
        for d in docs
    ]
    with TestPipeline(argv=IN_MEMORY) as p:
        rows = (
            p
            | beam.Create(docs)
            | EncodeDocuments(tokenizer_dir, append_eos=append_eos, batch_size=4, use_tiktoken=use_tiktoken)
        )
        assert_that(
            rows | beam.Map(lambda r: (r.id, tuple(r.tokens), r.input_bytes)),
            equal_to([(r.id, tuple(r.tokens), r.input_bytes) for r in expected]),
        )


def test_encode_refuses_changed_tokenizer(tokenizer_dir):
    with pytest.raises(Exception, match="changed while the job ran"):
        with TestPipeline(argv=IN_MEMORY) as p:
            _ = p | beam.Create(documents(["x"])) | EncodeDocuments(tokenizer_dir, tokenizer_sha256="0" * 64)


def test_fast_encoder_is_used_for_trained_tokenizer_and_matches(tokenizer_dir, texts):
    tok = read_tokenizer(tokenizer_dir)
    fast, reason = fast_encoder(tok)
    assert fast is not None, reason
    more = multilingual(2, start=7)
    # Special-token text is ordinary text for both, as in encode_ordinary.
    for text in more + ["<|endoftext|>", "a<|endoftext|>b <|endo", ""]:
        ids = fast(text)
        assert isinstance(ids, array) and ids.tolist() == tok.encode(text)


def test_fast_encoder_for_a_tokenizer_without_special_tokens(texts):
    # tiktoken gets a placeholder special token (its buffer call is slow without
    # any); it is never allowed, so its text is ordinary and its ID never appears.
    from bpe.tiktoken_core import _UNUSED_SPECIAL

    tok = train_small(texts, special_tokens=())
    fast, reason = fast_encoder(tok)
    assert fast is not None, reason
    for text in multilingual(2, start=5) + [_UNUSED_SPECIAL, f"a{_UNUSED_SPECIAL}b", ""]:
        ids = fast(text).tolist()
        assert ids == tok.encode(text) and tok.vocab_size not in ids
    assert tok.encode_batch([_UNUSED_SPECIAL]) == [tok.encode(_UNUSED_SPECIAL)]


def test_array_encoder_without_tiktokens_buffer_call_gives_the_same_arrays(tokenizer_dir):
    from bpe.tiktoken_core import _ArrayEncoder

    class ListOnly:  # a tiktoken Encoding without the buffer call of its core
        def __init__(self, encoding):
            self.encode_ordinary = encoding.encode_ordinary

    encoding = read_tokenizer(tokenizer_dir).to_tiktoken()
    for text in multilingual(2, start=3) + ["<|endoftext|>", ""]:
        buffered, listed = _ArrayEncoder(encoding)(text), _ArrayEncoder(ListOnly(encoding))(text)
        assert buffered.typecode == listed.typecode == "I"
        assert buffered == listed and buffered.tolist() == encoding.encode_ordinary(text)


def test_fast_encoder_refuses_custom_pattern():
    tok = bpe.Tokenizer([(97, 98)], pattern=r"\w+|\W")
    assert fast_encoder(tok)[0] is None


def test_without_tiktoken_everything_goes_through_our_encoder(monkeypatch, texts):
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # `import tiktoken` now fails
    tok = train_small(texts[:1], vocab_size=300)
    encode, reason = fast_encoder(tok)
    assert encode is None and reason == "tiktoken is not installed"
    assert tok.encode_batch(texts) == [tok.encode(text) for text in texts]


def _random_tokenizer(rng, alphabet=b"ab"):
    ids = list(alphabet)
    spelled = {i: bytes([i]) for i in ids}
    seen = set(spelled.values())
    merges = []
    for _ in range(rng.randint(1, 12)):
        for _ in range(20):
            left, right = rng.choice(ids), rng.choice(ids)
            if spelled[left] + spelled[right] not in seen:
                break
        else:
            break
        new = 256 + len(merges)
        merges.append((left, right))
        spelled[new] = spelled[left] + spelled[right]
        seen.add(spelled[new])
        ids.append(new)
    return bpe.Tokenizer(merges)


def test_fast_encoder_proof_holds_on_random_merge_lists():
    # Arbitrary (untrained) merge lists are where tiktoken's rank-of-bytes rule
    # and our merge order disagree; whenever the proof accepts one, they must not.
    rng = random.Random(1)
    accepted = rejected_and_differs = 0
    for _ in range(400):
        tok = _random_tokenizer(rng)
        fast, _ = fast_encoder(tok)
        samples = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 14))) for _ in range(25)]
        if fast is None:
            encoding = tok.to_tiktoken() if len({tok.token_bytes(i) for i in range(tok.vocab_size)}) == tok.vocab_size else None
            if encoding and any(encoding.encode_ordinary(s) != tok.encode(s) for s in samples):
                rejected_and_differs += 1
            continue
        accepted += 1
        for s in samples:
            assert fast(s).tolist() == tok.encode(s), (tok.merges, s)
    assert accepted > 50 and rejected_and_differs > 5


def _byte_pair_tokenizer(num_merges):
    merges = [(a, b) for a in range(256) for b in range(256)][:num_merges]
    return bpe.Tokenizer(merges)


@pytest.mark.parametrize("num_merges, token_type", [(65280, pa.uint16()), (65281, pa.uint32())])
def test_token_type_switches_above_65536(tmp_path, num_merges, token_type):
    tok = _byte_pair_tokenizer(num_merges)
    assert tok.vocab_size == 256 + num_merges
    path = tok.save(str(tmp_path / "tok"))
    tok = read_tokenizer(path)
    docs = [Document("a.txt", 1, b"\xff\x00 \xff\xfe", None), Document("a.txt", 2, b"ab", None)]
    out = str(tmp_path / "shards")
    with TestPipeline(argv=IN_MEMORY) as p:
        rows = p | beam.Create(docs) | EncodeDocuments(path)
        _ = rows | WriteTokenShards(out, tok.sha256, tok.vocab_size, num_shards=1)
    [shard] = glob.glob(out + "/part-*.parquet")
    assert shard.endswith("part-00000-of-00001.parquet")
    table = pq.read_table(shard)
    assert table.schema.field("tokens").type == pa.list_(token_type)
    assert table.schema.metadata[SHA256_KEY] == tok.sha256.encode()
    assert table.schema.metadata[VOCAB_SIZE_KEY] == str(tok.vocab_size).encode()
    rows = sorted(zip(table.column("id").to_pylist(), table.column("tokens").to_pylist()))
    assert rows == sorted((f"a.txt:{d.record}", tok.encode(d.data)) for d in docs)
    if token_type == pa.uint32():
        assert max(max(t) for _, t in rows) == 65536  # the pair (ff, 00), the last merge
    for (_, tokens), doc in zip(rows, docs):
        assert tok.decode_bytes(tokens) == doc.data


def test_write_shards_then_decode_shards_round_trip(tmp_path, tokenizer_dir, texts):
    tok = read_tokenizer(tokenizer_dir)
    docs = documents(texts)
    out = str(tmp_path / "shards")
    eos = tok.special_tokens["<|endoftext|>"]
    with TestPipeline(argv=IN_MEMORY) as p:
        rows = p | beam.Create(docs) | EncodeDocuments(tokenizer_dir, append_eos=True)
        _ = rows | WriteTokenShards(out, tok.sha256, tok.vocab_size, num_shards=2, eos_token_id=eos, row_group_tokens=500)
    shards = sorted(glob.glob(out + "/part-*.parquet"))
    assert [s.rsplit("/", 1)[1] for s in shards] == ["part-00000-of-00002.parquet", "part-00001-of-00002.parquet"]
    assert pq.read_schema(shards[0]).metadata[EOS_KEY] == str(eos).encode()
    assert pq.ParquetFile(shards[0]).metadata.row_group(0).column(1).compression == "ZSTD"
    # Each footer holds the input bytes of its rows; together, all documents'.
    footers = [pq.ParquetFile(shard).metadata.metadata for shard in shards]
    assert sum(int(f[INPUT_BYTES_KEY]) for f in footers) == sum(len(d.data) for d in docs)
    assert all(int(f[INPUT_BYTES_KEY]) > 0 for f in footers)
    # Token IDs and unique ids are written plain: a dictionary would be built and thrown away.
    for shard in shards:
        metadata = pq.ParquetFile(shard).metadata
        for rg in range(metadata.num_row_groups):
            for column in range(metadata.num_columns):
                encodings = metadata.row_group(rg).column(column).encodings
                assert not any("DICTIONARY" in e for e in encodings), encodings
    expected = [(d.doc_id if d.doc_id is not None else f"{d.file}:{d.record}", d.data) for d in docs]
    with TestPipeline(argv=IN_MEMORY) as p:
        decoded = (
            p
            | beam.io.ReadFromParquet(out + "/part-*.parquet")
            | DecodeShards(tokenizer_dir, strip_eos_token="<|endoftext|>")
        )
        assert_that(decoded, equal_to(expected))


def test_shard_schema():
    schema = shard_schema("ab" * 32, 1000)
    assert schema.names == ["id", "tokens"]
    assert schema.field("id").type == pa.string()
    assert EOS_KEY not in schema.metadata


@pytest.mark.parametrize("vocab_size", [1000, 70000])
def test_rows_to_table_equals_arrow_from_lists(vocab_size):
    schema = shard_schema("ab" * 32, vocab_size)
    rng = random.Random(vocab_size)
    rows = [(f"f:{i}", [rng.randrange(vocab_size) for _ in range(rng.randrange(0, 50))]) for i in range(200)]
    rows.append(("last", [vocab_size - 1, 0]))
    # Token lists come from our encoder, array("I") from tiktoken's: mixed in one table.
    mixed = [(row_id, array("I", tokens) if i % 2 else tokens) for i, (row_id, tokens) in enumerate(rows)]
    table = rows_to_table(mixed, schema)
    assert table.schema == schema
    assert table.column("id").to_pylist() == [r[0] for r in rows]
    assert table.column("tokens").to_pylist() == [r[1] for r in rows]
    assert table.column("tokens").combine_chunks().equals(pa.array([r[1] for r in rows], schema.field("tokens").type))


@pytest.mark.parametrize("bad", [[1, -1], [1, 1 << 16], array("I", [1, 1 << 16]), [1, 1 << 32]])
def test_rows_to_table_rejects_ids_outside_the_column_type(bad):
    with pytest.raises(ValueError, match="do not fit uint16"):
        rows_to_table([("a", [2]), ("b", bad)], shard_schema("ab" * 32, 1000))
