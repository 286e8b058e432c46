"""beam-bpe's algorithm layer: byte-level BPE training, encoding and decoding.

Python plus ``regex``, with compiled engines (tiktoken's core) used only where
proven to give the same IDs; it never imports Beam, so it runs anywhere a
tokenizer is needed (a Beam worker, a training loop, a notebook).

    import bpe
    tok = bpe.train({"hello": 10, " world": 5}, vocab_size=300)
    tok.decode(tok.encode("hello world"))
"""

from bpe.engines import EngineProof, ProofMismatch
from bpe.pretokenize import PRESETS, PreTokenizer
from bpe.tokenizer import Tokenizer, TokenizerFileError
from bpe.training.trainer import train

__all__ = ["PRESETS", "EngineProof", "PreTokenizer", "ProofMismatch", "Tokenizer", "TokenizerFileError", "train"]
