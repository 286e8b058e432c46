"""beam-bpe on a Flink cluster of three hosts (a JobManager and two TaskManagers, each in its own
network namespace) gives what DirectRunner gives, byte for byte, and loses nothing to a failure.

- train, encode, pack and report: the same files, byte for byte;
- Ctrl-C cancels the job on the cluster (Flink's REST API shows nothing left running);
- a TaskManager killed in the middle of an encode or a train: the job recovers (the cluster's
  restart strategy) and the result is complete, every document once;
- a job that fails (its JobManager killed) leaves nothing marked complete, and a rerun into the
  same --output completes identically.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import signal
import subprocess
import time
import uuid

import pyarrow.parquet as pq
import pytest

from tests.cluster import daemons, install
from tests.cluster import flink as flink_hosts
from tests.cluster.fixtures import BEAM_BPE, MARKS, STATE_DIR, beam_bpe, cluster
from tests.cluster.outputs import same_files, same_training, write_corpus
from tests.cluster.state import StateDir

pytestmark = MARKS

VOCAB = "600"
COPIES = 24  # the fault tests' corpus: the small one this many times, ~80 MB, long enough to kill a host in


@pytest.fixture(scope="module")
def work(flink_cluster):
    """A directory on the cluster's shared storage with the inputs and DirectRunner's outputs."""
    root = pathlib.Path(flink_cluster["shared_dir"]) / f"test-{uuid.uuid4().hex[:8]}"
    small = write_corpus(root / "small", 1)
    big = write_corpus(root / "big", COPIES)
    direct = {
        "tok": ["train", "--input", f"{small}/*.jsonl", "--vocab-size", VOCAB],
        "enc": ["encode", "--tokenizer", str(root / "direct-tok"), "--input", f"{small}/*.jsonl"],
        "big": ["encode", "--tokenizer", str(root / "direct-tok"), "--input", f"{big}/*.jsonl"],
        "bigtok": ["train", "--input", f"{big}/*.jsonl", "--vocab-size", VOCAB],
    }
    for name, argv in direct.items():
        code, err = beam_bpe(*argv, "--output", str(root / f"direct-{name}"))
        assert code == 0, err
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_train_on_flink_gives_directrunners_tokenizer_and_word_counts(flink, work):
    out = work / "flink-tok"
    code, err = beam_bpe("train", "--input", f"{work}/small/*.jsonl", "--vocab-size", VOCAB, "--output", str(out),
                         *flink["beam_args"])
    assert code == 0, err
    same_training(out, work / "direct-tok")
    assert json.loads((out / "train_stats.json").read_text())["runner"] == "PortableRunner"


def _sdk_workers_started() -> tuple[int, int]:
    """How many SDK workers the TaskManagers' pools have started so far (their logs say each),
    and how many of them as copies of the pool's ready template (pipeline.runtime.worker_pool)."""
    state = StateDir.at(STATE_DIR)
    logs = [(state.host_dir("flink", f"tm{index}") / "sdk-pool.log").read_text(errors="replace") for index in (1, 2)]
    started = sum(log.count("Starting worker") for log in logs)
    return started, sum(log.count("a copy of the ready template") for log in logs)


def test_encode_on_flink_gives_directrunners_shards_and_stats(flink, work):
    out = work / "flink-enc"
    started, ready = _sdk_workers_started()
    code, err = beam_bpe("encode", "--tokenizer", str(work / "direct-tok"), "--input", f"{work}/small/*.jsonl",
                         "--output", str(out), "--progress-every", "0.1", *flink["beam_args"])
    assert code == 0, err
    same_files(out, work / "direct-enc")
    # The progress lines come from the job's metrics, as the cluster reports them.
    assert "encode done: 120 documents" in err
    # One SDK worker per TaskManager served every stage of the job (PORTABLE_DEFAULTS in
    # pipeline.command_machinery.runners) instead of a new Python process per stage, each one a
    # copy of its pool's template, its imports done.
    assert _sdk_workers_started() == (started + 2, ready + 2)
    # One pipelined region: no exchange waits for the one before it to end, so Flink deploys the
    # whole job at its start instead of the reading steps only after the planning step is done
    # (transforms.read: the dead letters leave from one step).
    jid = max(_jobs(flink).values(), key=lambda job: job["start-time"])["jid"]
    assert _blocking_exchanges(flink, jid) == []


def _blocking_exchanges(flink: dict, jid: str) -> list[str]:
    """The steps of a job's Flink plan that read an input through a blocking exchange."""
    nodes = flink_hosts.rest(flink["rest"], f"/jobs/{jid}/plan")["plan"]["nodes"]
    return [node["description"] for node in nodes
            if any(edge.get("exchange") != "pipelined" for edge in node.get("inputs", []))]


