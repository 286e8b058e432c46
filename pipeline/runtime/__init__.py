"""beam-bpe's start-up machinery: everything that makes a command start and end sooner by
reaching into Beam's process model and private names, behind one facade and one switch.

    facade.py          what the commands call (start, new_pipeline, stop_at_once, end_idle_workers,
                       exit) and the switch BEAM_BPE_PLAIN_BEAM=1 that turns all of it off
    beam_internals.py  every private name of Beam that beam-bpe relies on, and their check
    beam_import.py     Beam imported without pandas and unused connectors
    s3_sessions.py     Beam's S3 clients sharing one botocore model loader
    warm_workers.py    DirectRunner's worker processes forked before the job
    worker.py          the worker process itself
    preloaded.py       tokenizers a worker reads before its job asks for them
    runner.py          the FnApiRunner that takes the warm workers
    live_counters.py   the counters of a running job, for the progress display
    stopping.py        SIGINT and SIGTERM during a job, a worker killed: one line, every worker ended
    worker_pool.py     the SDK worker pool for Flink and Spark hosts, workers copied from one ready process
"""

from pipeline.runtime.facade import (
    NOTHING_MORE_WRITTEN,
    PLAIN_BEAM_VARIABLE,
    cancel_on_stop,
    end_idle_workers,
    end_if_worker_killed,
    exit,
    is_on,
    new_pipeline,
    start,
    stop_at_once,
)

__all__ = [
    "NOTHING_MORE_WRITTEN", "PLAIN_BEAM_VARIABLE", "cancel_on_stop", "end_idle_workers", "end_if_worker_killed", "exit", "is_on",
    "new_pipeline", "start", "stop_at_once",
]
