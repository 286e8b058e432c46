"""The report's array code against the plain definitions it stands for: code point classes,
the class of a span, a document's dominant script, the sample's segmentation in parts,
token lengths and the page's check texts."""

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bpe import scripts
from tests.support.real_text import MULTILINGUAL_LINES, stdlib_lines
from tests.support.toy_tokenizers import pieces_with_bpe_tokens, train_small

SPANS = (
    "hello", " the", " 42", ");\n", "\n\n", "\u0301abc", "e\u0301", "中文", " Привет", "\t", "x\u200d\U0001f642",
)
INVALID = (b"bad \xff\xfe", b"\xe4\xb8", b"\x80", b" \xe4\xb8\xad\xe6")


@pytest.fixture(scope="module")
def tokenizer():
    docs = [line.decode() for line in stdlib_lines()[:2000]] + list(MULTILINGUAL_LINES) * 10
    return train_small(docs, vocab_size=700)


def plain_class_of_span(data: bytes) -> int:
    return scripts.class_of_span(scripts.classify(data.decode("utf-8", "surrogateescape")))


def test_classes_looked_up_as_met_equal_the_whole_table():
    table = np.frombuffer(scripts.code_point_classes(), dtype=np.uint8)
    code_points = np.arange(0x110000, dtype=np.uint32)
    np.random.default_rng(0).shuffle(code_points)
    for chunk in np.array_split(code_points, 7):  # met a few at a time, in no order
        assert np.array_equal(scripts.classes_of(chunk), table[chunk])
    assert np.array_equal(scripts.classes_of(np.arange(0x110000, dtype=np.uint32)), table)


def test_span_classes_equal_class_of_span_of_each_decoded_on_its_own():
    from transforms.report.figures import span_classes

    spans = [s.encode() for s in SPANS] + list(INVALID)
    assert span_classes(spans).tolist() == [plain_class_of_span(s) for s in spans]
    # A combining mark first takes "other", as classify does on its own (not the class before it).
    assert span_classes(["\u0301".encode(), b"a"]).tolist() == [scripts.OTHER, scripts.SCRIPTS.index("Latin")]
    assert span_classes([]).tolist() == []


def plain_dominant(data: bytes) -> int:
    classes = scripts.classify(data.decode("utf-8", "surrogateescape"))
    counts = [classes.count(i) for i in range(len(scripts.SCRIPTS))]
    writing = [i for i in sorted(scripts.WRITING) if counts[i]]
    if writing:
        return max(writing, key=lambda i: (counts[i], -i))
    return max(range(len(counts)), key=lambda i: (counts[i], -i))


def test_dominant_classes_equal_the_plain_definition():
    from transforms.report.sample import dominant_classes

    docs = [line.encode() for line in MULTILINGUAL_LINES] + list(INVALID) + [
        b"", b"12345 ...", "Привет hello".encode(), "ab Пр".encode(), "中文 日本語 カタカナ".encode(), b"\n\n",
    ]
    assert dominant_classes(docs) == [plain_dominant(d) for d in docs]
    assert dominant_classes([]) == []


def plain_segmentation(tok, documents) -> np.ndarray:
    """[class, (pieces, bytes, bpe, greedy, fewest)], one piece at a time with the plain segmentations."""
    from bpe.segmentation import Vocabulary

    vocabulary = Vocabulary([tok.token_bytes(i) for i in range(256 + len(tok.merges))])
    table = np.zeros((len(scripts.SCRIPTS), 5), dtype=np.int64)
    for data in documents:
        for piece, bpe in pieces_with_bpe_tokens(tok, data):
            greedy, fewest = vocabulary.both(piece)
            table[plain_class_of_span(piece)] += (1, len(piece), bpe, len(greedy), len(fewest))
    return table


