"""Encodings bundled with the ``quicktok-v1`` package (offline, exact, multithreaded)."""

import numpy as np

from ..optional import require

BUNDLED = ("llama3", "qwen3", "cl100k_base", "o200k_base")


class QuicktokTokenizer:
    """A bundled quicktok encoding (``ngramdraft[quicktok]``)."""

    kind = "quicktok"

    def __init__(self, name: str) -> None:
        quicktok = require("quicktok", "quicktok", f"tokenizer {name!r}")
        self.name = name
        self._enc = quicktok.get_encoding(name)
        self.n_vocab = int(self._enc.n_vocab)

    def encode_batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        ids, offsets = self._enc.encode_batch(list(texts))
        return ids.astype(np.int32), offsets.astype(np.int64)
