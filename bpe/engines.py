"""Encoding engines behind one interface, and the proof that picks one for a tokenizer.

An engine encodes a tokenizer's ordinary text (special-token strings are text,
as in ``Tokenizer.encode`` by default) from a str or any bytes:
``encode(data)`` gives a list of IDs, ``encode_array(data)`` an ``array("I")``,
the flat form token shards are built from. Engines, fastest first:

- ``gigatoken``, ``fastokens``, ``splintr``: the optional accelerators
  (``bpe.accelerators``, each proven as described there), for valid UTF-8
  text; each may decline a text it is not proven on.
- ``tiktoken``: tiktoken's Rust core, for valid UTF-8 text.
- ``python``: the reference, this package's own pre-tokenizer and
  ``PieceEncoder``; it encodes anything, byte for byte.

A tokenizer's engine is a chain: the first accelerator that builds and
qualifies (``AcceleratedEngine``), then tiktoken's engine if it qualifies, then
the reference. A text an engine does not take (declined, invalid UTF-8, lone
surrogates) goes to the next one down. Only the first accelerator is in the
chain: the texts one declines hold code points the others' Unicode tables lack
too. ``BEAM_BPE_ENGINES`` (e.g. ``tiktoken,python``) names the engines a
process may use; the others are rejected as switched off.

A faster engine is used for a tokenizer only once it is **proven** to give the
reference's IDs on every input it takes. For a tiktoken rank file, tiktoken's
rule is the file's own, so only the pattern and the sample are checked. For our
own tokenizers that means: the pattern is
one of tiktoken's own (``TIKTOKEN_PATTERNS``), ``_rank_mismatch`` finds no text on which
tiktoken's rank-of-bytes rule and our merge order could differ (O(vocabulary),
see there), and a sample text encodes alike in both, a check of the two regex
engines that runs in every process that builds the engine.

``choose(tokenizer)`` runs the proofs and returns the chain, whose ``.proof``
(an ``EngineProof``: the chain and why every other engine is not in it) is
small and picklable: a job's driver proves once and passes the proof on, and
``from_proof`` in each worker checks it against the worker's own tokenizer by
SHA-256 and trusts it, rebuilding the chain without the O(vocabulary) steps.
``beam-bpe encode --verify-fraction`` checks a sample of documents against the
reference while the job runs (``transforms.encode``).
"""

from __future__ import annotations

import dataclasses
import os
from array import array
from typing import TYPE_CHECKING, Callable

from bpe import chunking
from bpe.accelerators.unicode_guard import TIKTOKEN_GAPS, CodePointGuard
from bpe.decoder import vocabulary_bytes
from bpe.pretokenize import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, to_text

if TYPE_CHECKING:  # the tokenizer module imports this one: no import cycle at run time
    from bpe.encoder import PieceEncoder
    from bpe.tokenizer import Tokenizer

# Engine names, fastest first; the last one, the reference, encodes anything.
# The first three are the optional accelerators (``bpe.accelerators.ADAPTERS``).
ENGINES = ("gigatoken", "fastokens", "splintr", "tiktoken", "python")
ACCELERATORS = ENGINES[:3]
# Names the engines a process may use, e.g. "tiktoken,python" (the reference is always allowed).
ENGINES_VARIABLE = "BEAM_BPE_ENGINES"
# The patterns tiktoken's own encodings use, which its regex engine splits as ours does.
TIKTOKEN_PATTERNS = (GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN)


class ProofMismatch(ValueError):
    """An EngineProof given to a tokenizer it was not made for."""


@dataclasses.dataclass(frozen=True)
class EngineProof:
    """Which engine is proven to give a tokenizer's IDs, and why the faster ones are not.

    Attributes:
      tokenizer_sha256: the SHA-256 of the tokenizer the proof is for.
      engine: the fastest engine proven identical (a name in ``ENGINES``).
      rejected: (engine, why not) for every engine not in the chain.
      chain: the engines a text tries in turn, ``engine`` first and the
        reference last; () means ``engine`` and then the reference.
    """

    tokenizer_sha256: str
    engine: str
    rejected: tuple[tuple[str, str], ...] = ()
    chain: tuple[str, ...] = ()

    @property
    def engines(self) -> tuple[str, ...]:
        """The chain, spelt out: ``engine`` first, the reference last."""
        if self.chain:
            return self.chain
        return (self.engine,) if self.engine == "python" else (self.engine, "python")

    @property
    def reason(self) -> str:
        """One line: the engines chosen and why the others were not."""
        chain = self.engines
        head = self.engine if len(chain) <= 2 else f"{self.engine} (then {', then '.join(chain[1:])})"
        if not self.rejected:
            return f"{head}: proven identical for this tokenizer"
        why = "; ".join(f"not {name}: {reason}" for name, reason in self.rejected)
        return f"{head}: {why}"


