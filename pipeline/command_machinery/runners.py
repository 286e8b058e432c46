"""Beam pipeline options for our drivers: runner defaults, refusals, metrics.

Shared by the commands that run a Beam job:

    check_beam_args(beam_args, our_flags)      # UserError for any argument Beam would drop
    options = pipeline_options(beam_args)      # checks again; UserError for a refused runner
    pipeline = runtime.new_pipeline(options)   # DirectRunner = Beam's FnApiRunner (pipeline.runtime)
    ...
    result = pipeline.run(); result.wait_until_finish()
    counters = committed_counters(result)      # {(namespace, name): value}

On Flink and Spark (PortableRunner, FlinkRunner, SparkRunner), a job keeps its SDK workers
from one stage to the next, unless the user's flags say otherwise, and its submission skips
Beam's ``pip freeze`` (``PORTABLE_DEFAULTS``).

DirectRunner (the default) is made to use every local core: unless the user's
own flags say otherwise, it runs ``--direct_running_mode=multi_processing``
with ``--direct_num_workers=0`` (one SDK worker process per core), and its
workers log warnings only, so the command's output stays readable. Any flag the
user gives wins, because Beam takes the last value of a repeated flag and ours
come first.

DirectRunner jobs run on Beam's FnApiRunner, always (``runs_on_fn_api_runner``).
Beam's DirectRunner may first try Prism, a Go binary it downloads from GitHub
when the job starts, and fall back to the FnApiRunner only when that fails
(e.g. offline). Prism ignores the flags above, and the FnApiRunner is what our
tests run, so a job behaves the same online and offline and never downloads
anything. ``--runner=PrismRunner`` still gets Prism. Which FnApiRunner, and
how its worker processes start, is ``pipeline.runtime``'s.
"""
from __future__ import annotations

import datetime
import difflib
import functools
import logging
import secrets
import weakref
from typing import Sequence

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import (
    DirectOptions, GoogleCloudOptions, PipelineOptions, PortableOptions, StandardOptions, _BeamArgumentParser,
)

from pipeline.command_machinery import job_service
from pipeline.command_machinery.errors import UserError

__all__ = [
    "DIRECT_DEFAULTS", "PORTABLE_DEFAULTS", "check_beam_args", "committed_counters", "describe_runner", "is_direct", "pipeline_options",
    "runs_on_fn_api_runner", "tokenizer_transport",
]

DIRECT_DEFAULTS = (
    "--direct_running_mode=multi_processing",
    "--direct_num_workers=0",  # 0 = one worker per CPU core
    "--default_sdk_harness_log_level=WARNING",
)

# On Flink and Spark, the job's SDK workers are shut down after each stage and started again
# (a new Python process importing Beam and beam-bpe, 1-2 s) for the next one, unless the job
# keeps them for a while after their last use. Ten seconds spans the gap between two stages;
# the workers end that long after the job.
# Beam also runs `pip freeze` at every submission (0.2-0.4 s of the command's wall time) to stage
# the list of the client's packages, which workers only compare with their own to log a warning.
PORTABLE_DEFAULTS = ("--environment_cache_millis=10000", "--experiments=disable_logging_submission_environment")

_PORTABLE_NAMES = {"portablerunner", "flinkrunner", "sparkrunner"}
_DIRECT_NAMES = {"directrunner", "direct", "switchingdirectrunner", "fnapirunner", "bundlebaseddirectrunner"}
# The names that mean "Beam's default DirectRunner", which would try Prism first.
_SWITCHING_NAMES = {"directrunner", "direct", "switchingdirectrunner"}


def _runner_name(options: PipelineOptions) -> str:
    runner = options.view_as(StandardOptions).runner
    if runner is None:
        return "DirectRunner"
    # --runner may also name a class path (a.b.DaskRunner) or an instance.
    return runner if isinstance(runner, str) else type(runner).__name__


def _runner_key(options: PipelineOptions) -> str:
    # --runner may also name a class path (a.b.DirectRunner): compare the class name.
    return _runner_name(options).rsplit(".", 1)[-1].lower()


def is_direct(options: PipelineOptions) -> bool:
    """Whether the options select Beam's DirectRunner (also when --runner is absent)."""
    return _runner_key(options) in _DIRECT_NAMES


def runs_on_fn_api_runner(options: PipelineOptions) -> bool:
    """Whether the options name Beam's default DirectRunner, whose job runs on Beam's FnApiRunner
    here (never on Prism; see the module's docstring)."""
    return _runner_key(options) in _SWITCHING_NAMES


class _OptionsParser(_BeamArgumentParser):
    """Beam's own parser of pipeline options, failing with one line instead of exiting."""

    def error(self, message):
        raise UserError(f"Beam pipeline option: {message}")


