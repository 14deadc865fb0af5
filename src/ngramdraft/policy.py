"""Opt-in drafting policies beyond llama.cpp's rules: adaptive draft length and auto-off.

Without a policy a Drafter drafts exactly as llama.cpp does. On a CPU, a
forward pass over k+1 tokens costs up to three times one over a single
token (``benchmarks/e2e.py`` measures it), so drafts the model rejects are
not free: where little is accepted (open-ended text), llama.cpp's rules can
cost more than they save. A policy watches how much of each draft the model
accepted and sets the length of the next.

``AdaptiveLength``: the length grows by 2 after a draft accepted whole and
shrinks by 1 after any rejection (transformers' heuristic for assistant
models), between ``n_min`` and the drafter's ``n_draft``; and drafting
pauses for ``retry_after`` steps whenever, over the last ``window`` drafts,
fewer than ``off_below`` of the drafted tokens were accepted (auto-off with
periodic retry). The drafts themselves are still llama.cpp's, cut shorter.
"""

from collections import deque
from dataclasses import dataclass, field

from .errors import InvalidParameterError


@dataclass
class AdaptiveLength:
    """Adaptive draft length with auto-off; one instance per sequence (Drafter copies it)."""

    n_min: int = 1
    window: int = 16
    off_below: float = 0.25
    retry_after: int = 64
    length: int = field(default=0, init=False)
    _limit: int = field(default=0, init=False, repr=False)
    _paused: int = field(default=0, init=False, repr=False)
    _recent: deque = field(default_factory=deque, init=False, repr=False)

    def __post_init__(self):
        ints = {"n_min": self.n_min, "window": self.window, "retry_after": self.retry_after}
        for name, value in ints.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameterError(f"{name} must be an integer >= 1, got {value!r}")
        if not 0.0 <= self.off_below <= 1.0:
            raise InvalidParameterError(f"off_below must be 0 .. 1, got {self.off_below!r}")

    def start(self, n_draft):
        """A new sequence: full length, no pause, no history."""
        self._limit = n_draft
        self.length = n_draft
        self._paused = 0
        self._recent = deque(maxlen=self.window)

    def next_length(self):
        """How many tokens the next draft may have (0 while paused)."""
        if self._paused:
            self._paused -= 1
            return 0
        return self.length

    def observe(self, drafted, accepted):
        """The model accepted ``accepted`` of the ``drafted`` tokens of the last draft."""
        if drafted == 0:
            return
        if accepted >= drafted:
            self.length = min(self._limit, self.length + 2)
        else:
            self.length = max(min(self.n_min, self._limit), self.length - 1)
        self._recent.append((drafted, accepted))
        if len(self._recent) == self.window:
            total = sum(d for d, _ in self._recent)
            if sum(a for _, a in self._recent) < self.off_below * total:
                self._paused = self.retry_after
                self._recent.clear()