def test_the_sample_segmented_in_parts_equals_one_piece_at_a_time(tokenizer, monkeypatch):
    from transforms.report import measures as report
    from transforms.report.figures import Figures
    from transforms.report.sample import Segmenter
    from transforms.report.tokens import MeasuredTokenizer

    documents = [line for line in stdlib_lines()[2000:2300]] + [l.encode() for l in MULTILINGUAL_LINES] + list(INVALID)
    random.Random(0).shuffle(documents)
    segmenter = Segmenter(MeasuredTokenizer(tokenizer))
    expected = plain_segmentation(tokenizer, documents)
    assert np.array_equal(segmenter.count(documents), expected)
    figures = Figures.empty([tokenizer.vocab_size] * 2, len(documents))
    figures.sample = [(b"key", "source", "file", i, data, len(data)) for i, data in enumerate(documents)]
    monkeypatch.setattr(report, "SAMPLE_PART_BYTES", 500)  # many parts, pieces met again in later ones
    shown = [7, 3, 250]
    parts = report.sample_parts(figures, 2, shown)
    assert len(parts) > 10
    for t in (0, 1):  # every document once per tokenizer, in order, each part at most 500 bytes or one document
        mine = [part for part in parts if part.tokenizer == t]
        assert [part.index for part in mine] == list(range(len(mine)))
        assert [data for part in mine for data in part.documents] == documents
        assert all(len(part.documents) == 1 or sum(map(len, part.documents)) <= 500 for part in mine)
        # Each visualizer document is marked with its place, in the part that holds it.
        places = [place for part in mine for place in part.shown]
        assert [places[i] for i in shown] == [0, 1, 2] and places.count(-1) == len(documents) - 3
    # Tokenizer 1's tables come first and out of order: each tokenizer sums its own.
    segmented = [(part.tokenizer, segmenter.count(part.documents)) for part in reversed(parts)]
    assert np.array_equal(report.segmentation_tables(2, segmented), np.stack([expected, expected]))
    assert np.array_equal(report.segmentation_tables(2, segmented[: len(parts) // 2]),
                          np.stack([np.zeros_like(expected), expected]))
    figures.sample = []
    # No sample: each tokenizer still gets its part 0, which carries the fixed check texts.
    assert report.sample_parts(figures, 2) == [report.SamplePart(0, 0, [], []), report.SamplePart(1, 0, [], [])]
    assert np.array_equal(report.segmentation_tables(1, []), np.zeros((1, *expected.shape), dtype=np.int64))


def test_segment_gives_the_table_of_count_and_each_documents_ids(tokenizer):
    from transforms.report.sample import Segmenter, visualizer_tokens
    from transforms.report.tokens import MeasuredTokenizer

    documents = [line for line in stdlib_lines()[:50]] + [l.encode() for l in MULTILINGUAL_LINES] + list(INVALID)
    measured = MeasuredTokenizer(tokenizer)
    table, ids = Segmenter(measured).segment(documents)
    assert np.array_equal(table, plain_segmentation(tokenizer, documents))
    assert [i.tolist() for i in ids] == [tokenizer.encode(d) for d in documents]
    long = "Привет, мир! ".encode() * 200
    tokens = visualizer_tokens(measured, np.array(tokenizer.encode(long), dtype=np.uint32))
    assert len(tokenizer.decode_bytes(tokens)) <= 1200 < len(tokenizer.decode_bytes(tokenizer.encode(long)[: len(tokens) + 1]))


def test_combined_pieces_put_visualizer_tokens_and_checks_in_place(tokenizer):
    from transforms.report import combine_measures

    figures = {"token_counts": [[0], [0]], "visualizer": [{"script": "Latin"}, {"script": "Cyrillic"}]}
    pieces = {
        "figures": figures,
        "part-1-1": {"tokenizer": 1, "segmentation": np.ones((len(scripts.SCRIPTS), 5), dtype=int).tolist(),
                     "visualizer": [[1, [11]], [0, [10]]], "checks": [[1, "b", [2]], [0, "a", [1]]]},
        "part-1-0": {"tokenizer": 1, "segmentation": np.ones((len(scripts.SCRIPTS), 5), dtype=int).tolist(),
                     "visualizer": [], "checks": [[-1, "x", [9]], [-1, "y", [8]]], "per_tokenizer": "one"},
        "part-0-0": {"tokenizer": 0, "segmentation": np.zeros((len(scripts.SCRIPTS), 5), dtype=int).tolist(),
                     "visualizer": [[0, [5]], [1, [6]]], "checks": [[-1, "x", [7]]], "per_tokenizer": "zero"},
    }
    measures = combine_measures(pieces, [tokenizer, tokenizer], ["x"], per_tokenizer=lambda tok: "driver")
    assert measures["per_tokenizer"] == ["zero", "one"]  # each tokenizer's part 0 made its own
    assert [doc["tokens"] for doc in measures["visualizer"]] == [[[5], [10]], [[6], [11]]]
    assert measures["checks"] == [[{"text": "x", "ids": [7]}],
                                  [{"text": "x", "ids": [9]}, {"text": "y", "ids": [8]},
                                   {"text": "a", "ids": [1]}, {"text": "b", "ids": [2]}]]
    assert np.array(measures["segmentation"]).sum(axis=(1, 2)).tolist() == [0, 2 * 5 * len(scripts.SCRIPTS)]
    # A job without documents wrote no pieces: the check texts are encoded by the driver.
    empty = combine_measures({}, [tokenizer], ["Привет"], per_tokenizer=lambda tok: tok.vocab_size)
    assert empty["per_tokenizer"] == [tokenizer.vocab_size]
    assert empty["checks"] == [[{"text": "Привет", "ids": tokenizer.encode("Привет")}]] and empty["visualizer"] == []
    assert empty["sample_documents"] == 0 and empty["token_counts"] == [[0] * tokenizer.vocab_size]


def test_a_visualizer_document_is_a_check_text_only_where_its_tokens_are_valid_utf8(tokenizer):
    from transforms.report.measure_tokenizers import _text

    assert _text(tokenizer, tokenizer.encode("Привет, мир")) == "Привет, мир"
    assert _text(tokenizer, tokenizer.encode(b"bad \xff")) is None
    assert _text(tokenizer, [0xE4]) is None  # one byte of "中" (IDs 0..255 are the bytes)


def test_token_lengths_are_the_lengths_of_every_token(tokenizer):
    from transforms.report.tokens import token_lengths

    lengths = token_lengths(tokenizer)
    assert lengths.tolist() == [len(tokenizer.token_bytes(i)) for i in range(tokenizer.vocab_size)]


def test_a_batch_of_one_byte_characters_counts_its_invalid_bytes_as_fallback(tokenizer):
    from transforms.report.figures import Quantity, measure_batch
    from transforms.report.tokens import MeasuredTokenizer

    data = b"bad \xff\xfe bytes \x80\n"
    figures = measure_batch([("s", data)], [MeasuredTokenizer(tokenizer)])
    invalid = [i for i in tokenizer.encode(data) if tokenizer.token_bytes(i) in (b"\xff", b"\xfe", b"\x80")]
    assert invalid
    assert figures.counts["s"][0, Quantity.FALLBACK].sum() == len(invalid)
    assert figures.counts["s"][0, Quantity.FALLBACK, scripts.INVALID] == len(invalid)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=6), st.randoms(use_true_random=False))
