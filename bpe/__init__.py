"""beam-bpe's algorithm layer: byte-level BPE training, encoding and decoding.

Pure Python plus ``regex``; it never imports Beam, so it runs anywhere a
tokenizer is needed (a Beam worker, a training loop, a notebook).

    import bpe
    tok = bpe.train({"hello": 10, " world": 5}, vocab_size=300)
    tok.decode(tok.encode("hello world"))
"""

from bpe.pretokenize import PRESETS, PreTokenizer
from bpe.tokenizer import Tokenizer, TokenizerFileError
from bpe.trainer import train

__all__ = ["PRESETS", "PreTokenizer", "Tokenizer", "TokenizerFileError", "train"]
