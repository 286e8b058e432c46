"""A tiktoken rank file as a Hugging Face tokenizer.json with tiktoken's IDs, proven per file.

tiktoken joins the adjacent pair whose joined bytes have the lowest rank;
Hugging Face's BPE joins the pair listed first in its merges. A rank file's
merges are derived so that the two agree (``tiktoken_file.exact_merges``: one
merge per token, the last step tiktoken takes on the token's own bytes, and
``ignore_merges`` where some token is made only as a whole piece), and
``bpe.engines.rank_proof.rank_export_mismatch`` proves it for the file at hand,
in O(total token bytes x token length), with the argument in its docstring.

What no file can do is refused with ``NoExactFile``, one line naming the token:
a special token that an ordinary token's vocab name spells (HF would give it
that token's ID), or, with ``ignore_merges``, a special token the vocab must hold
(its ID leaves a gap) whose name reads as other bytes than its own text (HF
would give a piece of those bytes the special token's ID).

``rank_file_model`` is the merge list alone, for a tokenizer built on a rank file
(merges appended after it); ``rank_file_json`` the whole file, and ``rank_file_object``
the same as its JSON object, for a caller that adds to it before writing.
"""

from __future__ import annotations

from typing import Mapping

from bpe.engines.rank_proof import rank_export_mismatch
from bpe.tokenizer_file import TokenizerFileError, token_bytes_of
from bpe.tokenizer_file.render import as_text, file_object, special_token_clash, specials_in_vocab
from bpe.tokenizer_file.tiktoken_file import ExactMerges, exact_merges

__all__ = ["ExactMerges", "NoExactFile", "rank_file_json", "rank_file_model", "rank_file_object"]


class NoExactFile(TokenizerFileError):
    """No tokenizer.json gives the rank file's IDs; the message is one line saying why
    (a ``TokenizerFileError``, so a ``ValueError``)."""


def rank_file_model(tokens: Mapping[int, bytes]) -> ExactMerges:
    """The merges (and ``ignore_merges``) under which Hugging Face's BPE gives tiktoken's IDs
    for the rank file ``tokens`` (rank = ID -> token bytes), proven for this file.

    Raises:
      NoExactFile: the proof fails (``rank_export_mismatch``), naming the token.
    """
    model = exact_merges({data: rank for rank, data in tokens.items()})
    mismatch = rank_export_mismatch(tokens, model.merges, model.ignore_merges)
    if mismatch:
        raise NoExactFile(f"no tokenizer.json gives this rank file's IDs: {mismatch}")
    return model


def rank_file_json(tokens: Mapping[int, bytes], pattern: str, special_tokens: Mapping[str, int]) -> str:
    """The tokenizer.json text of a rank file with its pattern and special tokens, which
    Hugging Face ``tokenizers`` reads with tiktoken's IDs on every ordinary text.

    Raises:
      NoExactFile: one line: the proof fails, or a special token that no file can
        hold with its ID (see the module).
    """
    return as_text(rank_file_object(tokens, pattern, special_tokens))


def rank_file_object(tokens: Mapping[int, bytes], pattern: str, special_tokens: Mapping[str, int]) -> dict:
    """``rank_file_json``'s file as its JSON object.

    Raises:
      NoExactFile: as ``rank_file_json``.
    """
    model = rank_file_model(tokens)
    clash = special_token_clash(special_tokens, tokens)
    if clash:
        raise NoExactFile(f"no tokenizer.json gives these IDs: {clash}")
    if model.ignore_merges and specials_in_vocab(len(tokens), special_tokens):
        for text, token_id in special_tokens.items():
            spelled = token_bytes_of(text)
            if spelled is not None and spelled != text.encode("utf-8"):
                raise NoExactFile(
                    f"no tokenizer.json gives these IDs: special token {text!r} (ID {token_id}) must be held in "
                    f"the vocab, where its name stands for the bytes {spelled!r}; the rank file needs ignore_merges "
                    f"(token {model.whole_only[0]} is made only as a whole piece), under which Hugging Face would "
                    "give a piece of those bytes the special token's ID"
                )
    return file_object(tokens, model.merges, pattern, special_tokens, ignore_merges=model.ignore_merges)
