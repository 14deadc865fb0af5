"""Tokenizers: one small protocol, and a module per kind.

A tokenizer turns a batch of texts into one flat int32 array plus int64
offsets (text i is ``ids[offsets[i]:offsets[i+1]]``) and carries an
``identity``: its name, vocabulary size and a fingerprint (xxh3 of the ids of
a fixed probe text), which static caches record so that drafting with another
tokenizer can be refused. The kinds: ``quicktok`` (bundled encodings,
``ngramdraft[quicktok]``), ``huggingface`` (a tokenizer.json or a hub name,
``ngramdraft[hf]``) and ``gguf`` (a model's own vocabulary, read by llama.cpp,
``ngramdraft[llama]``); each imports its package only when loaded.
"""

import difflib
import os
import re
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import xxhash

from ..errors import CorpusError
from .gguf import GGUFTokenizer
from .huggingface import HFTokenizer
from .quicktok import BUNDLED, QuicktokTokenizer

_PROBE = (
    "ngramdraft tokenizer fingerprint. The quick brown fox jumps over the lazy dog; "
    "0123456789 naïve café façade Ærøskøbing 東京 Москва 🤖\n\n\tindented = x**2\n"
)


class Tokenizer(Protocol):
    """What a tokenizer answers: its name, kind and vocabulary size, and batch encoding."""

    name: str
    kind: str
    n_vocab: int

    def encode_batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]: ...


def identity(tokenizer: Tokenizer) -> dict[str, Any]:
    """The dict a static cache records for a tokenizer."""
    ids, _ = tokenizer.encode_batch([_PROBE])
    return {
        "name": tokenizer.name,
        "kind": tokenizer.kind,
        "n_vocab": int(tokenizer.n_vocab),
        "fingerprint": xxhash.xxh3_64_hexdigest(np.ascontiguousarray(ids, dtype="<i4").tobytes()),
    }


def identity_of(tokenizer: object) -> dict[str, Any]:
    """Identity of a tokenizer object, a name to load, or an identity dict."""
    if isinstance(tokenizer, dict):
        return tokenizer
    if isinstance(tokenizer, str | os.PathLike):
        return identity(load_tokenizer(str(tokenizer)))
    return identity(cast(Tokenizer, tokenizer))


def same_tokenizer(recorded: dict[str, Any], tokenizer: object) -> bool:
    """Whether ``tokenizer`` (object, name or identity) is the one a cache ``recorded``.

    A name equal to the recorded one, or a bundled name other than it, is
    answered by comparing names; anything else is loaded and its
    tokenization fingerprint compared, when both sides have one.
    """
    if isinstance(tokenizer, str | os.PathLike):
        name = str(tokenizer)
        if name == recorded.get("name"):
            return True
        if name in BUNDLED:
            return False
    theirs = identity_of(tokenizer)
    if recorded.get("fingerprint") and theirs.get("fingerprint"):
        return recorded["fingerprint"] == theirs["fingerprint"]
    return recorded.get("name") == theirs.get("name")


def load_tokenizer(name: str | os.PathLike[str]) -> Tokenizer:
    """A bundled quicktok encoding, a GGUF model's vocabulary, a tokenizer.json or a hub name.

    A name that is none of these fails at once, with the bundled names it
    resembles: only names shaped like hub ids (``owner/name``) go to the hub.
    """
    name = str(name)
    kind = tokenizer_kind(name)
    if kind == "bundled":
        return QuicktokTokenizer(name)
    if kind == "gguf":
        return GGUFTokenizer(name)
    return HFTokenizer(name)


def tokenizer_kind(name: str | os.PathLike[str]) -> str:
    """'bundled', 'gguf' or 'huggingface' (a file or a hub id) for a tokenizer name.

    Raises CorpusError, naming the bundled encodings it resembles, for a name
    that can be none of them; nothing is loaded.
    """
    name = str(name)
    if name in BUNDLED:
        return "bundled"
    if name.endswith(".gguf"):
        return "gguf"
    if Path(name).is_file() or looks_like_hub_id(name):
        return "huggingface"
    close = difflib.get_close_matches(name.lower(), BUNDLED, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    raise CorpusError(f"unknown tokenizer {name!r}: {hint}Use {CHOICES}")


# What a tokenizer name may be, in words: every message and help text that asks for one.
CHOICES = (
    f"a bundled encoding ({', '.join(BUNDLED)}), MODEL.gguf (a model's own vocabulary), "
    "the path of a tokenizer.json, or a hub id such as owner/name"
)


def needs_tokenizer(what: str) -> str:
    """The message for text given without a tokenizer."""
    return f"{what} needs --tokenizer NAME to become tokens: {CHOICES}"


def looks_like_hub_id(name: str) -> bool:
    """``owner/name`` with the characters the Hugging Face hub allows, and not a local path."""
    return re.fullmatch(r"[\w.-]+/[\w.-]+", name) is not None and not Path(name).exists()