def test_pack_on_flink_gives_directrunners_sequences_in_order(flink, work):
    outputs = {}
    for runner, flags in (("direct", []), ("flink", flink["beam_args"])):
        outputs[runner] = work / f"{runner}-pack"
        code, err = beam_bpe("pack", "--input", str(work / "direct-enc"), "--seq-len", "512", "--seed", "3",
                             "--validation-fraction", "0.1", "--output", str(outputs[runner]), *flags)
        assert code == 0, err
    same_files(outputs["flink"], outputs["direct"])
    assert list((outputs["flink"] / "train").glob("*.parquet")) and list((outputs["flink"] / "validation").glob("*"))


def test_report_on_flink_gives_directrunners_numbers(flink, work):
    outputs = {}
    for runner, flags in (("direct", []), ("flink", flink["beam_args"])):
        outputs[runner] = work / f"{runner}-report"
        code, err = beam_bpe("report", "--tokenizer", str(work / "direct-tok"), "--input", f"{work}/small/*.jsonl",
                             "--output", str(outputs[runner]), *flags)
        assert code == 0, err
    assert (outputs["flink"] / "report.json").read_bytes() == (outputs["direct"] / "report.json").read_bytes()


def _jobs(flink: dict) -> dict[str, dict]:
    return {job["jid"]: job for job in flink_hosts.rest(flink["rest"], "/jobs/overview")["jobs"]}


def _start_and_wait_until_running(flink: dict, argv: list[str]) -> tuple[subprocess.Popen, str]:
    """Starts a beam-bpe command and waits until its Flink job is RUNNING; (process, Flink job ID)."""
    before = set(_jobs(flink))
    process = subprocess.Popen([BEAM_BPE, *argv, *flink["beam_args"]], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        running = [jid for jid, job in _jobs(flink).items() if jid not in before and job["state"] == "RUNNING"]
        if running:
            return process, running[0]
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.2)
    process.kill()
    raise AssertionError("the job did not start running on Flink within 120 s")


def test_ctrl_c_cancels_the_job_on_flink(flink, work):
    out = work / "flink-interrupted"
    process, jid = _start_and_wait_until_running(
        flink, ["encode", "--tokenizer", str(work / "direct-tok"), "--input", f"{work}/big/*.jsonl", "--output", str(out)])
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "stopped by SIGINT, and the job was cancelled" in err
    assert _jobs(flink)[jid]["state"] == "CANCELED"
    assert flink_hosts.running_jobs(flink["rest"]) == []
    assert not (out / "stats.json").exists() and not list(out.glob("part-*"))


def _kill_a_taskmanager_during(flink: dict, argv: list[str]) -> tuple[int, str, str]:
    """Runs the command, kills TaskManager 2 once its job runs, brings it back (`up`);
    (exit code, stderr, Flink job ID)."""
    process, jid = _start_and_wait_until_running(flink, argv)
    time.sleep(0.3)  # early: the count job of the fault corpus lasts under 2 s on this cluster
    cluster("kill-taskmanager", "--index", "2")
    cluster("up", "--engine", "flink", "--taskmanagers", "2")
    _, err = process.communicate(timeout=600)
    return process.returncode, err, jid


def _failovers(flink: dict, jid: str) -> int:
    return len(flink_hosts.rest(flink["rest"], f"/jobs/{jid}/exceptions")["exceptionHistory"]["entries"])


def test_a_taskmanager_killed_mid_encode_loses_and_repeats_nothing(flink, work):
    out = work / "flink-enc-killed"
    code, err, jid = _kill_a_taskmanager_during(flink, [
        "encode", "--tokenizer", str(work / "direct-tok"), "--input", f"{work}/big/*.jsonl", "--output", str(out)])
    assert code == 0, err
    assert _failovers(flink, jid) >= 1, "the kill did not hit the job"
    same_files(out, work / "direct-big")
    ids = pq.read_table(sorted(out.glob("part-*.parquet")), columns=["id"]).column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 120 * COPIES


def test_a_taskmanager_killed_mid_train_loses_and_repeats_nothing(flink, work):
    out = work / "flink-tok-killed"
    code, err, jid = _kill_a_taskmanager_during(flink, [
        "train", "--input", f"{work}/big/*.jsonl", "--vocab-size", VOCAB, "--output", str(out)])
    assert code == 0, err
    assert _failovers(flink, jid) >= 1, "the kill did not hit the job"
    same_training(out, work / "direct-bigtok")
    assert json.loads((out / "train_stats.json").read_text())["documents"] == 120 * COPIES


