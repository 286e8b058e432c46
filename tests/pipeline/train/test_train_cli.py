"""``beam-bpe train`` end to end: exact counts, determinism, config, errors, bad input."""

import glob
import gzip
import hashlib
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import apache_beam as beam
import pyarrow.parquet as pq
import pytest

import bpe
from pipeline import runtime
from pipeline.command_machinery import config, runners
from pipeline.command_machinery.errors import UserError
from transforms.read import match_inputs
from tests.support.cli import IN_MEMORY, VOCAB, train
from tests.support.corpora import write_stdlib_corpus
from tests.support.outputs import merges, stats, word_counts
from tests.support.real_text import stdlib_lines
from tests.support.toy_tokenizers import plain_count

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_stdlib_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def baseline(corpus, tmp_path_factory):
    """One file, one in-process worker: the run everything else is compared with."""
    output = str(tmp_path_factory.mktemp("baseline"))
    assert train("--input", corpus["one"], "--vocab-size", str(VOCAB), "--output", output, *IN_MEMORY) == 0
    return output


def test_word_counts_equal_plain_count_and_merges_equal_library(baseline, capsys):
    lines = stdlib_lines()
    expected = plain_count(lines)
    assert word_counts(baseline) == expected
    # Training on the table is bpe.train on the plain count.
    assert merges(baseline) == json.loads(bpe.train(expected, VOCAB).to_json())["model"]["merges"]
    tok = bpe.Tokenizer.load(baseline)
    assert tok.vocab_size == VOCAB and len(tok.merges) == VOCAB - 256
    s = stats(baseline)
    assert s["documents"] == len(lines)
    assert s["bytes"] == sum(map(len, lines))
    assert s["pieces"] == sum(expected.values())
    assert s["unique_pieces"] == s["word_count_rows"] == len(expected)
    assert s["dead_letters"] == 0 and s["merges"] == VOCAB - 256 and s["files"] == 1
    assert set(s["seconds"]) == {"count", "train", "total"}


def test_same_merges_for_8_shards_and_2_worker_processes(corpus, baseline, tmp_path):
    output = str(tmp_path / "out")
    args = ["--input", corpus["shards"], "--vocab-size", str(VOCAB), "--output", output]
    assert train(*args, "--direct_running_mode=multi_processing", "--direct_num_workers=2") == 0
    assert stats(output)["runner"] == "DirectRunner (multi_processing, 2 workers)"
    assert stats(output)["files"] == 8
    assert word_counts(output) == word_counts(baseline)
    assert merges(output) == merges(baseline)


def _table_bytes_and_recorded_sha256(output: str) -> tuple[bytes, str]:
    with open(os.path.join(output, "word_counts.parquet"), "rb") as f:
        data = f.read()
    with open(os.path.join(output, "word_counts.complete"), encoding="utf-8") as f:
        return data, json.load(f)["table"]["sha256"]


def test_word_counts_are_byte_identical_with_1_and_2_workers(corpus, tmp_path):
    # The same 8 shards on 1 and on 2 worker processes, the 2-worker run twice: the table is
    # sorted by word bytes before it is written, so its bytes and its recorded SHA-256 agree.
    args = ["--input", corpus["shards"], "--vocab-size", str(VOCAB), "--direct_running_mode=multi_processing"]
    runs = []
    for name, workers in (("one", 1), ("two", 2), ("two-again", 2)):
        output = str(tmp_path / name)
        assert train(*args, "--output", output, f"--direct_num_workers={workers}") == 0
        runs.append(_table_bytes_and_recorded_sha256(output))
    (data, sha256), *others = runs
    assert all(other == (data, sha256) for other in others)
    assert hashlib.sha256(data).hexdigest() == sha256
    words = pq.read_table(io.BytesIO(data)).column("word").to_pylist()
    assert words == sorted(words) and len(words) == len(set(words))


def test_same_merges_for_jsonl_gz_shards_and_1_worker_process(corpus, baseline, tmp_path):
    output = str(tmp_path / "out")
    args = ["--input", corpus["jsonl"], "--vocab-size", str(VOCAB), "--output", output]
    assert train(*args, "--direct_running_mode=multi_processing", "--direct_num_workers=1") == 0
    assert merges(output) == merges(baseline)


