"""Hugging Face's pre-tokenizer chains: Split (Isolated) steps and ByteLevel's prefix space.

``tokenizers`` applies its pre-tokenizers one after another, each to every
piece the previous ones made: a Split with a regex cuts each piece into its
matches and the text between them (behavior ``Isolated``); ByteLevel with
``add_prefix_space`` puts a space before each piece that does not start with
one, and with ``use_regex`` splits with GPT-2's regex
(``bpe.tokenizer_file.spec.BYTE_LEVEL_PATTERN``).
"""

from __future__ import annotations

from typing import Sequence

from bpe.pretokenize import PreTokenizer


class StepPreTokenizer:
    """Applies pre-tokenizer steps in order (see ``bpe.tokenizer_file.spec.Step``).

    Args:
      steps: ("split", regex) and ("prefix_space", "") steps.

    Attributes:
      pattern: the regex when the chain is one split, else None.
    """

    def __init__(self, steps: Sequence[tuple[str, str]]):
        self.steps = tuple(steps)
        self._actions = []
        for kind, argument in self.steps:
            if kind == "split":
                self._actions.append(PreTokenizer(argument).split)
            elif kind == "prefix_space":
                self._actions.append(_prefix_space)
            else:
                raise ValueError(f"unknown pre-tokenizer step {kind!r}")
        self.pattern = self.steps[0][1] if len(self.steps) == 1 and self.steps[0][0] == "split" else None

    def split(self, text: str) -> list[str]:
        pieces = [text]
        for action in self._actions:
            pieces = [out for piece in pieces for out in action(piece)]
        return [piece for piece in pieces if piece]


def _prefix_space(piece: str) -> list[str]:
    # HF has no empty pieces to put a space before: empty text stays empty.
    if not piece:
        return []
    return [piece if piece.startswith(" ") else " " + piece]
