"""The simulated server that ``serving.py`` and ``ab.py`` drive: its texts, what a model
accepts of a draft, and vLLM's step loop around a proposer.

B sequences run at once, each a stretch of the held-out Gutenberg stream; a
third of them start with one shared "system prompt"; acceptance is by
teacher forcing (the drafted tokens up to the first that differs from the
text, plus the text's next token).
"""

import resource
import time

import numpy as np

from . import corpora

PROMPT = 128  # tokens of each sequence's own prompt
GENERATE = 256  # tokens each sequence generates before it finishes
SYSTEM = 256  # tokens of the shared system prompt


# The static caches a run can draft with, by name, and what each is.
STATICS = {"full": "541 MB Gutenberg corpus", "parity": "25 MB parity corpus"}


def static_path(smoke, which="full"):
    """The static cache's file: the 541 MB corpus's ("full"; a smoke run's: its first
    MB's), or the 25 MB parity corpus's ("parity", the cache llama.cpp's drafts were
    recorded with)."""
    if which == "parity" and not smoke:
        return corpora.parity_static().path
    return corpora.static_cache(1 if smoke else corpora.FULL_MB).path


class Texts:
    """Each new sequence: (prompt, continuation) from the next stretch of the stream."""

    def __init__(self, stream):
        self.stream = stream
        self.at = SYSTEM
        self.count = 0

    def next(self):
        need = PROMPT + GENERATE + 1
        if self.at + need > len(self.stream):
            self.at = SYSTEM
        piece = self.stream[self.at : self.at + need]
        self.at += need
        self.count += 1
        prompt = piece[:PROMPT]
        if self.count % 3 == 0:
            prompt = np.concatenate([self.stream[:SYSTEM], prompt])
        return prompt, piece[PROMPT:]


def accepted(draft, truth):
    """Tokens a model would accept: drafts up to the first mismatch, then its own."""
    n = 0
    while n < len(draft) and n < len(truth) - 1 and draft[n] == truth[n]:
        n += 1
    return n + 1


MAX_MODEL_LEN = SYSTEM + PROMPT + GENERATE + 16


def vllm_config(size, lookup_min=None, lookup_max=None):
    """What a proposer reads of vLLM's config, as vLLM's runner builds it."""
    from types import SimpleNamespace as NS

    return NS(
        speculative_config=NS(
            num_speculative_tokens=8, prompt_lookup_min=lookup_min, prompt_lookup_max=lookup_max
        ),
        model_config=NS(max_model_len=MAX_MODEL_LEN),
        scheduler_config=NS(max_num_seqs=size),
        parallel_config=NS(tensor_parallel_size=1),
    )


def run_vllm(kind, size, steps, quick, which="full"):
    """A vLLM step loop: the proposer sees the runner's token table, rows reused as requests end.

    ``ngramdraft-vllm`` is NgramProposer with the static cache; ``vllm-builtin``
    is vLLM's own NgramProposer (method "ngram", n-grams of 1 to 4 tokens, as
    ngramdraft's), which looks in the request's own tokens only.
    """
    if kind == "vllm-builtin":
        from vllm.v1.spec_decode.ngram_proposer import NgramProposer

        proposer = NgramProposer(vllm_config(size, 1, 4))
        propose = proposer.propose
        k = 8

        def call(sampled, n, table):
            return propose(k, sampled, n, table)
    else:
        from ngramdraft.integrations.vllm import NgramProposer

        cls = type("Proposer", (NgramProposer,), {"static": str(static_path(quick, which))})
        proposer = cls(vllm_config(size))
        proposer.batch.static.prefault().done.wait()
        call = proposer.propose
    texts = Texts(corpora.test_stream(200_000))
    table = np.zeros((size, MAX_MODEL_LEN), dtype=np.int32)
    lengths = np.zeros(size, dtype=np.int32)
    rest = [None] * size
    sampled = [[0]] * size

    def admit(row):
        prompt, rest[row] = texts.next()
        table[row, : len(prompt)], lengths[row] = prompt, len(prompt)
        sampled[row] = [int(prompt[-1])]

    for row in range(size):
        admit(row)
    warmup = min(20, steps // 5)
    timed, seq_steps, accepted_tokens = 0.0, 0, 0
    for step in range(steps + warmup):
        if step == warmup:
            timed, seq_steps, accepted_tokens = 0.0, 0, 0
        t0 = time.perf_counter()
        drafts = call(sampled, lengths, table)
        timed += time.perf_counter() - t0
        seq_steps += size
        for row in range(size):
            truth = rest[row]
            n = accepted(drafts[row], truth)
            accepted_tokens += n - 1
            table[row, lengths[row] : lengths[row] + n] = truth[:n]
            lengths[row] += n
            rest[row] = truth[n:]
            sampled[row] = truth[:n].tolist()
            if len(rest[row]) < 2:
                admit(row)
    return {
        "kind": kind,
        "size": size,
        "us_per_seq_step": 1e6 * timed / seq_steps,
        "accepted_per_seq_step": accepted_tokens / seq_steps,
        "seq_steps": seq_steps,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