class PythonEngine:
    """The reference engine: the tokenizer's pre-tokenizer and piece encoder.

    Args:
      split: the pre-tokenizer's split (text -> pieces).
      encoder: encodes the pieces with the tokenizer's merges.
      proof: the proof that chose this engine, if one did.
    """

    name = "python"
    # Documents handed to the reference engine: none, this is the reference.
    fallbacks = 0

    def __init__(self, split: Callable[[str], list[str]], encoder: PieceEncoder, proof: EngineProof | None = None):
        self._split = split
        self._encoder = encoder
        self.proof = proof

    @property
    def reason(self) -> str:
        return self.proof.reason if self.proof else "the reference encoder"

    def encode(self, data: str | bytes) -> list[int]:
        text, errors = to_text(data)
        return self._encoder.encode_pieces(self._split(text), errors)

    def encode_array(self, data: str | bytes) -> array:
        # A slice of pieces at a time into the array: a huge document never has
        # all its IDs as Python ints at once.
        text, errors = to_text(data)
        pieces = self._split(text)
        ids = array("I")
        for start in range(0, len(pieces), _PIECES_PER_STEP):
            ids.extend(self._encoder.encode_pieces(pieces[start : start + _PIECES_PER_STEP], errors))
        return ids


# How many pieces the reference encodes into a document's array at a time.
_PIECES_PER_STEP = 1 << 16

# tiktoken's special token for tokenizers that have none (see TiktokenEngine).
_UNUSED_SPECIAL = "<|beam-bpe: no special tokens|>"


class TiktokenEngine:
    """tiktoken's ordinary-text encoder for valid UTF-8, the reference for everything else.

    ``encode_array`` has tiktoken's core write the IDs into a buffer (the call
    behind ``Encoding.encode_to_numpy``) rather than make a Python int per
    token; a tiktoken without that call gets the list API. No special token is
    allowed, so special-token text is ordinary text, exactly as in
    ``encode_ordinary``. That call looks for special tokens first, and with none
    defined it looks for an empty pattern, which matches at every position and
    slows it down; so a tokenizer without special tokens gives tiktoken the
    placeholder ``_UNUSED_SPECIAL`` (ID vocab_size), which no output can hold.

    Args:
      encoding: the ``tiktoken.Encoding`` with our IDs as ranks.
      reference: the engine for documents that are not valid UTF-8.
      proof: the proof that chose this engine.
      guard: a ``CodePointGuard``: texts holding one of its code points (where
        tiktoken's Unicode tables differ from ``regex``'s) go to the reference.
        None for a rank file, whose IDs are tiktoken's by definition.

    Attributes:
      fallbacks: how many texts this object handed to the reference (a text
        encoded in chunks, ``_in_chunks``, counts once per chunk handed on).
    """

    name = "tiktoken"
    _NONE_ALLOWED: set[str] = set()

    def __init__(self, encoding, reference: PythonEngine, proof: EngineProof, guard=None):
        self.encoding = encoding
        self.reference = reference
        self.proof = proof
        self.guard = guard
        self.fallbacks = 0
        self._to_buffer = getattr(getattr(encoding, "_core_bpe", None), "encode_to_tiktoken_buffer", None)

    def __reduce__(self):  # the core's bound method does not pickle; the Encoding does
        return TiktokenEngine, (self.encoding, self.reference, self.proof, self.guard)

    @property
    def reason(self) -> str:
        return self.proof.reason

    def encode(self, data: str | bytes) -> list[int]:
        if len(data) > chunking.CHUNK_SIZE:
            return self.encode_array(data).tolist()
        text = self._taken(data)
        if text is None:
            self.fallbacks += 1
            return self.reference.encode(data)
        return self.encoding.encode_ordinary(text)

    def encode_array(self, data: str | bytes) -> array:
        return _in_chunks(self._encode_array, data)

    def _encode_array(self, data: str | bytes) -> array:
        text = self._taken(data)
        if text is None:
            self.fallbacks += 1
            return self.reference.encode_array(data)
        if self._to_buffer is None:
            return array("I", self.encoding.encode_ordinary(text))
        ids = array("I")
        ids.frombytes(memoryview(self._to_buffer(text, self._NONE_ALLOWED)).cast("B"))
        return ids


    def _taken(self, data: str | bytes) -> str | None:
        """``data`` as the text tiktoken encodes exactly, or None (the reference's job)."""
        text = _valid_text(data)
        if text is None or (self.guard is not None and self.guard.rejects(text)):
            return None
        return text


