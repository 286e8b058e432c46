"""What the engines read of a tokenizer: ``TokenizerLike``.

``bpe.tokenizer.Tokenizer`` builds its engines through this package, so the
engines name the tokenizer by this Protocol instead of importing its class:
the dependency points one way, from the tokenizer to its engines.
"""

from __future__ import annotations

from typing import Callable, Mapping, Protocol

from bpe.encoder import PieceEncoder

__all__ = ["TokenizerLike"]


class TokenizerLike(Protocol):
    """The part of ``bpe.tokenizer.Tokenizer`` that choosing and building engines reads."""

    kind: str
    pattern: str | None
    normalizer: str | None
    merges: list[tuple[int, int]]
    special_tokens: dict[str, int]
    added_tokens: dict[str, int]
    vocab_size: int

    @property
    def sha256(self) -> str: ...

    @property
    def piece_encoder(self) -> PieceEncoder: ...

    def reference_parts(self) -> tuple[Callable[[str], list], object]: ...

    def normalize(self, text: str) -> str: ...

    def ordinary_ids(self) -> list[int]: ...

    def ordinary_tokens(self) -> Mapping[int, bytes]: ...

    def to_tiktoken(self, name: str = "beam-bpe", special_tokens: Mapping[str, int] | None = None): ...
