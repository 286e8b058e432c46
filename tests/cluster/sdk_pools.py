"""The Python SDK worker pools: one on each worker host, in its namespace, on port 50000.

beam-bpe's pool (``pipeline.runtime.worker_pool``): Beam's, with each worker a copy of a process
that has done its imports.

Jobs use ``--environment_type=EXTERNAL --environment_config=localhost:50000``: "localhost"
resolves inside each worker's namespace, so each TaskManager (or Spark executor) gets SDK
workers from its own host's pool. The pool starts every SDK worker as ``python`` from PATH, so
the environment that runs this module (with beam-bpe installed) goes first on PATH.
"""

from __future__ import annotations

import os
import sys

from tests.cluster import daemons, network
from tests.cluster.state import StateDir

PORT = 50000
_START_SECONDS = 60
_NAME = "sdk-pool"


def start_missing(state: StateDir, engine: str, workers: list[network.Host]) -> None:
    """Starts the pool of every worker host where none runs, and waits until each listens."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    for host in workers:
        directory = state.host_dir(engine, host.name)
        if daemons.pid(_NAME, directory) is None:
            daemons.start(_NAME, [sys.executable, "-m", "pipeline.runtime.worker_pool",
                                  f"--service_port={PORT}"], directory, netns=host.netns, env=env)
    for host in workers:
        directory = state.host_dir(engine, host.name)
        daemons.wait_until(lambda: network.listening(host.address, PORT), f"the SDK worker pool on {host.name}",
                           _START_SECONDS, alive=lambda: daemons.pid(_NAME, directory) is not None,
                           log=directory / f"{_NAME}.log")


def stop(state: StateDir, engine: str, workers: list[network.Host]) -> None:
    """Stops every pool and the SDK workers it started."""
    for host in workers:
        daemons.stop(_NAME, state.host_dir(engine, host.name))
