"""Red team: the CLI driven with generated bad arguments, paths and files.

For every generated command line the outcome must be one of two: a correct
result (exit 0, every input record a document or a dead letter), or exit 2
with exactly one line ``beam-bpe CMD: error: ...`` and no traceback. In both
cases no file that was there before changes (inputs, the tokenizer, a user's
file inside --output), and anything new is inside ``--output``.

Bounded for CI: few examples each, the fast in-process runner, a deadline.
"""

import contextlib
import io
import json
import pathlib
import string
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline import cli
from tests.support.cli import IN_MEMORY
from tests.support.corpora import compress
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small

RED_TEAM = settings(max_examples=12, deadline=60_000, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
LINES = [b"the quick brown fox\n", b"caf\xc3\xa9 \xff broken\n", b"\n", b"jumps over\n"]


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory) -> pathlib.Path:
    """A tokenizer.json (its path: hypothesis shows it short in a failing example)."""
    return pathlib.Path(train_small(multilingual(1), vocab_size=300).save(str(tmp_path_factory.mktemp("tok"))))


def snapshot(root: pathlib.Path) -> dict[str, tuple]:
    """Every path under ``root``: its bytes, or "dir"."""
    return {str(p.relative_to(root)): ("dir",) if p.is_dir() else (p.read_bytes(),) for p in sorted(root.rglob("*"))}


def assert_untouched(root: pathlib.Path, before: dict, out: pathlib.Path) -> None:
    """Every file that was there before (all the user's: no run wrote here yet) is unchanged,
    also inside --output; anything new is --output, inside it, or a parent directory made for it."""
    after = snapshot(root)
    assert {path: after.get(path) for path in before} == before
    out = out.resolve()
    for path in set(after) - set(before):
        new = (root / path).resolve()
        # --output itself, what is in it, and the parents created for it (mkdir -p)
        assert new == out or out in new.parents or (new in out.parents and after[path] == ("dir",)), path


