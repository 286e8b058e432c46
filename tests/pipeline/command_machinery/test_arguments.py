"""Every argument the user types is used or refused: nothing is dropped with a warning.

Arguments our parser does not take must be Beam pipeline options (checked
against Beam's own parsers, see pipeline/command_machinery/runners.py ``check_beam_args``);
anything else is one error line with a "did you mean", exit 2, before the job
starts and before the output directory exists. User mistakes elsewhere (config
files, --runner, decode --stream input, output paths) are one line too.
"""

import json
import pathlib
import re
import subprocess
import sys

import pytest

from pipeline import cli
from tests.support.cli import IN_MEMORY
from tests.support.outputs import read_rows
from tests.support.real_text import multilingual
from tests.support.toy_tokenizers import train_small

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    tok = train_small(multilingual(1), vocab_size=300, special_tokens=("<|endoftext|>",))
    return tok.save(str(tmp_path_factory.mktemp("tok")))


@pytest.fixture
def shards(tmp_path) -> list[str]:
    """Eight text files, as an unquoted glob hands them over: one path each."""
    paths = []
    for i in range(8):
        path = tmp_path / "in" / f"part-{i}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"file {i} line one\nfile {i} line two\n")
        paths.append(str(path))
    return paths


def one_error(capsys) -> str:
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_an_unquoted_glob_encodes_every_file(tokenizer, shards, tmp_path):
    out = tmp_path / "out"
    assert cli.main(["encode", "--tokenizer", tokenizer, "--input", *shards, "--output", str(out), *IN_MEMORY]) == 0
    assert json.loads((out / "stats.json").read_text())["documents"] == 16
    assert {row_id.rsplit(":", 1)[0] for row_id, _ in read_rows(out)} == set(shards)


def test_an_unquoted_glob_trains_on_every_file(shards, tmp_path):
    out = tmp_path / "tok"
    assert cli.main(["train", "--no-progress", "--input", *shards, "--vocab-size", "260", "--output", str(out),
                     *IN_MEMORY]) == 0
    stats = json.loads((out / "train_stats.json").read_text())
    assert stats["files"] == 8 and stats["documents"] == 16


@pytest.mark.parametrize("command, flag, suggestion", [
    ("train", "--vocab_sise=5", "--vocab-size"),
    ("train", "--min_frequency=3", "--min-frequency"),
    ("train", "--direct_num_worker=2", "--direct_num_workers"),
    ("encode", "--append_eos", "--append-eos"),
    ("encode", "--text_field=body", "--text-field"),
    ("encode", "--num_shards=3", "--num-shards"),
    ("encode", "--direct-running-mode=in_memory", "--direct_running_mode"),
    ("decode", "--skip_eos", None),
])
def test_an_unknown_flag_is_refused_with_the_closest_one(tokenizer, shards, tmp_path, capsys, command, flag,
                                                         suggestion):
    out = tmp_path / "out"
    argv = {
        "train": ["--input", shards[0], "--vocab-size", "260", "--output", str(out)],
        "encode": ["--tokenizer", tokenizer, "--input", shards[0], "--output", str(out)],
        "decode": ["--tokenizer", tokenizer, "--input", shards[0]],
    }[command]
    assert cli.main([command, *argv, flag]) == 2
    error = one_error(capsys)
    name = flag.split("=")[0]
    hint = f": did you mean {suggestion}?" if suggestion else ""
    assert error.startswith(f"beam-bpe {command}: error: unknown flag {name}{hint}")
    assert not out.exists()