def _check_runner(options: PipelineOptions) -> None:
    """Refuses a --runner Beam does not know, and DaskRunner; importing the
    runner registers its own options."""
    from apache_beam.runners.runner import _RUNNER_MAP, create_runner

    name = _runner_name(options)
    if "dask" in name.lower():
        raise UserError(
            f"--runner {name} is not supported: Beam's DaskRunner silently drops elements of "
            "multi-branch pipelines and file sinks; use DirectRunner, or Flink/Spark/Dataflow "
            "(train's presets: --config flink, spark or dataflow)"
        )
    if is_direct(options) or "." in name:
        return  # a class path: Beam imports it when the job starts
    try:
        create_runner(name)
    except ValueError:
        known = sorted(path.rsplit(".", 1)[-1] for path in _RUNNER_MAP.values())
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean --runner={close[0]}? " if close else ""
        raise UserError(f"unknown --runner {name}: {hint}(known: {', '.join(known)})") from None
    except Exception as e:  # noqa: BLE001 - e.g. a runner whose extra packages are not installed
        raise UserError(f"cannot use --runner {name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") \
            from None


def _all_option_classes() -> list[type]:
    classes, todo = {}, list(PipelineOptions.__subclasses__())
    while todo:
        cls = todo.pop()
        classes.setdefault(f"{cls.__module__}.{cls.__qualname__}", cls)
        todo.extend(cls.__subclasses__())
    return list(classes.values())


_ASK_SECONDS = 15.0  # at most this long (or --job_server_timeout, if shorter) for the job service's answer


@functools.lru_cache(maxsize=8)
def _advertised(endpoint: str, timeout: float) -> tuple[job_service.AdvertisedOption, ...]:
    try:
        return tuple(job_service.advertised_options(endpoint, timeout))
    except Exception as e:  # noqa: BLE001 - grpc's errors: unreachable, timed out
        first = str(e).splitlines()[0] if str(e).strip() else f"no answer within {timeout:.0f} s"
        raise UserError(f"cannot ask the job service at {endpoint} which options it knows: {first}") from None


def _add_advertised(parser: _BeamArgumentParser, options: PipelineOptions) -> bool:
    """Adds the options the job service (``--job_endpoint``) advertises to ``parser``, as
    Beam's PortableRunner does when it submits; False when no job service is named."""
    portable = options.view_as(PortableOptions)
    if not portable.job_endpoint or portable.job_endpoint == "embed" or is_direct(options):
        return False
    for option in _advertised(portable.job_endpoint, min(float(portable.job_server_timeout or 60), _ASK_SECONDS)):
        kwargs: dict = {"action": "store"}
        if option.type == "BOOLEAN":
            kwargs["action"] = "store_true" if option.default != "true" else "store_false"
        elif option.type == "INTEGER":
            kwargs["type"] = int
        elif option.type == "ARRAY":
            kwargs["action"] = "append"
        try:
            parser.add_argument(f"--{option.name}", **kwargs)
        except Exception:  # noqa: BLE001 - one Beam's Python side knows already: it stands
            continue
    return True


def check_beam_args(beam_args: Sequence[str], our_flags: Sequence[str] = ()) -> None:
    """Refuses every argument Beam would discard: each must be a pipeline option
    of Beam, of the chosen runner, or of the job service the job goes to
    (``--job_endpoint``, asked only when some flag is not Beam's), with a valid value.

    Beam itself only logs "Discarding unparseable args" and runs without them,
    so a misspelt flag, one of ours spelt with underscores, or the second file
    of an unquoted glob would be silently dropped. PortableRunner passes on every
    option its job service advertises (Flink's ``--number_of_execution_retries``),
    so those are accepted as it accepts them.

    Args:
      beam_args: the arguments our parser did not take.
      our_flags: the command's own flags (``--vocab-size``), for "did you mean".

    Raises:
      UserError: the first argument Beam does not know, with the closest
        known flag.
    """
    options = PipelineOptions(list(beam_args))
    _check_runner(options)
    parser = _OptionsParser(allow_abbrev=False)
    beam_flags = []
    for cls in _all_option_classes():
        try:
            cls._add_argparse_args(parser)  # noqa: SLF001 - how Beam itself collects its options
        except Exception:  # noqa: BLE001 - a flag two classes define: the first definition stands
            continue
    for action in parser._actions:  # noqa: SLF001
        beam_flags.extend(s for s in action.option_strings if s.startswith("--"))
    _, unknown = parser.parse_known_args(list(beam_args))
    asked = bool(unknown) and _add_advertised(parser, options)
    if asked:
        beam_flags = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]  # noqa: SLF001
        _, unknown = parser.parse_known_args(list(beam_args))
    if not unknown:
        if asked:
            # Beam's Python side warns of the job service's options every time it parses the
            # flags ("Discarding unparseable args"), yet passes them on at submission: checked, so quiet.
            logging.getLogger("apache_beam.options.pipeline_options").setLevel(logging.ERROR)
        return
    arg = unknown[0]
    if not arg.startswith("-"):
        raise UserError(f"unexpected argument {arg!r} (a path for --input? several paths go after one --input; "
                        "quote a glob to let beam-bpe expand it)")
    name = arg.split("=", 1)[0]
    ours = {flag.replace("_", "-"): flag for flag in our_flags}
    if name.replace("_", "-") in ours:
        suggestion = ours[name.replace("_", "-")]
    else:
        close = difflib.get_close_matches(name, [*our_flags, *beam_flags], n=1, cutoff=0.75)
        suggestion = close[0] if close else None
    service = " nor one the job service advertises" if asked else ""
    hint = f": did you mean {suggestion}?" if suggestion else \
        f" (neither a flag of beam-bpe nor a Beam pipeline option{service})"
    raise UserError(f"unknown flag {name}{hint}")


