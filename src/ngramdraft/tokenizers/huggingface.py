"""Hugging Face ``tokenizers``: a tokenizer.json, or a tokenizer from the hub."""

import os
from pathlib import Path

import numpy as np

from ..errors import CorpusError
from ..optional import require
from .quicktok import BUNDLED


class HFTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer (``ngramdraft[hf]``)."""

    kind = "huggingface"

    def __init__(self, name: str | os.PathLike[str]) -> None:
        hf_tokenizer = require("tokenizers", "hf", f"tokenizer {name!r}").Tokenizer
        self.name = str(name)
        if Path(name).is_file():
            self._tok = hf_tokenizer.from_file(str(name))
        else:
            if os.environ.get("HF_HUB_OFFLINE") == "1":
                raise CorpusError(_hub_message(self.name, "HF_HUB_OFFLINE=1 is set"))
            try:
                self._tok = hf_tokenizer.from_pretrained(str(name))
            except Exception as e:  # the Rust side raises plain Exceptions
                raise CorpusError(_hub_message(self.name, e)) from e
        self.n_vocab = int(self._tok.get_vocab_size(with_added_tokens=True))

    def encode_batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        encodings = self._tok.encode_batch_fast(list(texts), add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        offsets = np.zeros(len(encodings) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.fromiter(
            (i for e in encodings for i in e.ids), dtype=np.int32, count=int(offsets[-1])
        )
        return ids, offsets


def _hub_message(name: str, why: object) -> str:
    return (
        f"cannot load tokenizer {name!r} from the Hugging Face hub ({why}). "
        f"Use a bundled encoding ({', '.join(BUNDLED)}) or the path of a tokenizer.json"
    )
