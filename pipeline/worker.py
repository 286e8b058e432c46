"""Beam's SDK worker process for DirectRunner jobs: quiet on the terminal, quick to exit.

    python -m pipeline.worker      # what the runner starts, once per worker process

Quiet: a worker sends its log records to the runner, which shows the ones that
matter (errors; see ``pipeline.runners``). But importing Beam logs a warning
through the root logger ("apitools not found"), Python's logging then gives the
root logger a handler that prints to stderr, and from there every INFO and
WARNING of the worker's start-up ("Logging handler created.", "No
semi_persistent_directory found", "Discarding unparseable args") lands on the
user's terminal as well. A do-nothing handler on the root logger beforehand
keeps stderr for tracebacks; the records still reach the runner.

Stoppable by the driver only: Ctrl-C in a terminal sends SIGINT to every
process of the job, and each worker would print its own traceback. Workers
ignore it; the driver ends them (``pipeline.stopping``).

Quick: when Beam's ``main`` returns, the harness has finished every bundle, torn
down the DoFns and sent its logs. What is left is the interpreter freeing every
object of the job, and the runner waits for that, one worker after the other,
so the worker exits at once.
"""

import logging
import os
import signal
import sys

logging.getLogger().addHandler(logging.NullHandler())
signal.signal(signal.SIGINT, signal.SIG_IGN)

from apache_beam.runners.worker import sdk_worker_main  # noqa: E402  (after the handler, on purpose)

if __name__ == "__main__":
    sdk_worker_main.main(sys.argv)  # an error raises here and exits the usual way
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
