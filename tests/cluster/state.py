"""The state directory of a local cluster: where everything it installs, runs and writes lives.

    DIR/downloads/            what pip and Maven fetched (kept: a second `up` downloads nothing)
    DIR/flink/pyflink/        Flink 1.19.3 from PyPI (FLINK_HOME), with Beam's runner jars in lib/
    DIR/spark/pyspark/        Spark 3.5.0 from PyPI (SPARK_HOME)
    DIR/jobserver-<engine>/   the Maven project of Beam's job server and its jars (lib/)
    DIR/launcher/             the job-server launcher jar (see jobserver.py)
    DIR/shared/               a directory every host reads and writes (inputs, outputs, artifacts)
    DIR/run/<engine>/         per host: config, logs, temporary files, and the PID files
    DIR/run/<engine>.json     what `up` said last: engine, hosts, beam_args, shared_dir

All the hosts share one file system here, as hosts with a shared mount would.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

ENGINES = ("flink", "spark")


@dataclasses.dataclass(frozen=True)
class StateDir:
    """Paths inside one state directory.

    Args:
      root: the directory given as ``--state-dir`` (made absolute).
    """

    root: pathlib.Path

    @classmethod
    def at(cls, path: str | pathlib.Path) -> "StateDir":
        root = pathlib.Path(path).resolve()
        root.mkdir(parents=True, exist_ok=True)
        return cls(root)

    @property
    def downloads(self) -> pathlib.Path:
        return self.root / "downloads"

    @property
    def shared(self) -> pathlib.Path:
        return self.root / "shared"

    @property
    def launcher(self) -> pathlib.Path:
        return self.root / "launcher"

    @property
    def lock(self) -> pathlib.Path:
        return self.root / ".lock"

    def engine_home(self, engine: str) -> pathlib.Path:
        """FLINK_HOME or SPARK_HOME: the package directory pip installed."""
        return self.root / engine / ("pyflink" if engine == "flink" else "pyspark")

    def jobserver(self, engine: str) -> pathlib.Path:
        return self.root / f"jobserver-{engine}"

    def run(self, engine: str) -> pathlib.Path:
        path = self.root / "run" / engine
        path.mkdir(parents=True, exist_ok=True)
        return path

    def host_dir(self, engine: str, host: str) -> pathlib.Path:
        """Config, logs and temporary files of one host (``jm``, ``tm1``, ``js``...)."""
        path = self.run(engine) / host
        path.mkdir(parents=True, exist_ok=True)
        return path

    def description_file(self, engine: str) -> pathlib.Path:
        return self.root / "run" / f"{engine}.json"

    def description(self, engine: str) -> dict | None:
        """What the last `up` of ``engine`` said, or None if it is not up."""
        path = self.description_file(engine)
        return json.loads(path.read_text()) if path.is_file() else None

    def engines_up(self) -> list[str]:
        return [engine for engine in ENGINES if self.description_file(engine).is_file()]
