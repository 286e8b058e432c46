"""Whether tiktoken's engine gives a tokenizer's IDs, and that engine when it does.

tiktoken merges by the rank of the concatenated bytes. For a tiktoken rank
file that is the file's own rule, so only the pattern and the sample are
checked. For our own tokenizers, and for Hugging Face files whose merges can
be renumbered into our contract (``_hf_as_ours``), it also takes: a pattern
that is one of tiktoken's own (``TIKTOKEN_PATTERNS``), whose regex engine
splits it as ours does; ``rank_proof.rank_mismatch`` finding no text on which
tiktoken's rule and our merge order could differ (O(vocabulary)); and the
verification sample (``bpe.engines.sample``) encoding alike in both, a check of
the two regex engines that runs in every process that builds the engine.
"""

from __future__ import annotations

import dataclasses

from bpe.accelerators.proof import tiktoken_gaps
from bpe.accelerators.unicode_guard import CodePointGuard
from bpe.engines import rank_proof
from bpe.engines.chain import PythonEngine, TiktokenEngine
from bpe.engines.engine_proof import EngineProof
from bpe.engines.sample import VERIFICATION_SAMPLE
from bpe.engines.tokenizer_like import TokenizerLike
from bpe.pretokenize import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN

__all__ = ["TIKTOKEN_PATTERNS", "tiktoken_engine"]

# The patterns tiktoken's own encodings use, which its regex engine splits as ours does.
TIKTOKEN_PATTERNS = (GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN)

# tiktoken's special token for tokenizers that have none (see ``TiktokenEngine``).
_UNUSED_SPECIAL = "<|beam-bpe: no special tokens|>"


def tiktoken_engine(tokenizer: TokenizerLike, proven: bool) -> tuple[TiktokenEngine | None, str]:
    """(tiktoken's engine for this tokenizer, "") if it qualifies, else (None, why not).

    ``proven``: the O(vocabulary) ``rank_proof.rank_mismatch`` already passed for a
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
    mismatch = None if proven or tokenizer.kind == "tiktoken" else rank_proof.rank_mismatch(view)
    if mismatch:
        return None, mismatch
    reference = PythonEngine(*tokenizer.reference_parts())
    # tiktoken's Unicode tables are older than ``regex``'s (its gaps, measured for the
    # installed versions); a rank file's IDs are tiktoken's own.
    guard = None
    if tokenizer.kind != "tiktoken":
        gaps, why = tiktoken_gaps(tokenizer.pattern)
        if gaps is None:
            return None, why
        guard = CodePointGuard(gaps)
    engine = TiktokenEngine(encoding, reference, EngineProof(tokenizer.sha256, "tiktoken"), guard)
    ours = reference.encode(VERIFICATION_SAMPLE)
    theirs = engine.encode_array(tokenizer.normalize(VERIFICATION_SAMPLE)).tolist()
    if ours != theirs:
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        return None, f"tiktoken differs from the reference on the verification sample at token {first}"
    return engine, ""


def _hf_as_ours(tokenizer: TokenizerLike) -> tuple[_Renumbered | None, str]:
    """A Hugging Face tokenizer's merges renumbered into our contract, when tiktoken's rule with
    the file's IDs as ranks is the same as ours with our IDs; else (None, why not).

    That holds when merges create tokens in increasing ID order (so the lowest
    rank of tiktoken is the earliest merge), each from tokens made before it,
    every ordinary token of two or more bytes is made by a merge (tiktoken could
    build any other one), and no added
    token is matched in text (tiktoken's ordinary encoder matches none). Then
    ``rank_proof.rank_mismatch`` of the renumbered tokenizer decides.
    """

    encoder = tokenizer.piece_encoder
    merged = encoder.merged
    if tokenizer.added_tokens:
        return None, "added tokens are matched in any text, which tiktoken's ordinary encoder does not do"
    if any(b <= a for a, b in zip(merged, merged[1:])):
        return None, "Hugging Face merge-rank semantics: merges do not create tokens in increasing ID order"
    made = set(encoder.byte_ids)
    for (left, right), token_id in zip(encoder.merges, merged):
        if left not in made or right not in made:
            return None, (f"Hugging Face merge-rank semantics: a merge makes token {token_id} from a token "
                          "a later merge makes")
        made.add(token_id)
    unmade = [i for i in tokenizer.ordinary_ids() if i not in made and i not in tokenizer.special_tokens.values()]
    if unmade:
        return None, f"Hugging Face merge-rank semantics: token {unmade[0]} is made by no merge"
    ours_id = {token_id: b for b, token_id in enumerate(encoder.byte_ids)}
    ours_id.update((token_id, 256 + i) for i, token_id in enumerate(merged))
    return _Renumbered([(ours_id[a], ours_id[b]) for a, b in encoder.merges]), ""


@dataclasses.dataclass(frozen=True)
class _Renumbered:
    """Merges renumbered into our contract (byte b is ID b, merge i makes 256 + i): what
    ``rank_proof.rank_mismatch`` reads of a tokenizer."""

    merges: list[tuple[int, int]]
