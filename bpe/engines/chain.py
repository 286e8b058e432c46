"""The engines a tokenizer's text goes through, and how they form a chain.

An engine encodes a tokenizer's ordinary text (special-token strings are text,
as in ``Tokenizer.encode`` by default) from a str or any bytes:
``encode(data)`` gives a list of IDs, ``encode_array(data)`` an ``array("I")``,
the flat form token shards are built from. Engines, fastest first:

- ``AcceleratedEngine``: one of the optional accelerators (``bpe.accelerators``),
  for valid UTF-8 text; it may decline a text it is not proven on.
- ``TiktokenEngine``: tiktoken's Rust core, for valid UTF-8 text
  (``NormalizingEngine`` gives it NFC text for a tokenizer whose file normalizes).
- ``PythonEngine``: the reference, this package's own pre-tokenizer and
  ``PieceEncoder``; it encodes anything, byte for byte.

Each faster engine holds the next one down and hands it every text it does not
take (declined, invalid UTF-8, lone surrogates): a tokenizer's engine is such a
chain, ending in the reference. Which engines are in it, and the proof that
each gives the reference's IDs, is ``bpe.engines.choice``'s business.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Callable

from bpe import chunking
from bpe.engines.engine_proof import EngineProof
from bpe.pretokenize import to_text

if TYPE_CHECKING:
    from bpe.encoder import PieceEncoder

__all__ = ["AcceleratedEngine", "Engine", "NormalizingEngine", "PythonEngine", "TiktokenEngine"]


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



class TiktokenEngine:
    """tiktoken's ordinary-text encoder for valid UTF-8, the reference for everything else.

    ``encode_array`` has tiktoken's core write the IDs into a buffer (the call
    behind ``Encoding.encode_to_numpy``) rather than make a Python int per
    token; a tiktoken without that call gets the list API. No special token is
    allowed, so special-token text is ordinary text, exactly as in
    ``encode_ordinary``. That call looks for special tokens first, and with none
    defined it looks for an empty pattern, which matches at every position and
    slows it down; so a tokenizer without special tokens gives tiktoken a
    placeholder special token (``bpe.engines.tiktoken_check``, ID vocab_size),
    which no output can hold.

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


# What ``AcceleratedEngine._unless_failing`` returns for a text the accelerator raised on.
_FAILED = object()


class AcceleratedEngine:
    """An accelerator (``bpe.accelerators``) for the texts it takes, the next engine down for the rest.

    The accelerator encodes valid text only and may decline a text it is not
    proven on (it returns None); that text, and any that is not valid UTF-8,
    goes to ``next``, the engine the chain continues with (tiktoken's or the
    reference). So does a text the accelerator fails on: whatever it raises,
    a Rust panic included (pyo3's ``PanicException`` is a ``BaseException``),
    except an interrupt or an exit, which stop the process as they would anyway.

    Args:
      name: the accelerator's name (in ``ACCELERATORS``).
      accelerator: its engine, from the adapter's ``build``.
      next: the engine for everything the accelerator does not encode.
      proof: the proof that chose this chain.

    Attributes:
      declined: valid texts the accelerator declined (per chunk of a text
        encoded in chunks).
      failed: texts the accelerator raised on (per chunk alike).
    """

    def __init__(self, name: str, accelerator, next: TiktokenEngine | PythonEngine, proof: EngineProof):
        self.name = name
        self.accelerator = accelerator
        self.next = next
        self.proof = proof
        self.declined = 0
        self.failed = 0

    @property
    def reason(self) -> str:
        return self.proof.reason

    @property
    def fallbacks(self) -> int:
        """Texts (documents, or chunks of a huge one) this chain encoded with another engine than the accelerator."""
        return self.declined + self.failed + self.next.fallbacks

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
            ids = self._unless_failing(self.accelerator.encode_utf8, data, None)
        else:
            ids = self._unless_failing(self.accelerator.encode, data.decode("utf-8"))
        if ids is _FAILED:
            ids = self.next.encode_array(data)
        return np.asarray(ids, dtype=np.uint32)

    def _accelerated(self, data: str | bytes):
        """The accelerator's IDs, or None: the next engine's document."""
        if isinstance(data, bytes) and hasattr(self.accelerator, "encode_utf8"):
            # An accelerator that reads UTF-8 gets the bytes as they are; ASCII needs no decoding
            # to be valid, and no guard holds an ASCII code point.
            if data.isascii():
                ids = self._unless_failing(self.accelerator.encode_utf8, data, None)
            else:
                text = _valid_text(data)
                if text is None:
                    return None
                ids = self._unless_failing(self.accelerator.encode_utf8, data, text)
        else:
            text = _valid_text(data)
            if text is None:
                return None
            ids = self._unless_failing(self.accelerator.encode, text)
        if ids is _FAILED:
            return None
        if ids is None:
            self.declined += 1
        return ids

    def _unless_failing(self, encode: Callable, *args):
        """``encode(*args)``, or ``_FAILED`` (counted in ``failed``) when it raises anything
        but an interrupt or an exit: the text is then the next engine's."""
        try:
            return encode(*args)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException:  # a Rust panic is a BaseException: pyo3's PanicException
            self.failed += 1
            return _FAILED



class NormalizingEngine:
    """An engine that does not normalize, given the text in NFC (``bpe.tokenizer_file.hf_normalizer``)
    for a tokenizer whose file normalizes; bytes that are not UTF-8 go to it as they are (its
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
    from bpe.tokenizer_file.hf_normalizer import nfc

    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
    return nfc(data)


# Any engine at the head of a chain.
Engine = PythonEngine | TiktokenEngine | AcceleratedEngine | NormalizingEngine