def test_summary_says_what_and_where(baseline, corpus, tmp_path, capsys, monkeypatch):
    # A relative --output is made absolute (portable runners' workers have another cwd).
    monkeypatch.chdir(tmp_path)
    output = str(tmp_path / "out")
    assert train("--word-counts", os.path.join(baseline, "word_counts.parquet"),
                 "--vocab-size", "300", "--output", "out") == 0
    captured = capsys.readouterr()
    assert captured.out == ""  # the summary goes to stderr, as every command's does
    out = captured.err
    assert "learned 44 merges" in out
    assert os.path.join(output, "tokenizer.json") in out and os.path.join(output, "train_stats.json") in out


def test_word_counts_retrains_without_reading_input(baseline, tmp_path):
    # Fewer merges from the same table: a prefix of the same merges.
    output = str(tmp_path / "small")
    table = os.path.join(baseline, "word_counts.parquet")
    assert train("--word-counts", table, "--vocab-size", "300", "--output", output) == 0
    assert merges(output) == merges(baseline)[:44]
    s = stats(output)
    assert s["documents"] is None and s["runner"] is None and s["word_counts"] == table
    assert not os.path.exists(os.path.join(output, "word_counts.parquet"))


def test_word_counts_of_another_pattern_are_refused(baseline, tmp_path, capsys):
    # The marker beside the table records the pattern it was counted with.
    table = os.path.join(baseline, "word_counts.parquet")
    output = tmp_path / "out"
    assert train("--word-counts", table, "--vocab-size", "300", "--pattern", "cl100k", "--output", str(output)) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == [f"beam-bpe train: error: word-count table {table} was counted with --pattern gpt2, not "
                   "--pattern cl100k: train with --pattern gpt2, or count the corpus again with --pattern cl100k"]
    assert not output.exists()


def test_word_counts_without_a_record_of_their_pattern_need_trust(baseline, tmp_path, capsys):
    # A table copied away from its marker (or made elsewhere) records no pattern.
    table = str(tmp_path / "copied.parquet")
    shutil.copyfile(os.path.join(baseline, "word_counts.parquet"), table)
    output = str(tmp_path / "out")
    assert train("--word-counts", table, "--vocab-size", "300", "--output", output) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "records no pattern" in err[0] and "--trust-word-counts" in err[0], err
    assert not os.path.exists(output)
    assert train("--word-counts", table, "--vocab-size", "300", "--output", output, "--trust-word-counts") == 0
    assert merges(output) == merges(baseline)[:44]


def test_word_counts_with_min_word_count_drop_rare_pieces(baseline, tmp_path):
    table = os.path.join(baseline, "word_counts.parquet")
    output = str(tmp_path / "out")
    assert train("--word-counts", table, "--vocab-size", "350", "--min-word-count", "5", "--output", output) == 0
    kept = {word: count for word, count in word_counts(baseline).items() if count >= 5}
    assert merges(output) == json.loads(bpe.train(kept, 350).to_json())["model"]["merges"]
    assert merges(output) != merges(baseline)[:94]  # the rare pieces did change the merges
    assert stats(output)["word_count_rows"] == len(kept)


def test_a_complete_tokenizer_is_replaced_only_with_overwrite(baseline, corpus, tmp_path, capsys):
    # Shards encoded with the old tokenizer could no longer be decoded: as encode and pack, refuse.
    table = os.path.join(baseline, "word_counts.parquet")
    output = str(tmp_path / "out")
    assert train("--word-counts", table, "--vocab-size", "300", "--output", output) == 0
    first = pathlib.Path(output, "tokenizer.json").read_bytes()
    capsys.readouterr()
    assert train("--word-counts", table, "--vocab-size", "350", "--output", output) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == [f"beam-bpe train: error: {output} already holds the tokenizer of a complete run (tokenizer.json); "
                   "pass --overwrite to replace it, or choose another --output"]
    assert pathlib.Path(output, "tokenizer.json").read_bytes() == first
    # A count phase into the same directory is refused before the job, too.
    assert train("--input", corpus["one"], "--vocab-size", "350", "--output", output, *IN_MEMORY) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert pathlib.Path(output, "tokenizer.json").read_bytes() == first
    assert train("--word-counts", table, "--vocab-size", "350", "--output", output, "--overwrite") == 0
    assert bpe.Tokenizer.load(output).vocab_size == 350


