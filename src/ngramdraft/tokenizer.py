"""Tokenizers: one small protocol, adapters for quicktok encodings and Hugging Face tokenizers.

A tokenizer turns a batch of texts into one flat int32 array plus int64
offsets (text i is ``ids[offsets[i]:offsets[i+1]]``) and carries an
``identity``: its name, vocabulary size and a fingerprint (xxh3 of the ids of
a fixed probe text), which static caches record so that drafting with another
tokenizer can be refused. Both adapters import their package lazily; each is
an optional extra (``ngramdraft[quicktok]``, ``ngramdraft[hf]``); a GGUF model's
own vocabulary is read by llama.cpp (``ngramdraft[llama]``, see
:mod:`ngramdraft.integrations.llama_cpp`).
"""

import difflib
import os
import re
from pathlib import Path
from typing import Protocol

import numpy as np
import xxhash

from .errors import CorpusError
from .optional import require

BUNDLED = ("llama3", "qwen3", "cl100k_base", "o200k_base")
_PROBE = (
    "ngramdraft tokenizer fingerprint. The quick brown fox jumps over the lazy dog; "
    "0123456789 naïve café façade Ærøskøbing 東京 Москва 🤖\n\n\tindented = x**2\n"
)


class Tokenizer(Protocol):
    name: str
    kind: str
    n_vocab: int

    def encode_batch(self, texts) -> tuple[np.ndarray, np.ndarray]: ...


def identity(tokenizer):
    """The dict a static cache records for a tokenizer."""
    ids, _ = tokenizer.encode_batch([_PROBE])
    return {
        "name": tokenizer.name,
        "kind": tokenizer.kind,
        "n_vocab": int(tokenizer.n_vocab),
        "fingerprint": xxhash.xxh3_64_hexdigest(np.ascontiguousarray(ids, dtype="<i4").tobytes()),
    }


def identity_of(tokenizer):
    """Identity of a tokenizer object, a name to load, or an identity dict."""
    if isinstance(tokenizer, dict):
        return tokenizer
    if isinstance(tokenizer, str | os.PathLike):
        tokenizer = load_tokenizer(str(tokenizer))
    return identity(tokenizer)


def same_tokenizer(recorded, tokenizer):
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


class QuicktokTokenizer:
    """An encoding bundled with the ``quicktok-v1`` package (offline, exact, multithreaded)."""

    kind = "quicktok"

    def __init__(self, name):
        quicktok = require("quicktok", "quicktok", f"tokenizer {name!r}")
        self.name = name
        self._enc = quicktok.get_encoding(name)
        self.n_vocab = self._enc.n_vocab

    def encode_batch(self, texts):
        ids, offsets = self._enc.encode_batch(list(texts))
        return ids.astype(np.int32), offsets.astype(np.int64)


class HFTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer, from a tokenizer.json or a hub name."""

    kind = "huggingface"

    def __init__(self, name):
        _HF = require("tokenizers", "hf", f"tokenizer {name!r}").Tokenizer
        self.name = str(name)
        if Path(name).is_file():
            self._tok = _HF.from_file(str(name))
        else:
            if os.environ.get("HF_HUB_OFFLINE") == "1":
                raise CorpusError(_hub_message(name, "HF_HUB_OFFLINE=1 is set"))
            try:
                self._tok = _HF.from_pretrained(str(name))
            except Exception as e:  # the Rust side raises plain Exceptions
                raise CorpusError(_hub_message(name, e)) from e
        self.n_vocab = self._tok.get_vocab_size(with_added_tokens=True)

    def encode_batch(self, texts):
        encodings = self._tok.encode_batch_fast(list(texts), add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        offsets = np.zeros(len(encodings) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.fromiter(
            (i for e in encodings for i in e.ids), dtype=np.int32, count=int(offsets[-1])
        )
        return ids, offsets


def _hub_message(name, why):
    return (
        f"cannot load tokenizer {name!r} from the Hugging Face hub ({why}). "
        f"Use a bundled encoding ({', '.join(BUNDLED)}) or the path of a tokenizer.json"
    )


def load_tokenizer(name):
    """A bundled quicktok encoding, a GGUF model's vocabulary, a tokenizer.json or a hub name.

    A name that is none of these fails at once, with the bundled names it
    resembles: only names shaped like hub ids (``owner/name``) go to the hub.
    """
    name = str(name)
    kind = tokenizer_kind(name)
    if kind == "bundled":
        return QuicktokTokenizer(name)
    if kind == "gguf":
        from .integrations.llama_cpp import GGUFTokenizer

        return GGUFTokenizer(name)
    return HFTokenizer(name)


def tokenizer_kind(name):
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
    raise CorpusError(
        f"unknown tokenizer {name!r}: {hint}Use a bundled encoding ({', '.join(BUNDLED)}), "
        "MODEL.gguf, the path of a tokenizer.json, or a hub id such as owner/name"
    )


def looks_like_hub_id(name):
    """``owner/name`` with the characters the Hugging Face hub allows, and not a local path."""
    return re.fullmatch(r"[\w.-]+/[\w.-]+", name) is not None and not Path(name).exists()
