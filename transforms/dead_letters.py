"""Writing dead letters (rejected input records and files) as JSON Lines.

A job's dead letters go into one file, sorted by (file, record, reason), so
identical reruns write identical files whatever the runner's bundling. A
dead letter is a short line, so one worker holds them all to sort them (a
million take a few hundred MB).
"""

import dataclasses
import json
import uuid

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from transforms import metrics
from transforms.sink_write import make_dir, temp_dir_beside

__all__ = ["DEAD_LETTERS_DIR", "DEAD_LETTER_GLOB", "WriteDeadLetters", "dead_letter_json"]

# The layout under a job's output directory: DIR/dead_letters/dead_letters-SSSSS-of-NNNNN.jsonl.
DEAD_LETTERS_DIR = "dead_letters"
DEAD_LETTER_PREFIX = "dead_letters"
DEAD_LETTER_SUFFIX = ".jsonl"
DEAD_LETTER_GLOB = f"{DEAD_LETTER_PREFIX}-*-of-*{DEAD_LETTER_SUFFIX}"


def dead_letter_json(dead_letter) -> str:
    """One dead letter as a JSON object line: {"file", "record", "reason"}."""
    # ensure_ascii (the default) escapes everything outside ASCII, so file
    # names holding undecodable bytes (lone surrogates) still write as UTF-8.
    return json.dumps(
        {"file": dead_letter.file, "record": dead_letter.record, "reason": dead_letter.reason}
    )


class _ToJsonFn(beam.DoFn):
    def __init__(self):
        self._dead_letters = metrics.counter("dead_letters", "written")

    def process(self, dead_letter):
        self._dead_letters.inc()
        # The sort key as bytes: file names may hold lone surrogates, which no str coder takes.
        key = (dead_letter.file.encode("utf-8", "surrogatepass"), dead_letter.record,
               dead_letter.reason.encode("utf-8", "surrogatepass"))
        yield key, dead_letter_json(dead_letter)


def _write_sorted(unused_impulse, prefix: str, lines: list):
    """Writes every line, sorted by its dead letter, into one file (under a temporary
    name first, so a retried step never leaves half a file)."""
    final = f"{prefix}-00000-of-00001{DEAD_LETTER_SUFFIX}"
    temp_dir = temp_dir_beside(prefix)
    make_dir(temp_dir)
    temporary = FileSystems.join(temp_dir, uuid.uuid4().hex)
    with FileSystems.create(temporary) as out:
        for _, line in sorted(lines):
            out.write(line.encode("utf-8") + b"\n")
    FileSystems.rename([temporary], [final])
    FileSystems.delete([temp_dir])
    yield final


@dataclasses.dataclass
class WriteDeadLetters(beam.PTransform):
    """Writes DeadLetter records to ``OUTPUT_DIR/dead_letters/dead_letters-00000-of-00001.jsonl``,
    sorted (see the module docstring); the file is written even when there are no
    dead letters, so readers always find it.

    Counter (``transforms.metrics``): ``dead_letters.written``.

    Args:
      output_dir: the job's output directory (local path or URL).

    Returns the PCollection of the file's name.
    """

    output_dir: str

    def __post_init__(self):
        super().__init__()

    def expand(self, dead_letters):
        prefix = FileSystems.join(self.output_dir, DEAD_LETTERS_DIR, DEAD_LETTER_PREFIX)
        lines = dead_letters | "ToJson" >> beam.ParDo(_ToJsonFn())
        return (
            dead_letters.pipeline
            | "Once" >> beam.Impulse()
            | "WriteJsonLines" >> beam.FlatMap(_write_sorted, prefix, beam.pvalue.AsList(lines)).with_output_types(str)
        )