def test_a_special_token_spelled_like_a_learned_token_is_refused(baseline, tmp_path, capsys):
    # Hugging Face would read it with that token's ID, and the vocabulary one shorter.
    table = os.path.join(baseline, "word_counts.parquet")
    learned = bpe.Tokenizer.load(baseline).ordinary_tokens()
    name = next(data.decode() for token_id, data in sorted(learned.items())
                if token_id > 256 and data.isascii() and data.isalpha() and token_id < 300)
    output = tmp_path / "out"
    assert train("--word-counts", table, "--vocab-size", "301", "--special-token", name, "--output", str(output)) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err[-1].startswith(f"beam-bpe train: error: special token {name!r} is spelled like the ordinary token "), err
    assert not (output / "tokenizer.json").exists()


def test_config_file_with_command_line_override(baseline, tmp_path):
    output = tmp_path / "out"
    cfg = tmp_path / "train.yaml"
    cfg.write_text(
        f"word_counts: {os.path.join(baseline, 'word_counts.parquet')}\n"
        f"output: {output}\n"
        "vocab_size: 350\n"
        "special_token: ['<|endoftext|>']\n"
        "beam_options:\n  direct_num_workers: 1\n  direct_running_mode: in_memory\n"
    )
    assert train("--config", str(cfg), "--vocab-size", "301") == 0
    tok = bpe.Tokenizer.load(str(output))
    assert tok.vocab_size == 301 and len(tok.merges) == 44  # CLI won over the file's 350
    assert tok.special_tokens == {"<|endoftext|>": 300}  # from the file: not overridden
    assert merges(output) == merges(baseline)[:44]


def test_config_beam_options_become_flags():
    assert config.beam_flags("f.yaml", {
        "runner": "FlinkRunner", "experiments": ["a", "b"], "save_main_session": True, "skip": False,
    }) == ["--runner=FlinkRunner", "--experiments=a", "--experiments=b", "--save_main_session"]
    assert config.beam_flags("f.yaml", ["--runner=SparkRunner"]) == ["--runner=SparkRunner"]
    with pytest.raises(UserError, match="beam_options"):
        config.beam_flags("f.yaml", "--runner=SparkRunner")


@pytest.mark.parametrize("preset", sorted(glob.glob(str(pathlib.Path(config.PRESETS_DIR) / "*.yaml"))))
def test_shipped_config_presets_parse(preset):
    from pipeline.train.command import SETTINGS

    from apache_beam.options.pipeline_options import PipelineOptions

    values, flags = config.load_configs([preset], SETTINGS)
    # Every Beam option in a preset is one Beam knows (a typo would be dropped with a warning).
    known = PipelineOptions(flags).get_all_options(drop_default=True)
    assert {flag[2:].split("=")[0] for flag in flags} <= set(known)


def test_a_shipped_preset_is_named_from_any_directory(baseline, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the checkout: the preset comes with the package
    table = os.path.join(baseline, "word_counts.parquet")
    assert train("--config", "gpt2-32k", "--word-counts", table, "--vocab-size", "300", "--output", "out") == 0
    tok = bpe.Tokenizer.load(str(tmp_path / "out"))
    assert tok.special_tokens == {"<|endoftext|>": 299}  # from the preset; --vocab-size from the command line


def test_an_unknown_preset_lists_the_shipped_ones(tmp_path, capsys):
    assert train("--config", "gpt2-23k", "--input", "x", "--vocab-size", "300", "--output", str(tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("beam-bpe train: error: --config gpt2-23k: no such preset; the shipped presets are "
                   "dataflow, flink, gpt2-32k, spark (or give the path of a .yaml file)")


def test_a_path_is_never_taken_for_a_preset(tmp_path, capsys):
    assert train("--config", "gpt2-32k.yaml", "--input", "x", "--vocab-size", "300", "--output", str(tmp_path)) == 2
    assert "cannot read config file gpt2-32k.yaml" in capsys.readouterr().err


def test_the_presets_are_installed_with_the_package(tmp_path):
    """setup.py's package data: a build of the package holds every preset."""
    repo = pathlib.Path(__file__).resolve().parents[3]
    shutil.copytree(repo, tmp_path / "src", symlinks=True, ignore=shutil.ignore_patterns(".git", ".venv", "build"))
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "lib")],
                   cwd=tmp_path / "src", check=True, capture_output=True)
    shipped = sorted(p.name for p in (repo / "pipeline" / "configs").glob("*.yaml"))
    assert shipped and sorted(p.name for p in (tmp_path / "lib" / "pipeline" / "configs").glob("*.yaml")) == shipped


