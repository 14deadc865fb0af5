"""Every drafter behind one teacher-forcing interface, each through its own code; the ceilings.

At each step a drafter proposes up to k tokens for the sequence so far; the
longest prefix equal to the true text is accepted, plus one true token (the
model's own), and the step is one forward pass (:func:`run`). The drafters:

* ``llama.cpp``: ngramdraft's ``Drafter`` (llama.cpp's rules bit for bit),
  one dynamic cache carried across a workload's requests as a server keeps it;
  ``llama.cpp+static`` adds the training corpus's 2-gram cache;
* ``suffix``: ``Drafter(rules="suffix")``, earlier requests remembered;
  ``suffix-sequence`` forgets them at each request; ``suffix+corpus`` adds
  the training corpus's suffix file (``build-static --suffix``);
* ``suffixdecoding``: arctic-inference's ``SuffixDecodingCache`` as vLLM's
  ``suffix`` method calls it (``peers.suffix_decoding`` builds it);
* ``vllm-ngram``: vLLM's ``ngram`` proposer function, longest match of 3 to 24
  tokens (``_find_longest_matched_ngram_and_propose_tokens``, the function its
  ``NgramProposer`` calls per request);
* ``transformers``: transformers' ``PromptLookupCandidateGenerator``
  (``max_matching_ngram_size=3``), on torch tensors as ``generate`` calls it;
* the ceilings (:data:`CEILINGS`): at each step the longest run of upcoming
  true tokens found anywhere earlier in the sequence, capped at k: what the
  best drafter that copies from the sequence could draft. ``ceiling-1`` and
  ``ceiling-2`` take only runs that follow an earlier occurrence of the
  sequence's last one or two tokens: the best a drafter could do by
  choosing, with hindsight, among the places a match of that length points
  to. ``ceiling-1+copy`` may also choose where its own copy stands (the
  place after its last choice's run, a position on per token since, as the
  suffix rules' pointer moves), and ``ceiling-1+near`` any place within 12
  positions of it (the suffix rules' ``WINDOW``).
"""

import functools
import time

import numpy as np

from . import corpora, peers

# Untimed and deterministic, the ceilings: (after, window), the longest run
# after an earlier occurrence of the sequence's last ``after`` tokens or, with
# a window, starting within it of where the choice's own copy stands.
WINDOW = 12  # the suffix rules' own (docs/suffix.md)
CEILINGS = {
    "ceiling": (0, -1),
    "ceiling-1": (1, -1),
    "ceiling-2": (2, -1),
    "ceiling-1+copy": (1, 0),
    "ceiling-1+near": (1, WINDOW),
}


class LlamaRules:
    def __init__(self, k):
        from ngramdraft import Drafter, NgramCache

        self.drafter = Drafter(dynamic=NgramCache(), n_draft=k)

    def start(self, prompt):
        self.drafter.start(prompt)

    def draft(self, context):
        return self.drafter.draft()

    def accept(self, tokens):
        self.drafter.accept(tokens)

    def finish(self):
        self.drafter.finish()


@functools.cache
def warm(kind):
    """The corpus's file of one kind, opened once per process, its warm-up (pages mapped,
    checksums checked) over before any clock starts, as a server's is long before it drafts."""
    mb = 1 if corpora.SMOKE else corpora.FULL_MB
    opened = corpora.static_cache(mb) if kind == "static" else corpora.suffix_corpus(mb)
    opened.prefault().wait()
    return opened


class LlamaStatic(LlamaRules):
    """llama.cpp's rules with the corpus's 2-gram cache (llama-lookup's -lcs)."""

    def __init__(self, k):
        from ngramdraft import Drafter, NgramCache

        self.drafter = Drafter(static=warm("static"), dynamic=NgramCache(), n_draft=k)


class SuffixRules(LlamaRules):
    """ngramdraft's suffix rules, earlier requests remembered across the workload's requests."""

    def __init__(self, k):
        from ngramdraft import Drafter

        self.drafter = Drafter(n_draft=k, rules="suffix")


class SuffixCorpus(LlamaRules):
    """The suffix rules with the corpus's suffix file (``build-static --suffix``)."""

    def __init__(self, k):
        from ngramdraft import Drafter

        self.drafter = Drafter(n_draft=k, rules="suffix", static=warm("suffix"))


class SuffixSequence(SuffixRules):
    """The suffix rules on the sequence alone: earlier requests forgotten at each start."""

    def start(self, prompt):
        from ngramdraft import Drafter

        self.drafter = Drafter(n_draft=self.drafter.n_draft, rules="suffix")
        self.drafter.start(prompt)


class SuffixDecoding:
    """arctic-inference's SuffixDecodingCache, called as vLLM's ``suffix`` proposer calls it.

    vLLM's defaults (max_spec_factor 1.0, min_token_prob 0.1, earlier
    responses cached) but a tree depth of 64, so that a match can back a
    32-token draft (vLLM's default depth, 24, caps every draft at 24).
    """

    DEPTH = 64

    def __init__(self, k):
        self.k = k
        self.cache = peers.suffix_decoding().SuffixDecodingCache(self.DEPTH, 10000)
        self.request = 0

    def start(self, prompt):
        self.request += 1
        self.cache.start_request(self.request, np.asarray(prompt, dtype=np.int32))

    def draft(self, context):
        pattern = context[-self.DEPTH :]
        found = self.cache.speculate(
            self.request, pattern, max_spec_tokens=self.k, max_spec_factor=1.0, min_token_prob=0.1
        )
        return found.token_ids

    def accept(self, tokens):
        self.cache.add_active_response(self.request, np.asarray(tokens, dtype=np.int32))

    def finish(self):
        self.cache.stop_request(self.request)


