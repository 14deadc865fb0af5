"""One build's corpus, checked: a source, the tokenizer, documents joined or apart."""

import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidParameterError
from ..files.tokens import RAW_SUFFIXES
from ..tokenizers import Tokenizer, identity, load_tokenizer, needs_tokenizer
from .counting import TokenTriples
from .sources import Source, TextFiles, TokenFiles

ONE_CORPUS = "give exactly one corpus: token files, text files, --dataset or --data-files"


@dataclass
class Corpus:
    """One corpus for a build: a :class:`~ngramdraft.build.sources.Source` and how to read it.

    ``tokenizer`` is a name load_tokenizer knows (text needs one; for token
    files it is only recorded). ``separate``: no 2-gram crosses a document
    boundary; token files carry no documents.
    """

    source: Source
    tokenizer: str | None = None
    separate: bool = False

    def __post_init__(self) -> None:
        if self.separate and not self.source.is_text:
            raise InvalidParameterError(
                "--separate-documents needs text: token files carry no documents"
            )
        if self.source.is_text and not self.tokenizer:
            raise InvalidParameterError(needs_tokenizer("text"))

    @classmethod
    def of(
        cls,
        inputs: "Iterable[str | os.PathLike[str]] | Source",
        tokenizer: str | None = None,
        separate: bool = False,
    ) -> "Corpus":
        """A corpus of files (token files by their suffix, text otherwise) or of a source."""
        if not isinstance(inputs, Iterable):
            return cls(inputs, tokenizer, separate)
        files = [str(p) for p in inputs]
        tokens = [p for p in files if Path(p).suffix in (*RAW_SUFFIXES, ".npy")]
        texts = [p for p in files if p not in tokens]
        if bool(tokens) == bool(texts):
            raise InvalidParameterError(ONE_CORPUS)
        return cls(TokenFiles(tokens) if tokens else TextFiles(texts), tokenizer, separate)

    @functools.cached_property
    def loaded_tokenizer(self) -> Tokenizer | None:
        """The tokenizer, loaded once (None when the corpus names none)."""
        return load_tokenizer(self.tokenizer) if self.tokenizer else None

    def meta(self) -> dict[str, Any]:
        """What the cache file records of its corpus and tokenizer."""
        meta: dict[str, Any] = {
            "documents": "separate" if self.separate else "joined",
            "corpus": self.source.identity,
        }
        if self.loaded_tokenizer is not None:
            meta["tokenizer"] = identity(self.loaded_tokenizer)
        return meta

    def triples(self, token_cache: str | None = None, *, quiet: bool = True) -> list[TokenTriples]:
        """The build's triples on this machine (text is tokenized first, or found cached)."""
        tokenizer = self.loaded_tokenizer if self.source.is_text else None
        return [
            TokenTriples(tokens, starts=starts if self.separate else None)
            for tokens, starts in self.source.streams(tokenizer, token_cache, quiet=quiet)
        ]
