"""The C merge loop, its pure-Python twin and the reference learn the same merges."""

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.interruptible import lowest_priority_and_default_sigint

from bpe import reference
from bpe.training import merge_loop, trainer
from bpe.reference import TIE_BREAKS
from bpe.training.trainer import train_merges



def test_the_compiled_loop_is_built():
    # pip install -e . builds it; without it training still works, only slower.
    if os.environ.get("BEAM_BPE_PURE_PYTHON") == "1":
        pytest.skip("BEAM_BPE_PURE_PYTHON=1 switches the C loop off")
    assert trainer._merges is not None, "bpe/training/_merges.c was not built: run pip install -e ."


@contextlib.contextmanager
def pure_python():
    """Runs the trainer with its pure-Python loop, as when the C loop is missing."""
    compiled, trainer._merges = trainer._merges, None
    try:
        yield
    finally:
        trainer._merges = compiled


def both_loops(*args, **kwargs):
    """train_merges with the C loop (when built) and with the Python loop."""
    with pure_python():
        python = train_merges(*args, progress=False, **kwargs)
    return train_merges(*args, progress=False, **kwargs), python


# Small alphabets and repeated counts make ties and runs like "aaaa" the norm;
# 0x80, 0xc3 and 0xff alone are invalid UTF-8.
ALPHABETS = [b"ab", b"abc", b"a", bytes([0, 255]), b"\x80\xc3\xff", "é√".encode(), b"a~\xa1 \x00"]
COUNTS = [
    st.sampled_from([0, 1, 2, 3, 5, 8]),
    st.integers(0, 50),
    st.sampled_from([2**62, 2**62 - 1, 2**61, 1, 3]),
    st.integers(0, 2**62),
]


@st.composite
def tables(draw):
    alphabet = draw(st.sampled_from(ALPHABETS))
    word = st.lists(st.sampled_from(alphabet), min_size=0, max_size=12).map(bytes)
    if draw(st.booleans()):  # str keys too, which add to the bytes of their UTF-8
        word = st.one_of(word, word.map(lambda w: w.decode("utf-8", "surrogateescape").encode("utf-8", "surrogatepass")))
    return draw(st.dictionaries(word, st.one_of(*COUNTS), max_size=14))


# The cases of both properties below: a table, how many merges, which tie-break.
CASES = dict(table=tables(), num_merges=st.integers(0, 30), tie_break=st.sampled_from(TIE_BREAKS))


@settings(max_examples=500, deadline=None)
@given(**CASES, min_frequency=st.integers(1, 3))
def test_both_loops_equal_the_reference(table, num_merges, min_frequency, tie_break):
    expected = reference.train_bytes(table, num_merges, min_frequency, tie_break=tie_break)
    compiled, python = both_loops(table, num_merges, min_frequency, tie_break=tie_break)
    assert compiled == expected
    assert python == expected


@settings(max_examples=200, deadline=None)
@given(**CASES, k=st.integers(0, 35))
def test_both_loops_resume_to_the_reference(table, num_merges, k, tie_break):
    expected = reference.train_bytes(table, num_merges, 1, tie_break=tie_break)
    checkpoint = train_merges(table, k, 1, progress=False, tie_break=tie_break)
    assert both_loops(table, num_merges, 1, resume_from=checkpoint, tie_break=tie_break) == (expected, expected)


def test_counts_beyond_64_bits_run_in_python_with_the_same_result():
    table = {b"ab": 2**70, b"abc": 2**64, b"bc": 3}
    words, counts = trainer._load_table(table)
    token_bytes = [bytes([b]) for b in range(256)]
    assert isinstance(trainer._new_loop(words, counts, token_bytes, 1, "bytes"), merge_loop.MergeLoop)
    assert both_loops(table, 5, 1) == (reference.train_bytes(table, 5, 1),) * 2


def test_the_compiled_loop_takes_64_bit_counts():
    if trainer._merges is None:
        pytest.skip("the C loop is not built")
    table = {b"ab": 2**64 - 1, b"abc": 2**63, b"bc": 2**63 + 1}
    words, counts = trainer._load_table(table)
    token_bytes = [bytes([b]) for b in range(256)]
    assert isinstance(trainer._new_loop(words, counts, token_bytes, 1, "bytes"), trainer._merges.MergeLoop)
    assert both_loops(table, 5, 1) == (reference.train_bytes(table, 5, 1),) * 2


@pytest.fixture(scope="module")
def real_table():
    from bpe.pretokenize import PreTokenizer
    from tests.support.real_text import multilingual

    pretokenizer = PreTokenizer("gpt2")
    table = Counter()
    for doc in multilingual(8):
        table.update(pretokenizer.pieces(doc))
    # Two documents that are not UTF-8, as a corpus can hold.
    table.update(pretokenizer.pieces(b"\xff\xfe caf\xe9 na\xefve \x80\x81 " * 40))
    return table


