"""The local cluster's command line: up, kill-taskmanager, down.

    python -m tests.cluster up --engine flink|spark --taskmanagers N --state-dir DIR
    python -m tests.cluster kill-taskmanager --state-dir DIR --index N [--engine flink|spark]
    python -m tests.cluster down --state-dir DIR [--engine flink|spark]

`up` installs what is missing, then starts whatever of the cluster is not running: on a
cluster that is up it only brings back the workers that are down. Its last line on stdout is
one JSON object: "beam_args" (the flags to add to a beam-bpe command), "shared_dir" (a
directory every host reads and writes) and "rest" (the master's web address). Everything
else goes to stderr. `down` stops every process `up` started, by PID, and removes the
namespaces and links. Each command holds DIR's lock, so two never interleave.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import sys

from tests.cluster import daemons, flink, install, jobserver, network, sdk_pools, spark
from tests.cluster.state import ENGINES, StateDir

_TOOLS = {"ip": "iproute2", "mvn": "maven", f"{install.JAVA_HOME}/bin/javac": "openjdk-17-jdk-headless"}


def _say(message: str) -> None:
    print(f"tests.cluster: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _locked(state: StateDir):
    with open(state.lock, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _check_machine() -> None:
    if os.geteuid() != 0:
        raise SystemExit("tests.cluster: needs root (it makes network namespaces)")
    missing = [package for tool, package in _TOOLS.items() if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"tests.cluster: needs the Debian packages {' '.join(missing)}")


def _hosts(engine: str, taskmanagers: int) -> list[network.Host]:
    names = flink.host_names(taskmanagers) if engine == "flink" else spark.host_names(taskmanagers)
    return network.hosts(engine, names)


def _beam_args(engine: str, taskmanagers: int, hosts: list[network.Host]) -> list[str]:
    args = [
        "--runner=PortableRunner", f"--job_endpoint={jobserver.endpoint(engine)}",
        "--environment_type=EXTERNAL", f"--environment_config=localhost:{sdk_pools.PORT}",
    ]
    if engine == "flink":
        # --flink_master: Beam's Flink job server does not cancel the job on the cluster when asked
        # to; beam-bpe then cancels it through Flink's REST API (pipeline/command_machinery/job_service.py).
        args += [f"--parallelism={taskmanagers * flink.SLOTS}", f"--flink_master={flink.rest_url(hosts)}"]
    return args


def up(state: StateDir, engine: str, taskmanagers: int) -> dict:
    """Installs, starts what is not running, and returns the cluster's description."""
    described = state.description(engine)
    if described and described["taskmanagers"] != taskmanagers:
        raise SystemExit(f"tests.cluster: {state.root} runs {engine} with {described['taskmanagers']} "
                         f"taskmanagers; `down` it first")
    hosts = _hosts(engine, taskmanagers)
    _say(f"installing what {engine} needs (once)")
    lib = install.jobserver_jars(state, engine)
    if engine == "flink":
        home = install.flink(state)
        install.beam_jars_into_flink(home, lib)
    else:
        install.spark(state)
    launcher = install.launcher(state)
    state.shared.mkdir(parents=True, exist_ok=True)
    network.up(engine, hosts)
    _say(f"starting what is not running of {engine} in {state.root}")
    if engine == "flink":
        flink.configure(state, hosts)
        flink.start_missing(state, hosts)
        rest = flink.rest_url(hosts)
    else:
        spark.configure(state, hosts)
        spark.start_missing(state, hosts)
        rest = spark.ui_url(hosts)
    jobserver.start_if_missing(state, engine, hosts, lib, launcher)
    sdk_pools.start_missing(state, engine, hosts[1:])
    description = {
        "engine": engine, "taskmanagers": taskmanagers, "beam_args": _beam_args(engine, taskmanagers, hosts),
        "shared_dir": str(state.shared), "rest": rest,
    }
    state.description_file(engine).write_text(json.dumps(description) + "\n")
    return description


def kill_taskmanager(state: StateDir, index: int, engine: str | None) -> None:
    """SIGKILLs the JVM of worker host ``index`` (1-based), as a failing machine would end."""
    engines = [engine] if engine else state.engines_up()
    if len(engines) != 1:
        raise SystemExit(f"tests.cluster: say which engine (--engine): up in {state.root}: {engines}")
    engine = engines[0]
    described = state.description(engine)
    if described is None or not 1 <= index <= described["taskmanagers"]:
        raise SystemExit(f"tests.cluster: no worker {index} of {engine} in {state.root}")
    host = _hosts(engine, described["taskmanagers"])[index]
    killed = daemons.kill(host.name, state.host_dir(engine, host.name))
    _say(f"{engine} worker {host.name}: " + (f"killed PID {killed}" if killed else "was not running"))


def down(state: StateDir, engines: list[str]) -> None:
    """Stops everything `up` started in ``state`` for ``engines``, and removes their namespaces
    and links."""
    for engine in engines:
        described = state.description(engine)
        run = state.root / "run" / engine
        if described is None and not run.is_dir():
            continue
        # Without a description (an `up` that failed half-way): as many workers as have a directory.
        workers = len(list(run.glob("tm*")) + list(run.glob("worker*")))
        taskmanagers = described["taskmanagers"] if described else max(workers, 1)
        hosts = _hosts(engine, taskmanagers)
        sdk_pools.stop(state, engine, hosts[1:])
        jobserver.stop(state, engine)
        for host in reversed(hosts):  # the workers before their master
            daemons.stop(host.name, state.host_dir(engine, host.name))
        for host in hosts:
            # What a killed daemon left behind (a Spark executor outlives its killed worker):
            # anything in the cluster's own namespaces is the cluster's.
            for orphan in network.processes_in(host.netns):
                _say(f"{engine}: stopping PID {orphan}, left in {host.netns}")
                daemons.kill_pid(orphan)
        network.down(engine, hosts)
        state.description_file(engine).unlink(missing_ok=True)
        _say(f"{engine} is down")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="install what is missing and start what is not running")
    start.add_argument("--engine", choices=ENGINES, required=True)
    start.add_argument("--taskmanagers", type=int, default=2, help="worker hosts (default: 2)")
    start.add_argument("--state-dir", required=True)
    kill = commands.add_parser("kill-taskmanager", help="SIGKILL one worker host's JVM")
    kill.add_argument("--state-dir", required=True)
    kill.add_argument("--index", type=int, required=True, help="1 for the first worker host")
    kill.add_argument("--engine", choices=ENGINES)
    stop = commands.add_parser("down", help="stop everything and remove the namespaces")
    stop.add_argument("--state-dir", required=True)
    stop.add_argument("--engine", choices=ENGINES, help="only this engine's cluster (default: both)")
    args = parser.parse_args(argv)
    _check_machine()
    state = StateDir.at(args.state_dir)
    with _locked(state):
        if args.command == "up":
            if args.taskmanagers < 1:
                parser.error("--taskmanagers must be at least 1")
            print(json.dumps(up(state, args.engine, args.taskmanagers)), flush=True)
        elif args.command == "kill-taskmanager":
            kill_taskmanager(state, args.index, args.engine)
        else:
            down(state, [args.engine] if args.engine else list(ENGINES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
