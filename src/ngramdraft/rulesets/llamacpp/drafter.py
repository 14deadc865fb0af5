"""LlamaCppDrafter: one sequence drafted by llama.cpp's rules, the Drafter by default.

Its caches are the three roles' (``caches/``): a context NgramCache it owns,
a dynamic NgramCache (or a shared dynamic file) and a static cache; its
kernel state (``state.py``) points at their handles and its buffers, so that
a draft and an accept are one kernel call each.
"""

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...build.static import as_static
from ...caches.ngram import NgramCache
from ...caches.shared import LOCK_TIMEOUT, SharedDynamicFile, dynamic_role
from ...caches.warmup import NO_WARMUP, NoWarmup, Warmup
from ...drafting.batch import NEED_ROOM
from ...drafting.drafter import MAX_DRAFT, REPLY_ROOM, Drafter, damaged
from ...drafting.policy import Policy
from ...errors import VocabularyError
from ...kernels.frozen import CORRUPT
from ...validation import TOKEN_MAX, as_tokens, check_int, check_ngram_range
from .state import (
    BUF,
    CTX,
    DYN,
    NO_STATIC,
    SEQ,
    STAT,
    N,
    accept_state,
    accept_token,
    draft_state,
    new_state,
    point,
    point_buffer,
)
from .step import NGRAM_MAX

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ...caches.base import Cache
    from ...caches.static import StaticCache


class LlamaCppDrafter(Drafter):
    """A :class:`~ngramdraft.Drafter` by llama.cpp's rules (``rules="llamacpp"``, the default).

    Parameters
    ----------
    static : StaticCache, path or any cache, optional
        The static role (2-grams of a corpus). Shared freely between drafters.
    dynamic : NgramCache, path or any cache, optional
        The dynamic role (earlier sequences). A path is loaded if it exists
        (native ``.ngd`` or llama.cpp lookup file) and written back by
        :meth:`finish` in the same format (a new ``.bin`` path: llama.cpp).
        Many drafters, threads and processes may share one path: each save
        merges under the file's lock, so no contribution is lost (see
        :mod:`ngramdraft.caches.shared`). Without one, the drafter keeps its own, so
        later sequences still learn from earlier ones.
    n_draft : int
        The most tokens one :meth:`draft` returns (>= 1).
    ngram_min, ngram_max : int
        The n-gram sizes drafting looks up (1 <= min <= max <= 4). The caches
        always count sizes 1..4, as llama.cpp does, so they stay reusable.
    tokenizer : name, tokenizer or identity dict, optional
        The tokenizer producing your tokens: a static cache recorded with
        another one raises TokenizerMismatchError.
    lock_timeout : float
        Seconds a save waits for a shared dynamic file's lock before it
        raises LockTimeoutError (the sequence's counts then wait for the next).
    save_every : float
        Seconds between saves of a dynamic path: ``finish()`` saves only if
        that long has passed since the last save (0, the default: at every
        finish). A server with a large dynamic file sets it and calls
        :meth:`flush` on its way out.
    max_dynamic_ngrams : int, optional
        A budget for a long-lived dynamic cache: past it, a merge keeps the
        n-grams with the most samples (see NgramCache). Without one the cache
        grows as llama.cpp's does.
    policy : Policy (AdaptiveLength, CostAwareLength or your own), optional
        Opt-in, beyond llama.cpp's rules: how much of each draft to submit,
        from the sequence's acceptance (AdaptiveLength) or from the engine's
        pass costs and what drafts proved (CostAwareLength); see
        :mod:`ngramdraft.drafting.policy`. The drafter keeps its own copy.
    rules : str
        ``"llamacpp"``; ``Drafter(rules=...)`` chose this class by it.
    """

    def __init__(
        self,
        static: "StaticCache | Cache | str | os.PathLike[str] | None" = None,
        dynamic: "NgramCache | Cache | SharedDynamicFile | str | os.PathLike[str] | None" = None,
        n_draft: int = 8,
        ngram_min: int = 1,
        ngram_max: int = 4,
        *,
        tokenizer: object = None,
        lock_timeout: float = LOCK_TIMEOUT,
        save_every: float = 0.0,
        max_dynamic_ngrams: int | None = None,
        policy: Policy | None = None,
        rules: str = "llamacpp",
    ) -> None:
        self.n_draft = check_int(n_draft, "n_draft", 1, MAX_DRAFT)
        self.ngram_min, self.ngram_max = check_ngram_range(ngram_min, ngram_max)
        self.static = None if static is None else as_static(static, tokenizer=tokenizer)
        self._warmup: Warmup | NoWarmup = (
            NO_WARMUP if self.static is None else self.static.prefault()
        )
        self.shared, self.dynamic = dynamic_role(
            dynamic, lock_timeout=lock_timeout, max_ngrams=max_dynamic_ngrams, save_every=save_every
        )
        self.context = NgramCache("context")
        self._seq = np.zeros(256, dtype=np.int32)
        self._buf = np.zeros(NGRAM_MAX + self.n_draft, dtype=np.int32)
        self._started = False
        self._init_policy(policy)
        # The kernels' view of all of the above (drafting/py): the
        # caches' own handles, which follow their tables, and our buffers.
        self._state = new_state(self.n_draft, (self.ngram_min, self.ngram_max))
        point(self._state, CTX, self.context.handle)
        point(self._state, DYN, self.dynamic.handle)
        point(self._state, STAT, NO_STATIC if self.static is None else self.static.handle)
        point_buffer(self._state, BUF, self._buf)
        point_buffer(self._state, SEQ, self._seq)

    @property
    def _n(self) -> int:
        """Tokens in the sequence: the kernels keep the count, in the state."""
        return int(self._state[N])

    @property
    def _held(self) -> np.ndarray:
        return self._seq

    def start(self, prompt_tokens: "ArrayLike") -> None:
        """Begin a sequence: the context cache counts the prompt's n-grams."""
        prompt = as_tokens(prompt_tokens, "prompt_tokens")
        self.context.clear()
        # Room for the prompt and a reply's worth of tokens at once, rather than
        # a doubling every few tokens (each one a trip back to Python).
        room = 4 * (len(prompt) + REPLY_ROOM)
        self.context.reserve(room, room)
        self._state[N] = 0
        self._begin(prompt)

    def draft(self) -> np.ndarray:
        """Up to n_draft tokens (int32) the model is likely to produce next."""
        if not self._started:
            self._require_started()
        # The dynamic cache may be shared with other threads: its lock keeps
        # merges out while the kernel reads it (NgramCache).
        with self.dynamic.lock:
            d = draft_state(self._state)
        if self._policy is not None:
            return self._submitted(self._policy, self._drafted(d))
        return self._drafted(d)

    def _drafted(self, d: int) -> np.ndarray:
        """The d drafted tokens in the buffer, a copy; or the error a damaged file deserves."""
        if d == CORRUPT or self._warmup.damage is not None:
            raise damaged(self.static)
        n = self._state[N]
        tail = n if n < NGRAM_MAX else NGRAM_MAX
        return self._buf[tail : tail + d].copy()

    def accept(self, tokens: "ArrayLike") -> None:
        """Append verified tokens (accepted drafts and the model's own token)."""
        if not self._started:
            self._require_started()
        if self._policy is not None:
            self._append_observed(self._policy, as_tokens(tokens, "tokens"))
            return
        if type(tokens) is list and len(tokens) == 1 and type(tokens[0]) is int:
            token = tokens[0]  # the commonest call, checked and passed without numpy
            if 0 <= token <= TOKEN_MAX and self._state[N] < len(self._seq):
                self._count(accept_token, token)
                return
        self._append(as_tokens(tokens, "tokens"))

    def rewind(self, n: int) -> None:
        """Remove the last ``n`` tokens and their n-grams, as if never accepted.

        For an engine that rolls a sequence back (a rejected branch, an edit):
        the context cache's counts go down exactly, in time proportional to n.
        """
        n = self._check_rewind(n)
        self.context.rewind(self._seq[: self._n], n)
        self._state[N] -= n
        if self._policy is not None:  # the drafts pending were made past the new end
            self._forget_drafts()

    def check_vocabulary(self, n_vocab: int) -> None:
        """Raise VocabularyError if a cache holds token ids that a model of n_vocab ids lacks."""
        n_vocab = check_int(n_vocab, "n_vocab", 1)
        for cache in (self.static, self.dynamic):
            if cache is not None and (top := cache.max_token) >= n_vocab:
                where = getattr(cache, "path", None) or f"the {cache.role} cache"
                raise VocabularyError(
                    f"{where}: holds token id {top}, but the model's vocabulary has {n_vocab} ids "
                    "(the cache was built with another tokenizer: rebuild it with "
                    "--tokenizer MODEL.gguf)"
                )

    def finish(self) -> None:
        """End the sequence: merge its context into the dynamic cache (and save it)."""
        self._require_started()
        self._started = False
        if self.shared is not None:
            self.shared.add(self.context)  # merges, then saves under the file's lock
        else:
            self.dynamic.merge(self.context)
        self.context.clear()

    def _append(self, new: np.ndarray) -> None:
        need = self._n + len(new)
        if need > len(self._seq):
            grown = np.zeros(max(need, 2 * len(self._seq)), dtype=np.int32)
            grown[: self._n] = self._seq[: self._n]
            self._seq = grown
            point_buffer(self._state, SEQ, self._seq)
        self._count(accept_state, new)

    def finish_accept(self, new: np.ndarray, status: int) -> None:
        """Finish an accept a batch kernel stopped for room (drafting/py's status)."""
        if status == NEED_ROOM:
            self._append(new)
        else:
            self._count(accept_state, new, status)

    def _count(self, kernel: Callable[..., int], new: object, r: int | None = None) -> None:
        """Run an accept kernel (or go on from its status r), growing the context as it asks."""
        if r is None:
            r = kernel(self._state, new, 0)
        while r >= 0:
            self.context.grow(r & 3)
            r = kernel(self._state, new, r >> 2)

    def use_state(self, row: np.ndarray) -> None:
        """Keep the kernels' state in ``row`` of a table of states from now on (the batch's)."""
        row[:] = self._state
        self._state = row
