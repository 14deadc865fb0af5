"""vLLM: ngramdraft as a speculative proposer (``method: custom_class``).

::

    LLM(model, speculative_config={
        "method": "custom_class",
        "model": "ngramdraft.integrations.vllm.NgramProposer",
        "num_speculative_tokens": 8,
    })

vLLM builds the class with its ``VllmConfig`` and calls, after every step,
``propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu)``: row i of
the input batch holds a request's whole sequence in
``token_ids_cpu[i, :num_tokens_no_spec[i]]`` and ``sampled_token_ids[i]``
the tokens it just accepted (empty while its prompt is still being filled
in). The rows carry no request ids, and vLLM packs them again whenever a
request ends, so :class:`NgramProposer` follows requests by content: a row
that extends the sequence it held last step accepts the new tokens; any
other row is matched against the sequences that lost their row (a request
moved by the packing), or else starts a new sequence. A sequence that no row
continues has ended and is finished into the dynamic cache. The drafts are
:class:`~ngramdraft.BatchDrafter`'s, so by default each is exactly llama.cpp's
draft for that request's tokens; the suffix rules submit the part of each
draft that their policy finds worth its pass (``docs/policies.md``).

Configuration: vLLM passes nothing but its own config, so the caches come
from class attributes (subclass it in a module of yours and name that
class) or from the environment (``NGRAMDRAFT_STATIC``, ``NGRAMDRAFT_DYNAMIC``;
both are read in vLLM's worker process, which inherits them):

    class MyProposer(NgramProposer):
        static = "wiki.ngd"
        dynamic = "requests.ngd"

A preempted request that vLLM resumes later comes back as a new sequence,
so the part before its preemption is counted into the dynamic cache twice.

Needs ``pip install 'ngramdraft[vllm]'``.
"""

import atexit
import os
import time
from collections import defaultdict
from collections.abc import Hashable
from functools import partial
from typing import Any

import numpy as np

from ..drafting.batch import BatchDrafter
from ..drafting.practice import load_batch_kernels
from ..drafting.rulesets import DEFAULT
from ..errors import NgramdraftError
from .core import AUTO, DraftStats, PassClock, engine_policy

PREFIX = 4  # tokens of a sequence's start that index the sequences without a row


