"""Superword tokenizers (SuperBPE): tokens that bridge whitespace, such as " by the way".

Training has two stages. Stage one is ordinary byte-level BPE up to the
transition vocabulary size T. Stage two pre-tokenizes with a looser regex
(``rules.STAGE_TWO_PATTERN``), so its pieces span several words, and keeps
merging adjacent tokens inside them up to the final vocabulary size.

- ``rules``: stage two's regex and the tokens it refuses (more than four words,
  a colon followed by a space).
- ``reference``: the algorithm over whole documents, written to be read:
  ``train`` (both stages) and ``extend`` (stage two on an existing tokenizer).
- ``candidates``: a stage-two piece cut into the runs of whole pretokens that
  stage two may merge, counted by frequency.

``bpe/training/superwords.py`` learns the reference's merges from the count
tables, with no document in memory.
"""