def _in_chunks(encode_array: Callable[[str | bytes], array], data: str | bytes) -> array:
    """``encode_array`` of a text, or of each of its chunks (``bpe.chunking``) with the IDs
    appended to one array, when it is longer than ``chunking.CHUNK_SIZE``.

    The chunks give the whole text's pieces for the preset patterns, the only
    ones the engines that call this run (tiktoken's and the accelerators'), so
    the IDs are the same; each chunk may go to another engine of the chain (a
    chunk holding invalid UTF-8 to the reference), and only one chunk's
    intermediate forms (its str, its UTF-8 bytes, its IDs) exist at a time.
    """
    if len(data) <= chunking.CHUNK_SIZE:
        return encode_array(data)
    ids = array("I")
    for chunk in chunking.chunks(data):
        part = encode_array(chunk)
        ids += part if part.typecode == "I" else array("I", part)
    return ids


def _valid_text(data: str | bytes) -> str | None:
    """``data`` as text tiktoken encodes exactly, or None (the reference's job).

    tiktoken takes only valid text: it would replace a lone surrogate in a str
    with U+FFFD, and bytes must be decoded first, while the reference keeps
    both byte for byte.
    """
    if isinstance(data, str):
        if data.isascii():  # a flag CPython keeps on every str
            return data
        try:
            data.encode("utf-8")  # no lone surrogates
        except UnicodeEncodeError:
            return None
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


class AcceleratedEngine:
    """An accelerator (``bpe.accelerators``) for the texts it takes, the next engine down for the rest.

    The accelerator encodes valid text only and may decline a text it is not
    proven on (it returns None); that text, and any that is not valid UTF-8,
    goes to ``next``, the engine the chain continues with (tiktoken's or the
    reference).

    Args:
      name: the accelerator's name (in ``ACCELERATORS``).
      accelerator: its engine, from the adapter's ``build``.
      next: the engine for everything the accelerator does not encode.
      proof: the proof that chose this chain.

    Attributes:
      declined: valid texts the accelerator declined (per chunk of a text
        encoded in chunks).
    """

    def __init__(self, name: str, accelerator, next: TiktokenEngine | PythonEngine, proof: EngineProof):
        self.name = name
        self.accelerator = accelerator
        self.next = next
        self.proof = proof
        self.declined = 0

    @property
    def reason(self) -> str:
        return self.proof.reason

    @property
    def fallbacks(self) -> int:
        """Texts (documents, or chunks of a huge one) this chain encoded with another engine than the accelerator."""
        return self.declined + self.next.fallbacks

    def encode(self, data: str | bytes) -> list[int]:
        if len(data) > chunking.CHUNK_SIZE:
            return self.encode_array(data).tolist()
        ids = self._accelerated(data)
        return self.next.encode(data) if ids is None else ids.tolist()

    def encode_array(self, data: str | bytes) -> array:
        return _in_chunks(self._encode_array, data)

    def _encode_array(self, data: str | bytes) -> array:
        ids = self._accelerated(data)
        if ids is None:
            return self.next.encode_array(data)
        if isinstance(ids, array):
            return ids
        view = memoryview(ids)  # a numpy array
        if view.itemsize != 4:
            return array("I", ids.tolist())
        out = array("I")
        out.frombytes(view.cast("B"))  # uint32: its buffer, no int per token
        return out

    def takes(self, code_points) -> bool:
        """Whether the accelerator takes every valid text made of these code points (a numpy array):
        its guard rejects none of them. A caller that has them already spares each text the check."""
        return not self.accelerator.guard.rejects_code_points(code_points)

    def encode_taken(self, data: bytes):
        """The IDs of valid UTF-8 bytes of at most ``chunking.CHUNK_SIZE`` whose code points the
        accelerator ``takes``, by the accelerator alone (a uint32 numpy array)."""
        import numpy as np

        if hasattr(self.accelerator, "encode_utf8"):
            ids = self.accelerator.encode_utf8(data, None)
        else:
            ids = self.accelerator.encode(data.decode("utf-8"))
        return np.asarray(ids, dtype=np.uint32)

    def _accelerated(self, data: str | bytes):
        """The accelerator's IDs, or None: the next engine's document."""
        if isinstance(data, bytes) and hasattr(self.accelerator, "encode_utf8"):
            # An accelerator that reads UTF-8 gets the bytes as they are; ASCII needs no decoding
            # to be valid, and no guard holds an ASCII code point.
            if data.isascii():
                ids = self.accelerator.encode_utf8(data, None)
            else:
                text = _valid_text(data)
                if text is None:
                    return None
                ids = self.accelerator.encode_utf8(data, text)
        else:
            text = _valid_text(data)
            if text is None:
                return None
            ids = self.accelerator.encode(text)
        if ids is None:
            self.declined += 1
        return ids


