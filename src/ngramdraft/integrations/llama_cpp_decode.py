"""ngramdraft's own speculative decoding over llama-cpp-python's low-level API.

llama-cpp-python verifies drafts in ``Llama.generate``, and pays for it
beyond the model's own work: with a draft model it keeps the logits of every
position, the prompt's included (a 152k-token vocabulary makes an 800-token
prompt 1.3x as dear), copies every verified row into ``Llama.scores``, and
samples each row through its sampler chain. :class:`Decoder` asks llama.cpp
for what verification reads and nothing more: a prompt chunk is evaluated
with the logits of its last position alone (as without drafting), a
verification batch (the last token and the draft) with the logits of every
row, which greedy decoding compares with one ``argmax`` over a view of
llama.cpp's own buffer. Other sampling settings go through the host's own
sampler chain, row by row, so its seed, penalties, grammar and logits
processors act as they do without drafting.

:func:`speculative_generate` is ``Llama.generate``'s protocol (a generator of
tokens; prefix reuse of the KV cache; ``stopping_criteria``) over a
:class:`Decoder`; the ``Llama`` that :func:`~ngramdraft.integrations.llama_cpp.load_llama`
makes runs it whenever it has a draft model, so ``create_completion``,
``create_chat_completion`` and the server draft through it unchanged.
"""

import time
import weakref
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from ..optional import require
from . import llama_cpp_host as host


class Decoder:
    """llama_decode calls on one ``Llama``'s context, through a batch of its own.

    The batch's arrays are numpy views, filled without a Python loop per
    token; the model's state (``input_ids``, ``n_tokens``) is kept as the
    host keeps it, so the host's own calls may follow ours.
    """

    def __init__(self, llama: Any) -> None:
        self.lib = require("llama_cpp", "llama", "llama-cpp-python drafting")
        self.llama = host.check(llama)
        self.n_batch = int(llama.n_batch)
        self.n_vocab = int(llama.n_vocab())
        batch = self.lib.llama_batch_init(self.n_batch, 0, 1)
        weakref.finalize(self, self.lib.llama_batch_free, batch)
        self.batch = batch
        n = self.n_batch
        self._token = np.ctypeslib.as_array(batch.token, shape=(n,))
        self._pos = np.ctypeslib.as_array(batch.pos, shape=(n,))
        self._logits = np.ctypeslib.as_array(batch.logits, shape=(n,))
        np.ctypeslib.as_array(batch.n_seq_id, shape=(n,))[:] = 1
        for i in range(n):  # every position in sequence 0, once
            batch.seq_id[i][0] = 0

    def decode(self, tokens: Sequence[int] | np.ndarray, rows: int) -> np.ndarray:
        """Evaluate ``tokens`` after the model's ``n_tokens``; the logits of the last ``rows``.

        Returns a read-only (rows, n_vocab) view of llama.cpp's buffer, valid
        until the next decode. Positions past ``n_tokens`` (a rejected draft's)
        leave the KV cache first, as the host's ``eval`` does.
        """
        llama, n = self.llama, len(tokens)
        start = llama.n_tokens
        host.drop_positions(llama, start)
        self._token[:n] = tokens
        self._pos[:n] = np.arange(start, start + n)
        self._logits[:n] = 0
        self._logits[n - rows : n] = 1
        self.batch.n_tokens = n
        code = self.lib.llama_decode(host.context(llama), self.batch)
        if code != 0:  # the host's own error, so that its callers' handlers still apply
            raise RuntimeError(f"llama_decode returned {code}")
        llama.input_ids[start : start + n] = tokens
        llama.n_tokens = start + n
        host.evaluated(llama)
        out = self.lib.llama_get_logits(host.context(llama))
        view = np.ctypeslib.as_array(out, shape=(rows, self.n_vocab))
        view.flags.writeable = False
        return view

    def prompt(self, tokens: Sequence[int]) -> np.ndarray:
        """Evaluate a prompt in chunks of n_batch; the logits of its last position, (1, n_vocab)."""
        logits = np.zeros((0, self.n_vocab), dtype=np.float32)
        for i in range(0, len(tokens), self.n_batch):
            chunk = tokens[i : i + self.n_batch]
            logits = self.decode(chunk, 1)
        return logits

    def pass_cost(self, n_tokens: int, *, context: int = 512, reps: int = 5) -> list[float]:
        """Median seconds of a verification pass over k = 1 .. n_tokens tokens after ``context``.

        A pass as :func:`speculative_generate` makes it: every row's logits and
        their argmax. The model's state is reset afterwards.
        """
        times = self.time_passes(range(1, n_tokens + 1), context=context, reps=reps)
        return [float(np.median(times[k])) for k in range(1, n_tokens + 1)]

    def time_passes(
        self, sizes: Sequence[int], *, context: int = 512, reps: int = 1
    ) -> dict[int, list[float]]:
        """Seconds of ``reps`` verification passes over each of ``sizes`` tokens after ``context``
        (as :meth:`pass_cost`); the model's state is reset afterwards."""
        llama = self.llama
        largest = max(sizes)
        context = max(1, min(context, capacity(llama) - largest - 1))
        ids = [1 + i % (self.n_vocab - 1) for i in range(context + largest)]
        llama.reset()
        self.prompt(ids[:context])
        times: dict[int, list[float]] = {}
        for k in sizes:
            for _ in range(reps):
                llama.n_tokens = context  # the last pass's positions go, as a rejection's do
                t0 = time.perf_counter()
                self.decode(ids[context : context + k], k).argmax(axis=1)
                times.setdefault(k, []).append(time.perf_counter() - t0)
        llama.reset()
        return times


