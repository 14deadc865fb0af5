"""SuffixDrafter: one sequence drafted by the suffix rules (``Drafter(rules="suffix")``).

The rules are ``step.py`` (specified in ``docs/suffix.md``); the
sequence is a :class:`~ngramdraft.caches.positions.PositionIndex` and the
earlier requests a :class:`~ngramdraft.caches.requests.RequestMemory`,
which any number of drafters may share. A draft and an accept are one
kernel call each.
"""

import os
from typing import TYPE_CHECKING

import numpy as np

from ...caches.positions import MAX_MATCH, PositionIndex
from ...caches.requests import MAX_TOKENS, RequestMemory
from ...caches.shared import LOCK_TIMEOUT, SharedRequestFile
from ...caches.suffix_corpus import SuffixCorpus, as_corpus
from ...caches.warmup import NO_WARMUP
from ...drafting.drafter import MAX_DRAFT, REPLY_ROOM, Drafter
from ...drafting.policy import IN_STEP, JUMPED, LONG_RUN, MISSED, Policy
from ...errors import InvalidParameterError, VocabularyError, WrongFileKindError
from ...kernels import suffixsearch
from ...validation import TOKEN_MAX, as_tokens, check_int
from . import state
from .step import (
    CORPUS_MIN_COUNT,
    CORPUS_MIN_MATCH,
    CORPUS_MIN_SHARE,
    MIN_MATCH_DEFAULT,
    accept_step,
    draft_step,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


# Tokens a copy's source has agreed on before its drafts are LONG_RUN's to a policy:
# where a model has followed a source this far it follows it on, so that
# CostAwareLength learns those drafts apart and submits them long (llama.cpp's ngram-mod
# drafts only after a 24-token match, and 48-64 tokens then, nearly all accepted).
PROVEN_RUN = 16


def _address(array: np.ndarray) -> tuple[int, int]:
    return array.ctypes.data, array.size


def corpus_params(
    corpus: SuffixCorpus | None, min_match: int, min_count: int, min_share: int
) -> np.ndarray:
    """The corpus search's parameters (``kernels/suffixsearch.py``) for a corpus, checked."""
    params = np.zeros(4, dtype=np.int64)
    params[suffixsearch.MAX_TOKEN] = -1 if corpus is None else corpus.max_token
    params[suffixsearch.MIN_MATCH] = check_int(min_match, "corpus_min_match", 1, MAX_MATCH)
    params[suffixsearch.MIN_COUNT] = check_int(min_count, "corpus_min_count", 1)
    params[suffixsearch.MIN_SHARE] = check_int(min_share, "corpus_min_share", 50, 100)
    return params


class SuffixDrafter(Drafter):
    """A :class:`~ngramdraft.Drafter` by the suffix rules (``rules="suffix"``, opt-in).

    Parameters
    ----------
    static : SuffixCorpus or path, optional
        A corpus's suffix file (``build-static --suffix``): drafted from when
        the sequence and the earlier requests draft nothing, its commonest
        continuation of the longest match (``docs/suffix.md``).
    dynamic : RequestMemory, SharedRequestFile or path, optional
        Earlier requests, shared by whoever holds the same memory; a path
        is a requests file that finished sequences are saved to and that
        other drafters and processes may share (``caches/shared.py``:
        merged under its lock, nothing lost; ``save_every`` and
        ``lock_timeout`` as for llama.cpp's dynamic file). Without one the
        drafter keeps its own memory; ``max_dynamic_tokens`` is the budget.
    n_draft : int
        The most tokens one :meth:`draft` returns.
    min_match : int
        The shortest match that drafts (>= 2; longer is quieter on text that
        does not repeat, and misses more of what does).
    corpus_min_match, corpus_min_count, corpus_min_share : int
        The corpus search's thresholds (``docs/suffix.md``): the shortest
        match it drafts from, the fewest occurrences, and the share (50 ..
        100 percent) of them a drafted token must follow; the defaults were
        measured by ``benchmarks/corpus_rules.py``.
    policy : Policy, optional
        As Drafter's: how much of each draft to submit.
    ngram_min, ngram_max, max_dynamic_ngrams
        llama.cpp's rules' settings, refused by name if given.
    """

    def __init__(
        self,
        static: object = None,
        dynamic: "RequestMemory | SharedRequestFile | str | os.PathLike[str] | None" = None,
        n_draft: int = 8,
        ngram_min: int = 1,
        ngram_max: int = 4,
        *,
        min_match: int = MIN_MATCH_DEFAULT,
        corpus_min_match: int = CORPUS_MIN_MATCH,
        corpus_min_count: int = CORPUS_MIN_COUNT,
        corpus_min_share: int = CORPUS_MIN_SHARE,
        max_dynamic_tokens: int | None = None,
        save_every: float = 0.0,
        lock_timeout: float = LOCK_TIMEOUT,
        policy: Policy | None = None,
        tokenizer: object = None,
        max_dynamic_ngrams: int | None = None,
        rules: str = "suffix",
    ) -> None:
        theirs = {
            "ngram_min": ngram_min != 1,
            "ngram_max": ngram_max != 4,
            "max_dynamic_ngrams": max_dynamic_ngrams is not None,
        }
        if named := [name for name, given in theirs.items() if given]:
            raise InvalidParameterError(
                f"{', '.join(named)}: llama.cpp's rules' setting, which rules='suffix' does not use"
            )
        self.n_draft = check_int(n_draft, "n_draft", 1, MAX_DRAFT)
        self.static = as_corpus(static, tokenizer)
        # Pages mapped and checksums checked in the background; damage found stops drafting.
        self._warmup = NO_WARMUP if self.static is None else self.static.prefault()
        budget = MAX_TOKENS if max_dynamic_tokens is None else max_dynamic_tokens
        if isinstance(dynamic, str | os.PathLike):
            dynamic = SharedRequestFile(
                dynamic, lock_timeout=lock_timeout, max_tokens=budget, save_every=save_every
            )
        self.shared = dynamic if isinstance(dynamic, SharedRequestFile) else None
        memory: RequestMemory
        if isinstance(dynamic, SharedRequestFile):
            memory = dynamic.cache
        elif dynamic is None:
            memory = RequestMemory(budget)
        elif isinstance(dynamic, RequestMemory):
            memory = dynamic
        else:
            raise WrongFileKindError(
                f"rules='suffix' remembers earlier requests in a RequestMemory, got "
                f"{type(dynamic).__name__} (an n-gram cache belongs to llama.cpp's rules): "
                "pass dynamic=RequestMemory(), a requests file's path, or nothing"
            )
        self.dynamic = memory
        self._index = PositionIndex()
        self._buf = np.zeros(self.n_draft, dtype=np.int32)
        # The kernels' one argument (step.py): it points at the index, the
        # earlier requests' index, the buffer and the corpus, which this object keeps alive.
        st = self._st = np.zeros(state.STATE_WORDS, dtype=np.int64)
        # How the batch's kernels find the state; read once: ctypes' attribute costs a
        # microsecond, and a batch reads it for every sequence at every step.
        self.state_address = st.ctypes.data
        st[state.N_DRAFT] = self.n_draft
        st[state.MIN_MATCH] = check_int(min_match, "min_match", 2, MAX_MATCH)
        st[state.SEQ_INDEX] = self._index.handle.ctypes.data
        st[state.MEM_INDEX] = memory.index.handle.ctypes.data
        st[state.OUT : state.OUT + 2] = self._buf.ctypes.data, len(self._buf)
        if self.static is not None:
            st[state.CORPUS_TEXT : state.CORPUS_TEXT + 2] = _address(self.static.text)
            st[state.CORPUS_SA : state.CORPUS_SA + 2] = _address(self.static.sa)
            if len(self.static.buckets):
                st[state.CORPUS_BUCKETS : state.CORPUS_BUCKETS + 2] = _address(self.static.buckets)
            if len(self.static.grams):
                st[state.CORPUS_GRAMS : state.CORPUS_GRAMS + 2] = _address(self.static.grams)
        st[state.CORPUS_ARGS : state.CORPUS_ARGS + 4] = corpus_params(
            self.static, corpus_min_match, corpus_min_count, corpus_min_share
        )
        self._started = False
        self._init_policy(policy)

    # What the batch's and replay's kernels take of a drafter.

    @property
    def kernel_state(self) -> np.ndarray:
        """The state the rules' kernels read and update (``state.py``), not a copy."""
        return self._st

    def reserve(self, n: int) -> None:
        """Room for n tokens in the sequence, so that kernels append without growing it."""
        self._index.reserve(n)

    def finish_accept(self, new: np.ndarray) -> None:
        """Accept what a batch kernel had no room for (it grows the sequence's index)."""
        self._append(new)

    def wait_checked(self) -> None:
        """Wait until the corpus's pages are mapped and checked (damage raised then)."""
        self._warmup.wait()

    @property
    def _n(self) -> int:
        return self._index.n

    @property
    def _held(self) -> np.ndarray:
        return self._index.text

    def start(self, prompt_tokens: "ArrayLike") -> None:
        """Begin a sequence with its prompt."""
        prompt = as_tokens(prompt_tokens, "prompt_tokens")
        self._index.clear()
        self._index.reserve(2 * (len(prompt) + REPLY_ROOM))  # no refile for a while
        state.restart(self._st)
        self._begin(prompt)

    def draft(self) -> np.ndarray:
        """Up to n_draft tokens (int32) the model is likely to produce next."""
        self._require_started()
        if self._warmup.damage is not None:
            raise self._warmup.damage
        with self.dynamic.lock:
            d = draft_step(self._st)
        if self._policy is not None:
            return self._submitted(
                self._policy, self._buf[:d].copy(), self._origin(), self._agreed()
            )
        return self._buf[:d].copy()

    def _origin(self) -> int:
        """Where the draft just made comes from, for a policy: a jump not yet tested, a
        copy that missed the sequence's last token, one in step with a source that has
        agreed on PROVEN_RUN tokens, or one in step."""
        st = self._st
        if st[state.JUST_JUMPED]:
            return JUMPED
        if st[state.MISSES]:
            return MISSED
        return LONG_RUN if st[state.AGREED] >= PROVEN_RUN else IN_STEP

    def _agreed(self) -> int:
        """Tokens the draft just made's source has agreed with the sequence on since it
        was set (0: a fresh match), for a policy; -1 for the corpus's, which copy nothing."""
        st = self._st
        return -1 if st[state.FROM_CORPUS] else int(st[state.AGREED])

    def accept(self, tokens: "ArrayLike") -> None:
        """Append verified tokens (accepted drafts and the model's own token)."""
        self._require_started()
        if type(tokens) is list and len(tokens) == 1 and type(tokens[0]) is int:
            token = tokens[0]  # the commonest call, checked without numpy's conversion
            if 0 <= token <= TOKEN_MAX and self._policy is None:
                self._append(np.array(tokens, dtype=np.int32))
                return
        new = as_tokens(tokens, "tokens")
        if self._policy is not None:
            self._append_observed(self._policy, new)
        else:
            self._append(new)

    def _append(self, new: np.ndarray) -> None:
        index = self._index
        if self._n + len(new) > len(index.text):
            index.reserve(self._n + len(new))
        with self.dynamic.lock:
            accept_step(self._st, new)

    def rewind(self, n: int) -> None:
        """Remove the last ``n`` tokens, as if never accepted (drafts then as a fresh start)."""
        n = self._check_rewind(n)
        self._index.rewind(n)
        state.restart(self._st)  # the pointer followed tokens that are gone
        if self._policy is not None:
            self._forget_drafts()

    def finish(self) -> None:
        """End the sequence: remember it among the earlier requests."""
        self._require_started()
        self._started = False
        if self.shared is not None:
            self.shared.add(self._index.tokens.copy())
        else:
            self.dynamic.add(self._index.tokens)

    def check_vocabulary(self, n_vocab: int) -> None:
        """Raise VocabularyError if the earlier requests hold ids a model of n_vocab lacks."""
        n_vocab = check_int(n_vocab, "n_vocab", 1)
        if self.static is not None and self.static.max_token >= n_vocab:
            raise VocabularyError(
                f"{self.static.path} holds token id {self.static.max_token}, but the model's "
                f"vocabulary has {n_vocab} ids (it was built with another tokenizer)"
            )
        if self.dynamic.max_token >= n_vocab:
            raise VocabularyError(
                f"the earlier requests hold token id {self.dynamic.max_token}, but the model's "
                f"vocabulary has {n_vocab} ids (they came from another tokenizer: use a new "
                "RequestMemory)"
            )