def pipeline_options(beam_args: Sequence[str]) -> PipelineOptions:
    """Builds PipelineOptions from Beam flags, with our DirectRunner defaults, and
    gives them to Beam's FileSystems for the driver's own reads and writes.

    Args:
      beam_args: Beam's own flags as the user gave them (``--runner=...``).

    Raises:
      UserError: an argument Beam does not know (``check_beam_args``), or
        Beam's DaskRunner, which silently drops the elements of multi-branch
        pipelines and of file sinks: our jobs are both.
    """
    beam_args = list(beam_args)
    options = _Options(beam_args)
    check_beam_args(beam_args)
    if not is_direct(options) and options.view_as(GoogleCloudOptions).job_name is None:
        # A name of our own, so a job on a cluster can be found there (to cancel it: pipeline.command_machinery.job_service).
        beam_args.append(f"--job_name={_job_name()}")
    if is_direct(options):
        # In multi_processing mode the runner re-logs every worker warning
        # (e.g. about options only the driver knows) as its own; keep errors.
        logging.getLogger("apache_beam.runners.portability.local_job_service").setLevel(logging.ERROR)
        options = _Options([*DIRECT_DEFAULTS, *beam_args])
    elif _runner_key(options) in _PORTABLE_NAMES:
        options = _Options([*PORTABLE_DEFAULTS, *beam_args])
    else:
        options = _Options(beam_args)
    # The driver's own file access before the job (matching inputs, checking the
    # output, reading a tokenizer) uses the same file-system options (S3
    # endpoint, credentials) as the job will.
    FileSystems.set_options(options)
    return options


def _job_name() -> str:
    """beam-bpe-YYYYMMDD-HHMMSS-xxxxxx (UTC): unique, and valid on every runner (Dataflow's
    rule: lower-case letters, digits and hyphens)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return f"beam-bpe-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


# Each _Options' views, made once per options class (weakly held: they go with their options).
_views: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Options(PipelineOptions):
    """Beam's PipelineOptions, with one view per options class, made when first asked.

    Building a pipeline asks the options for a view hundreds of times, and Beam
    parses the flags again for each new view. A view keeps no value of its own
    (reading and setting go to the options it came from, and the flags never
    change), so the first view of a class serves every later request. Kept
    outside the object, so what pickles is unchanged.
    """

    def view_as(self, cls):
        views = _views.setdefault(self, {})
        if cls not in views:
            views[cls] = super().view_as(cls)
        return views[cls]


def describe_runner(options: PipelineOptions) -> str:
    """A short description for summaries, e.g. "DirectRunner (multi_processing, 2 workers)"."""
    name = _runner_name(options)
    if not is_direct(options):
        return name
    direct = options.view_as(DirectOptions)
    workers = direct.direct_num_workers
    if workers == 0:
        import multiprocessing

        workers = multiprocessing.cpu_count()
    mode = direct.direct_running_mode
    return f"DirectRunner ({mode}, {workers} worker{'s' if workers != 1 else ''})"


def committed_counters(result) -> dict[tuple[str, str], int]:
    """The job's committed counters as {(namespace, name): total}; {} if unavailable.

    Some runners report no metrics (or only attempted ones). Callers use them
    for reporting; correctness comes from the job's output files.
    """
    try:
        counters = result.metrics().query()["counters"]
    except Exception:  # noqa: BLE001 - a runner without metrics support: report none
        return {}
    totals: dict[tuple[str, str], int] = {}
    for counter in counters:
        value = counter.committed
        if value is None:
            value = counter.attempted
        if value is None:
            continue
        key = (counter.key.metric.namespace, counter.key.metric.name)
        # The same counter appears once per step that updates it: add them up.
        totals[key] = totals.get(key, 0) + value
    return totals


# Beam's S3 flags and the boto3 client arguments they stand for.
_S3_CLIENT_ARGUMENTS = {
    "s3_endpoint_url": "endpoint_url",
    "s3_region_name": "region_name",
    "s3_access_key_id": "aws_access_key_id",
    "s3_secret_access_key": "aws_secret_access_key",
    "s3_session_token": "aws_session_token",
    "s3_verify": "verify",
}


def tokenizer_transport(options: PipelineOptions) -> dict | None:
    """smart_open's transport parameters for tokenizer paths, from Beam's own S3 flags.

    Tokenizer files are read by the library layer (``bpe.Tokenizer.load``, through
    smart_open), the corpus by Beam's FileSystems: the S3 endpoint and
    credentials given as Beam flags must reach both. None when no S3 flag is
    set (boto3 then finds its configuration as usual).
    """
    given = options.get_all_options()
    client = {argument: given[flag] for flag, argument in _S3_CLIENT_ARGUMENTS.items() if given.get(flag) is not None}
    return {"client_kwargs": {"S3.Client": client}} if client else None