class Stateless:
    """A drafter that reads the whole sequence at every step, as the peers do."""

    def start(self, prompt):
        pass

    def accept(self, tokens):
        pass

    def finish(self):
        pass


class VllmNgram(Stateless):
    def __init__(self, k):
        from vllm.v1.spec_decode.ngram_proposer import (
            _find_longest_matched_ngram_and_propose_tokens as propose,
        )

        self.propose, self.k = propose, k

    def draft(self, context):
        return self.propose(context, 3, 24, 1 << 30, self.k)


class TransformersLookup(Stateless):
    def __init__(self, k):
        import torch
        from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

        self.torch = torch
        self.generator = PromptLookupCandidateGenerator(
            num_output_tokens=k, max_matching_ngram_size=3, max_length=1 << 30
        )

    def draft(self, context):
        ids = self.torch.from_numpy(context.astype(np.int64))[None]
        candidates, _ = self.generator.get_candidates(ids)
        return candidates[0, len(context) :].numpy()


def ceiling_length(context, upcoming, k, after=0):
    """Length of the longest prefix of ``upcoming`` (at most k) found in ``context``
    right after an occurrence of the context's last ``after`` tokens."""
    return ceiling_run(context, upcoming, k, after)[0]


def ceiling_run(context, upcoming, k, after=0, copy=-1, window=-1):
    """(length, start) of the longest prefix of ``upcoming`` (at most k) found in ``context``
    right after an occurrence of the context's last ``after`` tokens, or starting within
    ``window`` positions of ``copy`` (with ``copy`` >= 0); of equal runs, the one nearest
    ``copy``. start is -1 if none is found."""
    n = len(context)
    starts = np.arange(after, n)
    for back in range(1, after + 1):
        starts = starts[context[starts - back] == context[n - back]]
    if copy >= 0:
        starts = np.union1d(starts, np.arange(max(copy - window, 0), min(copy + window + 1, n)))
    length, found = 0, np.array([-1])
    while length < min(k, len(upcoming)):
        starts = starts[starts + length < n]
        starts = starts[context[starts + length] == upcoming[length]]
        if not len(starts):
            break
        length, found = length + 1, starts
    return length, int(found[np.argmin(np.abs(found - copy))])


MAKERS = {
    "llama.cpp": LlamaRules,
    "llama.cpp+static": LlamaStatic,
    "suffix": SuffixRules,
    "suffix+corpus": SuffixCorpus,
    "suffix-sequence": SuffixSequence,
    "suffixdecoding": SuffixDecoding,
    "vllm-ngram": VllmNgram,
    "transformers": TransformersLookup,
}
DRAFTERS = (*MAKERS, *CEILINGS)


def run(workload, drafter_name, k, requests):
    """Teacher-forced figures of one drafter on one workload at cap k."""
    drafter = None if drafter_name in CEILINGS else MAKERS[drafter_name](k)
    passes = drafted = accepted = total = 0
    seconds = 0.0
    for prompt, output in requests:
        sequence = np.asarray(list(prompt) + list(output), dtype=np.int32)
        i, base, copy = 0, len(prompt), -1
        if drafter is not None:
            drafter.start(prompt)
        while i < len(output):
            context, upcoming = sequence[: base + i], sequence[base + i : base + i + k]
            if drafter is None:
                after, window = CEILINGS[drafter_name]
                a, start = ceiling_run(context, upcoming, k, after, copy, window)
                d = a
                if window >= 0 and a:  # the copy moves on a token a position, as the
                    copy = start + a + 1  # suffix rules' pointer does
                elif copy >= 0:
                    copy += 1
            else:
                t0 = time.perf_counter()
                draft = np.asarray(drafter.draft(context))[:k]
                seconds += time.perf_counter() - t0
                d = len(draft)
                a = 0
                while a < d and a < len(upcoming) and draft[a] == upcoming[a]:
                    a += 1
            step = sequence[base + i : base + i + a + 1]
            if drafter is not None:
                t0 = time.perf_counter()
                drafter.accept(step)
                seconds += time.perf_counter() - t0
            i += len(step)
            passes += 1
            drafted += d
            accepted += a
        if drafter is not None:
            drafter.finish()
        total += len(output)
    return {
        "workload": workload,
        "drafter": drafter_name,
        "k": k,
        "tokens": total,
        "passes": passes,
        "tokens_per_pass": total / passes,
        "drafted_per_pass": drafted / passes,
        "accepted_share": accepted / drafted if drafted else 0.0,
        "us_per_token": None if drafter is None else seconds / total * 1e6,
    }


def summarize(rounds_rows, fields=("workload", "drafter", "k")):
    """Quality from the first round (deterministic), cost medians and ranges over rounds,
    one row per distinct value of ``fields``."""
    by = {}
    for rows in rounds_rows:
        for r in rows:
            by.setdefault(tuple(r[f] for f in fields), []).append(r)
    out = []
    for rs in by.values():
        row = dict(rs[0])
        costs = [r["us_per_token"] for r in rs if r["us_per_token"] is not None]
        if costs:
            row["us_per_token"] = float(np.median(costs))
            row["us_per_token_range"] = [min(costs), max(costs)]
        out.append(row)
    return out
