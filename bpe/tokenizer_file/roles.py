"""The roles of special tokens (BOS, EOS, pad) that a tokenizer.json cannot declare itself.

A tokenizer.json declares BOS and EOS only through its post-processor, which
Hugging Face then adds to every text it encodes; ours declares its EOS by its
layout (the first special token after the merges). A tokenizer whose roles
neither carries (a tiktoken rank file with its preset's EOS, the extension of
ours with special tokens, whose new merges follow them) keeps them in
``tokenizer_config.json`` beside its tokenizer.json: the file in which
Hugging Face ``transformers`` keeps them too (``eos_token``, ``bos_token``,
``pad_token``; ``AutoTokenizer.from_pretrained`` reads it). ``Tokenizer.load``
takes from it the roles the tokenizer.json leaves undeclared.
"""

from __future__ import annotations

import json
from typing import Mapping

from bpe.tokenizer_file import storage
from bpe.tokenizer_file.spec import TokenizerFileError

__all__ = ["ROLES", "ROLES_FILE", "parse_config", "parse_roles", "read_config", "render_roles"]

ROLES_FILE = "tokenizer_config.json"
ROLES = ("bos_token", "eos_token", "pad_token")
# Bigger than any tokenizer_config.json, chat templates included; read whole.
MAX_ROLES_BYTES = 16 << 20


def read_config(file_path: str, transport_params: dict | None = None) -> bytes | None:
    """The bytes of the tokenizer_config.json beside the tokenizer file ``file_path``; None if there is none.

    Raises:
      TokenizerFileError: it is there but cannot be read.
    """
    return storage.read_beside(file_path, ROLES_FILE, transport_params, limit=MAX_ROLES_BYTES + 1)


def parse_config(data: bytes, source: str) -> dict:
    """A tokenizer_config.json as its JSON object.

    Raises:
      TokenizerFileError: too big, or not a JSON object.
    """
    if len(data) > MAX_ROLES_BYTES:
        raise TokenizerFileError(f"{source} is more than {MAX_ROLES_BYTES} bytes, more than a {ROLES_FILE} may be")
    try:
        config = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise TokenizerFileError(f"{source}: not JSON ({e})") from None
    if not isinstance(config, dict):
        raise TokenizerFileError(f"{source}: expected a JSON object")
    return config


def parse_roles(config: dict, source: str, special_tokens: Mapping[str, int]) -> dict[str, str]:
    """The roles a tokenizer_config.json (``parse_config``) gives, role -> special token text;
    its other keys are not ours. A role is a token's text, or an object with its
    ``content`` (as ``transformers`` writes an AddedToken), or null.

    Raises:
      TokenizerFileError: a role naming no special token of the tokenizer.
    """
    roles = {}
    for role in ROLES:
        value = config.get(role)
        text = value.get("content") if isinstance(value, dict) else value
        if text is None:
            continue
        if not isinstance(text, str) or text not in special_tokens:
            raise TokenizerFileError(f"{source}: {role} {json.dumps(text, ensure_ascii=False)} is not a special "
                                     "token of the tokenizer beside it")
        roles[role] = text
    return roles


def render_roles(roles: Mapping[str, str], existing: dict | None = None) -> str:
    """tokenizer_config.json text giving ``roles``: the other keys of an ``existing`` one
    (``parse_config``) kept, a model's chat template and the like; ``tokenizer_class``
    lets ``transformers``' AutoTokenizer load the tokenizer.json beside it."""
    config = {"tokenizer_class": "PreTrainedTokenizerFast"} if existing is None else dict(existing)
    for role in ROLES:
        config.pop(role, None)
        if role in roles:
            config[role] = roles[role]
    return json.dumps(config, ensure_ascii=False, indent=1) + "\n"