@pytest.mark.parametrize("tie_break", TIE_BREAKS)
@pytest.mark.parametrize("min_frequency", [1, 2, 7])
def test_both_loops_agree_on_real_text(real_table, tie_break, min_frequency):
    compiled, python = both_loops(real_table, 4000, min_frequency, tie_break=tie_break)
    assert len(compiled) > 1000
    assert compiled == python


def test_both_loops_resume_alike_on_real_text(real_table):
    full = train_merges(real_table, 3000, progress=False)
    for k in (1, 64, 1000, 2999):
        assert both_loops(real_table, 3000, resume_from=full[:k]) == (full, full)


def test_compiled_loop_equals_reference_on_real_text():
    import inspect
    import textwrap

    from bpe.pretokenize import PreTokenizer

    text = inspect.getsource(textwrap) + "Ünïcödé текст на русском языке, 日本語のテキスト、中文文本。 " * 20
    table = Counter(PreTokenizer("gpt2").pieces(text))
    for tie_break in TIE_BREAKS:
        assert train_merges(table, 200, progress=False, tie_break=tie_break) == reference.train_bytes(
            table, 200, tie_break=tie_break
        )


def test_checkpoints_and_interrupts_are_the_same_with_either_loop(real_table):
    def run():
        seen = []

        def checkpoint(merges):
            seen.append(merges)
            if len(seen) == 3:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            train_merges(real_table, 2000, checkpoint=checkpoint, checkpoint_every=0, progress=False)
        return seen

    compiled = run()
    with pure_python():
        python = run()
    assert compiled == python
    assert [len(c) for c in compiled] == [64, 128, 192, 192]


FALLBACK = """
import json, sys
{setup}
import bpe, bpe.training.trainer
table = {{b"low": 5, b"lower": 2, "newest": 6, "widest": 3, b"\\xff\\xfe": 4}}
tok = bpe.train(table, 256 + 12, special_tokens=["<s>"], progress=False)
print(json.dumps([bpe.training.trainer._merges is None, tok.to_json()]))
"""


@pytest.mark.parametrize(
    "env, setup",
    [
        ({"BEAM_BPE_PURE_PYTHON": "1"}, ""),
        ({}, "sys.modules['bpe.training._merges'] = None  # as if the build had failed"),
    ],
)
def test_a_missing_compiled_loop_falls_back_silently(env, setup):
    def run(env, setup):
        result = subprocess.run(
            [sys.executable, "-c", FALLBACK.format(setup=setup)],
            env={**{k: v for k, v in os.environ.items() if k != "BEAM_BPE_PURE_PYTHON"}, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stderr == ""
        return result.stdout

    fallback_missing, fallback_json = json.loads(run(env, setup))
    normal_missing, normal_json = json.loads(run({}, ""))
    assert fallback_missing and not normal_missing
    assert fallback_json == normal_json


INTERRUPTED = """
import json, random, sys
from bpe.training.trainer import train_merges
rng = random.Random(11)
letters = b"etaoinshrdlucmfwypvbgkqjxz"
weights = [1 / (i + 1) for i in range(len(letters))]
table = {}
for _ in range(200_000):
    word = bytes(rng.choices(letters, weights, k=rng.randint(2, 14)))
    table[word] = table.get(word, 0) + rng.randint(1, 9)
seen = []
def checkpoint(merges):
    seen.append(merges)
    print(len(merges), flush=True)
try:
    train_merges(table, 60_000, min_frequency=1, checkpoint=checkpoint, checkpoint_every=0, progress=False)
    print("finished", flush=True)
except KeyboardInterrupt:
    last = seen[-1]
    full = train_merges(table, len(last) + 500, min_frequency=1, progress=False)
    resumed = train_merges(table, len(last) + 500, min_frequency=1, progress=False, resume_from=last)
    print(json.dumps({"saved": len(last), "prefix": full[: len(last)] == last, "resumed": resumed == full}), flush=True)
"""


def test_ctrl_c_during_the_loop_saves_a_checkpoint_on_the_way_out():
    # A real SIGINT while the loop runs (in C when it is built): the last
    # checkpoint is a prefix of the uninterrupted result and resuming from it
    # gives that result.
    # At the lowest priority, so that on a busy machine the loop cannot run far ahead of the signal.
    process = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lowest_priority_and_default_sigint,
    )
    lines = []
    for line in process.stdout:  # wait until the loop has learned merges
        lines.append(line)
        if len(lines) == 3:
            process.send_signal(signal.SIGINT)
            break
    stdout, stderr = process.communicate(timeout=300)
    outcome = json.loads(stdout.strip().splitlines()[-1])
    assert outcome["saved"] >= 128 and outcome["prefix"] and outcome["resumed"], stderr