@pytest.mark.parametrize("command", ["encode", "train"])
def test_a_failed_job_leaves_nothing_complete_and_a_rerun_completes(flink, work, command):
    out = work / f"flink-{command}-failed"
    argv = {
        "encode": ["encode", "--tokenizer", str(work / "direct-tok"), "--input", f"{work}/big/*.jsonl"],
        "train": ["train", "--input", f"{work}/big/*.jsonl", "--vocab-size", VOCAB],
    }[command] + ["--output", str(out)]
    process, _ = _start_and_wait_until_running(flink, argv)
    time.sleep(0.3)  # early: the count job of the fault corpus lasts under 2 s on this cluster
    # The JobManager's machine fails: without a standby JobManager the job is lost.
    state = StateDir.at(STATE_DIR)
    assert daemons.kill("jm", state.host_dir("flink", "jm")) is not None
    _, err = process.communicate(timeout=300)
    assert process.returncode == 1, err
    assert f"beam-bpe {command}: error: the job failed on the cluster: " in err and "Traceback" not in err, err
    complete = {"encode": "stats.json", "train": "tokenizer.json"}[command]
    assert not (out / complete).exists() and not list(out.glob("part-*"))
    flink = cluster("up", "--engine", "flink", "--taskmanagers", "2")
    code, err = beam_bpe(*argv, *flink["beam_args"])
    assert code == 0, err
    if command == "encode":
        same_files(out, work / "direct-big")
    else:
        same_training(out, work / "direct-bigtok")


def test_the_flink_preset_works_as_shipped(flink, work):
    """configs/flink.yaml as shipped: the job server at localhost:8099, worker pools at
    localhost:50000 on each TaskManager host."""
    out = work / "flink-preset"
    code, err = beam_bpe("train", "--config", "flink", "--input", f"{work}/small/*.jsonl", "--vocab-size", VOCAB,
                         "--output", str(out))
    assert code == 0, err
    same_training(out, work / "direct-tok")


_POLL_CHECK = """
public class PollCheck {
  public static void main(String[] args) throws Exception {
    Class<?> strategy = Class.forName("org.apache.flink.client.program.rest.retry.ExponentialWaitStrategy",
                                      true, ClassLoader.getSystemClassLoader());
    Object waits = strategy.getConstructor(long.class, long.class).newInstance(10L, 2000L);
    StringBuilder out = new StringBuilder();
    for (long attempt = 0; attempt < 200; attempt++) {
      out.append(strategy.getMethod("sleepTime", long.class).invoke(waits, attempt)).append(' ');
    }
    System.out.println(out.toString().trim());
  }
}
"""


def test_the_job_server_sees_a_jobs_end_within_100_ms_or_5_percent_of_its_time(flink, tmp_path):
    """Flink's REST client in the job server waits up to 2 s between polls for a job's result
    (10, 20, 40 ms... 2 s); the running job server's own classpath, through its launcher, gives it
    waits that double to 100 ms and then grow with the time waited, a twentieth of it."""
    pid = StateDir.at(STATE_DIR).host_dir("flink", "js").joinpath("jobserver.pid").read_text().split()[0]
    argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    launcher_flags = [arg for arg in argv if arg.startswith(("-Djava.system.class.loader=", "-Dbeam.launcher.classpath="))]
    launcher_jar = argv[argv.index("-cp") + 1]
    source = tmp_path / "PollCheck.java"
    source.write_text(_POLL_CHECK)
    done = subprocess.run([argv[0], *launcher_flags, "-cp", launcher_jar, str(source)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    waits = [int(wait) for wait in done.stdout.split()]
    assert waits[:6] == [10, 20, 40, 80, 100, 100]  # Flink's own: 10 20 40 80 160 320
    assert min(waits[4:]) >= 100  # never more than ten polls a second
    waited = 0
    for wait in waits:
        assert 10 <= wait <= min(2000, max(100, waited // 20)), (wait, waited)
        waited += wait
    assert waits[-1] == 2000 and sum(waits[:37]) >= 4000  # a job of 4 s is asked about 37 times at most


def test_the_clusters_jvms_compile_with_c1_only(flink):
    """The JobManager, the TaskManagers and the job server run with ``install.JIT_OPTIONS``: the
    optimizing compiler's work in every job came out of the SDK workers' cores."""
    state = StateDir.at(STATE_DIR)
    jvms = {name: daemons.pid(name, state.host_dir("flink", name)) for name in ("jm", "tm1", "tm2")}
    jvms["jobserver"] = daemons.pid("jobserver", state.host_dir("flink", "js"))
    for name, pid in jvms.items():
        assert pid is not None, f"{name} is not running"
        argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        assert argv[0].endswith("/java"), (name, argv[:3])
        assert set(install.JIT_OPTIONS) <= set(argv), (name, [arg for arg in argv if arg.startswith("-XX")])