def test_the_figures_do_not_depend_on_how_documents_are_batched(tokenizer, cuts, rng):
    from transforms.report.figures import Figures, measure_batch
    from transforms.report.tokens import MeasuredTokenizer

    documents = [(f"source-{i % 3}", line.encode()) for i, line in enumerate(MULTILINGUAL_LINES)]
    documents += [("source-0", data) for data in INVALID] + [("source-1", "e\u0301\u0301x \u0301".encode())]
    documents += [("source-2", line) for line in stdlib_lines()[:20]]
    rng.shuffle(documents)
    measured = [MeasuredTokenizer(tokenizer)]
    whole = measure_batch(documents, measured)
    edges = sorted({0, len(documents), *(c % (len(documents) + 1) for c in cuts)})
    parts = Figures.empty([tokenizer.vocab_size])
    for a, b in zip(edges, edges[1:]):
        parts.merge(measure_batch(documents[a:b], measured))
    assert sorted(parts.counts) == sorted(whole.counts)
    for source in whole.counts:
        assert np.array_equal(parts.counts[source], whole.counts[source]), source
        assert np.array_equal(parts.words[source], whole.words[source])
    assert np.array_equal(parts.token_counts[0], whole.token_counts[0])


def test_tokens_whose_bytes_alone_decide_their_class_have_it_in_the_table(tokenizer):
    from transforms.report.tokens import MeasuredTokenizer

    measured = MeasuredTokenizer(tokenizer)
    kinds = set()
    for token_id in range(tokenizer.vocab_size):
        data = tokenizer.token_bytes(token_id)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        classes = scripts.classify(text) if text else []
        if not text or scripts.code_point_classes()[ord(text[0])] == scripts.INHERITED:
            assert measured.classes[token_id] == -1, data
            kinds.add("around")
        else:
            assert measured.classes[token_id] == scripts.class_of_span(classes), data
            assert measured.characters[token_id] == len(text)
            kinds.add(scripts.SCRIPTS[measured.classes[token_id]])
    assert {"around", "Latin", "Cyrillic", "Arabic", "whitespace", "punctuation", "digits"} <= kinds