def test_direct_runner_defaults_and_user_flags_win():
    from apache_beam.options.pipeline_options import DirectOptions

    default = runners.pipeline_options([]).view_as(DirectOptions)
    assert default.direct_running_mode == "multi_processing" and default.direct_num_workers == 0
    mine = runners.pipeline_options(["--direct_num_workers=1", "--direct_running_mode=in_memory"])
    assert mine.view_as(DirectOptions).direct_num_workers == 1
    assert mine.view_as(DirectOptions).direct_running_mode == "in_memory"
    portable = runners.pipeline_options(["--runner=PortableRunner"])
    assert "--direct_running_mode=multi_processing" not in portable.get_all_options(drop_default=True).values()
    assert not runners.is_direct(portable)


def test_direct_jobs_run_on_the_fn_api_runner_and_never_try_prism(monkeypatch):
    """Beam's DirectRunner would try Prism (a binary downloaded at run time) first."""
    from apache_beam.runners.portability import prism_runner
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    from apache_beam.testing.util import assert_that, equal_to

    def no_prism(*args, **kwargs):
        raise AssertionError("Prism was tried")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", no_prism)
    options = runners.pipeline_options(["--direct_num_workers=2", "--default_sdk_harness_log_level=ERROR"])
    with runtime.new_pipeline(options) as p:
        assert isinstance(p.runner, FnApiRunner)
        # The workers get the job's options, as under the DirectRunner.
        levels = p | beam.Create([0]) | beam.Map(lambda _: _worker_log_level())
        assert_that(levels, equal_to(["ERROR"]))
    for explicit in ("--runner=PortableRunner", "--runner=PrismRunner"):
        assert not isinstance(runtime.new_pipeline(runners.pipeline_options([explicit])).runner, FnApiRunner)


def test_worker_errors_still_reach_the_driver_from_quiet_workers():
    options = runners.pipeline_options(["--direct_num_workers=2"])
    with pytest.raises(Exception, match="boom from a worker"):
        with runtime.new_pipeline(options) as p:
            _ = p | beam.Create([1, 2]) | beam.Map(_fail)


def test_quick_worker_exit_still_tears_down_dofns(tmp_path):
    options = runners.pipeline_options(["--direct_num_workers=2"])
    with runtime.new_pipeline(options) as p:
        _ = p | beam.Create(list(range(8))) | beam.ParDo(_MarkTeardown(str(tmp_path)))
    assert list(tmp_path.glob("teardown-*")), "no worker ran DoFn.teardown"


class _MarkTeardown(beam.DoFn):
    def __init__(self, directory):
        self.directory = directory

    def process(self, element):
        yield element

    def teardown(self):
        open(os.path.join(self.directory, f"teardown-{os.getpid()}"), "w").close()


def _fail(_):
    raise ValueError("boom from a worker")


def test_train_output_is_only_our_own_lines(tmp_path):
    """What a user sees: Beam's worker processes print nothing of their start-up."""
    (tmp_path / "in.txt").write_text("hello world, hello beam\n" * 200)  # 14 merges to learn
    command = [sys.executable, "-m", "pipeline.cli", "train", "--input", str(tmp_path / "in.txt"),
               "--vocab-size", "270", "--output", str(tmp_path / "out"), "--direct_num_workers=2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert any("learned" in line for line in lines), lines
    assert all(line.startswith(("beam-bpe train:", "  ")) for line in lines), lines


def test_records_mostly_dead_letters_for_one_reason_are_not_trained_on(tmp_path, capsys):
    # --text-field body on records that have a "text": all but one are dead letters.
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"hello world {i}"}) + "\n" for i in range(9))
                      + json.dumps({"body": "hello body"}) + "\n")
    output = tmp_path / "out"
    assert train("--input", str(corpus), "--text-field", "body", "--vocab-size", "300", "--output", str(output),
                 *IN_MEMORY) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err[-1] == (
        f"beam-bpe train: error: 9 of 10 input records are dead letters for one reason (missing field 'body', "
        f"e.g. {corpus} record 1): not training; is --text-field or --format wrong? They are listed in "
        f"{output}/dead_letters/; the counts of the rest are in {output}/word_counts.parquet "
        "(--word-counts trains from them)"
    ), err
    assert not (output / "tokenizer.json").exists()