def capacity(llama: Any) -> int:
    """Positions the model's state holds: its context, or ``input_ids`` if shorter (the
    host sizes that by the n_ctx asked for; llama.cpp may round its own up)."""
    return min(host.context_size(llama), len(llama.input_ids))


def decoder_of(llama: Any) -> Decoder:
    """The :class:`Decoder` of ``llama``, made at its first use and kept on it."""
    decoder = getattr(llama, "_ngramdraft_decoder", None)
    if decoder is None:
        decoder = llama._ngramdraft_decoder = Decoder(llama)
    return decoder


def picks_argmax(settings: dict[str, Any]) -> bool:
    """Whether ``Llama.generate``'s sampling ``settings`` (its defaults for those left out)
    pick each row's argmax: temperature 0 without penalties, grammar or logits processors."""
    return (
        settings.get("temp", 0.8) == 0.0
        and settings.get("repeat_penalty", 1.0) == 1.0
        and settings.get("frequency_penalty", 0.0) == 0.0
        and settings.get("presence_penalty", 0.0) == 0.0
        and settings.get("grammar") is None
        and settings.get("logits_processor") is None
    )


def speculative_generate(
    llama: Any,
    tokens: Sequence[int],
    draft_model: Callable[..., Any],
    *,
    reset: bool = True,
    stopping_criteria: Any = None,
    max_tokens: int | None = None,
    **settings: Any,
) -> Generator[int, Sequence[int] | None, None]:
    """``Llama.generate`` with drafts from ``draft_model``, verified by a :class:`Decoder`.

    ``settings`` are ``Llama.generate``'s sampling arguments. At temperature
    0 without penalties, grammar or logits processors each row is its
    logits' argmax (what the host's greedy sampler picks, first of equal
    values); otherwise each row is sampled by the host's sampler chain, in
    order, until one differs from the draft, so a seed draws the same values
    as without drafting. Tokens sent into the generator are verified as the
    host treats them: as the start of the next draft.

    ``max_tokens`` (not ``Llama.generate``'s: its caller stops taking tokens
    there) caps each draft at what the caller will still take: a pass's
    tokens past it are dropped unread, and on a CPU a longer pass costs more
    (llama-server caps its drafts so too).
    """
    decoder = decoder_of(llama)
    sampler = None if picks_argmax(settings) else host.sampler(llama, **_sampler(settings))
    tokens = list(tokens)
    if not tokens:
        raise InvalidParameterError("generate needs at least one prompt token")
    if reset:
        keep = _reusable_prefix(llama, tokens)
        if keep == 0:
            llama.reset()
        llama.n_tokens = keep
        tokens = tokens[keep:]
    rows = decoder.prompt(tokens)
    drafted: list[int] = []
    wanted = max_tokens if max_tokens is not None and max_tokens > 0 else None
    while True:
        # Row i predicts the token after the batch's position i; the draft's tokens are
        # accepted while they equal what the model picks.
        accepted: list[int] = []
        stop = False
        for i in range(len(drafted) + 1):
            token = _pick(llama, rows, i, sampler)
            if stopping_criteria is not None and stopping_criteria(
                llama.input_ids[: llama.n_tokens - len(drafted) + i], rows[i]
            ):
                stop = True
                break
            accepted.append(token)
            if i == len(drafted) or drafted[i] != token:
                break
        # The rejected positions leave the model's state (and the KV cache at the next
        # decode); the last token picked is evaluated by the next pass.
        llama.n_tokens -= len(drafted) + 1 - len(accepted)
        sent: Sequence[int] | None = None
        for token in accepted:
            sent = yield token
        if stop:
            return
        if wanted is not None:
            wanted -= len(accepted)
        # As the host: tokens sent in after a pass's last token open the next draft.
        opened = [] if sent is None else [int(t) for t in sent]
        n = llama.n_tokens
        if n + 1 + len(opened) > capacity(llama):
            return
        llama.input_ids[n : n + 1 + len(opened)] = [token, *opened]
        draft = np.asarray(draft_model(llama.input_ids[: n + 1 + len(opened)])).astype(int)
        if wanted is not None:  # the pass's own token is one of those wanted
            draft = draft[: max(0, wanted - 1)]
        room = min(capacity(llama) - n, decoder.n_batch) - 1
        drafted = [*opened, *draft.tolist()][:room]
        rows = decoder.decode([token, *drafted], 1 + len(drafted))


def _pick(llama: Any, rows: np.ndarray, i: int, sampler: Any) -> int:
    """The token that row i of the last decode picks: its argmax, or the host's sampler's."""
    if sampler is None:
        return int(rows[i].argmax())
    # The row's place among the decode's outputs, counted from the end (llama.cpp's
    # negative index), so that a prompt chunk's one output is row 0 too.
    return host.sample(sampler, llama, i - len(rows))


_SAMPLER_ARGS = (
    "top_k", "top_p", "min_p", "typical_p", "temp", "repeat_penalty", "frequency_penalty",
    "presence_penalty", "tfs_z", "mirostat_mode", "mirostat_eta", "mirostat_tau", "penalize_nl",
    "logits_processor", "grammar",
)  # fmt: skip


def _sampler(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if k in _SAMPLER_ARGS}


def _reusable_prefix(llama: Any, tokens: list[int]) -> int:
    """Positions of the model's state a new prompt keeps: their common prefix, less one so
    that the prompt's last position is evaluated again (its logits are needed)."""
    if llama.n_tokens == 0 or not host.rolls_back(llama):
        return 0
    held = llama.input_ids[: llama.n_tokens]
    m = min(len(held), len(tokens))
    differ = np.flatnonzero(held[:m] != np.asarray(tokens[:m]))
    common = int(differ[0]) if len(differ) else m
    return max(0, min(common, len(tokens) - 1))
