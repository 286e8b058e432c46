"""index.html: the report as one self-contained page (styles, script and data inline; no network).

Everything but the live box is plain HTML and SVG rendered here from
report.json, so the tables and charts read without JavaScript, and every number
on the page is one of report.json's (embedded whole in the page as
``<script type="application/json" id="report-data">``). The live box
(``assets/report.js``) encodes typed text with each tokenizer's merges in
the browser; its pattern is the exact JavaScript form of the tokenizer's
(``pipeline.report.pattern``), or the page says why there is none.
"""

from __future__ import annotations

import json
from html import escape
from importlib import resources
from typing import Sequence

from bpe.tokenizer import Tokenizer
from pipeline.report.charts import bar_chart, loglog_chart
from pipeline.report.json_report import display_source
from pipeline.report.pattern import UnsupportedPattern, to_javascript

# Rows shown of each token list; report.json holds them all.
LIST_ROWS = 200
# Check texts the live box must encode exactly as Python does before it shows IDs (with the
# visualizer's documents; ``transforms.report.MeasureTokenizers`` encodes them all).
CHECK_TEXTS = (
    "Hello world! It's 2024-06-01, isn't it?\n\tdef f(x):\n        return x**2  # 100%\n\n",
    "Привет, мир. Καλημέρα κόσμε. שלום עולם. مرحبا بالعالم. नमस्ते दुनिया। สวัสดีชาวโลก",
    "你好，世界！こんにちは世界、カタカナ。안녕하세요 세계.",
    "e\u0301 \u00a0\u2028\u3000\u0085x\ufeffy 🙂👍🏽 ſt K",
    "  leading  and trailing spaces   \r\n\r\nCRLF\u000b\u000c\u001c end ",
)


# C0 controls but tab, LF and CR, and DEL, as numeric character references: the HTML
# parser turns them back into the same characters, so the page shows what raw bytes
# showed while the file stays text (grep, diff). A NUL, which the parser drops from
# text, is dropped here. Byte tokens 0x00-0x1F put them in the token lists.
_CONTROLS = {0: "", **{c: f"&#x{c:x};" for c in (*range(1, 9), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)}}


def _asset(name: str) -> str:
    return resources.files("pipeline.report").joinpath("assets", name).read_text(encoding="utf-8")


def _json_script(element_id: str, value) -> str:
    # ensure_ascii and an escaped "<": no "</script>" and no lone surrogate can break the page.
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def _num(value, kind: str = "ratio") -> str:
    if value is None:
        return '<td class="num">–</td>'
    if kind == "int":
        shown = f"{value:,}"
    elif kind == "percent":
        shown = f"{value:+.1f}%"
    elif kind == "share":
        shown = f"{100 * value:.2f}%"
    else:
        shown = f"{value:.3f}"
    return f'<td class="num" data-value="{value!r}">{shown}</td>'