def test_a_vocabulary_far_below_vocab_size_needs_allow_smaller_vocab(tmp_path, capsys):
    corpus = tmp_path / "in.txt"
    corpus.write_text("hello world, hello beam\n" * 50)
    output = tmp_path / "out"
    args = ["--input", str(corpus), "--vocab-size", "1000", "--output", str(output), *IN_MEMORY]
    assert train(*args) == 2
    captured = capsys.readouterr()
    err = [line for line in captured.err.splitlines() if line.strip()]
    learned = len(json.loads((output / "merges.checkpoint.json").read_text())["merges"])
    assert 0 < learned < 744 // 2
    assert err[-1] == (
        f"beam-bpe train: error: learned only {learned} of the 744 merges --vocab-size 1000 asks for (no pair "
        f"occurs 2+ times in the rest), so the vocabulary would be {256 + learned}: not writing tokenizer.json. "
        f"The merges are saved in {output}/merges.checkpoint.json: rerun with --resume --allow-smaller-vocab "
        "to write that tokenizer, or use a larger corpus, a lower --min-frequency or a smaller --vocab-size"
    ), err
    assert "learned" not in captured.out  # no summary: nothing to present as a result
    assert not (output / "tokenizer.json").exists() and not (output / "train_stats.json").exists()
    assert train(*args, "--resume", "--allow-smaller-vocab") == 0
    assert bpe.Tokenizer.load(str(output)).vocab_size == 256 + learned
    # Half the merges asked for is enough.
    assert train(*args[:2], "--vocab-size", str(256 + 2 * learned), "--output", str(tmp_path / "half"),
                 *IN_MEMORY) == 0


def test_help_lists_the_flags_that_guard_the_result(capsys):
    with pytest.raises(SystemExit) as stopped:
        train("--help")
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--allow-smaller-vocab", "--trust-word-counts", "--overwrite"):
        assert flag in out
    assert "fewer than 50% of the merges" in " ".join(out.split())


def _worker_log_level():
    """The log level option as an SDK worker process received it from the runner."""
    options = json.loads(os.environ.get("PIPELINE_OPTIONS", "{}"))  # {"beam:option:NAME:v1": value}
    return next((value for key, value in options.items() if ":default_sdk_harness_log_level:" in key), None)


def _bad_bytes_corpus(root: pathlib.Path) -> str:
    (root / "in").mkdir()
    # Invalid UTF-8 in a text file and (raw, inside a JSON string) in jsonl.
    (root / "in" / "latin1.txt").write_bytes(b"caf\xe9 au lait \xff\xfe\n" + b"hello world\n" * 3)
    (root / "in" / "docs.jsonl").write_bytes(
        b'{"text": "na\xefve \xc3 caf\xc3\xa9"}\n'
        b'{"text": "hello world"}\n'
        b'{"text": "unterminated\n'  # malformed: record 3
        b'{"body": "no text field"}\n'  # missing field: record 4
    )
    (root / "in" / "cut.txt.gz").write_bytes(gzip.compress(b"x" * 5000 + b"\n")[:40])  # truncated gzip
    (root / "in" / "empty.txt").write_bytes(b"")
    return str(root / "in" / "*")


def test_bad_input_is_counted_losslessly_or_dead_lettered(tmp_path, capsys):
    output = str(tmp_path / "out")
    assert train("--input", _bad_bytes_corpus(tmp_path), "--vocab-size", "260", "--output", output,
                 "--min-frequency", "1", *IN_MEMORY) == 0
    counts = word_counts(output)
    good_documents = [b"caf\xe9 au lait \xff\xfe\n", *[b"hello world\n"] * 3,
                      b"na\xefve \xc3 caf\xc3\xa9", b"hello world",
                      # The truncated gzip still decompresses its one line; the
                      # missing end-of-stream marker then gives a dead letter.
                      b"x" * 5000 + b"\n"]
    expected = plain_count(good_documents)
    assert expected[b" \xff\xfe"] == 1 and expected[b" \xc3"] == 1 and expected[b"\xef"] == 1
    assert counts == expected
    s = stats(output)
    assert s["dead_letters"] == 3
    out = capsys.readouterr().err
    assert "3 input record(s) could not be read" in out and "missing field 'text'" in out
    letters = []
    for path in glob.glob(os.path.join(output, "dead_letters", "*.jsonl")):
        with open(path, encoding="utf-8") as f:
            letters += [json.loads(line) for line in f]
    assert sorted((os.path.basename(d["file"]), d["record"]) for d in letters) == [
        ("cut.txt.gz", -1), ("docs.jsonl", 3), ("docs.jsonl", 4)]