Engine = PythonEngine | TiktokenEngine | AcceleratedEngine


def allowed_engines() -> tuple[str, ...]:
    """The engines ``BEAM_BPE_ENGINES`` allows (all when unset); the reference always.

    Raises:
      ValueError: the variable names an engine that does not exist.
    """
    value = os.environ.get(ENGINES_VARIABLE, "").strip()
    if not value:
        return ENGINES
    names = {name.strip() for name in value.split(",") if name.strip()}
    unknown = sorted(names - set(ENGINES))
    if unknown:
        raise ValueError(f"{ENGINES_VARIABLE} names unknown engines {unknown}; the engines are {', '.join(ENGINES)}")
    return tuple(name for name in ENGINES if name in names or name == "python")


def choose(tokenizer: Tokenizer) -> Engine:
    """The fastest chain of engines proven identical for this tokenizer; runs every proof it needs.

    The chain is the first accelerator that builds and qualifies (in
    ``ACCELERATORS`` order), then tiktoken's engine if it qualifies, then the
    reference. Engines ``BEAM_BPE_ENGINES`` leaves out are rejected as switched off.
    """
    allowed = allowed_engines()
    rejected: list[tuple[str, str]] = []
    switched_off = f"switched off by {ENGINES_VARIABLE}={os.environ.get(ENGINES_VARIABLE, '')}"
    accelerator = None
    for name in ACCELERATORS:
        if name not in allowed:
            rejected.append((name, switched_off))
        elif accelerator is None:
            accelerator, why = _build_accelerator(tokenizer, name, proven=False)
            if accelerator is None:
                rejected.append((name, why))
            else:
                chosen = name
    tiktoken, why = _tiktoken(tokenizer, proven=False) if "tiktoken" in allowed else (None, switched_off)
    if tiktoken is None:
        rejected.append(("tiktoken", why))
    chain = (*([chosen] if accelerator is not None else []), *(["tiktoken"] if tiktoken else []), "python")
    return _chain(tokenizer, EngineProof(tokenizer.sha256, chain[0], tuple(rejected), chain), accelerator, tiktoken)


def _build_accelerator(tokenizer: Tokenizer, name: str, proven: bool):
    """(the accelerator ``name``'s engine, why) or (None, why not); never raises."""
    import importlib

    if tokenizer.kind == "tiktoken" and name != "gigatoken":
        return None, f"only gigatoken is proven for tiktoken rank files, not {name}"
    if tokenizer.kind not in ("beam-bpe", "tiktoken"):
        return None, "the accelerators are proven for beam-bpe's own tokenizers and tiktoken rank files only"
    try:
        adapter = importlib.import_module(f"bpe.accelerators.{name}")
        return adapter.build(tokenizer, proven=proven)
    except Exception as e:  # an adapter that fails to load means: not this engine
        return None, f"{name} failed to build: {type(e).__name__}: {e}"


def _chain(tokenizer: Tokenizer, proof: EngineProof, accelerator, tiktoken: TiktokenEngine | None) -> Engine:
    """The engine objects of a proof's chain, from the engines already built."""
    reference = PythonEngine(*tokenizer.reference_parts(), proof)
    engine: Engine = reference
    if tiktoken is not None:
        tiktoken.proof = proof
        engine = tiktoken if tokenizer.normalizer is None else NormalizingEngine(tiktoken)
    if accelerator is not None:
        engine = AcceleratedEngine(proof.engine, accelerator, engine, proof)
    return engine


