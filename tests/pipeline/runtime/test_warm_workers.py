"""Workers started before the job (pipeline.runtime.warm_workers), tokenizers read ahead
(pipeline.runtime.preloaded) and Beam imported without pandas (pipeline.runtime.beam_import)."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import apache_beam as beam
import pytest

import bpe
from bpe import proof_cache
from pipeline.command_machinery.runners import pipeline_options
from pipeline.runtime import new_pipeline, preloaded, warm_workers
from transforms.encode import _EncodeBatchFn
from tests.support.toy_tokenizers import train_small

ROOT = str(pathlib.Path(__file__).resolve().parents[3])
CORES = os.cpu_count() or 1


@pytest.mark.parametrize("argv, expected", [
    (["encode", "--input", "x"], CORES),
    (["encode", "--direct_num_workers=3"], 3),
    (["encode", "--direct_num_workers", "2"], 2),
    (["encode", "--direct_num_workers=0"], CORES),
    (["encode", "--direct_num_workers=2", "--direct_num_workers=1"], 1),  # Beam takes the last
    (["encode", "--runner=DirectRunner", "--direct_num_workers=2"], 2),
    (["encode", "--runner", "apache_beam.runners.direct.DirectRunner", "--direct_num_workers=2"], 2),
    (["encode", "--direct_running_mode=in_memory"], 0),
    (["encode", "--direct_running_mode", "multi_threading", "--direct_num_workers=2"], 0),
    (["encode", "--runner=FlinkRunner"], 0),
    (["encode", "--runner", "PrismRunner"], 0),
    (["encode", "--help"], 0),
    (["encode", "-h"], 0),
    (["encode", "--direct_num_workers=two"], 0),
])
def test_the_pool_starts_as_many_workers_as_the_job_will_run(argv, expected):
    assert warm_workers.direct_workers(argv) == expected


class _Pid(beam.DoFn):
    def process(self, element):
        yield os.getpid()


def _write_pids(pids, directory):
    for pid in pids:
        open(os.path.join(directory, str(pid)), "w").close()


def test_a_job_runs_on_the_warm_workers_and_empties_the_pool(tmp_path):
    warm_workers.start(2, ["transforms.read"])
    warm = {process.pid for process in warm_workers._idle}
    assert len(warm) == 2
    options = pipeline_options(["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    with new_pipeline(options) as p:
        _ = (p | beam.Create(range(40)) | beam.Reshuffle() | beam.ParDo(_Pid())
             | beam.Map(lambda pid, d=str(tmp_path): _write_pids([pid], d)))
    used = {int(name) for name in os.listdir(tmp_path)}
    assert used and used <= warm  # every element ran in a warm worker
    assert warm_workers._idle == []


class _SamplingPeriod(beam.DoFn):
    def process(self, unused):
        from apache_beam.runners.worker import statesampler

        yield statesampler.get_current_tracker().sampling_period_ms


def test_a_warm_workers_bundles_sample_their_steps_times_often_so_their_ends_do_not_wait(tmp_path):
    # Beam's sampler wakes every 200 ms, and each bundle's end waits for it (pipeline.runtime.worker).
    from pipeline.runtime.worker import SAMPLING_PERIOD_MS

    warm_workers.start(2, ["transforms.read"])
    options = pipeline_options(["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    with new_pipeline(options) as p:
        _ = (p | beam.Create(range(40)) | beam.Reshuffle() | beam.ParDo(_SamplingPeriod())
             | beam.Map(lambda period, d=str(tmp_path): _write_pids([period], d)))
    assert {int(name) for name in os.listdir(tmp_path)} == {SAMPLING_PERIOD_MS}
    assert warm_workers._idle == []


def test_with_no_warm_worker_left_the_job_starts_its_own(tmp_path):
    assert warm_workers._idle == []
    options = pipeline_options(["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    with new_pipeline(options) as p:
        _ = p | beam.Create(range(10)) | beam.Map(lambda x, d=str(tmp_path): _write_pids([os.getpid()], d))
    assert os.listdir(tmp_path)
    assert int(os.listdir(tmp_path)[0]) != os.getpid()


def test_a_worker_killed_before_its_job_is_passed_over():
    warm_workers.start(2)
    first, second = warm_workers._idle
    first.kill()
    first.wait()
    taken = warm_workers.take({"PATH": os.environ.get("PATH", "")})
    try:
        assert taken is second
        assert warm_workers._idle == []
        assert warm_workers.take({}) is None
    finally:
        taken.kill()
        taken.wait()


def test_workers_no_job_takes_end_with_the_command_or_when_their_input_ends():
    warm_workers.start(2)
    processes = list(warm_workers._idle)
    warm_workers.discard()
    assert warm_workers._idle == []
    assert all(process.poll() is not None for process in processes)
    # A warm worker whose driver goes away (its stdin ends) exits by itself, with 0.
    env = {**os.environ, "PYTHONPATH": ROOT}
    ahead = json.dumps({"modules": ["transforms.read"], "tokenizers": []})
    process = subprocess.Popen([sys.executable, "-m", "pipeline.runtime.worker", "--warm", ahead],
                               stdin=subprocess.PIPE, env=env, cwd=ROOT)
    process.stdin.close()
    assert process.wait(timeout=120) == 0


def _warm_processes(marker: str) -> list[int]:
    """The processes whose command line names ``marker`` (a path): a started warm worker
    names it in its JSON, a forked one has the command's own command line."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