def test_token_kinds_are_the_distinct_class_length_and_characters_of_the_known_tokens(tokenizer):
    from transforms.report.tokens import MeasuredTokenizer

    measured = MeasuredTokenizer(tokenizer)
    n_kinds = len(measured.kind_classes)
    known = measured.classes >= 0
    assert np.array_equal(measured.kinds == n_kinds, ~known)
    kind = measured.kinds[known]
    assert np.array_equal(measured.kind_classes[kind], measured.classes[known])
    assert np.array_equal(measured.kind_lengths[kind], measured.lengths[known])
    assert np.array_equal(measured.kind_characters[kind], measured.characters[known])
    triples = set(zip(measured.kind_classes.tolist(), measured.kind_lengths.tolist(), measured.kind_characters.tolist()))
    assert len(triples) == n_kinds == len(set(kind.tolist())) < known.sum()


def test_text_span_classes_equal_class_of_span_of_classify():
    from transforms.report.tokens import text_span_classes

    texts = [*SPANS, "\u0301", "\u0301\u0301", "\u0301a\u0301", "a\u0301\u0301", " \u0301", "\u0301 ", "\udcff", "x\udce4", "\n"]
    assert text_span_classes(texts).tolist() == [scripts.class_of_span(scripts.classify(t)) for t in texts]
    assert text_span_classes(["\u0301"]).tolist() == [scripts.OTHER]  # no character that is not combining
    with pytest.raises(ValueError, match="never empty"):
        text_span_classes(["a", ""])


def test_a_batch_encoded_from_its_code_points_gives_each_documents_ids(tokenizer, monkeypatch):
    from bpe.engines import AcceleratedEngine
    from transforms.report.tokens import MeasuredTokenizer

    measured = MeasuredTokenizer(tokenizer)
    documents = [line for line in stdlib_lines()[:200]] + [l.encode() for l in MULTILINGUAL_LINES] + [b"", "x" * 5000]
    documents[-1] = documents[-1].encode()
    guarded = [*documents[:3], "Armenian \u0558 here".encode()]  # U+0558: a code point gigatoken lacks
    monkeypatch.setattr("transforms.report.tokens.CHUNK_SIZE", 4096)  # the long document goes the usual way
    for docs in (documents, guarded):
        code_points = np.frombuffer(b"".join(docs).decode("utf-8").encode("utf-32-le"), dtype=np.uint32)
        got = measured.encode_valid(docs, code_points)
        assert [ids.tolist() for ids in got] == [tokenizer.encode(d) for d in docs]
        assert all(ids.dtype == np.uint32 for ids in got)
    engine = tokenizer.engine
    if isinstance(engine, AcceleratedEngine):  # the accelerated configuration
        assert engine.takes(np.array([ord(c) for c in "hello Привет 中文"], dtype=np.uint32))
        assert not engine.takes(np.array([ord("a"), 0x558], dtype=np.uint32))
        assert engine.encode_taken("Привет, мир".encode()).tolist() == tokenizer.encode("Привет, мир")