class NormalizingEngine:
    """An engine that does not normalize, given the text in NFC (``bpe.hf_normalizer``) for a
    tokenizer whose file normalizes; bytes that are not UTF-8 go to it as they are (its
    reference normalizes them itself).

    Args:
      engine: tiktoken's engine for the tokenizer.
    """

    def __init__(self, engine: TiktokenEngine):
        self.engine = engine
        self.name = engine.name

    @property
    def proof(self) -> EngineProof:
        return self.engine.proof

    @property
    def reason(self) -> str:
        return self.engine.reason

    @property
    def fallbacks(self) -> int:
        return self.engine.fallbacks

    def encode(self, data: str | bytes) -> list[int]:
        return self.engine.encode(_nfc(data))

    def encode_array(self, data: str | bytes) -> array:
        return self.engine.encode_array(_nfc(data))


def _nfc(data: str | bytes) -> str | bytes:
    from bpe.hf_normalizer import nfc

    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
    return nfc(data)


def from_proof(tokenizer: Tokenizer, proof: EngineProof) -> Engine:
    """The chain of engines a proof names, for the tokenizer it was made for, without re-proving it.

    The O(vocabulary) proofs are trusted; the cheap checks still run (the
    engine is importable, takes the vocabulary and encodes the samples alike).
    An engine that fails one here is left out of the chain, with its reason.

    Raises:
      ProofMismatch: the proof is for a tokenizer with another SHA-256.
    """
    check(tokenizer, proof)
    chain, rejected = proof.engines, list(proof.rejected)
    accelerator = tiktoken = None
    if chain[0] in ACCELERATORS:
        accelerator, why = _build_accelerator(tokenizer, chain[0], proven=True)
        if accelerator is None:
            rejected.append((chain[0], why))
    if "tiktoken" in chain:
        tiktoken, why = _tiktoken(tokenizer, proven=True)
        if tiktoken is None:
            rejected.append(("tiktoken", why))
    built = {"python", *(["tiktoken"] if tiktoken is not None else []), *([chain[0]] if accelerator is not None else [])}
    rebuilt = tuple(name for name in chain if name in built)
    if rebuilt != chain:
        proof = EngineProof(proof.tokenizer_sha256, rebuilt[0], tuple(rejected), rebuilt)
    return _chain(tokenizer, proof, accelerator, tiktoken)


def check(tokenizer: Tokenizer, proof: EngineProof) -> None:
    """Raises ProofMismatch unless the proof was made for this tokenizer (same SHA-256)."""
    if not isinstance(proof, EngineProof):
        raise TypeError(f"expected an EngineProof, got {type(proof).__name__}")
    if proof.tokenizer_sha256 != tokenizer.sha256:
        raise ProofMismatch(
            f"the engine proof is for tokenizer {proof.tokenizer_sha256}, not for this one ({tokenizer.sha256})"
        )
    for name in (proof.engine, *proof.chain):
        if name not in ENGINES:
            raise ProofMismatch(f"the engine proof names {name!r}, not one of {', '.join(ENGINES)}")