def _beam_bpe(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *argv], env={**os.environ, "PYTHONPATH": ROOT},
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_a_cli_job_runs_and_leaves_no_warm_worker_behind(corpus, tmp_path):
    source = corpus.write("a.txt", "".join(f"line {i} of the text\n" for i in range(200)).encode())
    tokenizer = train_small(["some text to train on, some text"] * 20)
    tokenizer.save(str(tmp_path / "tok"))
    proc = _beam_bpe("encode", "--tokenizer", str(tmp_path / "tok"), "--input", source,
                     "--output", str(tmp_path / "out"), "--direct_num_workers=2", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "200 documents" in proc.stderr
    assert _warm_processes(str(tmp_path / "tok")) == []


def test_a_command_that_fails_before_its_job_ends_its_warm_workers(tmp_path):
    missing = str(tmp_path / "missing-tokenizer")
    proc = _beam_bpe("encode", "--tokenizer", missing, "--input", missing, "--output", str(tmp_path / "out"),
                     "--direct_num_workers=2")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("beam-bpe encode: error:"), proc.stderr
    assert _warm_processes(missing) == []


def test_forked_workers_whose_command_is_killed_end_by_themselves(tmp_path):
    marker = str(tmp_path / "marker-tokenizer")
    code = (
        "import os, signal, sys\n"
        "from pipeline.runtime import beam_import, warm_workers\n"
        "beam_import.import_beam()\n"
        f"warm_workers.start_for(['encode', '--tokenizer', {marker!r}, '--direct_num_workers=2'], ['transforms.read'])\n"
        "print(' '.join(str(process.pid) for process in warm_workers._idle), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, marker], env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    forked = [int(pid) for pid in proc.stdout.split()]
    assert len(forked) == 2
    deadline = time.monotonic() + 60
    while any(os.path.exists(f"/proc/{pid}") for pid in forked) and time.monotonic() < deadline:
        time.sleep(0.1)  # their input ends with the command: they exit (init reaps them)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in forked)


# --- pipeline.runtime.preloaded ---------------------------------------------------------------


@pytest.fixture
def two_tokenizers(tmp_path):
    first = train_small(["the first tokenizer's text, the first"] * 20)
    second = train_small(["quite another corpus: zebra quartz zebra"] * 20, vocab_size=620)
    path = str(tmp_path / "tok")
    first.save(path)
    return path, first, second


def test_a_preloaded_tokenizer_is_taken_once_with_its_engine_built(two_tokenizers):
    path, first, _ = two_tokenizers
    loaded = bpe.Tokenizer.load(path)
    proof = proof_cache.proven(loaded)  # now cached, as the driver leaves it
    preloaded.load(path)
    tokenizer = preloaded.take(path, None, proof)
    assert tokenizer is not None and tokenizer.sha256 == loaded.sha256
    assert tokenizer._engine is not None  # built ahead, from the cached proof
    assert tokenizer.encode("the first tokenizer") == first.encode("the first tokenizer")
    assert preloaded.take(path, None, proof) is None  # once


def test_the_command_takes_the_tokenizer_it_read_ahead_once(two_tokenizers, monkeypatch):
    import argparse

    from pipeline.command_machinery import outputs, tokenizer_flags

    path, first, _ = two_tokenizers
    monkeypatch.chdir(os.path.dirname(path))
    typed = os.path.basename(path)
    preloaded.load(outputs.absolute(typed))  # as start_for reads it before it forks
    kept, _ = preloaded._kept[(path, None)]
    args = argparse.Namespace(tokenizer=outputs.absolute(typed), tokenizer_preset=None)  # as encode hands it on
    assert tokenizer_flags.load(args) is kept
    again = tokenizer_flags.load(args)
    assert again is not kept and again.encode("the first") == first.encode("the first")


def test_a_tokenizer_read_before_a_fork_gets_its_engine_in_each_copy(two_tokenizers):
    path, first, _ = two_tokenizers
    proof_cache.proven(bpe.Tokenizer.load(path))  # cached, as the driver leaves it
    preloaded.load(path, engine=False)  # as the command line reads it before it forks
    kept, built_from = preloaded._kept[(path, None)]
    assert built_from is None and kept._engine is None
    preloaded.build_engines()  # as each copy does
    kept, built_from = preloaded._kept[(path, None)]
    assert built_from is not None and kept._engine is not None
    taken = preloaded.take(path, None, built_from)
    assert taken is kept and taken.encode("the first") == first.encode("the first")


def test_a_preloaded_tokenizer_built_from_another_proof_is_not_taken(two_tokenizers):
    path, _, _ = two_tokenizers
    proof = proof_cache.proven(bpe.Tokenizer.load(path))
    preloaded.load(path)
    other = type(proof)(tokenizer_sha256=proof.tokenizer_sha256, engine="python", rejected=(), chain=())
    assert other != proof
    assert preloaded.take(path, None, other) is None
    assert preloaded.take(path, None, proof) is None  # the kept one went with the refusal


def test_an_unreadable_tokenizer_is_not_kept(tmp_path):
    preloaded.load(str(tmp_path / "missing"))
    assert preloaded.take(str(tmp_path / "missing"), None, None) is None


def test_a_tokenizer_file_changed_after_it_was_read_ahead_fails_the_step(two_tokenizers, tmp_path, monkeypatch):
    monkeypatch.setenv(proof_cache.CACHE_VARIABLE, str(tmp_path / "empty-cache"))  # no proof of the first
    path, _, second = two_tokenizers
    preloaded.load(path)  # the warm worker reads the first tokenizer...
    second.save(path)  # ...then the file changes before the driver proves it
    proof = proof_cache.proven(bpe.Tokenizer.load(path))
    fn = _EncodeBatchFn(path, proof, eos_token=None, append_eos=False)
    with pytest.raises(RuntimeError, match="changed while the job ran"):
        fn.setup()


def test_a_tokenizer_read_ahead_with_its_engine_is_not_mixed_with_the_new_file(two_tokenizers, tmp_path,
                                                                                monkeypatch):
    monkeypatch.setenv(proof_cache.CACHE_VARIABLE, str(tmp_path / "cache"))
    path, first, second = two_tokenizers
    proof_cache.proven(bpe.Tokenizer.load(path))  # the first one's proof is cached: its engine is built ahead
    preloaded.load(path)
    second.save(path)
    proof = proof_cache.proven(bpe.Tokenizer.load(path))
    fn = _EncodeBatchFn(path, proof, eos_token=None, append_eos=False)
    fn.setup()  # takes nothing: the kept engine is the first tokenizer's; the step reads the file
    text = b"quite another corpus, zebra"
    assert list(fn._engine.encode_array(text)) == second.encode(text.decode())
    assert second.encode(text.decode()) != first.encode(text.decode())


# --- pipeline.runtime.beam_import --------------------------------------------------------


def test_beam_is_imported_without_pandas_and_unused_connectors_which_import_afterwards():
    pytest.importorskip("pandas")
    code = (
        "import sys\n"
        "from pipeline.runtime import beam_import\n"
        "beam_import.import_beam()\n"
        "assert 'apache_beam' in sys.modules and 'pandas' not in sys.modules, sorted(sys.modules)[:5]\n"
        "assert 'pymongo' not in sys.modules and 'apache_beam.io.gcp.bigquery' not in sys.modules\n"
        "import pandas, pymongo, apache_beam as beam\n"
        "from apache_beam.io.gcp import bigquery\n"
        "assert hasattr(bigquery, 'ReadFromBigQuery') and hasattr(pymongo, 'MongoClient')\n"
        "assert pandas.DataFrame({'a': [1]}).shape == (1, 1)\n"
        "with beam.Pipeline() as p:\n"
        "    p | beam.Create([1, 2]) | beam.Map(lambda x: x)\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.parametrize("beam_first", [False, True], ids=["started", "forked from the command"])
def test_a_worker_process_does_not_import_pandas(beam_first):
    pytest.importorskip("pandas")
    code = (
        "import sys\n"
        + ("from pipeline.runtime import beam_import; beam_import.import_beam()\n" if beam_first else "")
        + "from pipeline.runtime import worker\n"
        "worker.settle()\n"
        "import pyarrow as pa\n"
        "pa.array(['an id', 'another'], type=pa.string())\n"  # where pyarrow would look for pandas
        "print('apache_beam' in sys.modules, 'pandas' in sys.modules and sys.modules['pandas'] is not None)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip() == "True False", proc.stderr[-2000:]


def test_the_command_line_forks_warm_workers_and_ends_the_ones_no_job_took(tmp_path, monkeypatch):
    missing = str(tmp_path / "missing-tokenizer")
    argv = ["beam-bpe", "encode", "--tokenizer", missing, "--input", missing, "--output", str(tmp_path / "out"),
            "--direct_num_workers=2"]
    # The command line's own process: the workers are copies of it, and it ends with os._exit.
    code = (
        "import json, os, sys\n"
        "from pipeline import cli\n"
        "from pipeline.runtime import warm_workers\n"
        "forked, real_fork, real_discard = [], warm_workers._fork, warm_workers.discard\n"
        "def fork():\n"
        "    process = real_fork()\n"
        "    forked.append(process.pid)\n"
        "    return process\n"
        "def discard():\n"
        "    real_discard()\n"
        "    alive = [pid for pid in forked if os.path.exists(f'/proc/{pid}')]\n"
        "    print(json.dumps({'forked': forked, 'alive': alive, 'parent': os.getpid()}), flush=True)\n"
        "warm_workers._fork, warm_workers.discard = fork, discard\n"
        f"sys.argv = {argv!r}\n"
        "cli.main()\n"
        "print('not reached')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "error:" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert len(report["forked"]) == 2 and report["parent"] not in report["forked"]
    assert report["alive"] == []
    assert "not reached" not in proc.stdout

    from pipeline import cli

    started = []
    monkeypatch.setattr(warm_workers, "start_for", lambda *args: started.append(args))
    # Called with its arguments (from Python, as the tests do), the command starts none.
    started.clear()
    assert cli.main(["encode", "--tokenizer", missing, "--input", missing, "--output", str(tmp_path / "out"),
                     "--direct_num_workers=2"]) == 2
    assert started == []


def test_the_command_and_its_forked_workers_collect_garbage_after_a_start_up_without_it(tmp_path):
    """Start-up runs with the collector off and freezes what it made (pipeline.cli); the
    command and each forked worker then run with the collector on, skipping those objects."""
    code = f"""
import gc, os, sys
from pipeline import cli
from pipeline.runtime import warm_workers, worker
real_exit = os._exit
real_discard = warm_workers.discard
def discard():  # each worker reports and exits by itself first
    for process in warm_workers._idle:
        process.wait()
    real_discard()
warm_workers.discard = discard
def state(who):  # one write each: the processes share the pipe
    os.write(1, f"{{who}} {{gc.isenabled()}} {{gc.get_freeze_count() > 10000}}\\n".encode())
def run_forked(job_input):
    state("worker")
    real_exit(0)
def exit_(code):
    state("command")
    real_exit(code)
worker.run_forked = run_forked
os._exit = exit_
sys.argv = ["beam-bpe", "encode", "--direct_num_workers=2", "--tokenizer", {str(tmp_path / "missing")!r},
            "--input", "x", "--output", {str(tmp_path / "out")!r}]
cli.main()
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr  # the missing tokenizer, after start-up
    assert sorted(result.stdout.splitlines()) == ["command True True", "worker True True", "worker True True"]
