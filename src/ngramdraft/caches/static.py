"""The static cache: 2-grams of a large corpus in one read-only, memory-mapped file."""

import mmap
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CorruptFileError, WrongFileKindError
from ..files.atomic import atomic_output
from ..files.ngd.header import KIND_NAMES, KIND_STATIC, NOT_NGRAMS, Header
from ..files.ngd.reading import frozen_view, map_file, read_meta
from ..files.ngd.writing import make_constmap
from ..kernels.frozen import CORRUPT, followers_span, key_hash_of, key_values, span_stats
from ..kernels.handles import frozen_handle
from ..validation import check_cache_arrays, check_ngram
from .base import Arrays, Cache, RecordedTokenizer
from .mapped import MappedFile
from .warmup import Warmup

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class StaticCache(MappedFile, RecordedTokenizer, Cache):
    """2-gram -> followers of a corpus, served zero-copy from a mmap'd ``.ngd`` file.

    Open with :meth:`open` (reads one page, whatever the size); create with
    :func:`ngramdraft.build_static`, :func:`ngramdraft.static_from_cache`,
    :func:`ngramdraft.static_from_llamacpp` or :func:`ngramdraft.merge_static`
    (each writes the file and opens it). Any number of drafters, threads or
    processes can share one.

    For kernels: ``frozen`` is the file's arrays (``kernels.frozen.Frozen``,
    views of the mapping) and ``handle`` their handle.
    """

    role = "static"

    def __init__(self, mm: mmap.mmap, header: Header, meta: dict[str, Any], path: object) -> None:
        self._mm: mmap.mmap | None = mm
        self.header = header
        self.meta = meta
        self.path = Path(str(path))
        self._warmup: Warmup | None = None
        self._arrays_checked = False
        self.frozen = frozen_view(mm, header, path)
        self.handle = frozen_handle(self.frozen)

    # -- opening ---------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        verify: bool = False,
        tokenizer: object = None,
    ) -> "StaticCache":
        """Open a static cache file (memory-mapped, read-only).

        ``verify`` also checks every section's checksum (reads the whole file).
        ``tokenizer`` (a name, or an object with an ``identity`` dict) makes the
        open fail with TokenizerMismatchError if the cache records another one.
        Opening reads one page; :meth:`prefault` maps the rest in the background.
        """
        mm, header = map_file(path)
        if header.kind in NOT_NGRAMS:
            raise WrongFileKindError(f"{path}: {NOT_NGRAMS[header.kind]}")
        if header.kind != KIND_STATIC:
            raise WrongFileKindError(
                f"{path}: a {KIND_NAMES[header.kind]} cache, not a static one "
                "(load it with NgramCache.load)"
            )
        return cls(mm, header, read_meta(mm, header, path), path)._opened(verify, tokenizer)

    # -- the Cache interface -------------------------------------------------

    def __len__(self) -> int:
        return self.header.n_keys

    @property
    def n_entries(self) -> int:
        return self.header.n_entries

    def followers(self, ngram: "ArrayLike") -> tuple[np.ndarray, np.ndarray]:
        key = check_ngram(ngram)
        f = self.frozen
        lo, n = followers_span(f, key, np.uint64(key_hash_of(f, key)))
        if n == CORRUPT:
            raise CorruptFileError(f"{self.path}: offsets of 2-gram {key[:2]} are impossible")
        return f.tokens[lo : lo + n].copy(), f.counts[lo : lo + n].copy()

    @property
    def max_token(self) -> int:
        return self.header.max_token

    def arrays(self) -> Arrays:
        """The file's arrays, checked: every path that copies or converts the cache reads here.

        Opening checks no array, so that it stays one page read; drafting bounds
        every span it reads. A copy hands every offset to numpy and the build
        kernels, so the first call checks the checksums (through the warm-up, so
        that they are read once whoever asks first) and the arrays' structure
        (the copy reads the whole file anyway) and raises a named error on damage.
        """
        if not self._arrays_checked:
            self.prefault().wait()
            self._check_arrays()
            self._arrays_checked = True
        f = self.frozen
        return f.keys, f.offsets, f.tokens, f.counts

    def _save_native(self, path: str | os.PathLike[str]) -> None:
        # From the mapping, not the path: another writer may have replaced the file since.
        mm, block = self._mapping(), 8 << 20
        with atomic_output(path, len(mm)) as out:
            for start in range(0, len(mm), block):
                out.write(mm[start : start + block])

    # -- integrity -------------------------------------------------------------

    def _check_arrays(self) -> None:
        """The invariants a copy relies on: spans, ids in range, keys ascending, counts."""
        f = self.frozen
        check_cache_arrays(f.keys, f.offsets, f.tokens, f.counts, where=str(self.path))
        keys = f.keys.astype(np.int64)
        packed = (keys[:, 0] << 32) | keys[:, 1]
        if len(packed) > 1 and np.any(np.diff(packed) <= 0):
            raise CorruptFileError(f"{self.path}: 2-gram keys are not strictly ascending")
        top = max(int(f.keys.max(initial=-1)), int(f.tokens.max(initial=-1)))
        if top != self.header.max_token:
            raise CorruptFileError(
                f"{self.path}: max_token is {self.header.max_token}, data has {top}"
            )
        n_vocab = self._n_vocab
        if n_vocab is not None and top >= n_vocab:
            raise CorruptFileError(
                f"{self.path}: holds id {top}, but its tokenizer has {n_vocab} ids"
            )

    def _check(self) -> None:
        """Verify every invariant of the file's contents; raises CorruptFileError."""
        self._check_arrays()
        f = self.frozen
        if not np.array_equal(span_stats(f.offsets, f.tokens, f.counts), f.stats):
            raise CorruptFileError(f"{self.path}: per-2-gram statistics disagree with the counts")
        if int(f.counts.max(initial=0)) != self.header.max_count:
            raise CorruptFileError(
                f"{self.path}: max_count is {self.header.max_count}, "
                f"data has {int(f.counts.max(initial=0))}"
            )
        seed, seglen, _, fuse = make_constmap(f.keys, key_values(f.offsets, f.counts, 0))
        if len(self) and (seed, seglen) != (self.header.fuse_seed, self.header.fuse_segment_length):
            raise CorruptFileError(f"{self.path}: constmap parameters are not the canonical ones")
        if len(self) and not np.array_equal(fuse, f.fuse):
            raise CorruptFileError(
                f"{self.path}: constmap does not map every key to its index and draft flag"
            )
