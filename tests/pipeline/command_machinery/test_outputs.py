"""pipeline.command_machinery.outputs, the job-output contract: paths, atomic writes, staging, dead letters, --strict;
and train + encode writing to an object store (a moto S3 server) through it."""

import io
import json
import os

import pyarrow.parquet as pq
import pytest

import bpe
from pipeline import cli
from pipeline.command_machinery import outputs, unreadable_records
from pipeline.command_machinery.errors import UserError
from tests.support.cli import IN_MEMORY, train
from tests.support.toy_tokenizers import plain_count


def test_absolute_strips_file_scheme_and_keeps_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert outputs.absolute("out") == str(tmp_path / "out")
    assert outputs.absolute(f"file://{tmp_path}/x") == f"{tmp_path}/x"
    assert outputs.absolute("s3://bucket/dir") == "s3://bucket/dir"
    assert outputs.absolute("gs://bucket/a/*.jsonl") == "gs://bucket/a/*.jsonl"


def test_write_atomic_replaces_the_whole_file_and_leaves_no_temporary(tmp_path):
    path = str(tmp_path / "stats.json")
    outputs.write_json(path, {"a": 1})
    outputs.write_json(path, {"b": [1, 2]}, indent=2)
    assert json.loads(open(path).read()) == {"b": [1, 2]}
    assert os.listdir(tmp_path) == ["stats.json"]
    assert outputs.temporary_path(path) == str(tmp_path / ".stats.json.tmp")
    outputs.write_json(path, {"c": 3}, indent=None)
    assert open(path).read() == '{"c":3}\n'


def test_readable_json_reads_back_the_same_with_rows_of_scalars_on_one_line():
    value = {"a": [1, 2.5, None, True], "b": {"c": [], "d": {}, 1: [{"id": 3, "text": "\u00e9\n"}, [4, [5]]]},
             "e": "x", "f": (6, 7), "g": [[8, 9], {"h": False}]}
    text = outputs.readable_json(value, 2)
    assert json.loads(text) == json.loads(json.dumps(value))
    assert text.splitlines() == [
        "{", '  "a": [1, 2.5, null, true],', '  "b": {', '    "c": [],', '    "d": {},', '    "1": [',
        '      {"id": 3, "text": "\\u00e9\\n"},', "      [", "        4,", "        [5]", "      ]", "    ]", "  },",
        '  "e": "x",', '  "f": [6, 7],', '  "g": [', "    [8, 9],", '    {"h": false}', "  ]", "}",
    ]
    assert outputs.readable_json([1, 2], 1) == "[1, 2]" and outputs.readable_json("s", 1) == '"s"'


def _staged(tmp_path) -> outputs.StagedOutput:
    return outputs.StagedOutput(str(tmp_path / "out"), ("part-*.bin", "dead_letters/dead_letters-*-of-*.jsonl"))


def _stage(output: outputs.StagedOutput, parts: int) -> None:
    os.makedirs(os.path.join(output.staging, "dead_letters"), exist_ok=True)
    os.makedirs(os.path.join(output.staging, "beam-temp-x"), exist_ok=True)
    for i in range(parts):
        with open(os.path.join(output.staging, f"part-{i}.bin"), "w") as f:
            f.write(str(i))
    with open(os.path.join(output.staging, "dead_letters", "dead_letters-00000-of-00001.jsonl"), "w") as f:
        f.write('{"file": "f", "record": 2, "reason": "r"}\n')


def test_publish_moves_the_result_and_writes_the_marker_last(tmp_path):
    output = _staged(tmp_path)
    _stage(output, parts=3)
    assert not output.is_complete()
    output.publish({"parts": 3})
    out = tmp_path / "out"
    assert sorted(os.listdir(out)) == ["dead_letters", "part-0.bin", "part-1.bin", "part-2.bin", "stats.json"]
    assert json.loads((out / "stats.json").read_text()) == {"parts": 3}
    assert unreadable_records.read_dead_letters(str(out)) == [{"file": "f", "record": 2, "reason": "r"}]
    # A new result with fewer parts replaces the old one entirely.
    _stage(output, parts=1)
    output.clear_leftovers()  # complete: the old result stays until publish
    assert sorted(os.listdir(out)) == ["dead_letters", "part-0.bin", "part-1.bin", "part-2.bin", "stats.json"]
    _stage(output, parts=1)
    output.publish({"parts": 1})
    assert sorted(os.listdir(out)) == ["dead_letters", "part-0.bin", "stats.json"]


def test_leftovers_of_an_incomplete_run_are_removed(tmp_path, capsys):
    output = _staged(tmp_path)
    _stage(output, parts=2)
    output.publish({"parts": 2})
    os.remove(tmp_path / "out" / "stats.json")  # as if the run stopped before its marker
    (tmp_path / "out" / ".stats.json.tmp").write_text("{")
    _stage(output, parts=1)
    output.clear_leftovers()
    assert os.listdir(tmp_path / "out") == []
    assert "removing leftovers of a previous run that did not complete" in capsys.readouterr().err


def _write_dead_letters(directory, shards: dict[str, list[dict]]) -> None:
    os.makedirs(os.path.join(directory, "dead_letters"), exist_ok=True)
    for name, letters in shards.items():
        with open(os.path.join(directory, "dead_letters", name), "w") as f:
            f.write("".join(json.dumps(d) + "\n" for d in letters) + "\n")


