"""The report page in a real browser: headless Chromium opens index.html from disk.

The live box must give exactly ``Tokenizer.encode``'s IDs for the presets as
text is typed and pasted; its pattern must split every code point as the
``regex`` module does; the charts and the visualizer must be there; and the
page must make no network request.
"""

import shutil

import pytest

from bpe.pretokenize import PreTokenizer
from benchmarks.chromium import Chromium
from tests.support.cli import IN_MEMORY, report
from tests.support.outputs import read_report
from tests.support.real_text import MULTILINGUAL_LINES, stdlib_lines
from tests.support.toy_tokenizers import train_with_pattern

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")

PATTERNS = ("gpt2", "cl100k", "o200k", r"\w+\b|\s+|[^\w\s]+")  # the last has no exact JavaScript form
TYPED = ("Hello, world! It's 42.", "Привет, мир!", "你好，世界", "カタカナ ひらがな", "안녕 세계", "مرحبا", "नमस्ते", "e\u0301 ſ K 🙂")
PASTED = "".join(MULTILINGUAL_LINES) + "tabs\t\tand   spaces  \n\n\n  trailing   "


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """(index.html path, report.json, tokenizers) for the three presets and one custom pattern."""
    root = tmp_path_factory.mktemp("page")
    docs = [line.decode() for line in stdlib_lines()[:3000]] + list(MULTILINGUAL_LINES) * 10
    tokenizers, argv = [], []
    for n, pattern in enumerate(PATTERNS):
        tok = train_with_pattern(docs, pattern, vocab_size=700)
        tok.save(str(root / f"tok{n}"))
        tokenizers.append(tok)
        argv.append(f"--tokenizer={root / f'tok{n}'}")
    corpus = root / "corpus.txt"
    corpus.write_bytes("".join(MULTILINGUAL_LINES).encode() + b"".join(stdlib_lines()[:200]) + b"bad \xff\xe4\xb8 end\n")
    assert report(*argv, f"--input={corpus}", f"--output={root / 'out'}", "--sample-documents=300", *IN_MEMORY) == 0
    return root / "out" / "index.html", read_report(root / "out"), tokenizers


@pytest.fixture(scope="module")
def browser(page, tmp_path_factory):
    path, _, _ = page
    with Chromium(tmp_path_factory.mktemp("profile"), CHROMIUM) as chromium:
        chromium.open(path.as_uri())
        assert chromium.evaluate("document.body.dataset.ready") == "1"
        yield chromium


def live_ids(browser, index: int) -> list[int]:
    shown = browser.evaluate(f"document.querySelector('#live-{index} .live-tokens').dataset.ids")
    spans = browser.evaluate(f"[...document.querySelectorAll('#live-{index} .live-tokens .tok')].map(s => +s.dataset.id)")
    ids = [int(i) for i in shown.split(",")] if shown else []
    assert spans == ids
    return ids


def set_box(browser, text: str, per_character: bool) -> str:
    browser.evaluate("(() => { const box = document.getElementById('live-input'); box.value = ''; box.focus(); box.dispatchEvent(new Event('input')); })()")
    browser.type_text(text, per_character=per_character)
    return browser.evaluate("document.getElementById('live-input').value")


@pytest.mark.parametrize("per_character", [True, False], ids=["typed", "pasted"])
def test_live_box_gives_the_python_ids_for_every_preset(page, browser, per_character):
    _, _, tokenizers = page
    texts = TYPED if per_character else (PASTED, " ".join(TYPED) * 3)
    for text in texts:
        value = set_box(browser, text, per_character)
        assert value == text.replace("\r\n", "\n")  # a textarea keeps LF only
        for index, tok in enumerate(tokenizers[:3]):
            assert live_ids(browser, index) == tok.encode(value), (PATTERNS[index], value)
            count = browser.evaluate(f"document.querySelector('#live-{index} .live-count').textContent")
            assert count == f"{len(tok.encode(value))} tokens"


def test_a_pattern_without_an_exact_javascript_form_says_so(browser):
    statuses = browser.evaluate("[...document.querySelectorAll('.live-status')].map(e => e.textContent)")
    assert all(s.startswith("Verified against") for s in statuses[:3])
    assert statuses[3].startswith("Live encoding is off for this tokenizer") and "word boundaries" in statuses[3]
    set_box(browser, "word boundaries", per_character=False)
    assert browser.evaluate("document.querySelectorAll('#live-3 .tok').length") == 0


