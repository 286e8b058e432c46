"""``NativeEngine``: what every accelerator's engine is, around its library's native encoder.

An engine is built from a few small arguments (a ``tokenizer.json`` text, a
rank file and a pattern, ...). It pickles as those arguments and builds the
native encoder again where it is unpickled, so Beam ships it to workers small.
A text holding a code point its Unicode tables class differently from
``regex``'s (its gaps, measured by ``unicode_gaps``) is declined: ``encode``
returns None, and the text goes to the next engine down.
"""

from __future__ import annotations

from bpe.accelerators.unicode_guard import CodePointGuard

__all__ = ["NativeEngine"]


class NativeEngine:
    """An accelerator's encoder for one vocabulary.

    A subclass defines ``_load(*args)``, which builds the native encoder from
    the constructor's other arguments, and ``_encode(text)``, which gives the
    IDs of a valid text the guard lets through (a list, an ``array("I")`` or a
    numpy uint32 array).

    Args:
      gaps: the code point ranges to decline ("0558 058B-058C"; "" for none).
      *args: what ``_load`` builds the native encoder from.
    """

    def __init__(self, gaps: str, *args):
        self.args = args
        self._backend = self._load(*args)
        self.guard = CodePointGuard(gaps)

    def __reduce__(self):
        return type(self), (self.guard.ranges, *self.args)

    def _load(self, *args):
        raise NotImplementedError

    def _encode(self, text: str):
        raise NotImplementedError

    def encode(self, text: str):
        """The IDs of valid text; None for a text holding a code point of its gaps."""
        if self.guard.rejects(text):
            return None
        return self._encode(text)