def test_strict_fails_on_a_malformed_jsonl_line(tmp_path, capsys):
    output = str(tmp_path / "out")
    code = train("--input", _bad_bytes_corpus(tmp_path), "--vocab-size", "260", "--output", output,
                 "--strict", *IN_MEMORY)
    assert code == 2  # like encode --strict
    err = capsys.readouterr().err
    assert "malformed JSON" in err and "(--strict)" in err
    assert not os.path.exists(os.path.join(output, "tokenizer.json"))


def test_readme_stdlib_glob_matches_through_beam():
    # The README's first command trains on "$STDLIB/*.py"; Beam's FileSystems must match it.
    pattern = os.path.join(sysconfig.get_path("stdlib"), "*.py")
    assert match_inputs([pattern]) == sorted(glob.glob(pattern))
    assert len(match_inputs([pattern])) > 50


ERROR_CASES = [
    "glob matches nothing", "vocab too small", "invalid regex", "output is a file", "output under a file",
    "unknown format", "dask runner", "dask runner class path", "missing vocab size", "missing input",
    "word counts missing", "word counts not parquet", "config missing", "config not yaml",
    "config unknown key", "duplicate special", "underscored flag", "special token is a byte",
]


def _error_cases(tmp_path: pathlib.Path, corpus: dict) -> dict:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    ok = ["--input", corpus["one"], "--vocab-size", "300", "--output", str(tmp_path / "out")]
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("vocab_size: [1,\n")
    unknown_key = tmp_path / "unknown.yaml"
    unknown_key.write_text("vocab-sise: 300\n")
    return {
        "glob matches nothing": (
            ["--input", str(tmp_path / "nothing" / "*.txt"), *ok[2:]], "no file matches"),
        "vocab too small": ([*ok[:3], "257", *ok[4:], "--special-token", "<a>", "--special-token", "<b>"],
                            "--vocab-size 257 is too small: it must be at least 258"),
        "invalid regex": ([*ok, "--pattern", "(unclosed"], "invalid pre-tokenizer regex"),
        "output is a file": ([*ok[:5], str(a_file)], "exists and is not a directory"),
        "output under a file": ([*ok[:5], str(a_file / "sub")], "cannot write to --output"),
        "unknown format": ([*ok, "--format", "csv"], "unknown --format 'csv'"),
        "dask runner": ([*ok, "--runner=DaskRunner"], "DaskRunner is not supported"),
        "dask runner class path": ([*ok, "--runner", "apache_beam.runners.dask.dask_runner.DaskRunner"],
                                   "is not supported"),
        "missing vocab size": ([*ok[:2], *ok[4:]], "--vocab-size is required"),
        "missing input": (ok[2:], "--input is required"),
        "word counts missing": (["--word-counts", str(tmp_path / "none.parquet"), *ok[2:]], "does not exist"),
        "word counts not parquet": (["--word-counts", str(a_file), *ok[2:]], "cannot read word-count table"),
        "config missing": ([*ok, "--config", str(tmp_path / "none.yaml")], "cannot read config file"),
        "config not yaml": ([*ok, "--config", str(bad_yaml)], "is not valid YAML"),
        "config unknown key": ([*ok, "--config", str(unknown_key)], "unknown key 'vocab_sise'"),
        "duplicate special": ([*ok, "--special-token", "<a>", "--special-token", "<a>"], "given twice"),
        "underscored flag": ([*ok, "--min_frequency=5"], "unknown flag --min_frequency: did you mean --min-frequency?"),
        "special token is a byte": ([*ok, "--special-token", "Ċ"],
                                    "--special-token: special token 'Ċ' is spelled like the ordinary token 10 "),
    }


@pytest.mark.parametrize("case", ERROR_CASES)
def test_user_errors_exit_2_with_one_line(case, corpus, tmp_path, capsys):
    cases = _error_cases(tmp_path, corpus)
    assert sorted(cases) == sorted(ERROR_CASES)
    argv, message = cases[case]
    assert train(*argv) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("beam-bpe train: error: ") and message in lines[0], lines[0]
    assert not os.path.exists(tmp_path / "out" / "word_counts.parquet")