def _table(table_id: str, caption: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cells) + "</tr>" for cells in rows)
    return (f'<table id="{table_id}"><caption>{escape(caption)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _text(value: str) -> str:
    return f"<td>{escape(value)}</td>"


def _token_cell(entry: dict) -> str:
    return f'<td><code class="tokentext">{escape(entry["text"])}</code></td>'


# Table columns: (header, report.json key, how the number is shown).
COMPRESSION = (
    ("bytes", "bytes", "int"), ("characters", "characters", "int"), ("words", "words", "int"),
    ("tokens", "tokens", "int"), ("bytes/token", "bytes_per_token", "ratio"),
    ("chars/token", "characters_per_token", "ratio"), ("tokens/word", "tokens_per_word", "ratio"),
    ("byte fallback", "fallback_share", "share"),
)
SOURCES = (("documents", "documents", "int"), *COMPRESSION)
SEGMENTATION = (
    ("pieces", "pieces", "int"), ("bytes", "bytes", "int"), ("BPE", "bpe", "int"), ("greedy", "greedy", "int"),
    ("fewest", "fewest", "int"), ("BPE over fewest", "bpe_over_fewest_percent", "percent"),
    ("greedy over fewest", "greedy_over_fewest_percent", "percent"),
)


def _rows_table(table_id: str, caption: str, label: str, rows: Sequence[tuple[str, dict]], columns) -> str:
    """A table of (row label, report.json entry) with the given columns."""
    cells = [[_text(name), *(_num(entry[key], kind) for _, key, kind in columns)] for name, entry in rows]
    return _table(table_id, caption, [label, *(header for header, _, _ in columns)], cells)


def _per_script(report: dict) -> str:
    tokenizers = report["tokenizers"]
    scripts = [row["script"] for row in tokenizers[0]["by_script"]]
    parts = [
        _rows_table(f"script-{t}", f"{tok['name']}: compression per script", "script",
                    [*((r["script"], r) for r in tok["by_script"]), ("all", tok["total"])], COMPRESSION)
        for t, tok in enumerate(tokenizers)
    ]
    for key, title in (("bytes_per_token", "Bytes per token, per script"),
                       ("tokens_per_word", "Tokens per word, per script"),
                       ("fallback_share", "Share of byte-level fallback tokens, per script")):
        series = [(tok["name"], [_lookup(tok["by_script"], "script", s, key) for s in scripts]) for tok in tokenizers]
        parts.append(bar_chart(title, scripts, series))
    return "".join(parts)


def _lookup(rows: Sequence[dict], field: str, value: str, key: str):
    return next((r[key] for r in rows if r[field] == value), None)


def _per_source(report: dict) -> str:
    tokenizers = report["tokenizers"]
    names = [r["source"] for r in tokenizers[0]["by_source"]]
    shown = [display_source(s, names) for s in names]
    parts = [
        _rows_table(f"source-{t}", f"{tok['name']}: compression per source", "source",
                    list(zip(shown, tok["by_source"])), SOURCES)
        for t, tok in enumerate(tokenizers)
    ]
    series = [(tok["name"], [r["bytes_per_token"] for r in tok["by_source"]]) for tok in tokenizers]
    parts.append(bar_chart("Bytes per token, per source", shown, series))
    return "".join(parts)


def _comparison(report: dict) -> str:
    tokenizers = report["tokenizers"]
    if len(tokenizers) < 2:
        return '<p class="note">One tokenizer: give --tokenizer more than once to compare them side by side.</p>'
    first = tokenizers[0]["name"]
    headers = ["script", "bytes", *(f"{t['name']} tokens" for t in tokenizers),
               *(f"{t['name']} vs {first}" for t in tokenizers[1:])]
    rows = [[_text(r["script"]), _num(r["bytes"], "int"), *(_num(n, "int") for n in r["tokens"]),
             *(_num(d, "percent") for d in r["difference_percent"][1:])] for r in report["comparison"]]
    scripts = [r["script"] for r in report["comparison"]]
    series = [(f"{t['name']} vs {first}", [r["difference_percent"][i] for r in report["comparison"]])
              for i, t in enumerate(tokenizers) if i]
    caption = "Tokens per script, side by side (difference in percent of the first tokenizer's)"
    chart = bar_chart("Token count difference per script, percent", scripts, series)
    return _table("comparison", caption, headers, rows) + chart


def _token_list(table_id: str, caption: str, entries: Sequence[dict], with_count: bool) -> str:
    rows = [[_num(e["id"], "int"), _token_cell(e), _text(e["hex"]), *([_num(e["count"], "int")] if with_count else [])]
            for e in entries[:LIST_ROWS]]
    more = f" (first {LIST_ROWS} of {len(entries):,}; all in report.json)" if len(entries) > LIST_ROWS else ""
    return _table(table_id, caption + more, ["ID", "token", "bytes", *(["count"] if with_count else [])], rows)


def _vocabulary(report: dict) -> str:
    tokenizers = report["tokenizers"]
    curves = [(t["name"], t["vocabulary"]["rank_frequency"]) for t in tokenizers]
    parts = [loglog_chart("Token frequency: rank against count", curves)]
    for t, tok in enumerate(tokenizers):
        use, below = tok["vocabulary"], tok["vocabulary"]["rare"]["below"]
        parts.append(f"<h3>{escape(tok['name'])}</h3><p>{use['produced']:,} of {use['ordinary_tokens']:,} ordinary "
                     f"tokens were produced; {use['never_produced']['count']:,} never, {use['rare']['count']:,} "
                     f"fewer than {below:,} times.</p>")
        parts.append(_token_list(f"never_produced-{t}", "Tokens never produced", use["never_produced"]["tokens"], False))
        parts.append(_token_list(f"rare-{t}", f"Tokens produced fewer than {below} times", use["rare"]["tokens"], True))
        rows = [[_num(e["id"], "int"), _token_cell(e), _num(e["length"], "int"), _num(e["count"], "int")]
                for e in use["longest"]]
        parts.append(_table(f"longest-{t}", "Longest tokens", ["ID", "token", "bytes", "count"], rows))
        parts.append(_superwords(t, use["superwords"]))
    return "".join(parts)


def _superwords(t: int, superwords: dict) -> str:
    """The superword tokens (tokens that bridge a space) of one tokenizer: their share, the most used."""
    if not superwords["in_vocabulary"]:
        return "<p>No superword tokens (tokens that bridge a space).</p>"
    share = lambda value: "n/a" if value is None else f"{value:.1%}"  # noqa: E731
    rows = [[_num(e["id"], "int"), _token_cell(e), _num(e["length"], "int"), _num(e["count"], "int")]
            for e in superwords["most_used"]]
    return (f"<p>{superwords['in_vocabulary']:,} superword tokens (tokens that bridge a space): "
            f"{share(superwords['share_of_tokens'])} of the tokens produced, covering "
            f"{share(superwords['share_of_bytes'])} of the text's bytes.</p>"
            + _table(f"superwords-{t}", "Most used superword tokens", ["ID", "token", "bytes", "count"], rows))


def _health(report: dict) -> str:
    parts = []
    for t, tok in enumerate(report["tokenizers"]):
        health = tok["health"]
        unreachable, not_utf8 = health["no_merge_path"], health["not_utf8"]
        parts.append(f"<h3>{escape(tok['name'])}</h3><p>{unreachable['count']:,} tokens no merge path reaches "
                     f"(BPE never produces them from text); {not_utf8['count']:,} tokens whose bytes are not valid "
                     f"UTF-8 on their own; {health['never_produced']['count']:,} never produced on this corpus "
                     "(listed under Vocabulary use).</p>")
        parts.append(_token_list(f"no_merge_path-{t}", "Tokens no merge path reaches", unreachable["tokens"], False))
        parts.append(_token_list(f"not_utf8-{t}", "Tokens that are not valid UTF-8 on their own",
                                 not_utf8["tokens"], False))
    return "".join(parts)


def _segmentation(report: dict) -> str:
    corpus = report["corpus"]
    parts = [f'<p class="note">On the sample of {corpus["sample_documents"]:,} documents (the first '
             f'{corpus["sample_bytes_per_document"]:,} bytes of each), within the same pre-token pieces: '
             "BPE's tokens, greedy longest match's, and the fewest possible with the same vocabulary.</p>"]
    for t, tok in enumerate(report["tokenizers"]):
        seg = tok["segmentation"]
        rows = [*((r["script"], r) for r in seg["by_script"]), ("all", seg["total"])]
        parts.append(_rows_table(f"segmentation-{t}", f"{tok['name']}: BPE against greedy and fewest tokens",
                                 "script", rows, SEGMENTATION))
        scripts = [r["script"] for r in seg["by_script"]]
        series = [("BPE", [r["bpe_over_fewest_percent"] for r in seg["by_script"]]),
                  ("greedy", [r["greedy_over_fewest_percent"] for r in seg["by_script"]])]
        parts.append(bar_chart(f"{tok['name']}: tokens over the fewest possible, percent", scripts, series))
    return "".join(parts)


def _token_span(tokenizer: Tokenizer, token_id: int) -> tuple[str, str]:
    """A token's span without its colour: (what follows the class names, the rest)."""
    data = tokenizer.token_bytes(token_id)
    title = f"ID {token_id} · bytes {data.hex(' ')}"
    try:
        text = data.decode("utf-8")
        partial = any(ord(c) < 32 and c not in "\n\t" for c in text)
    except UnicodeDecodeError:
        partial = True
    if partial:
        shown = "".join(f"\\x{b:02x}" for b in data)
        return " partial", f'" data-id="{token_id}" title="{title}">{shown}</span>'
    return "", f'" data-id="{token_id}" title="{title}">{escape(text)}</span>'


def _token_spans(tokenizer: Tokenizer, ids: Sequence[int], known: dict[int, tuple[str, str]]) -> str:
    """The tokens as spans coloured in turn; ``known`` keeps each ID's span for the next call."""
    out = []
    for n, token_id in enumerate(ids):
        if token_id not in known:
            known[token_id] = _token_span(tokenizer, token_id)
        kind, rest = known[token_id]
        out.append(f'<span class="tok c{n % 6}{kind}{rest}')
    return "".join(out)


def _visualizer(report: dict, tokenizers: Sequence[Tokenizer]) -> str:
    parts = ['<p class="note">Sample documents by script, token boundaries coloured; hover a token for its ID '
             "and bytes. Bytes that are not whole UTF-8 characters on their own are shown as \\xNN.</p>"]
    names = [d["source"] for d in report["visualizer"]]
    known: list[dict[int, tuple[str, str]]] = [{} for _ in tokenizers]
    for d, doc in enumerate(report["visualizer"]):
        source = display_source(doc["source"], names)
        parts.append(f'<h3>{escape(doc["script"])}: {escape(source)}, record {doc["record"]:,} ({doc["bytes"]:,} bytes)</h3>')
        for t, (tok, ids) in enumerate(zip(report["tokenizers"], doc["tokens"])):
            spans = _token_spans(tokenizers[t], ids, known[t])
            parts.append(f'<div class="note">{escape(tok["name"])}: {len(ids):,} tokens shown</div>'
                         f'<div class="doc" id="doc-{d}-{t}">{spans}</div>')
    return "".join(parts)


def live_pattern(tok: Tokenizer) -> tuple[str | None, str | None]:
    """The live box's (JavaScript pattern, None) for the tokenizer, or (None, why there is none).

    The box replays merges under our ID contract (bytes 0..255, merges make the other IDs from
    256 on, in learned order, past any special tokens between them): a rank file's or a Hugging
    Face file's tokenizer gets none.
    """
    if tok.kind != "beam-bpe":
        names = {"tiktoken": "a tiktoken rank file", "huggingface": "a Hugging Face tokenizer.json"}
        return None, f"the live box encodes beam-bpe's own tokenizers; this one is {names.get(tok.kind, tok.kind)}"
    try:
        return to_javascript(tok.pattern), None
    except UnsupportedPattern as e:
        return None, str(e)


def _tokenizer_data(
    report: dict, tokenizers: Sequence[Tokenizer], checks: Sequence[Sequence[dict]],
    patterns: Sequence[tuple[str | None, str | None]],
) -> list[dict]:
    """What the live box needs per tokenizer: merges, the JavaScript pattern (or why not) and check texts."""
    return [
        {"index": t, "name": entry["name"], "pattern": pattern, "unsupported": unsupported,
         "merges": [i for pair in tok.merges for i in pair], "made": tok.piece_encoder.merged if tok.merges else [],
         "checks": list(checks[t])}
        for t, (entry, tok, (pattern, unsupported)) in enumerate(zip(report["tokenizers"], tokenizers, patterns))
    ]


def _live_box(report: dict) -> str:
    rows = "".join(f'<div class="live-row" id="live-{t}"><h3>{escape(tok["name"])}: <span class="live-count"></span>'
                   '</h3><div class="live-status note"></div><div class="doc live-tokens"></div></div>'
                   for t, tok in enumerate(report["tokenizers"]))
    return ('<noscript><p class="note">The live box needs JavaScript; everything else on this page works without '
            'it.</p></noscript><textarea id="live-input" spellcheck="false">Type or paste text here: Привет, 世界! '
            "def f(x): return x**2</textarea>" + rows)


def _tokenizers_table(report: dict) -> str:
    rows = [[_text(t["name"]), _num(t["vocab_size"], "int"), _text(t["pattern_preset"] or "custom"),
             _num(t["total"]["tokens"], "int"), _num(t["total"]["bytes_per_token"]),
             _num(t["total"]["tokens_per_word"]), _text(t["sha256"] or "")] for t in report["tokenizers"]]
    headers = ["name", "vocab size", "pattern", "tokens", "bytes/token", "tokens/word", "SHA-256"]
    return _table("tokenizers-table", "The tokenizers measured", headers, rows)


def render_page(
    report: dict, tokenizers: Sequence[Tokenizer], checks: Sequence[Sequence[dict]],
    patterns: Sequence[tuple[str | None, str | None]],
) -> str:
    """The whole page as one HTML string.

    ``checks[t]``: the texts ({"text", "ids"}) the live box must encode as tokenizer
    ``t`` does before it shows IDs (the measures' ``checks``). ``patterns[t]``:
    ``live_pattern`` of tokenizer ``t``.
    """
    corpus = report["corpus"]
    summary = (f"{corpus['documents']:,} documents, {corpus['bytes']:,} bytes, {corpus['characters']:,} characters, "
               f"{corpus['words']:,} words from {corpus['sources']:,} sources; {corpus['dead_letters']:,} records "
               "could not be read.")
    sections = [
        ("tokenizers", "Tokenizers", _tokenizers_table(report)),
        ("scripts", "Compression per script", _per_script(report)),
        ("sources", "Compression per source", _per_source(report)),
        ("compare", "Side by side", _comparison(report)),
        ("vocabulary", "Vocabulary use", _vocabulary(report)),
        ("health", "Vocabulary health", _health(report)),
        ("segmentation", "Segmentation: BPE against the fewest tokens", _segmentation(report)),
        ("visualizer", "Token visualizer", _visualizer(report, tokenizers)),
        ("live", "Live box", _live_box(report)),
    ]
    body = "".join(f'<section id="{sid}"><h2>{escape(title)}</h2>{html}</section>'
                   for sid, title, html in sections).translate(_CONTROLS)
    # The policy forbids every request: nothing on the page can reach the network.
    policy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        f"<title>beam-bpe report</title><style>{_asset('report.css')}</style></head><body>"
        f"<h1>beam-bpe report</h1><p>{escape(summary)}</p>{body}"
        f"{_json_script('report-data', report)}{_json_script('tokenizer-data', _tokenizer_data(report, tokenizers, checks, patterns))}"
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )
