"""``WriteWithSink``: a Beam file sink's protocol, finished in one stage after the writes.

    names = records | WriteWithSink(sink)     # a FileBasedSink; the final file names

Beam's ``iobase.Write`` runs a file sink in four stages of its own besides the
writes: one makes the temporary directory, one gathers the bundles' results (a
GroupByKey), and two finish (check the destination, then rename). Every stage
of a job costs tens of milliseconds on DirectRunner, and a beam-bpe job has two
or three sinks. Here the temporary directory is named while the pipeline is
built and made by the first writer (or by the last step, when nothing was
written), and one step that runs once per job (from an Impulse) finishes, with
the bundles' results as a side input: the same protocol in one stage.

What the protocol keeps, the sink's own methods doing the work: each bundle
writes temporary files and only the files of committed bundles are renamed into
place, so a retried bundle leaves no duplicate; with ``num_shards`` the records
are spread over exactly that many files (one GroupByKey) and shards nothing
went to are written empty; a job with nothing to write writes one empty file,
unless the sink skips empty output.
"""

from __future__ import annotations

import dataclasses
import random
import uuid

import apache_beam as beam
from apache_beam.io.filebasedsink import FileBasedSink
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

__all__ = ["WriteWithSink", "temp_dir_beside", "make_dir"]


def temp_dir_beside(file_path_prefix: str) -> str:
    """A new temporary directory's name beside files named ``file_path_prefix*``, as Beam names it
    (``beam-temp-*``: what ``pipeline.command_machinery.outputs`` removes after an interrupted job)."""
    base, last = FileSystems.split(file_path_prefix)
    return FileSystems.join(base, f"beam-temp-{last}-{uuid.uuid1().hex}")


def make_dir(directory: str) -> None:
    """Makes the directory, which another worker may have made already."""
    if not FileSystems.exists(directory):
        try:
            FileSystems.mkdirs(directory)
        except IOError:
            if not FileSystems.exists(directory):
                raise


class _WriterFn(beam.DoFn):
    """A step that writes temporary files of ``sink`` into ``temp_dir``, which it makes first."""

    def __init__(self, sink: FileBasedSink, temp_dir: str):
        self._sink = sink
        self._temp_dir = temp_dir

    def setup(self):
        make_dir(self._temp_dir)


class _WriteBundleFn(_WriterFn):
    """Writes each bundle's records into temporary files; emits each file's result."""

    def start_bundle(self):
        self._writer = None

    def process(self, record):
        if self._writer is None:
            self._writer = self._sink.open_writer(self._temp_dir, str(uuid.uuid4()))
        self._writer.write(record)
        if self._writer.at_capacity():
            yield self._writer.close()
            self._writer = None

    def finish_bundle(self):
        if self._writer is not None:
            yield WindowedValue(self._writer.close(), GlobalWindow().max_timestamp(), [GlobalWindow()])


class _SpreadFn(beam.DoFn):
    """Keys records by shard, round robin from a random shard per bundle (as Beam's sink does)."""

    def __init__(self, shards: int):
        self._shards = shards

    def start_bundle(self):
        self._next = random.randrange(self._shards)

    def process(self, record):
        self._next = (self._next + 1) % self._shards
        yield self._next, record


class _WriteShardFn(_WriterFn):
    """Writes one shard's records, grouped, into one temporary file; emits its result."""

    def process(self, shard):
        writer = self._sink.open_writer(self._temp_dir, str(uuid.uuid4()))
        for record in shard[1]:
            writer.write(record)
        yield writer.close()


def _finish(unused_impulse, sink: FileBasedSink, temp_dir: str, min_shards: int, results):
    """Renames the committed bundles' files into place (empty ones added up to ``min_shards``)."""
    results = list(results)
    make_dir(temp_dir)
    checked = sink.pre_finalize(temp_dir, results)
    if len(results) < min_shards and (results or not sink.skip_if_empty):
        results += [sink.open_writer(temp_dir, str(uuid.uuid4())).close() for _ in range(min_shards - len(results))]
    yield from sink.finalize_write(temp_dir, results, checked) or ()


@dataclasses.dataclass
class WriteWithSink(beam.PTransform):
    """Writes a PCollection through a Beam ``FileBasedSink``.

    Args:
      sink: the sink; its ``num_shards`` (0: one file per bundle) and
        ``skip_if_empty`` apply as in Beam's ``Write``.

    Returns the PCollection of the final file names.
    """

    sink: FileBasedSink

    def __post_init__(self):
        super().__init__()

    def expand(self, records):
        temp_dir = temp_dir_beside(self.sink.file_path_prefix.get())
        shards = self.sink.num_shards
        if shards:
            results = (
                records
                | "Spread" >> beam.ParDo(_SpreadFn(shards))
                | "GroupIntoShards" >> beam.GroupByKey()
                | "WriteShards" >> beam.ParDo(_WriteShardFn(self.sink, temp_dir))
            )
        else:
            results = records | "WriteBundles" >> beam.ParDo(_WriteBundleFn(self.sink, temp_dir))
        return (
            records.pipeline
            | "Once" >> beam.Impulse()
            | "Finish" >> beam.FlatMap(_finish, self.sink, temp_dir, max(shards, 1), beam.pvalue.AsList(results))
            .with_output_types(str)
        )
