"""tiktoken's Rust core as an optional accelerator, and the proof that it gives our IDs.

tiktoken is not a dependency (``pip install beam-bpe[fast]`` adds it). When it
is installed, ``fast_encoder`` returns its ordinary-text encoder for a tokenizer,
but only after proving, for that very tokenizer, that it cannot give other IDs
than our own encoder on any valid UTF-8 text; otherwise it says why not. Our
encoder stays the reference and handles everything tiktoken cannot (bytes that
are not valid UTF-8, custom patterns, merge lists tiktoken would replay
differently).
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Callable, Sequence

from bpe.pretokenize import PRESETS

if TYPE_CHECKING:  # the tokenizer module uses this one: no import cycle at run time
    from bpe.tokenizer import Tokenizer


# Text that exercises every branch of the preset patterns and the places where
# regex engines disagree most often: Unicode whitespace and categories, digits of
# other scripts, contractions in both cases, CR/LF runs, trailing spaces.
VERIFICATION_SAMPLE = "".join(
    [
        "Hello, world! It's 2024; we'll see—they're OK'd. I'M HERE'S 'LL 'VE 'RE 'D 'T.\n",
        "  leading and   multiple   spaces \t\ttabs\r\n\r\nCRLF\n\n\n  \n trailing   ",
        "numbers 1 12 123 1234 12345 3.14159 1,000,000 ١٢٣٤٥ １２３４ ⅫⅣ ²³ ½\n",
        "Ünïcödé façade naïve coöperate Straße ΑΒΓ αβγ Кириллица עברית العربية हिन्दी ไทย\n",
        "漢字かなカナ한국어 中文没有空格的句子很长很长 😀👍🏽👨‍👩‍👧 e\u0301 a\u0308 \u200d\u200b\ufeff\n",
        "".join(chr(c) for c in range(0x00, 0x80)),
        "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a",
        "\u2028\u2029\u202f\u205f\u3000 x\x1c\x1d\x1e\x1fy \u00ad\u034f\u180e\n",
        "def f(x):\n    return {'a': [1, 2]}  # comment\n\tif x <= 0: pass\n",
        "<|endoftext|> <s></s> [CLS] @@ ## $$ %% ^^ && ** (( )) __ ++ == ~~ `` || \\\\ // ?? !! ...\n",
    ]
)


def fast_encoder(tokenizer: Tokenizer, proven: bool = False) -> tuple[Callable[[str], array] | None, str]:
    """tiktoken's ordinary-text encoder for this tokenizer (text -> ``array("I")`` of
    IDs, see ``_ArrayEncoder``), if it provably gives our IDs.

    Both encoders return a piece that is a whole token as that token. Otherwise
    tiktoken repeatedly merges the adjacent pair whose *concatenated bytes* have
    the lowest rank (our ID), while ours replays the merge *pairs* in learned
    order. They can differ only where two adjacent tokens (a, b) spell a token T
    whose own merge is some other pair: tiktoken joins them, ours never does.
    ``_rank_mismatch`` proves, for every such "foreign" pair, that our encoder can
    never leave a and b side by side (see there). Pieces must match too, so only
    the preset patterns (tiktoken's own) qualify, and a sample text is encoded
    both ways as a last check of the two regex engines.

    Args:
      tokenizer: the tokenizer at hand.
      proven: ``_rank_mismatch`` already found nothing for this very tokenizer
        (same SHA-256), e.g. in the driver; skip it here. The sample check stays.

    Returns:
      (encode function or None, a one-line reason for the choice).
    """
    if tokenizer.pattern not in PRESETS.values():
        return None, "custom pre-tokenizer pattern: tiktoken's regex engine may split it differently"
    try:
        # See _ArrayEncoder for why a tokenizer without special tokens gets one.
        encoding = tokenizer.to_tiktoken(special_tokens=tokenizer.special_tokens or {_UNUSED_SPECIAL: tokenizer.vocab_size})
    except ImportError:  # an optional accelerator, not a dependency
        return None, "tiktoken is not installed"
    except Exception as e:  # any failure to build it just means the slow path
        return None, f"tiktoken rejected the vocabulary: {e}"
    mismatch = None if proven else _rank_mismatch(tokenizer)
    if mismatch:
        return None, mismatch
    encode = _ArrayEncoder(encoding)
    ours = tokenizer.encode(VERIFICATION_SAMPLE)
    theirs = encode(VERIFICATION_SAMPLE).tolist()
    if ours != theirs:
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        return None, f"tiktoken differs from our encoder on the verification sample at token {first}"
    return encode, "tiktoken verified identical for this tokenizer"


# tiktoken's special token for tokenizers that have none (see _ArrayEncoder).
_UNUSED_SPECIAL = "<|beam-bpe: no special tokens|>"


class _ArrayEncoder:
    """``encoding.encode_ordinary``, giving an ``array("I")`` instead of a list.

    tiktoken's core can write the IDs into a buffer (the call behind
    ``Encoding.encode_to_numpy``) instead of making a Python int for every
    token: 17.4 MB/s against 15.0 for ``encode_ordinary`` on one core (tiktoken
    0.14, 32k vocab), and the shards are built from flat arrays anyway. No
    special token is allowed, so special-token text is ordinary text, exactly as
    in ``encode_ordinary``. A tiktoken without that call gets the list API.
    Pickles as its Encoding does (a tokenizer carries it to Beam workers);
    ``.encoding`` is that ``tiktoken.Encoding``, for callers who want lists.

    The call first looks for special tokens in the text. With none defined it
    looks for an empty pattern, which matches at every position (12.7 MB/s), so
    ``fast_encoder`` gives a tokenizer without special tokens the placeholder
    ``_UNUSED_SPECIAL`` (ID vocab_size), which no output can hold because no
    special token is ever allowed.
    """

    _NONE_ALLOWED: set[str] = set()

    def __init__(self, encoding):
        self.encoding = encoding
        self._to_buffer = getattr(getattr(encoding, "_core_bpe", None), "encode_to_tiktoken_buffer", None)

    def __reduce__(self):
        return _ArrayEncoder, (self.encoding,)

    def __call__(self, text: str) -> array:
        if self._to_buffer is None:
            return array("I", self.encoding.encode_ordinary(text))
        ids = array("I")
        ids.frombytes(memoryview(self._to_buffer(text, self._NONE_ALLOWED)).cast("B"))
        return ids


def _rank_mismatch(tokenizer: Tokenizer) -> str | None:
    """Why tiktoken could encode some text differently from our encoder, or None.

    Checks, with t(x) = the merge step that creates token x (-1 for bytes):

    1. Token bytes are unique, and every token's bytes, replayed as one piece,
       give that token (both encoders return whole-token pieces directly).
    2. For every foreign pair (a, b) spelling token T (see ``fast_encoder``),
       a and b can never be adjacent in our encoder. Suppose they were, split at
       byte k. Then the token ending at k-1 has always been an element of a's
       right spine (a, right(a), right(right(a)), ...) and the token starting at
       k one of b's left spine. Spine elements x and y are side by side during
       the steps after both exist and before their parents: if merge (x, y)
       is step r within that window, step r would have joined them across k,
       and tokens are never split again, so the adjacency is impossible. (When
       y's parent is made at step r itself, that is the same merge (c, c) on a
       run c c c; merging left to right, x takes y first.) A foreign pair with no
       such refuting (x, y) is a possible difference, and disqualifies tiktoken.
    """
    merges = tokenizer.merges
    token_bytes = [tokenizer.token_bytes(i) for i in range(256 + len(merges))]
    rank: dict[bytes, int] = {}
    for token_id, data in enumerate(token_bytes):
        if data in rank:
            return f"tokens {rank[data]} and {token_id} have the same bytes"
        rank[data] = token_id
    replay = tokenizer._encoder.encode_bytes  # uncached: the merges replayed as such
    for token_id in range(256, len(token_bytes)):
        if replay(token_bytes[token_id]) != [token_id]:
            return f"token {token_id}'s own bytes do not encode to it by replaying the merges"
    merge_step = {pair: step for step, pair in enumerate(merges)}

    def created(token_id: int) -> float:
        return token_id - 256 if token_id >= 256 else -1

    def spine(token_id: int, side: int) -> list[int]:
        chain = [token_id]
        while token_id >= 256:
            token_id = merges[token_id - 256][side]
            chain.append(token_id)
        return chain

    def refuted(a: int, b: int) -> bool:
        lefts, rights = spine(a, 1), spine(b, 0)
        for j, x in enumerate(lefts):
            x_until = created(lefts[j - 1]) if j else float("inf")
            for i, y in enumerate(rights):
                step = merge_step.get((x, y))
                if step is None:
                    continue
                y_until = created(rights[i - 1]) if i else float("inf")
                if max(created(x), created(y)) < step < x_until and step <= y_until:
                    return True
        return False

    for token_id in range(256, len(token_bytes)):
        data = token_bytes[token_id]
        own = merges[token_id - 256]
        for k in range(1, len(data)):
            left = rank.get(data[:k])
            if left is None:
                continue
            right = rank.get(data[k:])
            if right is not None and (left, right) != own and not refuted(left, right):
                return (
                    f"tiktoken could build token {token_id} from ({left}, {right}), "
                    f"which is not its merge {own}"
                )
    return None


def encode_if_valid(fast: Callable[[str], Sequence[int]], data: str | bytes) -> Sequence[int] | None:
    """``fast``'s IDs for text that is valid UTF-8, else None (our encoder's job).

    tiktoken takes only valid text: it would replace a lone surrogate in a str
    with U+FFFD, and bytes must be decoded first, while our encoder keeps both
    byte for byte.
    """
    if isinstance(data, str):
        try:
            data.encode("utf-8")  # about 1 ms per MB: no lone surrogates
        except UnicodeEncodeError:
            return None
        return fast(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return fast(text)
