"""What an input pattern means: unreadable matches are dead letters, a directory means its files."""

import os
import socket

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_pipeline

from pipeline import cli
from tests.support.cli import IN_MEMORY
from tests.support.read_assertions import check_read, text_documents
from transforms.read import Document, match_inputs


@pytest.fixture
def unreadable(corpus, tmp_path):
    """A good file beside entries the glob matches but the reader cannot read.

    Returns (good path, {path: expected reason substring}).
    """
    good = corpus.write("good.txt", b"fine\n")
    dangling = corpus.path("dangling.txt")
    os.symlink(corpus.path("gone.txt"), dangling)
    fifo = corpus.path("fifo.txt")
    os.mkfifo(fifo)
    # A socket path must be short; bind in a short directory and move it in.
    sock = socket.socket(socket.AF_UNIX)
    short = f"/tmp/bpe-{os.getpid()}.sock"
    sock.bind(short)
    sock.close()
    os.rename(short, corpus.path("socket.txt"))
    loop = corpus.path("loop.txt")
    os.symlink(loop, loop)
    expected = {
        dangling: "cannot stat file (a symbolic link to",
        fifo: "not a regular file but a FIFO",
        corpus.path("socket.txt"): "not a regular file but a socket",
        loop: "cannot stat file (a symbolic link to",
    }
    return good, expected


def test_unreadable_matches_are_dead_letters(corpus, unreadable):
    good, expected = unreadable
    dead = [(path, -1, reason) for path, reason in expected.items()]
    check_read([corpus.path("*")], [Document(good, 1, b"fine\n", None)], dead)
    # Named one by one (no wildcard) they are dead letters too, not "no file matches".
    check_read(sorted(expected), [], dead)


def test_match_inputs_keeps_unreadable_matches(corpus, unreadable):
    good, expected = unreadable
    assert match_inputs([corpus.path("*")]) == sorted([good, *expected])
    dangling = corpus.path("dangling.txt")
    assert match_inputs([dangling]) == [dangling]


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists directories without read permission")
def test_a_directory_that_cannot_be_listed_is_a_dead_letter(corpus):
    good = corpus.write("a/good.txt", b"fine\n")
    corpus.write("b/hidden.txt", b"x\n")
    locked = corpus.path("b")
    os.chmod(locked, 0)
    try:
        check_read([corpus.path("*/*.txt")], [Document(good, 1, b"fine\n", None)],
                   [(locked, -1, "cannot list directory: PermissionError")])
        # A pattern that cannot match under it does not care.
        check_read([corpus.path("a/*.txt")], [Document(good, 1, b"fine\n", None)])
    finally:
        os.chmod(locked, 0o755)


def test_strict_train_fails_on_a_dangling_symlink(corpus, unreadable, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli.main(["train", "--no-progress", "--input", corpus.path("*.txt"), "--vocab-size", "260",
                     "--output", str(out), "--strict", *IN_MEMORY])
    assert code == 2
    err = capsys.readouterr().err
    assert "(--strict)" in err and "dangling.txt" in err
    assert not (out / "tokenizer.json").exists()


def test_a_directory_means_the_files_directly_in_it(corpus):
    a = corpus.write("data/a.txt", b"one\ntwo\n")
    b = corpus.write("data/b.jsonl", b'{"text": "three"}\n')
    corpus.write("data/sub/c.txt", b"not read: directories are not recursed\n")
    data = corpus.path("data")
    expected = text_documents(a, [b"one\n", b"two\n"]) + [Document(b, 1, b"three", None)]
    for pattern in (data, data + "/", "file://" + data):
        assert match_inputs([pattern]) == [a, b]
        check_read([pattern], expected)
    # The whole tree, when asked for.
    assert len(match_inputs([data + "/**"])) == 3


@pytest.mark.parametrize("layout", ["empty", "only a subdirectory"])
def test_a_directory_without_files_matches_nothing(corpus, tmp_path, capsys, layout):
    data = corpus.path("data")
    os.makedirs(os.path.join(data, "sub") if layout != "empty" else data)
    with pytest.raises(FileNotFoundError, match=f"^no file matches {data}$"):
        match_inputs([data])
    check_read([data], [], [(data, -1, f"no file matches {data}")])
    code = cli.main(["train", "--no-progress", "--input", data, "--vocab-size", "260",
                     "--output", str(tmp_path / "out"), *IN_MEMORY])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"beam-bpe train: error: --input: no file matches {data}"]


def test_an_object_store_prefix_means_the_files_under_it(s3_bucket):
    client, options = s3_bucket
    client.put_object(Bucket="corpus", Key="dir/a.txt", Body=b"a\n")
    client.put_object(Bucket="corpus", Key="dir/b.txt", Body=b"b\n")
    client.put_object(Bucket="corpus", Key="dirt.txt", Body=b"not under dir/\n")
    with test_pipeline.TestPipeline(options=PipelineOptions(options)):
        # The pipeline gives FileSystems its S3 options.
        assert match_inputs(["s3://corpus/dir"]) == ["s3://corpus/dir/a.txt", "s3://corpus/dir/b.txt"]
    check_read(["s3://corpus/dir"], text_documents("s3://corpus/dir/a.txt", [b"a\n"])
               + text_documents("s3://corpus/dir/b.txt", [b"b\n"]), options=options)


def test_files_are_planned_largest_first_whatever_their_names_and_patterns(tmp_path):
    # A runner spreads the reads in the order they come (Flink deals them out in turn): largest
    # first, two workers' shares differ by less than one file.
    from transforms.read.matching import MatchedFile, MatchFilesFn

    sizes = {"a.txt": 10, "b.txt": 300, "c.txt": 20, "d.txt": 300, "e.txt": 5}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x\n" * (size // 2))
    out = list(MatchFilesFn().process([str(tmp_path / "[ace].txt"), str(tmp_path / "*.txt")]))
    assert [(os.path.basename(f.path), f.size) for f in out if isinstance(f, MatchedFile)] == [
        ("b.txt", 300), ("d.txt", 300), ("c.txt", 20), ("a.txt", 10), ("e.txt", 4)]