def test_a_stray_word_is_refused(tokenizer, shards, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["encode", "--tokenizer", tokenizer, "--input", shards[0], "--output", str(out), "--strict", "extra"]
    assert cli.main(argv) == 2
    assert one_error(capsys).startswith("beam-bpe encode: error: unexpected argument 'extra'")
    assert not out.exists()


def test_a_bad_beam_option_value_is_one_line(tokenizer, shards, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["encode", "--tokenizer", tokenizer, "--input", shards[0], "--output", str(out)]
    assert cli.main([*argv, "--direct_running_mode=fast"]) == 2
    assert "--direct_running_mode: invalid choice: 'fast'" in one_error(capsys)
    assert not out.exists()


def test_a_misspelt_runner_is_refused_before_the_output_exists(shards, tmp_path, capsys):
    out = tmp_path / "tok"
    argv = ["train", "--input", shards[0], "--vocab-size", "260", "--output", str(out), "--runner=DirectRuner"]
    assert cli.main(argv) == 2
    assert one_error(capsys).startswith(
        "beam-bpe train: error: unknown --runner DirectRuner: did you mean --runner=DirectRunner?")
    assert not out.exists()


def test_config_beam_options_are_checked_too(shards, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("beam_options:\n  direct_num_worker: 2\n")
    out = tmp_path / "tok"
    argv = ["train", "--input", shards[0], "--vocab-size", "260", "--output", str(out), "--config", str(config)]
    assert cli.main(argv) == 2
    assert one_error(capsys) == "beam-bpe train: error: unknown flag --direct_num_worker: did you mean --direct_num_workers?"
    assert not out.exists()


@pytest.mark.parametrize("content, message", [
    (b"vocab_size: 300\ncomment: caf\xe9\n", "is not UTF-8 text"),
    (b"input: " + b"[" * 5000 + b"]" * 5000 + b"\n", "is nested too deeply"),
])
def test_a_bad_config_file_is_one_line(shards, tmp_path, capsys, content, message):
    config = tmp_path / "c.yaml"
    config.write_bytes(content)
    argv = ["train", "--input", shards[0], "--vocab-size", "260", "--output", str(tmp_path / "tok"),
            "--config", str(config)]
    assert cli.main(argv) == 2
    assert one_error(capsys) == f"beam-bpe train: error: config file {config} {message}"


@pytest.mark.parametrize("name", ["out[1]", "out*", "what?"])
def test_an_output_path_with_glob_characters_is_refused(tokenizer, shards, tmp_path, capsys, name):
    out = tmp_path / name
    argv = ["encode", "--tokenizer", tokenizer, "--input", shards[0], "--output", str(out), *IN_MEMORY]
    assert cli.main(argv) == 2
    assert "which Beam's file systems take as a glob pattern" in one_error(capsys)
    assert not out.exists()


def test_an_unwritable_output_is_one_line(tokenizer, shards, capsys):
    out = pathlib.Path(shards[0]) / "sub"  # below a file: no one can create it
    assert cli.main(["train", "--input", shards[0], "--vocab-size", "260", "--output", str(out)]) == 2
    assert one_error(capsys) == f"beam-bpe train: error: cannot write to --output {out}: Not a directory"


def test_a_huge_integer_on_the_decode_stream_is_one_line(tokenizer):
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "decode", "--tokenizer", tokenizer, "--stream"],
                          input=b"10 11 " + b"7" * 5000 + b" 12\n", capture_output=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2
    [error] = proc.stderr.decode().splitlines()
    assert error.startswith("beam-bpe decode: error: token ID 7777") and "(5000 digits) at position 2 is out of" in error


def test_a_parser_error_is_one_line_in_a_real_process(tokenizer, shards, tmp_path):
    """What a user sees: the whole stderr of the process, not only our prints."""
    for argv in (["encode", "--tokenizer", tokenizer, "--input", shards[0]],  # no --output
                 ["encode", "--tokenizer", tokenizer, "--input", *shards, "--output", str(tmp_path / "o"),
                  "--text_field=body"]):
        proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *argv], capture_output=True, text=True,
                              cwd=REPO, timeout=120)
        assert proc.returncode == 2
        [error] = proc.stderr.splitlines()
        assert error.startswith("beam-bpe encode: error: ")
    assert not (tmp_path / "o").exists()


def test_the_options_give_one_view_per_class_which_reads_and_writes_the_same_values():
    import pickle

    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

    from pipeline.command_machinery.runners import pipeline_options

    options = pipeline_options(["--direct_num_workers=3"])
    view = options.view_as(DirectOptions)
    assert options.view_as(DirectOptions) is view and view.direct_num_workers == 3
    options.view_as(StandardOptions).runner = "SomeRunner"
    assert options.view_as(StandardOptions).runner == "SomeRunner"
    assert options.get_all_options()["runner"] == "SomeRunner"
    view.direct_num_workers = 5  # through a view: the options and a view of the copy see it
    copy = pickle.loads(pickle.dumps(options))
    assert copy.view_as(DirectOptions).direct_num_workers == 5
    assert copy.get_all_options() == options.get_all_options()


@pytest.mark.parametrize("flags", [
    ["--validation-fraction", "0.1"], ["--validation-documents", "1"], ["--targets"], ["--pack-format", "llmc"],
    ["--seed", "0"], ["--pad-id", "3"], ["--drop-remainder"], ["--no-split-documents"],
    ["--tokens-per-file", "100"], ["--window-tokens", "100"],
])
def test_encode_without_pack_refuses_the_packing_flags(tokenizer, shards, tmp_path, capsys, flags):
    out = tmp_path / "out"
    argv = ["encode", "--tokenizer", tokenizer, "--input", shards[0], "--output", str(out), *flags, *IN_MEMORY]
    assert cli.main(argv) == 2
    assert one_error(capsys) == (f"beam-bpe encode: error: {flags[0]} applies only with --pack N (packed sequences) "
                                 "or --pack-format megatron (whole documents)")
    assert not out.exists()


