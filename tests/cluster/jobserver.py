"""Beam's job server for the engine, in the root namespace, and how it starts.

The Flink job server submits each job to the JobManager's REST port. Beam's Flink runner
stages, with every job, the jars a classpath scan of the job server finds (ClassGraph over
its class loader's URLs and java.class.path): 157 MB, uploaded to Flink's blob server in
12-16 s per job and kept by every TaskManager. So it starts through a launcher
(jobserver/BeamJobServerLauncher.java): the JVM's system class loader, which loads the job
server's jars itself but shows no URLs, so the scan finds only the 2 KB launcher jar; Beam's
classes are in the cluster's own lib/ instead (install.beam_jars_into_flink). It must be the
system class loader, not one made in main: Flink's REST client deserializes a failed job's
exception with the system class loader, and the real cause would be lost.

Flink's REST client, in the job server, polls for a job's result with waits doubling up to 2 s,
fixed in its code, so a job's end reached the command up to 2 s late. The launcher finds one
class first on the Flink job server's classpath, jobserver/flink/ExponentialWaitStrategy.java,
whose waits stop doubling at 100 ms and then grow to a twentieth of the time waited so far
(install.result_polling).

The Spark job server is the Spark driver: executors connect back to it on the bridge. Beam's
Spark runner makes the same scan and would ship its finds (some 400 jars, 420 MB) with every
application, for each executor to copy: it starts through the same launcher, and the executors
find Beam's jars on their own classpath (``spark.executor.extraClassPath``, the same directory
on every host here; on a real cluster, a directory each worker host has).
"""

from __future__ import annotations

import pathlib

from tests.cluster import daemons, install, network
from tests.cluster.install import JAVA_HOME, JIT_OPTIONS
from tests.cluster.state import StateDir

# The job service's port (Flink's: Beam's default, as configs/flink.yaml says); artifacts on the port below.
JOB_PORTS = {"flink": 8099, "spark": 8199}
_START_SECONDS = 90
_NAME = "jobserver"

# What Spark's launcher gives Java 17 (spark-class adds none when started as a plain JVM).
_SPARK_JAVA17 = [f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
    "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util",
    "java.util.concurrent", "java.util.concurrent.atomic", "sun.nio.ch", "sun.nio.cs", "sun.security.action",
    "sun.util.calendar")] + ["-Djdk.reflect.useDirectMethodHandle=false"]


def endpoint(engine: str) -> str:
    return f"localhost:{JOB_PORTS[engine]}"


def _flink_command(state: StateDir, hosts: list[network.Host], lib: pathlib.Path, launcher: pathlib.Path) -> list[str]:
    return [
        "-Djava.system.class.loader=BeamJobServerLauncher",
        f"-Dbeam.launcher.classpath={install.result_polling(state, lib)}:{lib}/*",
        "-cp", str(launcher), "BeamJobServerLauncher",
        f"--flink-master={hosts[0].address}:8081",
    ]


def _spark_command(state: StateDir, hosts: list[network.Host], lib: pathlib.Path, launcher: pathlib.Path) -> list[str]:
    hosts_file = state.run("spark") / "hosts"
    gateway = network.gateway("spark")
    return [
        *_SPARK_JAVA17,
        f"-Dspark.driver.host={gateway}", f"-Dspark.driver.bindAddress={gateway}",
        f"-Dspark.executor.extraJavaOptions=-Djdk.net.hosts.file={hosts_file}",
        f"-Dspark.executor.extraClassPath={lib}/*",
        "-Dspark.executor.memory=2g",
        "-Djava.system.class.loader=BeamJobServerLauncher",
        f"-Dbeam.launcher.classpath={lib}/*:{state.engine_home('spark')}/jars/*",
        "-Dbeam.launcher.main=org.apache.beam.runners.spark.SparkJobServerDriver",
        "-cp", str(launcher), "BeamJobServerLauncher",
        f"--spark-master-url=spark://{hosts[0].address}:7077",
    ]


def start_if_missing(state: StateDir, engine: str, hosts: list[network.Host], lib: pathlib.Path,
                     launcher: pathlib.Path) -> None:
    """Starts the job server unless it runs, and waits until it listens.

    Args:
      state: the state directory.
      engine: "flink" or "spark".
      hosts: the cluster's hosts, the master first.
      lib: the job server's jars (install.jobserver_jars).
      launcher: the launcher jar.
    """
    directory = state.host_dir(engine, "js")
    port = JOB_PORTS[engine]
    if daemons.pid(_NAME, directory) is not None:
        if network.listening("127.0.0.1", port):
            return
        daemons.stop(_NAME, directory)  # started with other settings (an older recipe): start it again
    artifacts = state.shared / f"artifacts-{engine}"  # the SDK workers read them: shared storage
    artifacts.mkdir(parents=True, exist_ok=True)
    command = (_flink_command if engine == "flink" else _spark_command)(state, hosts, lib, launcher)
    started = daemons.start(_NAME, [
        f"{JAVA_HOME}/bin/java", f"-Djdk.net.hosts.file={state.run(engine) / 'hosts'}", f"-Djava.io.tmpdir={directory}", *JIT_OPTIONS,
        "-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
        *command, f"--job-port={port}", f"--artifact-port={port - 1}", "--expansion-port=0",
        f"--artifacts-dir={artifacts}",
    ], directory)
    daemons.wait_until(lambda: network.listening("127.0.0.1", port), f"the {engine} job server", _START_SECONDS,
                       alive=lambda: daemons.pid(_NAME, directory) == started, log=directory / f"{_NAME}.log")


def stop(state: StateDir, engine: str) -> None:
    daemons.stop(_NAME, state.host_dir(engine, "js"))