def run_cli(argv: list[str]) -> tuple[int, list[str]]:
    """cli.main in this process: (exit code, stderr lines); a traceback fails the test."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main(argv)
        except SystemExit as e:  # argparse: usage mistakes
            code = e.code
    return code, err.getvalue().splitlines()


def check_outcome(command: str, code: int, err: list[str], out: pathlib.Path, records: int | None) -> None:
    assert not any("Traceback" in line for line in err), err
    if code == 2:
        errors = [line for line in err if "error" in line]
        assert len(errors) == 1 and errors[0].startswith(f"beam-bpe {command}: error: "), err
        assert err[-1] == errors[0], err  # the error line is the last thing said
        return
    assert code == 0, err
    if command == "encode":
        stats = json.loads((out / "stats.json").read_text())
        if records is not None:
            assert stats["records_read"] == stats["documents"] + stats["dead_letters"] == records
    else:
        assert (out / "tokenizer.json").exists()


class Workspace:
    """A fresh directory: inputs in in/ (and a user's Parquet file named like a shard), a
    tokenizer in tok/, an output to be in out/."""

    def __init__(self, root: pathlib.Path, tokenizer_json: pathlib.Path):
        self.root = root
        (root / "in").mkdir()
        (root / "tok").mkdir()
        (root / "tok" / "tokenizer.json").write_bytes(tokenizer_json.read_bytes())
        for i in range(3):
            (root / "in" / f"part-{i}.txt").write_bytes(b"".join(LINES))
        pq.write_table(pa.table({"text": ["the user's own document"]}), root / "in" / "part-00000-of-00001.parquet")
        self.inputs = [str(root / "in" / f"part-{i}.txt") for i in range(3)]
        self.out = root / "out"


FLAG_NAME = st.text(string.ascii_lowercase + "_-", min_size=1, max_size=16).filter(lambda s: s.strip("-_") != "help")
MUTATIONS = st.sampled_from([
    [], ["--append_eos"], ["--num_shards=2"], ["--text_field", "text"], ["--strict"], ["--overwrite"],
    ["--num-shards", "-1"], ["--num-shards", "x"], ["--format", "csv"], ["--eos-token", "<x>"], ["stray"],
    ["--runner=DirectRuner"], ["--runner=DaskRunner"], ["--direct_num_worker=1"], ["--direct_running_mode=fast"],
    ["--input"], ["--output"], ["--tokenizer"], ["--id-field", ""], ["--format", "jsonl"], ["--append-eos"],
])


@RED_TEAM
@given(mutations=st.lists(MUTATIONS, max_size=3), unknown=st.one_of(st.none(), FLAG_NAME),
       glob_inputs=st.booleans())
def test_encode_with_generated_arguments(tokenizer_json, mutations, unknown, glob_inputs):
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(pathlib.Path(tmp), tokenizer_json)
        inputs = [str(ws.root / "in" / "*.txt")] if glob_inputs else ws.inputs  # quoted, or expanded by a shell
        argv = ["encode", "--tokenizer", str(ws.root / "tok"), "--input", *inputs, "--output", str(ws.out),
                *[arg for mutation in mutations for arg in mutation], *IN_MEMORY]
        if unknown:
            argv.append(f"--{unknown}=1")
        before = snapshot(ws.root)
        code, err = run_cli(argv)
        check_outcome("encode", code, err, ws.out, None if mutations else 3 * len(LINES))
        assert_untouched(ws.root, before, ws.out)


PATH_PIECES = st.sampled_from(["out", "o[1]", "o*", "what?", "in", "in/part-0.txt", "tok", "tok/tokenizer.json",
                               "caf\u00e9 dir", "a/b/c", "..", ".", "in/../out2", "-dash", "out/"])


@RED_TEAM
@example(output="in", input_kind="glob")  # issue 17 case 1: the corpus directory as --output
@example(output="tok", input_kind="file")
@given(output=PATH_PIECES, input_kind=st.sampled_from(["glob", "missing", "dir", "empty-glob", "file"]))
def test_encode_with_generated_paths(tokenizer_json, output, input_kind):
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp) / "ws"
        base.mkdir()
        ws = Workspace(base, tokenizer_json)
        inputs = {"glob": str(ws.root / "in" / "*.txt"), "missing": str(ws.root / "nope.txt"),
                  "dir": str(ws.root / "in"), "empty-glob": str(ws.root / "in" / "*.gz"),
                  "file": ws.inputs[0]}[input_kind]
        out = ws.root / output
        before = snapshot(pathlib.Path(tmp))
        code, err = run_cli(["encode", "--tokenizer", str(ws.root / "tok"), "--input", inputs, "--output",
                             str(out), *IN_MEMORY])
        check_outcome("encode", code, err, out, None)
        assert_untouched(pathlib.Path(tmp), before, out)


CODEC_NAMES = st.sampled_from(["x.txt", "x.jsonl", "x.jsonl.gz", "x.txt.bz2", "x.txt.zst", "x.txt.xz", "x.parquet",
                               "x.json", "x.gz"])


@RED_TEAM
@given(name=CODEC_NAMES, data=st.binary(max_size=200), compressed=st.booleans(), strict=st.booleans())
def test_encode_with_generated_files(tokenizer_json, name, data, compressed, strict):
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(pathlib.Path(tmp), tokenizer_json)
        path = ws.root / "in" / name
        path.write_bytes(compress(data, name) if compressed else data)
        before = snapshot(ws.root)
        argv = ["encode", "--tokenizer", str(ws.root / "tok"), "--input", str(path), "--output", str(ws.out),
                *(["--strict"] if strict else []), *IN_MEMORY]
        code, err = run_cli(argv)
        check_outcome("encode", code, err, ws.out, None)
        assert_untouched(ws.root, before, ws.out)


TRAIN_MUTATIONS = st.sampled_from([
    [], ["--vocab_size=300"], ["--vocab-size", "10"], ["--vocab-size", "x"], ["--min-frequency", "0"],
    ["--pattern", "(unclosed"], ["--special-token", ""], ["--checkpoint-every", "nan"], ["--resume"],
    ["--config", "/nonexistent.yaml"], ["--word-counts", "/nonexistent.parquet"], ["--format", "xml"],
    ["--strict"], ["--direct_num_workers=x"],
])


@RED_TEAM
@given(mutations=st.lists(TRAIN_MUTATIONS, max_size=2), unknown=st.one_of(st.none(), FLAG_NAME),
       config=st.one_of(st.none(), st.binary(max_size=60)))
def test_train_with_generated_arguments_and_configs(tokenizer_json, mutations, unknown, config):
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(pathlib.Path(tmp), tokenizer_json)
        argv = ["train", "--no-progress", "--input", *ws.inputs, "--vocab-size", "270", "--output", str(ws.out),
                *[arg for mutation in mutations for arg in mutation], *IN_MEMORY]
        if unknown:
            argv.append(f"--{unknown}")
        if config is not None:
            (ws.root / "c.yaml").write_bytes(config)
            argv += ["--config", str(ws.root / "c.yaml")]
        before = snapshot(ws.root)
        code, err = run_cli(argv)
        check_outcome("train", code, err, ws.out, None)
        assert_untouched(ws.root, before, ws.out)
