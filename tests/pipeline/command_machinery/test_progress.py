"""The progress of a running Beam job (pipeline/command_machinery/progress.py), seen on stderr of real jobs.

Jobs run on DirectRunner, in-memory and with two worker processes, and on
PortableRunner (whose job service gives no counters while the job runs). The
plain lines are forced often with --progress-every; a terminal gets a tqdm bar.
"""

import io
import json
import re
import sys

import pytest

from pipeline import cli
from pipeline.command_machinery.progress import describe
from tests.support.beam_services import portable_runner_flags  # noqa: F401  (fixture)
from tests.support.cli import IN_MEMORY
from tests.support.outputs import stats
from tests.support.real_text import STDLIB
from transforms import metrics

TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
FILES = 4
LINE = re.compile(
    r"beam-bpe (\w+): (\w+) (running|done): ([\d,]+) (\w+), ([\d,.]+ [kMGT]?B|[\d,]+ tokens), "
    r"(?:(\d+)/(\d+) files, )?\d+:\d\d:\d\d elapsed$"
)
UNITS = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """FILES text files of real text (this machine's stdlib), each over the 1 MB between
    two updates of the read counters, so a file's reading is seen advancing."""
    root = tmp_path_factory.mktemp("corpus")
    sources = sorted(STDLIB.glob("*.py"))
    for i in range(FILES):
        data, n = b"", i
        while len(data) < 1_500_000:
            data += sources[n % len(sources)].read_bytes()
            n += FILES
        (root / f"part-{i}.txt").write_bytes(data)
    return str(root / "part-*.txt")


