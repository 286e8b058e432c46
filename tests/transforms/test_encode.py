"""EncodeDocuments, WriteTokenShards and DecodeShards as Beam transforms."""

import dataclasses
import glob
import pickle
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
from tests.support.cli import IN_MEMORY
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small
from bpe import engines
from bpe.engines import rank_proof
from bpe.engines import EngineProof, ProofMismatch, PythonEngine, TiktokenEngine
from transforms import metrics
from transforms.decode import DecodeShards
from transforms.encode import EncodeDocuments
from transforms.read import Document
from transforms.shards import (
    EOS_KEY, INPUT_BYTES_KEY, SHA256_KEY, VOCAB_SIZE_KEY, TokenRow, rows_to_table, shard_schema,
)
from transforms.write_shards import WriteTokenShards


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


def python_only(proof: EngineProof) -> EngineProof:
    """The same proof with every faster engine switched off: a slower engine than proven is always exact."""
    off = tuple((name, "switched off by the test") for name in proof.engines[:-1])
    return dataclasses.replace(proof, engine="python", rejected=off, chain=("python",))


@pytest.fixture
def tiktoken_only(monkeypatch):
    """Accelerators switched off: tiktoken's engine is the fastest there is."""
    monkeypatch.setenv(engines.ENGINES_VARIABLE, "tiktoken,python")


def count_proofs(monkeypatch) -> list:
    """Records every run of the O(vocabulary) proof from now on."""
    calls = []
    proof = rank_proof.rank_mismatch
    monkeypatch.setattr(rank_proof, "rank_mismatch", lambda t: calls.append(t) or proof(t))
    return calls


@pytest.mark.parametrize("engine", ["chain", "tiktoken", "python"])
@pytest.mark.parametrize("append_eos", [False, True])
def test_encode_documents_gives_tokenizer_ids(tokenizer_dir, texts, engine, append_eos, monkeypatch):
    if engine == "tiktoken":
        monkeypatch.setenv(engines.ENGINES_VARIABLE, "tiktoken,python")
    tok = bpe.Tokenizer.load(tokenizer_dir)
    proof = tok.prove()
    assert proof.engines[-2:] == ("tiktoken", "python"), proof.reason
    if engine == "python":
        proof = python_only(proof)
    docs = documents(texts)
    eos = [tok.special_tokens["<|endoftext|>"]] if append_eos else []
    expected = [
        (d.doc_id if d.doc_id is not None else f"{d.file}:{d.record}", tuple(tok.reference.encode(d.data) + eos), len(d.data), "H")
        for d in docs
    ]
    proofs = count_proofs(monkeypatch)
    p = TestPipeline(argv=IN_MEMORY)
    rows = (
        p
        | beam.Create(docs)
        | EncodeDocuments(tokenizer_dir, proof, append_eos=append_eos, batch_size=4, verify_fraction=1.0)
    )
    assert_that(
        rows | beam.Map(lambda r: (r.id, tuple(r.tokens), r.input_bytes, isinstance(r, TokenRow) and r.tokens.typecode)),
        equal_to(expected),
    )
    result = p.run()
    result.wait_until_finish()
    assert proofs == []  # workers trust the driver's proof
    counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
    assert counters[metrics.name("encode", "documents")] == len(docs)
    assert counters[metrics.name("encode", "tokens")] == sum(len(row[1]) for row in expected)
    # The one document that is not valid UTF-8 goes down the chain to the reference.
    assert counters.get(metrics.name("encode", "reference_fallbacks"), 0) == (0 if engine == "python" else 1)
    assert counters[metrics.name("encode", "verified_documents")] == len(docs)


def test_encode_refuses_changed_tokenizer(tokenizer_dir):
    proof = dataclasses.replace(bpe.Tokenizer.load(tokenizer_dir).prove(), tokenizer_sha256="0" * 64)
    with pytest.raises(Exception, match="changed while the job ran"):
        with TestPipeline(argv=IN_MEMORY) as p:
            _ = p | beam.Create(documents(["x"])) | EncodeDocuments(tokenizer_dir, proof)


def test_proof_is_small_picklable_and_checked_by_sha256(tokenizer_dir, texts, monkeypatch):
    driver = bpe.Tokenizer.load(tokenizer_dir)
    proof = driver.prove()
    assert pickle.loads(pickle.dumps(proof)) == proof and len(pickle.dumps(proof)) < 500
    assert proof.tokenizer_sha256 == driver.sha256 and proof.engines[-2:] == ("tiktoken", "python")
    assert "tiktoken" not in dict(proof.rejected) and proof.engine == proof.engines[0]
    proofs = count_proofs(monkeypatch)
    worker = bpe.Tokenizer.load(tokenizer_dir)
    engine = worker.use_proof(pickle.loads(pickle.dumps(proof)))
    assert proofs == [] and engine is worker.engine and engine.name == proof.engine
    assert worker.prove() == proof
    other = train_small(texts[:1], vocab_size=300)
    with pytest.raises(ProofMismatch, match="engine proof is for tokenizer"):
        other.use_proof(proof)
    with pytest.raises(ProofMismatch):
        worker.use_proof(other.prove())  # an engine already decided still checks the proof


