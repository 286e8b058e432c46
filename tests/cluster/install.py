"""Installs what a cluster needs and the machine lacks, from package registries only.

    flink(state)           Flink 1.19.3: apache-flink + apache-flink-libraries from PyPI
    spark(state)           Spark 3.5.0: pyspark from PyPI
    jobserver_jars(state)  Beam's job server for the engine: its Maven project (jobserver/ENGINE/pom.xml)
    launcher(state)        jobserver/BeamJobServerLauncher.java, compiled
    result_polling(state, lib)  jobserver/flink/ExponentialWaitStrategy.java, compiled against Flink's client
    beam_jars_into_flink   the job server's Beam jars, copied into Flink's lib/

Each step does nothing when its result is there. pip installs with ``--no-deps --target``
into the state directory, never into an environment: the packages are used for their jars
and scripts, not imported.
"""

from __future__ import annotations

import glob
import pathlib
import shutil
import subprocess
import sys
import zipfile

from tests.cluster.state import StateDir

FLINK_VERSION = "1.19.3"
SPARK_VERSION = "3.5.0"  # exactly the Spark beam-runners-spark-3 2.70.0 is built against
HERE = pathlib.Path(__file__).resolve().parent
LAUNCHER_SOURCE = HERE / "jobserver" / "BeamJobServerLauncher.java"
RESULT_POLLING_SOURCE = HERE / "jobserver" / "flink" / "ExponentialWaitStrategy.java"
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
# The Flink JVMs and the job server compile with the quick compiler only (C1). With the optimizing
# one (C2) as well, they kept compiling hundreds of methods in every job, however many jobs came
# before (jstat -compiler), at about 1.1 of their 1.7 CPU-seconds in a 240 MB encode, taken from
# the SDK workers' cores; with C1 only they use about 1.0 CPU-second a job. Their own work (task
# deployment, RPC, moving the SDK workers' elements) is a small share of a job and no slower per
# GB measured (benchmarks/RESULTS.md).
JIT_OPTIONS = ("-XX:TieredStopAtLevel=1",)


def _run(*command: str, cwd: pathlib.Path | None = None) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def _pip_target(state: StateDir, target: str, requirements: list[str]) -> None:
    """Downloads the packages (no dependencies) and installs them into state/target."""
    state.downloads.mkdir(parents=True, exist_ok=True)
    _run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-cache-dir", *requirements,
         "-d", str(state.downloads))
    files = []
    for requirement in requirements:
        name, version = requirement.split("==")
        pattern = f"{name.replace('-', '[-_]')}-{version}[-.]*"
        files += sorted(glob.glob(str(state.downloads / pattern)))[:1]
    partial = state.root / f"{target}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    # The sdists (230 MB and 320 MB) are built into wheels: without --no-cache-dir pip keeps a copy.
    _run(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-cache-dir", "--target", str(partial), *files)
    partial.rename(state.root / target)


def flink(state: StateDir) -> pathlib.Path:
    """Flink from PyPI; returns FLINK_HOME. The two packages together make a complete one
    (bin/, conf/, lib/, plugins/)."""
    home = state.engine_home("flink")
    if not (home / "lib" / f"flink-dist-{FLINK_VERSION}.jar").is_file():
        _pip_target(state, "flink", [f"apache-flink=={FLINK_VERSION}", f"apache-flink-libraries=={FLINK_VERSION}"])
    return home


def spark(state: StateDir) -> pathlib.Path:
    """Spark from PyPI; returns SPARK_HOME (bin/spark-class, jars/)."""
    home = state.engine_home("spark")
    if not (home / "jars" / f"spark-core_2.12-{SPARK_VERSION}.jar").is_file():
        _pip_target(state, "spark", [f"pyspark=={SPARK_VERSION}"])
    return home


def jobserver_jars(state: StateDir, engine: str) -> pathlib.Path:
    """Beam's job server for ``engine``: the jars its Maven project in the repository names,
    copied by Maven into state/jobserver-ENGINE/lib; returns that directory."""
    project = state.jobserver(engine)
    lib = project / "lib"
    pom = (HERE / "jobserver" / engine / "pom.xml").read_text()
    if lib.is_dir() and (project / "pom.xml").is_file() and (project / "pom.xml").read_text() == pom:
        return lib
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir(parents=True)
    (project / "pom.xml").write_text(pom)
    _run("mvn", "-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory=lib.partial", cwd=project)
    (project / "lib.partial").rename(lib)
    return lib


def _compiled(source: pathlib.Path, jar: pathlib.Path, classpath: str = "") -> pathlib.Path:
    """``jar``, made from the one Java ``source`` file when it is missing or older than it."""
    if jar.is_file() and jar.stat().st_mtime >= source.stat().st_mtime:
        return jar
    classes = jar.with_suffix(".classes")
    shutil.rmtree(classes, ignore_errors=True)
    classes.mkdir(parents=True)
    _run(f"{JAVA_HOME}/bin/javac", "--release", "11", *(["-cp", classpath] if classpath else []),
         "-d", str(classes), str(source))
    _run(f"{JAVA_HOME}/bin/jar", "cf", str(jar), "-C", str(classes), ".")
    return jar


def launcher(state: StateDir) -> pathlib.Path:
    """The launcher jar (see tests/cluster/jobserver.py), compiled from its source when newer."""
    return _compiled(LAUNCHER_SOURCE, state.launcher / "launcher.jar")


def result_polling(state: StateDir, jobserver_lib: pathlib.Path) -> pathlib.Path:
    """The jar the Flink job server finds Flink's ExponentialWaitStrategy in first (see the source)."""
    return _compiled(RESULT_POLLING_SOURCE, state.launcher / "result-polling.jar", f"{jobserver_lib}/*")


def _classes(jar: pathlib.Path) -> set[str]:
    with zipfile.ZipFile(jar) as z:
        return {n for n in z.namelist() if n.endswith(".class") and not n.startswith("META-INF/")}


def beam_jars_into_flink(flink_home: pathlib.Path, jobserver_lib: pathlib.Path) -> None:
    """Copies into Flink's lib/ every job-server jar with a class Flink's jars lack, once.

    With Beam's runner classes on the JobManager's and TaskManagers' own classpath, a job needs
    to ship none of them (jobserver.py). Left out: flink-* (the cluster's own 1.19.3 stays),
    slf4j-* (slf4j-api 2 ahead of flink-dist would detach Flink's log4j binding), and jars whose
    classes flink-dist already holds in full (commons-*, kryo, lz4...). The list copied is kept
    in lib/beam-jars.txt.
    """
    record = flink_home / "lib" / "beam-jars.txt"
    if record.is_file():
        return
    have: set[str] = set()
    for jar in (flink_home / "lib").glob("*.jar"):
        have |= _classes(jar)
    copied = []
    for jar in sorted(jobserver_lib.glob("*.jar")):
        if jar.name.startswith(("flink-", "slf4j-")) or not _classes(jar) - have:
            continue
        shutil.copy(jar, flink_home / "lib" / jar.name)
        copied.append(jar.name)
    record.write_text("\n".join(copied) + "\n")