def run(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


def progress_lines(err, command="train"):
    """(state, documents, bytes, files done, files) of each progress line."""
    found = []
    for line in err:
        m = LINE.match(line)
        if m and m.group(1) == command:
            size, unit = m.group(6).split(" ")
            done = (int(m.group(7)), int(m.group(8))) if m.group(7) else (None, None)
            found.append((m.group(3), int(m.group(4).replace(",", "")),
                          float(size.replace(",", "")) * UNITS.get(unit, 1), *done))
    return found


def train_argv(corpus, out, *flags):
    return ["train", "--input", corpus, "--vocab-size", "300", "--output", str(out), *flags]


def check_progress(lines, documents):
    """Lines only grow, at least one shows the job part-way, the last is the whole job."""
    running = [line for line in lines if line[0] == "running"]
    assert running and lines[-1][0] == "done" and [line[0] for line in lines].count("done") == 1
    for before, after in zip(lines, lines[1:]):
        assert after[1] >= before[1] and after[2] >= before[2] and after[3] >= before[3]
    assert any(0 < line[1] < documents for line in running), running
    assert lines[-1][1] == documents
    assert lines[-1][3:] == (FILES, FILES)  # every file done, of the files matched on the driver


@pytest.mark.parametrize("runner", [IN_MEMORY, TWO_WORKERS], ids=["in_memory", "two_workers"])
def test_the_count_job_shows_documents_bytes_and_files_as_it_goes(corpus, tmp_path, capsys, runner):
    code, out, err = run(capsys, *train_argv(corpus, tmp_path / "out", "--progress-every", "0.05", *runner))
    assert code == 0, err
    s = stats(tmp_path / "out")
    lines = progress_lines(err)
    check_progress(lines, s["documents"])
    assert lines[-1][2] == pytest.approx(s["bytes"], abs=50_000)  # shown to a tenth of a MB
    assert out == ""  # the progress and the summary go to stderr


def test_no_progress_prints_none_and_the_summary_is_the_same(corpus, tmp_path, capsys):
    code, shown_out, shown_err = run(capsys, *train_argv(corpus, tmp_path / "a", "--progress-every", "0.05",
                                                         *IN_MEMORY))
    assert code == 0 and progress_lines(shown_err)
    code, quiet_out, quiet_err = run(capsys, *train_argv(corpus, tmp_path / "b", "--no-progress",
                                                         "--progress-every", "0.05", *IN_MEMORY))
    assert code == 0, quiet_err
    assert not [line for line in quiet_err if "count running" in line or "count done" in line]
    def summary(err):  # the summary without its timings, in one output directory
        lines = [line for line in err if line.startswith(("beam-bpe train: counted", "beam-bpe train: learned", "  "))]
        return re.sub(r"in [\d.]+ s", "", "\n".join(lines)).replace(str(tmp_path / "a"), str(tmp_path / "b"))

    assert shown_out == quiet_out == ""
    assert summary(shown_err) == summary(quiet_err) and "learned" in summary(quiet_err)


def test_a_log_gets_no_line_before_the_first_interval(corpus, tmp_path, capsys):
    """The default: a line every 10 s, the first after 10 s; a shorter job adds nothing."""
    code, _, err = run(capsys, *train_argv(corpus, tmp_path / "out", "--progress-every", "3600", *IN_MEMORY))
    assert code == 0 and not progress_lines(err) and not [line for line in err if "count " in line]


def test_a_terminal_gets_a_bar_of_files_done(corpus, tmp_path, capsys, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert cli.main(train_argv(corpus, tmp_path / "out", *IN_MEMORY)) == 0
    draws = terminal.getvalue().split("\r")
    s = stats(tmp_path / "out")
    last_count = [d for d in draws if d.startswith("count:")][-1]
    assert last_count.startswith("count: 100%|")
    assert f"{s['documents']:,} documents" in last_count and f"{FILES}/{FILES} files" in last_count
    assert any(d.startswith("merges:") for d in draws)  # the merge phase's bar follows


def test_encode_pack_and_report_show_their_progress(corpus, tmp_path, capsys):
    every = ("--progress-every", "0.05", *IN_MEMORY)
    assert run(capsys, *train_argv(corpus, tmp_path / "tok", "--no-progress", *IN_MEMORY))[0] == 0
    code, _, err = run(capsys, "encode", "--tokenizer", str(tmp_path / "tok"), "--input", corpus,
                       "--output", str(tmp_path / "enc"), *every)
    assert code == 0, err
    encoded = json.loads((tmp_path / "enc" / "stats.json").read_text())
    lines = progress_lines(err, "encode")
    assert lines[-1] == ("done", encoded["documents"], pytest.approx(encoded["input_bytes"], abs=50_000),
                         FILES, FILES)

    code, _, err = run(capsys, "pack", "--input", str(tmp_path / "enc"), "--seq-len", "512",
                       "--output", str(tmp_path / "packed"), *every)
    assert code == 0, err
    packed = json.loads((tmp_path / "packed" / "stats.json").read_text())
    done = [m.groups() for m in (re.fullmatch(r"beam-bpe pack: pack done: ([\d,]+) sequences, ([\d,]+) tokens, "
                                              r"\d+:\d\d:\d\d elapsed", line) for line in err) if m]
    assert done == [(f"{packed['sequences']:,}", f"{packed['tokens']:,}")]

    code, _, err = run(capsys, "report", "--tokenizer", str(tmp_path / "tok"), "--input", corpus,
                       "--output", str(tmp_path / "report"), *every)
    assert code == 0, err
    assert progress_lines(err, "report")[-1][3:] == (FILES, FILES)


def test_a_runner_without_live_counters_gets_the_time_and_a_note_once(  # noqa: F811
        corpus, tmp_path, capsys, portable_runner_flags):
    code, _, err = run(capsys, *train_argv(corpus, tmp_path / "out", "--progress-every", "0.05",
                                           *portable_runner_flags))
    assert code == 0, err
    notes = [line for line in err if "gives no counters" in line]
    assert notes == ["beam-bpe train: count: the runner gives no counters (yet) while the job runs; "
                     "showing the elapsed time"]
    assert any(re.fullmatch(r"beam-bpe train: count running: \d+:\d\d:\d\d elapsed", line) for line in err)
    # Once the job is done, its result has the counters.
    assert progress_lines(err)[-1][:2] == ("done", stats(tmp_path / "out")["documents"])


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_interval_is_one_line_before_the_job(tmp_path, capsys, value, corpus):
    code, _, err = run(capsys, *train_argv(corpus, tmp_path / "out", "--progress-every", value))
    assert code == 2
    assert err == [f"beam-bpe train: error: --progress-every must be a number of seconds above 0, not {value!r}"]
    assert not (tmp_path / "out").exists()


def test_the_line_text():
    counters = {metrics.key("read", "documents"): 1234567, metrics.key("read", "bytes"): 5_600_000}
    assert describe(counters, files=3, files_done=2, elapsed=3725.9) == \
        "1,234,567 documents, 5.6 MB, 2/3 files, 1:02:05 elapsed"
    assert describe(counters, files=3, files_done=7, elapsed=0) == \
        "1,234,567 documents, 5.6 MB, 3/3 files, 0:00:00 elapsed"  # never more done than there are
    assert describe({}, elapsed=59) == "0 documents, 0 B, 0:00:59 elapsed"
    assert describe(None, files=3, elapsed=61) == "0:01:01 elapsed"  # no counters: the time only


@pytest.mark.parametrize("terminal", [True, False], ids=["bar", "lines"])
def test_once_every_file_is_read_the_line_says_the_job_is_combining_and_writing(terminal):
    """The bar sits at 100% from the last file read to the job's end: it says what runs then."""
    from pipeline.command_machinery.progress import FILES_DONE, Progress, _Display

    class Stream(io.StringIO):
        def isatty(self):
            return terminal

    stream = Stream()
    display = _Display(Progress("report", "measure", files=2, every=0.05), stream, None)
    counters = {metrics.key("read", "documents"): 10, metrics.key("read", "bytes"): 100, FILES_DONE: 1}
    display._draw(counters, 1, final=False)
    assert "combining" not in stream.getvalue()
    display._draw({**counters, FILES_DONE: 2}, 2, final=False)
    last = re.split(r"[\r\n]", stream.getvalue().rstrip("\n"))[-1]
    assert last.endswith("2/2 files, 0:00:00 elapsed; all files read, combining and writing the results"), last
    display._draw({**counters, FILES_DONE: 2}, 2, final=True)
    last = re.split(r"[\r\n]", stream.getvalue().rstrip("\n"))[-1].rstrip()  # a bar pads a shorter line
    assert last.endswith("2/2 files, 0:00:00 elapsed"), last  # done: nothing runs any more
