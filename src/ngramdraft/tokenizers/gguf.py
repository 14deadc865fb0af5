"""A GGUF model's own vocabulary, tokenized by llama.cpp, as llama-lookup-create -m does."""

import contextlib
import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFileError
from ..files.kinds import check_gguf
from ..optional import require


def model_name(llama: Any) -> str:
    """The name a loaded llama_cpp.Llama's vocabulary is recorded under."""
    return str(llama.metadata.get("general.name") or Path(llama.model_path).name)


class LlamaVocab:
    """A loaded ``llama_cpp.Llama``'s vocabulary as an ngramdraft tokenizer."""

    kind = "gguf"

    def __init__(self, llama: Any, name: str) -> None:
        self._llama = llama
        self.name = name
        self.n_vocab = int(llama.n_vocab())

    def encode_batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        pieces = [
            self._llama.tokenize(t.encode("utf-8"), add_bos=False, special=False) for t in texts
        ]
        offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in pieces], out=offsets[1:])
        ids = np.fromiter((i for p in pieces for i in p), dtype=np.int32, count=int(offsets[-1]))
        return ids, offsets


class GGUFTokenizer(LlamaVocab):
    """The vocabulary of a GGUF model file (``--tokenizer MODEL.gguf``), as llama-lookup-create -m.

    llama.cpp itself tokenizes (the model is loaded vocabulary only), so a
    cache built with it holds exactly the ids the model will see; its
    identity records the model's name and a fingerprint of its tokenization.
    Needs ``ngramdraft[llama]``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        llama_cpp = require("llama_cpp", "llama", "a GGUF model's vocabulary")
        path = check_gguf(path)
        # A vocabulary-only model has no training context, which llama.cpp
        # reports at error level through the host's logger (Python's stderr);
        # nothing is wrong, so it is kept out of the user's terminal.
        with contextlib.redirect_stderr(io.StringIO()):
            try:
                llama = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
            except ValueError as e:
                raise ModelFileError(
                    f"{path}: llama.cpp cannot read this model's vocabulary ({e})"
                ) from e
        super().__init__(llama, model_name(llama))
        self.path = os.fspath(path)
