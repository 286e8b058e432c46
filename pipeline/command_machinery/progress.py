"""How far a running Beam job is, on stderr: documents and bytes read, files done, elapsed.

    progress.add_arguments(parser)         # --no-progress, --progress-every SECONDS
    progress.check_arguments(args)         # UserError for a bad --progress-every
    shown = Progress("train", "count", files=len(files), enabled=not args.no_progress,
                     every=args.progress_every)
    with runtime.stop_at_once(...):
        result = shown.run(pipeline)       # pipeline.run() and wait_until_finish()

On a terminal it is a tqdm bar of the files done, with the documents and bytes
read beside it, redrawn every second. Anywhere else (a log) it is one plain
line every ``every`` seconds, the first after that long, and a last one when
the job succeeds if any was printed: a short job prints nothing more. Only
stderr is written; stdout never. Once every file is read the job still combines
and writes, with the bar at 100%: the line then says so (``FINISHING``).

The counters come from the running job: on our DirectRunner (Beam's
FnApiRunner with the start-up machinery on, ``pipeline.runtime.runner``) from
its workers, through its ``watch_counters`` (only while progress is shown); on
a runner whose ``run()`` returns while the job runs (portable runners: Flink,
Spark, Prism, Dataflow) from its result's metrics, asked again at every line.
A runner that gives none while the job runs gets the elapsed time only, and a
line saying so, once. A stop while a job runs on a cluster cancels it there
(``runtime.cancel_on_stop``, ``job_service.cancel``). On a stop (SIGINT, SIGTERM) the bar is cleared before
``pipeline.runtime.stopping`` prints its one line.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence

from pipeline import runtime
from pipeline.command_machinery import job_service
from pipeline.command_machinery.errors import UserError
from pipeline.command_machinery.runners import committed_counters, is_direct
from transforms import metrics

__all__ = ["PACKED", "READ", "Progress", "add_arguments", "check_arguments", "describe"]

Counters = dict[tuple[str, str], int]

# What a line shows: (label, counter, whether it counts bytes).
READ = (("documents", metrics.key("read", "documents"), False), ("bytes", metrics.key("read", "bytes"), True))
PACKED = (("sequences", metrics.key("pack", "sequences"), False), ("tokens", metrics.key("pack", "real_tokens"), False))
FILES_DONE = metrics.key("read", "files_done")
DEFAULT_EVERY = "10"
# What a job does after its last file is read, said at the end of the line until it is done.
FINISHING = "all files read, combining and writing the results"
_TERMINAL_EVERY = 1.0  # seconds between two redraws of the bar


def add_arguments(parser: argparse.ArgumentParser, from_config: bool = False) -> None:
    """Adds --no-progress and --progress-every; ``from_config``: defaults stay None
    for ``pipeline.command_machinery.config.resolve`` to fill in."""
    parser.add_argument("--no-progress", action="store_true", default=None if from_config else False,
                        help="no progress bar or progress lines on stderr")
    parser.add_argument("--progress-every", metavar="SECONDS", default=None if from_config else DEFAULT_EVERY,
                        help=f"when stderr is not a terminal, a progress line this often (default: {DEFAULT_EVERY})")


def check_arguments(args: argparse.Namespace) -> None:
    """Turns --progress-every into seconds (a float).

    Raises:
      UserError: not a number of seconds above 0.
    """
    try:
        every = float(args.progress_every)
    except (TypeError, ValueError):
        every = math.nan
    if not 0 < every < math.inf:
        raise UserError(f"--progress-every must be a number of seconds above 0, not {args.progress_every!r}")
    args.progress_every = every


def describe(counters: Counters | None, fields: Sequence = READ, files: int | None = None,
             files_done: int | None = None, elapsed: float = 0.0) -> str:
    """The line's text: "1,234 documents, 5.6 MB, 2/3 files, 0:00:12 elapsed".

    ``counters`` None: the runner gave none; only the elapsed time is shown.
    """
    parts = []
    if counters is not None:
        for label, key, is_bytes in fields:
            value = counters.get(key, 0)
            parts.append(_bytes(value) if is_bytes else f"{value:,} {label}")
        if files is not None:
            parts.append(f"{min(files_done or 0, files):,}/{files:,} files")
    parts.append(f"{_clock(elapsed)} elapsed")
    return ", ".join(parts)


def _bytes(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class Progress:
    """The progress of one Beam job of a command.

    Args:
      command: the CLI command, for the plain lines ("train").
      phase: what the job does ("count").
      fields: the counters shown (``READ``, ``PACKED``).
      files: the number of input files, known on the driver from matching;
        None: no files are shown.
      enabled: False shows nothing (``--no-progress``).
      every: seconds between two plain lines.
    """

    def __init__(self, command: str, phase: str, fields: Sequence = READ, files: int | None = None,
                 enabled: bool = True, every: float = float(DEFAULT_EVERY)):
        self.command, self.phase, self.fields, self.files = command, phase, fields, files
        self.enabled, self.every = enabled, every

    def run(self, pipeline):
        """Runs the pipeline to its end (``run()``, ``wait_until_finish()``) with the
        progress shown meanwhile; returns the result."""
        # Asked before the job runs: Beam's PortableRunner takes the runner out of the options.
        direct = is_direct(pipeline.options)
        if not self.enabled:
            result = pipeline.run()
            _wait(result, pipeline, direct)
            return result
        # The FnApiRunner of pipeline.runtime reads the counters from its workers as the job goes.
        watch = getattr(pipeline.runner, "watch_counters", None)
        display = _Display(self, sys.stderr, watch() if watch is not None else None)
        with display:
            result = pipeline.run()
            if display.source is None:  # run() returned while the job runs: ask its result
                display.source = lambda: committed_counters(_fresh(result)) or None
            _wait(result, pipeline, direct)
            display.finish(lambda: committed_counters(_fresh(result)))
        return result


def _wait(result, pipeline, direct: bool) -> None:
    """Waits for the job of ``result`` to end; a stop cancels it on its runner, and a job that fails
    on a cluster is one line (``errors.JobFailed``); on DirectRunner (``direct``) a failure is ours:
    it raises as is."""
    with runtime.cancel_on_stop(result, lambda: job_service.cancel(result, pipeline.options)):
        try:
            result.wait_until_finish()
        except Exception as e:  # noqa: BLE001 - re-raised as is unless the job ran on a cluster
            if direct:
                raise
            raise job_service.failure(e, pipeline.options) from None


def _fresh(result):
    """The result, made to ask its runner again: a PortableRunner's result keeps
    the first metrics it got (``PipelineResult._metrics``)."""
    if getattr(result, "_metrics", None) is not None:
        result._metrics = None  # noqa: SLF001
    return result


class _Display:
    """The thread that redraws the line, and the bar or lines it draws.

    A stop (SIGINT, SIGTERM) clears the bar first, then goes to the handler
    that was there (``pipeline.runtime.stopping``'s, which prints one line and exits).
    """

    def __init__(self, progress: Progress, stream, source: Callable[[], Counters | None] | None):
        self.progress, self.stream, self.source = progress, stream, source
        self.terminal = bool(getattr(stream, "isatty", lambda: False)())
        self._lock = threading.RLock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="beam-bpe-progress", daemon=True)
        self._started = time.monotonic()
        self._bar = None
        self._printed = self._said_no_counters = self._silent = False
        self._handlers: dict[int, object] = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous = signal.getsignal(signum)
                if callable(previous):
                    self._handlers[signum] = previous
                    signal.signal(signum, self._clear_then(previous))
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stopped.set()
        self._thread.join(timeout=10)
        with self._lock:
            self._silent = True
            if self._bar is not None:  # a failure: the bar goes, the error line follows
                self._bar.leave = False
                self._bar.close()
        for signum, previous in self._handlers.items():
            signal.signal(signum, previous)

    def _clear_then(self, previous):
        def handler(signum, frame):
            with self._lock:
                self._silent = True
                if self._bar is not None:
                    self._bar.clear()
            previous(signum, frame)

        return handler

    def _loop(self) -> None:
        while not self._stopped.wait(_TERMINAL_EVERY if self.terminal else self.progress.every):
            source = self.source
            try:
                counters = source() if source is not None else None
            except Exception:  # noqa: BLE001 - a runner that cannot tell: the time only
                counters = None
            self._draw(counters, self.progress.files and counters and counters.get(FILES_DONE), final=False)

    def finish(self, final_counters: Callable[[], Counters]) -> None:
        """The last line, from the job's final counters (read once the thread is
        stopped, so no late answer replaces them): the job succeeded, so every
        file is done."""
        self._stopped.set()
        self._thread.join(timeout=10)
        self._draw(final_counters() or None, self.progress.files, final=True)
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def _draw(self, counters: Counters | None, files_done: int | None, final: bool) -> None:
        p = self.progress
        with self._lock:
            if self._silent:
                return
            if counters is None and not self._said_no_counters and not final:
                self._said_no_counters = True
                self._write(f"beam-bpe {p.command}: {p.phase}: the runner gives no counters (yet) while the job "
                            "runs; showing the elapsed time")
            text = describe(counters, p.fields, p.files, files_done, time.monotonic() - self._started)
            if p.files and not final and (files_done or 0) >= p.files:
                text += f"; {FINISHING}"
            if self.terminal:
                self._draw_bar(text, files_done)
            elif self._printed or not final:
                self._write(f"beam-bpe {p.command}: {p.phase} {'done' if final else 'running'}: {text}")

    def _draw_bar(self, text: str, files_done: int | None) -> None:
        p = self.progress
        text = text.replace("{", "{{").replace("}", "}}")
        bar_format = "{desc}: " + text if not p.files else "{desc}: {percentage:3.0f}%|{bar}| " + text
        if self._bar is None:
            from tqdm import tqdm  # only for a terminal

            self._bar = tqdm(total=p.files, desc=p.phase, file=self.stream, bar_format=bar_format, leave=True)
        self._bar.bar_format = bar_format
        self._bar.n = files_done or 0
        self._bar.refresh()

    def _write(self, line: str) -> None:
        if self._bar is not None:
            self._bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)
        self._printed = True