class NgramProposer:
    """Prompt-lookup drafts for vLLM's ``custom_class`` speculative method.

    Class attributes, for a subclass to set: ``static`` and ``dynamic``
    (paths or caches, as for :class:`~ngramdraft.Drafter`; default from
    ``NGRAMDRAFT_STATIC`` / ``NGRAMDRAFT_DYNAMIC``), ``ngram_min``,
    ``ngram_max``, ``max_dynamic_ngrams``, ``save_every`` (seconds between
    saves of a dynamic path, 30 by default: a server does not rewrite the
    file for every request; ``close()``, at exit, saves the rest), ``rules``
    (``"llamacpp"``, the default, or ``"suffix"``; default from
    ``NGRAMDRAFT_RULES``: the suffix rules' static is a corpus's suffix file
    (``build-static --suffix``), their dynamic a requests file, and the
    ``ngram_*`` and ``max_dynamic_ngrams`` settings are llama.cpp's rules'
    own), ``policy`` (by default the rule set's engine policy: none for
    llama.cpp's rules, whose drafts go whole, bit for bit; for the suffix
    rules ``CostAwareLength()``, which learns vLLM's pass costs from the
    steps where one request runs, a step of several being every row's
    pass at once; None submits whole drafts; the suffix rules take a policy
    of yours). ``n_draft`` is vLLM's ``num_speculative_tokens``, and up to
    vLLM's ``max_num_seqs`` requests are followed at once.

    ``stats`` (:class:`~ngramdraft.integrations.core.DraftStats`) holds the
    steps (``passes``), the tokens drafted, the seconds spent drafting and the
    sequences started and finished, for reporting the proposer's cost per
    step; vLLM counts the accepted tokens itself.
    """

    static = None
    dynamic = None
    ngram_min = 1
    ngram_max = 4
    max_dynamic_ngrams = None
    save_every = 30.0
    rules = None
    policy: Any = AUTO

    def __init__(self, vllm_config: Any) -> None:
        spec = vllm_config.speculative_config
        self.n_draft = spec.num_speculative_tokens
        self.max_model_len = vllm_config.model_config.max_model_len
        max_seqs = vllm_config.scheduler_config.max_num_seqs
        rules = self.rules or os.environ.get("NGRAMDRAFT_RULES") or DEFAULT
        load_batch_kernels(rules)  # with the engine's start, not in its first step
        self.batch = BatchDrafter(
            static=self.static or os.environ.get("NGRAMDRAFT_STATIC") or None,
            dynamic=self.dynamic or os.environ.get("NGRAMDRAFT_DYNAMIC") or None,
            n_draft=self.n_draft,
            max_seqs=max_seqs,
            rules=rules,
            save_every=self.save_every,
            # The suffix rules refuse these by name unless left as they are.
            ngram_min=self.ngram_min,
            ngram_max=self.ngram_max,
            max_dynamic_ngrams=self.max_dynamic_ngrams,
            policy=engine_policy(rules, self.policy),
        )
        # A step of one running request is one pass of its draft: timed for its policy.
        self._clock = PassClock()
        self._clocked: tuple[Hashable, int] | None = None  # (sequence, its length) last step
        # The sequence each batch row held last step.
        self._row_ids: list[Hashable | None] = [None] * max_seqs
        self._next_id = 0
        self.stats = DraftStats()
        # vLLM never says a request ended but by dropping its row at the next
        # step: the last requests reach the dynamic cache when the process ends.
        atexit.register(self.close)

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """vLLM's CPU runner loads every proposer's model: this one has none."""

    def close(self) -> None:
        """Finish every sequence still followed into the dynamic cache, and save a path."""
        for seq_id in {s for s in self._row_ids if s is not None}:
            self.batch.finish(seq_id)
            self.stats.finished += 1
        self._row_ids = [None] * len(self._row_ids)
        self.batch.flush()

    def propose(
        self,
        sampled_token_ids: Any,
        num_tokens_no_spec: Any,
        token_ids_cpu: np.ndarray,
        slot_mappings: Any = None,
    ) -> list[list[int]]:
        """One draft per batch row (a list of token ids, empty for none)."""
        start = time.perf_counter()
        n = len(sampled_token_ids)
        if n > len(self._row_ids):
            raise NgramdraftError(
                f"vLLM passed {n} rows, more than its max_num_seqs={len(self._row_ids)}"
            )
        lengths = np.asarray(num_tokens_no_spec[:n], dtype=np.int64)
        self._follow(n, lengths, token_ids_cpu)
        if self._clocked is not None and n == 1 and self._row_ids[0] == self._clocked[0]:
            seq_id, length = self._clocked
            self._clock.called(partial(self.batch.observe_pass, seq_id), int(lengths[0]) - length)
        drafts: list[list[int]] = [[] for _ in range(n)]
        held, limit = lengths.tolist(), self.max_model_len
        wanted = [
            i
            for i in range(n)
            if sampled_token_ids[i] and self._row_ids[i] is not None and held[i] < limit
        ]
        if wanted:
            out, got = self.batch.draft([self._row_ids[i] for i in wanted])
            # Converted once, whole: numpy's per-row indexing costs more at a few requests.
            take = np.minimum(got, limit - lengths[wanted]).tolist()
            for i, row, k in zip(wanted, out.tolist(), take, strict=True):
                drafts[i] = row[:k]
            self.stats.drafted += sum(take)
        # Only a step of one request times its draft's pass: several share a step's time.
        self._clocked = None
        if n == 1 and self._row_ids[0] is not None:
            self._clocked = (self._row_ids[0], int(lengths[0]))
            self._clock.returned(len(drafts[0]))
        self.stats.passes += 1
        self.stats.seconds += time.perf_counter() - start
        return drafts

    def _follow(self, n: int, lengths: np.ndarray, token_ids: np.ndarray) -> None:
        """Bring every row's sequence up to date: extend, move, start or finish."""
        rows = [i for i in range(n) if self._row_ids[i] is not None]
        lost = {s for s in self._row_ids[n:] if s is not None}  # rows gone from the batch
        self._row_ids[n:] = [None] * (len(self._row_ids) - n)
        lost |= self._sync(rows, lengths, token_ids)
        # Rows without a sequence: a request moved here by the packing, or a new one.
        free = [i for i in range(n) if self._row_ids[i] is None]
        by_prefix: dict[bytes, list[tuple[Hashable, np.ndarray]]] = defaultdict(list)
        for seq_id in lost:
            tokens = self.batch.tokens(seq_id)
            by_prefix[tokens[:PREFIX].tobytes()].append((seq_id, tokens))
        moved = []
        for i in free:
            row = token_ids[i, : lengths[i]]
            seq_id = _claim(by_prefix, row)
            if seq_id is not None:
                self._row_ids[i] = seq_id
                moved.append(i)
                lost.discard(seq_id)
        lost |= self._sync(moved, lengths, token_ids)  # new tokens may hold a negative id
        for seq_id in lost:
            self.batch.finish(seq_id)
            self.stats.finished += 1
        for i in free:
            if self._row_ids[i] is None and (row := token_ids[i, : lengths[i]]).min(initial=0) >= 0:
                self._row_ids[i] = self._next_id
                self.batch.add(self._next_id, row)
                self._next_id += 1
                self.stats.sequences += 1

    def _sync(self, rows: list[int], lengths: np.ndarray, token_ids: np.ndarray) -> set[Hashable]:
        """Accept the new tokens of these rows; the sequences of rows that do not extend them."""
        if not rows:
            return set()
        ids = [self._row_ids[i] for i in rows]
        mismatch = self.batch.sync(ids, token_ids, lengths[rows], rows)
        if not mismatch.any():  # a step's usual answer: every row went on as it was
            return set()
        for i in np.asarray(rows)[mismatch]:
            self._row_ids[i] = None
        return {seq_id for seq_id, bad in zip(ids, mismatch, strict=True) if bad}


def _claim(
    by_prefix: dict[bytes, list[tuple[Hashable, np.ndarray]]], row: np.ndarray
) -> Hashable | None:
    """Take from ``by_prefix`` a sequence that ``row`` extends; its id, or None."""
    for k in range(min(PREFIX, len(row)) + 1):
        candidates = by_prefix.get(row[:k].tobytes(), [])
        for j, (seq_id, tokens) in enumerate(candidates):
            if len(tokens) == k or (
                len(tokens) <= len(row) and np.array_equal(tokens, row[: len(tokens)])
            ):
                del candidates[j]
                return seq_id
    return None
