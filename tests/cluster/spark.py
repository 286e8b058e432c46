"""A Spark 3.5.0 standalone cluster: one master host and N worker hosts.

Each worker offers 2 cores and 4 GB. An application ships only the job server's launcher jar
(``jobserver.py``: Beam's jars are on the executors' classpath instead of copied into each
application's work directory); the worker still removes the directories of finished
applications a minute or two after they end (``spark.worker.cleanup.*``), and a worker starts
with an empty one, so the disk stays bounded over any number of jobs.
"""

from __future__ import annotations

import shutil

from tests.cluster import daemons, network
from tests.cluster.install import JAVA_HOME
from tests.cluster.state import StateDir

MASTER_PORT = 7077
UI_PORT = 8080
_START_SECONDS = 90
_WORKER_CLEANUP = ("-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.interval=60 "
                   "-Dspark.worker.cleanup.appDataTtl=60")


def host_names(workers: int) -> list[str]:
    return ["master", *(f"worker{i}" for i in range(1, workers + 1))]


def ui_url(hosts: list[network.Host]) -> str:
    return f"http://{hosts[0].address}:{UI_PORT}"


def configure(state: StateDir, hosts: list[network.Host]) -> None:
    """Writes the JVMs' hosts file (Spark takes the rest as command-line flags)."""
    network.write_hosts_file(state.run("spark") / "hosts", "spark", hosts)


def _start(state: StateDir, host: network.Host, java_options: str, arguments: list[str]) -> int:
    home = state.engine_home("spark")
    directory = state.host_dir("spark", host.name)
    env = {
        "PATH": "/usr/bin:/bin", "JAVA_HOME": JAVA_HOME, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": host.address,
        "SPARK_DAEMON_JAVA_OPTS": f"-Djdk.net.hosts.file={state.run('spark') / 'hosts'} -Djava.io.tmpdir={directory} "
                                  + java_options,
        "SPARK_WORKER_DIR": str(directory / "work"),
    }
    # spark-class execs the JVM: the PID is the master's or worker's own.
    return daemons.start(host.name, ["env", *(f"{k}={v}" for k, v in env.items()), str(home / "bin" / "spark-class"),
                                     *arguments], directory, netns=host.netns)


def _alive_workers(hosts: list[network.Host]) -> set[str]:
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"{ui_url(hosts)}/json/", timeout=5) as answer:
            workers = json.load(answer)["workers"]
    except OSError:
        return set()
    return {worker["host"] for worker in workers if worker["state"] == "ALIVE"}


def start_missing(state: StateDir, hosts: list[network.Host]) -> None:
    """Starts the master and every worker that is not running; waits until each is up."""
    master = hosts[0]
    directory = state.host_dir("spark", master.name)
    if daemons.pid(master.name, directory) is None:
        started = _start(state, master, "", ["org.apache.spark.deploy.master.Master", "--host", master.address,
                                             "--port", str(MASTER_PORT), "--webui-port", str(UI_PORT)])
        daemons.wait_until(lambda: network.listening(master.address, UI_PORT), "Spark's master", _START_SECONDS,
                           alive=lambda: daemons.pid(master.name, directory) == started,
                           log=directory / f"{master.name}.log")
    for worker in hosts[1:]:
        directory = state.host_dir("spark", worker.name)
        if daemons.pid(worker.name, directory) is None:
            # Application directories a stopped or killed worker left are nobody's now.
            shutil.rmtree(directory / "work", ignore_errors=True)
            (directory / "work").mkdir()
            _start(state, worker, _WORKER_CLEANUP, [
                "org.apache.spark.deploy.worker.Worker", "--host", worker.address, "--cores", "2", "--memory", "4g",
                "--webui-port", "8082", f"spark://{master.address}:{MASTER_PORT}"])
    daemons.wait_until(lambda: {w.address for w in hosts[1:]} <= _alive_workers(hosts), "Spark's workers to register",
                       _START_SECONDS, log=state.host_dir("spark", hosts[1].name) / f"{hosts[1].name}.log")
