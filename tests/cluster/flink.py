"""A Flink 1.19.3 session cluster: one JobManager host and N TaskManager hosts.

Every host has its own Flink configuration directory (``run/flink/<host>/conf``). The
settings beyond the defaults, each needed for a reason:

- heartbeats every 3 s, timeout 15 s: a killed TaskManager is noticed in about 5 s, not 50 s;
- restarts: fixed delay, 10 attempts 10 s apart, region failover. A restarting job first tries
  the dead TaskManager's slots until it is declared lost; the budget must outlast that and the
  time a replacement takes to register (`up` brings it back);
- network memory 512 MB per TaskManager: Beam's batch jobs deploy every task at once
  (PIPELINED), and Flink's default runs out of network buffers;
- blob cleanup every 60 s, and a restarted TaskManager starts with an empty temporary
  directory: the disk used by jobs and by killed TaskManagers stays bounded;
- one slot per TaskManager, so a job at parallelism N runs on every host;
- the JVMs compile with C1 only (``install.JIT_OPTIONS`` says why).
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import urllib.request

from tests.cluster import daemons, network
from tests.cluster.install import JAVA_HOME, JIT_OPTIONS
from tests.cluster.state import StateDir

REST_PORT = 8081
SLOTS = 1
_START_SECONDS = 120


def host_names(taskmanagers: int) -> list[str]:
    return ["jm", *(f"tm{i}" for i in range(1, taskmanagers + 1))]


def rest_url(hosts: list[network.Host]) -> str:
    return f"http://{hosts[0].address}:{REST_PORT}"


def rest(url: str, path: str, method: str = "GET") -> dict:
    """A call to Flink's REST API; the JSON it answers."""
    request = urllib.request.Request(url + path, method=method)
    with urllib.request.urlopen(request, timeout=5) as answer:
        body = answer.read()
    return json.loads(body) if body else {}


def _java_options(flink_home: pathlib.Path) -> str:
    """The --add-opens list the shipped config.yaml gives Java 17 (Flink needs it)."""
    shipped = (flink_home / "conf" / "config.yaml").read_text()
    return re.search(r"^\s*all:\s*(--add-exports.*)$", shipped, re.M).group(1)


def configure(state: StateDir, hosts: list[network.Host]) -> None:
    """Writes each host's Flink configuration directory and the JVMs' hosts file."""
    home = state.engine_home("flink")
    run = state.run("flink")
    network.write_hosts_file(run / "hosts", "flink", hosts)
    jm = hosts[0]
    for host in hosts:
        directory = state.host_dir("flink", host.name)
        conf, tmp = directory / "conf", directory / "tmp"
        conf.mkdir(exist_ok=True)
        tmp.mkdir(exist_ok=True)
        for shipped in [*home.joinpath("conf").glob("log4j*.properties"), *home.joinpath("conf").glob("logback*.xml")]:
            shutil.copy(shipped, conf)
        # Flat keys: the start scripts read some of them (env.java.home) with sed.
        settings = {
            "env.java.home": JAVA_HOME,
            "env.java.opts.all": f"{_java_options(home)} -Djdk.net.hosts.file={run / 'hosts'} "
                                 f"-Djava.io.tmpdir={tmp} {' '.join(JIT_OPTIONS)}",
            "env.log.dir": str(directory),
            "env.pid.dir": str(directory),
            "io.tmp.dirs": str(tmp),
            "jobmanager.rpc.address": jm.address,
            "jobmanager.rpc.port": 6123,
            "rest.address": jm.address,
            "rest.port": REST_PORT,
            "taskmanager.numberOfTaskSlots": SLOTS,
            "parallelism.default": 1,
            "heartbeat.interval": 3000,
            "heartbeat.timeout": 15000,
            "blob.service.cleanup.interval": 60,
        }
        if host is jm:
            settings.update({
                "jobmanager.bind-host": "0.0.0.0",
                "rest.bind-address": "0.0.0.0",
                "blob.server.port": 6124,
                "jobmanager.memory.process.size": "1g",
                "jobmanager.execution.failover-strategy": "region",
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": 10,
                "restart-strategy.fixed-delay.delay": "10 s",
            })
        else:
            settings.update({
                "taskmanager.host": host.address,
                "taskmanager.bind-host": "0.0.0.0",
                # Any free port: a TaskManager started again after a kill must not take its dead
                # predecessor's RPC address, which the JobManager still holds (Pekko then keeps
                # the new one's connection read-only and it never registers).
                "taskmanager.rpc.port": 0,
                "taskmanager.data.port": 6121,
                "taskmanager.memory.process.size": "2g",
                "taskmanager.memory.network.min": "512m",
                "taskmanager.memory.network.max": "512m",
            })
        (conf / "config.yaml").write_text("".join(f"{key}: {value}\n" for key, value in settings.items()))


def _start(state: StateDir, host: network.Host, script: str) -> int:
    home = state.engine_home("flink")
    directory = state.host_dir("flink", host.name)
    env = {"PATH": "/usr/bin:/bin", "FLINK_CONF_DIR": str(directory / "conf"), "JAVA_HOME": JAVA_HOME}
    # start-foreground execs the JVM: the PID is the JobManager's or TaskManager's own.
    return daemons.start(host.name, ["env", *(f"{k}={v}" for k, v in env.items()), str(home / "bin" / script),
                                     "start-foreground"], directory, netns=host.netns)


def _answers(url: str) -> bool:
    try:
        rest(url, "/overview")
    except OSError:
        return False
    return True


def _taskmanager_ids(url: str) -> set[str]:
    try:
        return {tm["id"] for tm in rest(url, "/taskmanagers")["taskmanagers"]}
    except OSError:
        return set()


def start_missing(state: StateDir, hosts: list[network.Host]) -> None:
    """Starts the JobManager and every TaskManager that is not running, and waits until each
    one started is up (the JobManager answers, the TaskManager has registered)."""
    jm, url = hosts[0], rest_url(hosts)
    if daemons.pid(jm.name, state.host_dir("flink", jm.name)) is None:
        started = _start(state, jm, "jobmanager.sh")
        directory = state.host_dir("flink", jm.name)
        daemons.wait_until(lambda: _answers(url), "Flink's JobManager", _START_SECONDS,
                           alive=lambda: daemons.pid(jm.name, directory) == started, log=directory / "jm.log")
    before = _taskmanager_ids(url)
    restarted = []
    for tm in hosts[1:]:
        directory = state.host_dir("flink", tm.name)
        if daemons.pid(tm.name, directory) is None:
            # What a dead TaskManager left in its temporary directory (blobs, spilled data) is
            # never cleaned by Flink: the new one starts empty.
            shutil.rmtree(directory / "tmp", ignore_errors=True)
            (directory / "tmp").mkdir()
            _start(state, tm, "taskmanager.sh")
            restarted.append(tm)
    if restarted:
        def registered():
            # Each new TaskManager appears with a new ID (a dead one lingers until it times out).
            new = _taskmanager_ids(url) - before
            return len(new) >= len(restarted) and all(
                any(tm_id.startswith(f"{tm.address}:") for tm_id in new) for tm in restarted)
        daemons.wait_until(registered, f"TaskManagers {[tm.name for tm in restarted]} to register",
                           _START_SECONDS, log=state.host_dir("flink", restarted[0].name) / f"{restarted[0].name}.log")


def running_jobs(url: str) -> list[str]:
    """The IDs of the jobs that are not in a terminal state."""
    terminal = {"FINISHED", "FAILED", "CANCELED", "SUSPENDED"}
    return [job["id"] for job in rest(url, "/jobs")["jobs"] if job["status"] not in terminal]