def test_dead_letters_are_read_from_every_shard_in_order_and_listed(tmp_path):
    letters = [{"file": f"f{i % 3}", "record": i, "reason": f"bad {i}"} for i in range(8)]
    _write_dead_letters(tmp_path, {
        "dead_letters-00000-of-00002.jsonl": letters[:4], "dead_letters-00001-of-00002.jsonl": letters[4:],
        "other.jsonl": [{"file": "ignored", "record": 1, "reason": "not a shard"}],
    })
    read = unreadable_records.read_dead_letters(str(tmp_path))
    assert read == sorted(letters, key=lambda d: (d["file"], d["record"]))
    lines = unreadable_records.dead_letter_lines(read, str(tmp_path))
    assert lines[0] == f"8 input record(s) could not be read; all are listed in {tmp_path}/dead_letters/"
    assert lines[1] == "  f0 (record 0): bad 0" and lines[-1] == "  ... and 3 more" and len(lines) == 7
    assert unreadable_records.dead_letter_lines([{"file": "z", "record": -1, "reason": "r"}], "d")[1] == "  z (whole file): r"


def test_strict_fails_with_one_line_after_listing_the_dead_letters(tmp_path, capsys):
    unreadable_records.fail_if_strict(True, str(tmp_path), "nothing done")  # no dead letters: no failure
    _write_dead_letters(tmp_path, {"dead_letters-00000-of-00001.jsonl": [{"file": "f", "record": 3, "reason": "r"}]})
    unreadable_records.fail_if_strict(False, str(tmp_path), "nothing done")  # not strict: no failure
    assert capsys.readouterr().err == ""
    with pytest.raises(UserError, match=r"^1 input records could not be read \(--strict\); nothing done$"):
        unreadable_records.fail_if_strict(True, str(tmp_path), "nothing done")
    assert "  f (record 3): r" in capsys.readouterr().err


def test_sizes_for_people():
    assert [outputs.size(n) for n in (None, 999, 1500, 2_500_000, 3_000_000_000)] == [
        "? bytes", "999 bytes", "1.5 kB", "2.5 MB", "3.0 GB"]


def _objects(client, prefix: str) -> list[str]:
    found = client.list_objects_v2(Bucket="corpus", Prefix=prefix).get("Contents", [])
    return sorted(o["Key"][len(prefix):] for o in found)


def _object(client, key: str) -> bytes:
    return client.get_object(Bucket="corpus", Key=key)["Body"].read()


def test_train_and_encode_write_to_an_object_store(s3_bucket, capsys):
    client, options = s3_bucket
    lines = [f"line {i}: the {'quick' if i % 2 else 'lazy'} fox {i * i}\n".encode() for i in range(200)]
    client.put_object(Bucket="corpus", Key="drivers-in/a.txt", Body=b"".join(lines))
    client.put_object(Bucket="corpus", Key="drivers-in/b.jsonl", Body=b'{"text": "three", "id": "b3"}\n{"text": 4}\n')
    beam = [*options, *IN_MEMORY]

    assert train("--input", "s3://corpus/drivers-in/*", "--vocab-size", "280", "--output", "s3://corpus/tok", *beam) == 0
    assert _objects(client, "tok/") == [".beam-bpe-output.json",
        "dead_letters/dead_letters-00000-of-00001.jsonl", "tokenizer.json", "train_stats.json",
        "word_counts.complete", "word_counts.parquet"]
    table = pq.read_table(io.BytesIO(_object(client, "tok/word_counts.parquet")))
    assert dict(zip(table.column("word").to_pylist(), table.column("count").to_pylist())) == plain_count(
        [*lines, b"three"])
    stats = json.loads(_object(client, "tok/train_stats.json"))
    assert stats["dead_letters"] == 1 and stats["documents"] == 201 and stats["merges"] == 280 - 256
    # The count marker on the object store is found again by --resume.
    assert train("--input", "s3://corpus/drivers-in/*", "--vocab-size", "280", "--output", "s3://corpus/tok",
                 "--resume", *beam) == 0
    assert "the count phase is complete" in capsys.readouterr().err

    encode = ["encode", "--tokenizer", "s3://corpus/tok", "--input", "s3://corpus/drivers-in/*", "--output", "s3://corpus/shards"]
    assert cli.main([*encode, *beam]) == 0
    assert _objects(client, "shards/") == [".beam-bpe-output.json",
        "dead_letters/dead_letters-00000-of-00001.jsonl", "part-00000-of-00001.parquet", "stats.json"]
    tok = bpe.Tokenizer.from_json(_object(client, "tok/tokenizer.json"))
    shard = pq.read_table(io.BytesIO(_object(client, "shards/part-00000-of-00001.parquet")))
    rows = dict(zip(shard.column("id").to_pylist(), shard.column("tokens").to_pylist()))
    assert rows["b3"] == tok.encode(b"three") and rows["s3://corpus/drivers-in/a.txt:7"] == tok.encode(lines[6])
    stats = json.loads(_object(client, "shards/stats.json"))
    assert stats["documents"] == 201 and stats["dead_letters"] == 1 and stats["records_read"] == 202
    # A complete result is refused without --overwrite, replaced with it.
    assert cli.main([*encode, *beam]) == 2
    assert "already holds token shards" in capsys.readouterr().err
    assert cli.main([*encode, "--overwrite", "--num-shards", "2", *beam]) == 0
    assert _objects(client, "shards/") == [".beam-bpe-output.json",
        "dead_letters/dead_letters-00000-of-00001.jsonl", "part-00000-of-00002.parquet",
        "part-00001-of-00002.parquet", "stats.json"]