def _tiktoken(tokenizer: Tokenizer, proven: bool) -> tuple[TiktokenEngine | None, str]:
    """(tiktoken's engine for this tokenizer, "") if it qualifies, else (None, why not).

    ``proven``: the O(vocabulary) ``_rank_mismatch`` already passed for a
    tokenizer with this SHA-256 (in a job's driver); skip it. A tiktoken rank
    file needs no such proof: tiktoken's rule is the file's own semantics.
    """
    if tokenizer.pattern not in TIKTOKEN_PATTERNS:
        return None, "custom pre-tokenizer pattern: tiktoken's regex engine may split it differently"
    view, ranks = tokenizer, None
    if tokenizer.kind == "huggingface":
        view, why = _hf_as_ours(tokenizer)
        if view is None:
            return None, why
        encoder, spelled = tokenizer.piece_encoder, tokenizer.ordinary_tokens()
        ranks = {spelled[i]: i for i in (*encoder.byte_ids, *encoder.merged)}
    special_tokens = tokenizer.special_tokens or {_UNUSED_SPECIAL: tokenizer.vocab_size}
    try:
        if ranks is None:
            encoding = tokenizer.to_tiktoken(special_tokens=special_tokens)
        else:
            import tiktoken

            encoding = tiktoken.Encoding(name="beam-bpe", pat_str=tokenizer.pattern, mergeable_ranks=ranks,
                                         special_tokens=dict(special_tokens))
    except ImportError:
        return None, "tiktoken cannot be imported"
    except Exception as e:  # any failure to build it just means the next engine down
        return None, f"tiktoken rejected the vocabulary: {e}"
    mismatch = None if proven or tokenizer.kind == "tiktoken" else _rank_mismatch(view)
    if mismatch:
        return None, mismatch
    reference = PythonEngine(*tokenizer.reference_parts())
    # tiktoken's Unicode tables are older than ``regex``'s; a rank file's IDs are tiktoken's own.
    guard = None if tokenizer.kind == "tiktoken" else CodePointGuard(TIKTOKEN_GAPS)
    engine = TiktokenEngine(encoding, reference, EngineProof(tokenizer.sha256, "tiktoken"), guard)
    ours = reference.encode(VERIFICATION_SAMPLE)
    theirs = engine.encode_array(tokenizer.normalize(VERIFICATION_SAMPLE)).tolist()
    if ours != theirs:
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        return None, f"tiktoken differs from the reference on the verification sample at token {first}"
    return engine, ""


def _hf_as_ours(tokenizer: Tokenizer) -> tuple[_Renumbered | None, str]:
    """A Hugging Face tokenizer's merges renumbered into our contract, when tiktoken's rule with
    the file's IDs as ranks is the same as ours with our IDs; else (None, why not).

    That holds when merges create tokens in increasing ID order (so the lowest
    rank of tiktoken is the earliest merge), every ordinary token of two or more
    bytes is made by a merge (tiktoken could build any other one), and no added
    token is matched in text (tiktoken's ordinary encoder matches none). Then
    ``_rank_mismatch`` of the renumbered tokenizer decides.
    """

    encoder = tokenizer.piece_encoder
    merged = encoder.merged
    if tokenizer.added_tokens:
        return None, "added tokens are matched in any text, which tiktoken's ordinary encoder does not do"
    if any(b <= a for a, b in zip(merged, merged[1:])):
        return None, "Hugging Face merge-rank semantics: merges do not create tokens in increasing ID order"
    made = set(merged) | set(encoder.byte_ids)
    unmade = [i for i in tokenizer.ordinary_ids() if i not in made and i not in tokenizer.special_tokens.values()]
    if unmade:
        return None, f"Hugging Face merge-rank semantics: token {unmade[0]} is made by no merge"
    ours_id = {token_id: b for b, token_id in enumerate(encoder.byte_ids)}
    ours_id.update((token_id, 256 + i) for i, token_id in enumerate(merged))
    return _Renumbered([(ours_id[a], ours_id[b]) for a, b in encoder.merges]), ""


@dataclasses.dataclass(frozen=True)
class _Renumbered:
    """Merges renumbered into our contract (byte b is ID b, merge i makes 256 + i): what
    ``_rank_mismatch`` reads of a tokenizer."""

    merges: list[tuple[int, int]]


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


