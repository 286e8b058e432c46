"""Writing dead letters (rejected input records and files) as JSON Lines."""

import dataclasses
import json

import apache_beam as beam
from apache_beam.coders.coders import ToBytesCoder
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystems import FileSystems

from transforms import metrics
from transforms.sink_write import WriteWithSink

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


class _LinesSink(FileBasedSink):
    """Files of text lines, one record (a str) per line, in UTF-8."""

    def __init__(self, file_path_prefix: str, file_name_suffix: str):
        super().__init__(file_path_prefix, coder=ToBytesCoder(), file_name_suffix=file_name_suffix,
                         mime_type="text/plain")

    def write_encoded_record(self, file_handle, encoded_value: bytes) -> None:
        file_handle.write(encoded_value + b"\n")


class _ToJsonFn(beam.DoFn):
    def __init__(self):
        self._dead_letters = metrics.counter("dead_letters", "written")

    def process(self, dead_letter):
        self._dead_letters.inc()
        yield dead_letter_json(dead_letter)


@dataclasses.dataclass
class WriteDeadLetters(beam.PTransform):
    """Writes DeadLetter records to ``OUTPUT_DIR/dead_letters/dead_letters-SSSSS-of-NNNNN.jsonl``.

    Written through a Beam file sink (temporary files, then a rename;
    ``transforms.sink_write``), so retried bundles leave no duplicates. At
    least one shard is written, even when there are no dead letters, so
    readers always find the directory.
    Counter (``transforms.metrics``): ``dead_letters.written``.

    Args:
      output_dir: the job's output directory (local path or URL).
    """

    output_dir: str

    def expand(self, dead_letters):
        prefix = FileSystems.join(self.output_dir, DEAD_LETTERS_DIR, DEAD_LETTER_PREFIX)
        return (
            dead_letters
            | "ToJson" >> beam.ParDo(_ToJsonFn())
            | "WriteJsonLines" >> WriteWithSink(_LinesSink(prefix, DEAD_LETTER_SUFFIX))
        )