def code_point_sweeps() -> list[str]:
    """Every code point but the surrogates in order, and each one between spaces and letters."""
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    return ["".join(points), "".join(f"{c} {c}x'{c}1\n" for c in points[::3]),
            "".join(f" {c}'s{c}{c}\r\n" for c in points[1::3])]


def test_the_browser_pattern_splits_every_code_point_as_python_does(page, browser):
    for sweep_number, text in enumerate(code_point_sweeps()):
        browser.send("Runtime.evaluate", expression=f"window.sweep = {_js_string(text)}; 0", returnByValue=True)
        for index, pattern in enumerate(PATTERNS[:3]):
            got = browser.evaluate(f"window.liveEncoders[{index}].pieces(window.sweep).map(p => [...p].length).join(',')")
            want = ",".join(str(len(p)) for p in PreTokenizer(pattern).split(text))
            assert got == want, (pattern, sweep_number)


def _js_string(text: str) -> str:
    import json

    return json.dumps(text)


def test_charts_and_visualizer_are_there(page, browser):
    _, result, tokenizers = page
    assert browser.evaluate("document.querySelectorAll('svg.chart').length") >= 8
    assert browser.evaluate("document.querySelectorAll('svg.chart rect').length") > 20
    assert browser.evaluate("document.querySelectorAll('svg.chart polyline').length") == len(tokenizers)
    shown = browser.evaluate("[...document.querySelectorAll('#visualizer .doc')].map(d => [...d.querySelectorAll('.tok')].map(s => +s.dataset.id))")
    expected = [ids for doc in result["visualizer"] for ids in doc["tokens"]]
    assert shown == expected and len(shown) >= 8
    titles = browser.evaluate("[...document.querySelectorAll('#visualizer .tok')].map(s => s.title)")
    first = result["visualizer"][0]["tokens"][0][0]
    assert titles[0] == f"ID {first} · bytes {tokenizers[0].token_bytes(first).hex(' ')}"
    # Partial UTF-8 is shown as bytes, never dropped: the spans spell every byte.
    partial = browser.evaluate("[...document.querySelectorAll('#visualizer .tok.partial')].map(s => s.textContent)")
    assert partial and all(p.startswith("\\x") for p in partial)


def test_the_page_makes_no_network_request(page, browser, tmp_path):
    path, _, _ = page
    set_box(browser, "more text", per_character=False)
    browser.screenshot(tmp_path / "report.png")  # kept out of the repository (a temporary directory)
    assert browser.requests == [path.as_uri()]
    failed = [e for e in browser.events if e.get("method") == "Network.loadingFailed"]
    assert failed == []


def test_the_page_is_text_and_shows_control_tokens_as_before(page, browser):
    """Byte tokens 0x00-0x1F are in the token lists: the file holds no raw control byte
    (grep reads it as text), and the browser shows what the raw bytes showed: the same
    characters, a NUL dropped and a CR read as LF, as the HTML parser does with raw ones."""
    import subprocess

    path, result, _ = page
    data = path.read_bytes()
    raw = sorted({b for b in data if (b < 0x20 and b not in b"\t\n\r") or b == 0x7F})
    assert raw == [], raw
    grep = subprocess.run(["grep", "-c", ".", str(path)], capture_output=True, text=True)
    assert grep.returncode == 0 and grep.stdout.strip().isdigit(), grep.stdout
    entries = result["tokenizers"][0]["vocabulary"]["never_produced"]["tokens"][:200]
    assert any(e["text"] == "\x01" for e in entries) and any(e["text"] == "\x00" for e in entries)
    shown = browser.evaluate("[...document.querySelectorAll('#never_produced-0 code.tokentext')].map(c => c.textContent)")
    assert shown == [e["text"].replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n") for e in entries]


def test_the_health_section_shows_report_json_lists_and_counts(page, browser):
    _, result, tokenizers = page
    for t, tok in enumerate(result["tokenizers"]):
        health = tok["health"]
        for name in ("no_merge_path", "not_utf8"):
            ids = browser.evaluate(
                f"[...document.querySelectorAll('#{name}-{t} tbody tr')].map(r => +r.cells[0].dataset.value)")
            assert ids == [e["id"] for e in health[name]["tokens"][:200]]
        assert health["not_utf8"]["count"] >= 128 and health["no_merge_path"]["count"] == 0  # trained: all reachable
        shown = browser.evaluate(f"[...document.querySelectorAll('#health h3')][{t}].nextElementSibling.textContent")
        assert shown.startswith(f"0 tokens no merge path reaches (BPE never produces them from text); "
                                f"{health['not_utf8']['count']:,} tokens whose bytes are not valid UTF-8")
