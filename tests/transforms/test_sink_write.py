"""A Beam file sink run by transforms.sink_write: every record once, the shards asked for,
an empty output still one file, and only committed bundles' files published."""

import os

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline

from apache_beam.coders.coders import ToBytesCoder
from apache_beam.io.filebasedsink import FileBasedSink

from transforms.sink_write import WriteWithSink, _finish, temp_dir_beside


class _LinesSink(FileBasedSink):
    """Files of text lines, one record (a str) per line, in UTF-8: the simplest sink."""

    def __init__(self, file_path_prefix: str, file_name_suffix: str):
        super().__init__(file_path_prefix, coder=ToBytesCoder(), file_name_suffix=file_name_suffix,
                         mime_type="text/plain")

    def write_encoded_record(self, file_handle, encoded_value: bytes) -> None:
        file_handle.write(encoded_value + b"\n")


def _lines(directory) -> list[str]:
    lines = []
    for name in os.listdir(directory):
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            lines += f.read().splitlines()
    return lines


def _write(tmp_path, records, options=(), **sink_args):
    sink = _LinesSink(str(tmp_path / "out" / "lines"), ".txt")
    for name, value in sink_args.items():
        setattr(sink, name, value)
    with TestPipeline(argv=list(options)) as p:
        _ = p | beam.Create(records) | WriteWithSink(sink)
    return sorted(os.listdir(tmp_path / "out"))


def test_every_record_is_written_once_in_files_of_one_bundle_each(tmp_path):
    records = [f"record {i} é" for i in range(500)]
    names = _write(tmp_path, records, ["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    assert names and all(name.startswith("lines-") and name.endswith(".txt") for name in names)
    assert sorted(_lines(tmp_path / "out")) == sorted(records)


def test_num_shards_gives_exactly_that_many_files_even_with_fewer_records(tmp_path):
    assert _write(tmp_path, ["a", "b"], num_shards=5) == [f"lines-{i:05d}-of-00005.txt" for i in range(5)]
    assert sorted(_lines(tmp_path / "out")) == ["a", "b"]


def test_nothing_to_write_still_writes_one_empty_file_unless_the_sink_skips_it(tmp_path):
    assert _write(tmp_path / "kept", []) == ["lines-00000-of-00001.txt"]
    assert _lines(tmp_path / "kept" / "out") == []
    os.makedirs(tmp_path / "skipped" / "out")
    assert _write(tmp_path / "skipped", [], skip_if_empty=True) == []


def test_only_the_committed_bundles_files_are_published(tmp_path):
    """A retried bundle's first attempt leaves a temporary file no result names: it is
    removed with the temporary directory, never renamed into place."""
    sink = _LinesSink(str(tmp_path / "lines"), ".txt")
    temp_dir = temp_dir_beside(sink.file_path_prefix.get())
    os.makedirs(temp_dir)
    committed = sink.open_writer(temp_dir, "committed")
    committed.write("kept")
    result = committed.close()
    stray = sink.open_writer(temp_dir, "retried")
    stray.write("lost attempt")
    stray.close()
    published = list(_finish(None, sink, temp_dir, 1, [result]))
    assert [os.path.basename(name) for name in published] == ["lines-00000-of-00001.txt"]
    assert sorted(os.listdir(tmp_path)) == ["lines-00000-of-00001.txt"]
    assert _lines(tmp_path) == ["kept"]
