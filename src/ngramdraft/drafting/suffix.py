"""SuffixDrafter: one sequence drafted by the suffix rules (``Drafter(rules="suffix")``).

The rules are ``rules/suffix.py`` (specified in ``docs/suffix.md``); the
sequence is a :class:`~ngramdraft.caches.positions.PositionIndex` and the
earlier requests a :class:`~ngramdraft.caches.requests.RequestMemory`,
which any number of drafters may share. A draft and an accept are one
kernel call each.
"""

from typing import TYPE_CHECKING, Any

import numpy as np

from ..caches.corpus import SuffixCorpus, as_corpus
from ..caches.positions import MAX_CHAIN, MAX_MATCH, SIZES, PositionIndex
from ..caches.requests import MAX_TOKENS, RequestMemory
from ..errors import InvalidParameterError, VocabularyError
from ..kernels import suffixsearch as S
from ..rules import suffix as R
from ..validation import TOKEN_MAX, as_tokens, check_int
from .base import SequenceDrafter
from .policy import Policy

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

MAX_DRAFT = 4096
REPLY_ROOM = 256
LLAMACPP_ONLY = ("lock_timeout", "save_every", "max_dynamic_ngrams")
_LIMITS = np.array([MAX_MATCH, MAX_CHAIN], dtype=np.int64)


def suffix_drafter(
    static: object = None,
    dynamic: RequestMemory | None = None,
    n_draft: int = 8,
    ngram_min: int = 1,
    ngram_max: int = 4,
    **options: Any,
) -> "SuffixDrafter":
    """A SuffixDrafter from Drafter's arguments: llama.cpp's own settings are refused by name."""
    theirs = {"ngram_min": ngram_min != 1, "ngram_max": ngram_max != 4}
    theirs.update((name, True) for name in LLAMACPP_ONLY if name in options)
    if named := [name for name, given in theirs.items() if given]:
        raise InvalidParameterError(
            f"{', '.join(named)}: llama.cpp's rules' setting, which rules='suffix' does not use"
        )
    return SuffixDrafter(static, dynamic, n_draft, **options)


def corpus_params(corpus: SuffixCorpus | None) -> np.ndarray:
    """The corpus search's parameters (``kernels/suffixsearch.py``) for a corpus."""
    params = np.zeros(4, dtype=np.int64)
    params[S.MAX_TOKEN] = -1 if corpus is None else corpus.max_token
    params[S.MIN_MATCH] = R.CORPUS_MIN_MATCH
    params[S.MIN_COUNT] = R.CORPUS_MIN_COUNT
    params[S.MIN_SHARE] = R.CORPUS_MIN_SHARE
    return params


class SuffixDrafter(SequenceDrafter):
    """Draft by the suffix rules; the interface is :class:`~ngramdraft.Drafter`'s.

    Parameters
    ----------
    static : SuffixCorpus or path, optional
        A corpus's suffix file (``build-static --suffix``): drafted from when
        the sequence and the earlier requests draft nothing, its commonest
        continuation of the longest match (``docs/suffix.md``).
    dynamic : RequestMemory, optional
        Earlier requests, shared by whoever holds the same memory; without
        one the drafter keeps its own (``max_dynamic_tokens`` its budget).
    n_draft : int
        The most tokens one :meth:`draft` returns.
    min_match : int
        The shortest match that drafts (>= 2; longer is quieter on text that
        does not repeat, and misses more of what does).
    policy : Policy, optional
        As Drafter's: how much of each draft to submit.
    """

    def __init__(
        self,
        static: object = None,
        dynamic: RequestMemory | None = None,
        n_draft: int = 8,
        *,
        min_match: int = R.MIN_MATCH_DEFAULT,
        max_dynamic_tokens: int | None = None,
        policy: Policy | None = None,
        tokenizer: object = None,
    ) -> None:
        self.n_draft = check_int(n_draft, "n_draft", 1, MAX_DRAFT)
        self.static = as_corpus(static, tokenizer)
        if self.static is not None:
            self.static.prefault()  # pages mapped and checksums checked, in the background
        if dynamic is None:
            budget = MAX_TOKENS if max_dynamic_tokens is None else max_dynamic_tokens
            dynamic = RequestMemory(budget)
        elif not isinstance(dynamic, RequestMemory):
            raise InvalidParameterError(
                f"rules='suffix' remembers earlier requests in a RequestMemory, got "
                f"{type(dynamic).__name__} (an n-gram cache or its file belongs to llama.cpp's "
                "rules): pass dynamic=RequestMemory(), or nothing"
            )
        self.dynamic = dynamic
        self._corpus_params = corpus_params(self.static)
        self._index = PositionIndex()
        self._buf = np.zeros(self.n_draft, dtype=np.int32)
        self._st = np.zeros(R.STATE_WORDS, dtype=np.int64)
        self._st[R.N_DRAFT] = self.n_draft
        self._st[R.MIN_MATCH] = check_int(min_match, "min_match", 2, MAX_MATCH)
        self._started = False
        self._init_policy(policy)

    @property
    def _n(self) -> int:
        return int(self._st[R.N])

    @property
    def _held(self) -> np.ndarray:
        return self._index.text

    def start(self, prompt_tokens: "ArrayLike") -> None:
        """Begin a sequence with its prompt."""
        prompt = as_tokens(prompt_tokens, "prompt_tokens")
        self._index.clear()
        self._index.reserve(2 * (len(prompt) + REPLY_ROOM))  # no refile for a while
        self._st[R.N] = 0
        self._st[R.FROM] = R.NONE
        self._begin(prompt)

    def draft(self) -> np.ndarray:
        """Up to n_draft tokens (int32) the model is likely to produce next."""
        self._require_started()
        memory = self.dynamic
        with memory.lock:
            mem = memory.index
            self._st[R.MEM_N] = mem.n
            d = R.draft_step(
                self._index.text,
                self._index.prev,
                self._index.head,
                mem.text,
                mem.prev,
                mem.head,
                SIZES,
                self._st,
                self._buf,
                _LIMITS,
            )
        if d == 0 and self.static is not None:
            if (damage := self.static.prefault().damage) is not None:
                raise damage
            d = S.draft(
                self.static.text,
                self.static.sa,
                self._index.text,
                self._n,
                self._corpus_params,
                self._buf,
            )
        if self._policy is not None:
            return self._submitted(self._policy, self._buf[:d].copy())
        return self._buf[:d].copy()

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
        memory = self.dynamic
        with memory.lock:
            self._st[R.MEM_N] = memory.index.n
            R.accept_step(
                index.text, index.prev, index.head, SIZES, self._st, memory.index.text, new
            )
        index.n = self._n

    def rewind(self, n: int) -> None:
        """Remove the last ``n`` tokens, as if never accepted (drafts then as a fresh start)."""
        n = self._check_rewind(n)
        self._index.rewind(n)
        self._st[R.N] = self._index.n
        self._st[R.FROM] = R.NONE  # the pointer followed tokens that are gone
        if self._policy is not None:
            self._forget_drafts()

    def finish(self) -> None:
        """End the sequence: remember it among the earlier requests."""
        self._require_started()
        self._started = False
        self.dynamic.add(self._index.tokens)

    def flush(self) -> None:
        """Nothing to save: earlier requests live in memory."""

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
