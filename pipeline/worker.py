"""Beam's SDK worker process for DirectRunner jobs, without start-up chatter on the terminal.

    python -m pipeline.worker      # what the runner starts, once per worker process

A worker sends its log records to the runner, which shows the ones that matter
(errors; see ``pipeline.runners``). But importing Beam logs a warning through
the root logger ("apitools not found"), Python's logging then gives the root
logger a handler that prints to stderr, and from there every INFO and WARNING of
the worker's start-up ("Logging handler created.", "No semi_persistent_directory
found", "Discarding unparseable args") lands on the user's terminal as well. A
do-nothing handler on the root logger beforehand keeps stderr for tracebacks;
the records still reach the runner.
"""

import logging
import sys

logging.getLogger().addHandler(logging.NullHandler())

from apache_beam.runners.worker import sdk_worker_main  # noqa: E402  (after the handler, on purpose)

if __name__ == "__main__":
    sdk_worker_main.main(sys.argv)