def test_tokenizer_decides_its_engine_once(tokenizer_dir, monkeypatch):
    tok = bpe.Tokenizer.load(tokenizer_dir)
    proofs = count_proofs(monkeypatch)
    engine = tok.engine
    assert tok.engine is engine and tok.prove() is engine.proof
    tok.use_proof(tok.prove())
    assert tok.engine is engine and len(proofs) == 1


def test_in_memory_tokenizer_sha256_is_that_of_its_saved_file(tmp_path, texts):
    tok = train_small(texts[:1], vocab_size=300)
    loaded = bpe.Tokenizer.load(tok.save(str(tmp_path)))
    assert loaded.sha256 == tok.sha256
    assert loaded.use_proof(tok.prove()).name == tok.engine.name
    assert loaded.prove() == tok.prove()


def test_tiktoken_engine_is_chosen_for_trained_tokenizer_and_matches(tokenizer_dir, texts, tiktoken_only):
    tok = bpe.Tokenizer.load(tokenizer_dir)
    engine = tok.engine
    assert isinstance(engine, TiktokenEngine) and engine.reason.startswith("tiktoken: not gigatoken: switched off")
    assert "not tiktoken" not in engine.reason
    more = multilingual(2, start=7)
    # Special-token text is ordinary text for both, as in encode_ordinary; text
    # tiktoken cannot take exactly goes to the reference.
    for text in more + ["<|endoftext|>", "a<|endoftext|>b <|endo", "", "lone \udc80 surrogate", b"caf\xc3\xa9 \xff"]:
        ids = engine.encode_array(text)
        assert isinstance(ids, array) and ids.typecode == "I" and ids.tolist() == tok.reference.encode(text)
        listed = engine.encode(text)
        assert isinstance(listed, list) and listed == tok.reference.encode(text)
    assert engine.fallbacks == 4  # the last two texts, once per call


def test_tiktoken_engine_for_a_tokenizer_without_special_tokens(texts, tiktoken_only):
    # tiktoken gets a placeholder special token (its buffer call is slow without
    # any); it is never allowed, so its text is ordinary and its ID never appears.
    from bpe.engines.tiktoken_check import _UNUSED_SPECIAL

    tok = train_small(texts, special_tokens=())
    engine = tok.engine
    assert engine.name == "tiktoken", engine.reason
    for text in multilingual(2, start=5) + [_UNUSED_SPECIAL, f"a{_UNUSED_SPECIAL}b", ""]:
        ids = engine.encode_array(text).tolist()
        assert ids == tok.reference.encode(text) and tok.vocab_size not in ids
    assert tok.encode_batch([_UNUSED_SPECIAL]) == [tok.reference.encode(_UNUSED_SPECIAL)]


def test_array_encoding_without_tiktokens_buffer_call_gives_the_same_arrays(tokenizer_dir):
    class ListOnly:  # a tiktoken Encoding without the buffer call of its core
        def __init__(self, encoding):
            self.encode_ordinary = encoding.encode_ordinary

    tok = bpe.Tokenizer.load(tokenizer_dir)
    encoding = tok.to_tiktoken()
    reference = PythonEngine(tok.pre_tokenizer.split, tok.piece_encoder)
    proof = tok.prove()
    for text in multilingual(2, start=3) + ["<|endoftext|>", ""]:
        buffered = TiktokenEngine(encoding, reference, proof).encode_array(text)
        listed = TiktokenEngine(ListOnly(encoding), reference, proof).encode_array(text)
        assert buffered.typecode == listed.typecode == "I"
        assert buffered == listed and buffered.tolist() == encoding.encode_ordinary(text)


def test_tiktoken_is_refused_for_a_custom_pattern():
    tok = bpe.Tokenizer([(97, 98)], pattern=r"\w+|\W")
    assert tok.engine.name == "python" and "custom pre-tokenizer pattern" in tok.engine.reason
    assert tok.engine.encode_array("ab ab").tolist() == tok.encode("ab ab") == [256, 32, 256]


def test_without_tiktoken_everything_goes_through_our_encoder(monkeypatch, texts, tiktoken_only):
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # `import tiktoken` now fails
    tok = train_small(texts[:1], vocab_size=300)
    assert tok.engine.name == "python" and tok.engine.reason.endswith("; not tiktoken: tiktoken cannot be imported")
    assert tok.encode_batch(texts) == [tok.reference.encode(text) for text in texts]