def _rank_mismatch(tokenizer) -> str | None:
    """Why tiktoken could encode some text differently from our encoder, or None.

    ``tokenizer``: anything with ``merges`` (ours, or ``_hf_as_ours``' renumbering).

    Both encoders return a piece that is a whole token as that token. Otherwise
    tiktoken repeatedly merges the adjacent pair whose *concatenated bytes* have
    the lowest rank (our ID), while ours replays the merge *pairs* in learned
    order. They can differ only where two adjacent tokens (a, b) spell a token T
    whose own merge is some other pair (a "foreign" pair): tiktoken joins them,
    ours never does. The proof, with t(x) = the merge step that creates token x
    (-1 for bytes):

    The cut fact. Put a piece ending in token a's bytes before one starting
    with token b's, and let each replay on its own. Until a merge joins tokens
    across the cut, the token ending at the cut is an element of a's right spine
    (a, right(a), right(right(a)), ...) and the token starting there one of b's
    left spine; spine elements x and y stand side by side during the steps after
    both exist and before their parents. So the first merge across the cut is a
    merge (x, y) of such elements at a step s inside that window:
    t(x), t(y) < s < t(parent of x) and s <= t(parent of y) (a and b themselves
    have no parent). When y's parent is made at step s itself, that is the same
    merge (c, c) on a run c c c; merging left to right, x takes y first.
    ``_crossings`` looks for such a merge for every merge (a, b) at once.

    1. Token bytes are unique, and every token T = merge (a, b) at step r, replayed
       as one piece, gives T (both encoders return whole-token pieces directly).
       By induction in ID order: a and b replay to themselves, so the piece
       becomes [a, b] and then [T] exactly when no merge joins across the cut
       before step r; one that does leaves no boundary where a and b meet.
    2. Then no foreign pair (a, b) of a token T is ever adjacent in our encoder.
       The piece of T's bytes is a's then b's and replays to [T], not [a, b]
       ((a, b) is no merge: its bytes are T's, which only T's merge makes), so a
       merge joins across their cut: by the cut fact, one of their spines'
       elements, inside the window. Wherever a and b would meet, that merge
       joins across their cut first (tokens are never split again).
    """
    merges = tokenizer.merges
    rank: dict[bytes, int] = {}
    for token_id, data in enumerate(vocabulary_bytes(merges)):
        if data in rank:
            return f"tokens {rank[data]} and {token_id} have the same bytes"
        rank[data] = token_id
    if not merges:
        return None
    import numpy as np  # only for the proof: a vocabulary's worth of spine pairs at once

    table = _MergeTable(merges)
    crossed = _crossings(table, table.left, table.right, limit=np.arange(len(merges)))
    if crossed.any():
        token_id = 256 + int(np.flatnonzero(crossed)[0])
        return (f"token {token_id}'s own bytes do not encode to it by replaying the merges "
                f"(tiktoken gives the token itself)")
    return None


class _MergeTable:
    """The merges as arrays: each token's children and creation step, and a sorted
    index from a pair (left * base + right) to the first step that merges it."""

    def __init__(self, merges: list[tuple[int, int]]):
        import numpy as np

        pairs = np.array(merges, dtype=np.int64)
        self.left, self.right = pairs[:, 0], pairs[:, 1]
        count = len(merges)
        self.base = 256 + count + 1
        # For every ID: its children (-1 for bytes) and the step that creates it (-1 for bytes).
        self.children = np.full((256 + count, 2), -1, dtype=np.int64)
        self.children[256:] = pairs
        self.created = np.arange(-256, count, dtype=np.int64)
        self.created[:256] = -1
        keys, first = np.unique(self.left * self.base + self.right, return_index=True)
        self.keys, self.steps = keys, first.astype(np.int64)

    def step_of(self, x, y):
        """The step merging (x, y) for each pair of the arrays, or -1."""
        import numpy as np

        keys = x * self.base + y
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[at] == keys, self.steps[at], -1)

    def spine(self, tokens, side: int):
        """[(elements, until)] level by level down the ``side`` (0 left, 1 right) spine of
        each token: -1 past its byte; ``until`` is the step that makes the element's parent."""
        import numpy as np

        levels = [(tokens, np.full(len(tokens), np.iinfo(np.int64).max))]
        while True:
            above = levels[-1][0]
            below = np.where(above >= 256, self.children[np.maximum(above, 0), side], -1)
            if not (below >= 0).any():
                return levels
            levels.append((below, np.where(below >= 0, self.created[np.maximum(above, 0)], -1)))


def _crossings(table: _MergeTable, lefts, rights, limit):
    """For each (a, b) = (lefts[i], rights[i]): whether a merge joins across the cut
    between a's bytes and b's at a step below ``limit[i]`` (see ``_rank_mismatch``)."""
    import numpy as np

    crossed = np.zeros(len(lefts), dtype=bool)
    created = table.created
    right_spines = table.spine(rights, side=0)
    for xs, x_until in table.spine(lefts, side=1):
        for ys, y_until in right_spines:
            at = np.flatnonzero((xs >= 0) & (ys >= 0) & ~crossed)
            if not len(at):
                continue
            x, y = xs[at], ys[at]
            step = table.step_of(x, y)
            inside = ((step >= 0) & (np.maximum(created[x], created[y]) < step) & (step < x_until[at])
                      & (step <= y_until[at]) & (step < limit[at]))
            crossed[at[inside]] = True
    return crossed