@pytest.mark.parametrize("flags, message", [
    (["--pad-id", "300"], "--pad-id 300 is not a token ID of the tokenizer (vocab_size 300)"),
    (["--pad-id", "-1"], "--pad-id must be 0 or more, not -1"),
    (["--pack-format", "llmc", "--pad-id", "3"], "--pad-id: llmc files hold no padding"),
])
def test_encode_with_pack_refuses_a_pad_id_it_cannot_use(tokenizer, shards, tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    argv = ["encode", "--tokenizer", tokenizer, "--input", shards[0], "--output", str(out), "--pack", "8", *flags,
            *IN_MEMORY]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err  # the tokenizer's engine is named first: the check needs its vocabulary
    assert err.splitlines()[-1].startswith(f"beam-bpe encode: error: {message}") and "Traceback" not in err
    assert not (out / "stats.json").exists() and not (out / ".staging").exists()


def test_every_command_prints_its_summary_on_stderr_with_thousands_separators(tokenizer, tmp_path, capfd):
    """stdout is for what a user pipes (decode's documents); every summary line goes to
    stderr, and its numbers have thousands separators."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i} of the summary corpus\n" for i in range(1200)))
    commands = {
        "train": ["train", "--no-progress", "--input", str(corpus), "--vocab-size", "260",
                  "--output", str(tmp_path / "tok"), *IN_MEMORY],
        "encode": ["encode", "--tokenizer", tokenizer, "--input", str(corpus), "--output", str(tmp_path / "shards"),
                   *IN_MEMORY],
        "pack": ["pack", "--input", str(tmp_path / "shards"), "--seq-len", "8", "--output", str(tmp_path / "packed"),
                 *IN_MEMORY],
        "report": ["report", "--tokenizer", tokenizer, "--input", str(corpus), "--output", str(tmp_path / "report"),
                   *IN_MEMORY],
        "prune": ["prune", "--no-progress", "--tokenizer", tokenizer, "--input", str(corpus), "--vocab-size", "280",
                  "--output", str(tmp_path / "pruned"), *IN_MEMORY],
    }
    for name, argv in commands.items():
        capfd.readouterr()
        assert cli.main(argv) == 0, name
        captured = capfd.readouterr()
        assert captured.out == "", (name, captured.out)
        summary = [line for line in captured.err.splitlines() if line.startswith(f"beam-bpe {name}: ")]
        assert re.search(r"\b\d,\d{3}\b", " ".join(summary)), (name, captured.err)
        words = " ".join(word for line in summary for word in line.split() if "/" not in word)  # paths aside
        assert not re.search(r"\b\d{4,}\b", words), (name, summary)  # 1,200, never 1200: one style


def test_version_prints_the_installed_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"beam-bpe {version('beam-bpe')}\n"


@pytest.mark.parametrize("runner", ["PortableRunner", "FlinkRunner", "SparkRunner"])
def test_a_cluster_job_keeps_its_sdk_workers_between_stages_unless_told_otherwise(runner):
    from apache_beam.options.pipeline_options import PortableOptions

    from pipeline.command_machinery.runners import pipeline_options

    def kept(options):  # Beam keeps the flag's text; the runner (Java) reads it as a number
        return int(options.view_as(PortableOptions).environment_cache_millis)

    assert kept(pipeline_options([f"--runner={runner}"])) == 10000
    assert kept(pipeline_options([f"--runner={runner}", "--environment_cache_millis=0"])) == 0
    assert kept(pipeline_options([])) == 0


@pytest.mark.parametrize("runner", ["PortableRunner", "FlinkRunner", "SparkRunner"])
def test_a_cluster_job_is_submitted_without_beams_pip_freeze(runner, monkeypatch, tmp_path):
    """Beam's stager runs `pip freeze` at each submission unless an experiment turns it off;
    the user's own experiments are kept beside it."""
    from apache_beam.options.pipeline_options import DebugOptions
    from apache_beam.runners.portability.stager import Stager

    from pipeline.command_machinery.runners import pipeline_options

    ran = []
    monkeypatch.setattr(subprocess, "check_output", lambda argv, *a, **k: ran.append(argv) or b"")
    options = pipeline_options([f"--runner={runner}", "--experiments=user_experiment"])
    Stager.create_job_resources(options, str(tmp_path))
    assert not [argv for argv in ran if "freeze" in argv]
    assert "user_experiment" in options.view_as(DebugOptions).experiments
    Stager.create_job_resources(pipeline_options([]), str(tmp_path))  # DirectRunner: Beam's default
    assert [argv for argv in ran if "freeze" in argv]