def test_a_proof_naming_tiktoken_falls_back_where_tiktoken_cannot_be_imported(
    monkeypatch, tokenizer_dir, texts, tiktoken_only
):
    proof = bpe.Tokenizer.load(tokenizer_dir).prove()
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    worker = bpe.Tokenizer.load(tokenizer_dir)
    engine = worker.use_proof(proof)
    assert engine.name == "python" and "tiktoken cannot be imported" in engine.reason
    assert [engine.encode(t) for t in texts[:3]] == [worker.reference.encode(t) for t in texts[:3]]


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


def test_tiktoken_proof_holds_on_random_merge_lists(tiktoken_only):
    # Arbitrary (untrained) merge lists are where tiktoken's rank-of-bytes rule
    # and our merge order disagree; whenever the proof accepts one, they must not.
    rng = random.Random(1)
    accepted = rejected_and_differs = 0
    for _ in range(400):
        tok = _random_tokenizer(rng)
        fast = tok.engine.encode_array if tok.engine.name == "tiktoken" else None
        samples = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 14))) for _ in range(25)]
        if fast is None:
            encoding = tok.to_tiktoken() if len({tok.token_bytes(i) for i in range(tok.vocab_size)}) == tok.vocab_size else None
            if encoding and any(encoding.encode_ordinary(s) != tok.reference.encode(s) for s in samples):
                rejected_and_differs += 1
            continue
        accepted += 1
        for s in samples:
            assert fast(s).tolist() == tok.reference.encode(s), (tok.merges, s)
    assert accepted > 50 and rejected_and_differs > 5


def _byte_pair_tokenizer(num_merges):
    merges = [(a, b) for a in range(256) for b in range(256)][:num_merges]
    return bpe.Tokenizer(merges)


@pytest.mark.parametrize("num_merges, token_type", [(65280, pa.uint16()), (65281, pa.uint32())])
def test_token_type_switches_above_65536(tmp_path, num_merges, token_type):
    tok = _byte_pair_tokenizer(num_merges)
    assert tok.vocab_size == 256 + num_merges
    path = tok.save(str(tmp_path / "tok"))
    tok = bpe.Tokenizer.load(path)
    docs = [Document("a.txt", 1, b"\xff\x00 \xff\xfe", None), Document("a.txt", 2, b"ab", None)]
    out = str(tmp_path / "shards")
    with TestPipeline(argv=IN_MEMORY) as p:
        rows = p | beam.Create(docs) | EncodeDocuments(path, tok.prove())
        _ = rows | WriteTokenShards(out, tok.sha256, tok.vocab_size, num_shards=1)
    [shard] = glob.glob(out + "/part-*.parquet")
    assert shard.endswith("part-00000-of-00001.parquet")
    table = pq.read_table(shard)
    assert table.schema.field("tokens").type == pa.list_(token_type)
    assert table.schema.metadata[SHA256_KEY] == tok.sha256.encode()
    assert table.schema.metadata[VOCAB_SIZE_KEY] == str(tok.vocab_size).encode()
    rows = sorted(zip(table.column("id").to_pylist(), table.column("tokens").to_pylist()))
    assert rows == sorted((f"a.txt:{d.record}", tok.reference.encode(d.data)) for d in docs)
    if token_type == pa.uint32():
        assert max(max(t) for _, t in rows) == 65536  # the pair (ff, 00), the last merge
    for (_, tokens), doc in zip(rows, docs):
        assert tok.decode_bytes(tokens) == doc.data


def test_write_shards_then_decode_shards_round_trip(tmp_path, tokenizer_dir, texts):
    tok = bpe.Tokenizer.load(tokenizer_dir)
    docs = documents(texts)
    out = str(tmp_path / "shards")
    eos = tok.special_tokens["<|endoftext|>"]
    with TestPipeline(argv=IN_MEMORY) as p:
        rows = p | beam.Create(docs) | EncodeDocuments(tokenizer_dir, tok.prove(), append_eos=True)
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
    mixed = [TokenRow(row_id, array("I", tokens) if i % 2 else tokens) for i, (row_id, tokens) in enumerate(rows)]
    table = rows_to_table(mixed, schema)
    assert table.schema == schema
    assert table.column("id").to_pylist() == [r[0] for r in rows]
    assert table.column("tokens").to_pylist() == [r[1] for r in rows]
    assert table.column("tokens").combine_chunks().equals(pa.array([r[1] for r in rows], schema.field("tokens").type))


@pytest.mark.parametrize("bad", [[1, -1], [1, 1 << 16], array("I", [1, 1 << 16]), [1, 1 << 32]])
def test_rows_to_table_rejects_ids_outside_the_column_type(bad):
    with pytest.raises(ValueError, match="do not fit uint16"):
        rows_to_table([TokenRow("a", [2]), TokenRow("b", bad)], shard_schema("ab" * 32, 1000))
