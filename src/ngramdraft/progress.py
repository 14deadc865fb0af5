"""Progress lines for long steps: rate and ETA on a terminal, silent elsewhere."""

import sys
import time
from typing import TextIO


class Progress:
    """Report ``done/total unit`` with rate and ETA on stderr, at most 5 times a second.

    Disabled (every method a no-op) when stderr is not a terminal or quiet is set.
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        unit: str = "",
        *,
        quiet: bool = False,
        stream: TextIO | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = not quiet and self.stream.isatty()
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.t0 = time.perf_counter()
        self._last = 0.0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.enabled and now - self._last >= 0.2:
            self._last = now
            self._draw(now)

    def _draw(self, now: float, end: str = "") -> None:
        elapsed = max(now - self.t0, 1e-9)
        rate = self.done / elapsed
        line = f"\r{self.label}: {_si(self.done)}{self.unit}"
        if self.total:
            line += f"/{_si(self.total)}{self.unit} ({100 * self.done / self.total:.0f}%)"
        line += f" {_si(rate)}{self.unit}/s"
        if self.total and rate > 0 and self.done < self.total:
            line += f" ETA {(self.total - self.done) / rate:.0f}s"
        else:
            line += f" {elapsed:.1f}s"
        self.stream.write(line + "\x1b[K" + end)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.perf_counter(), end="\n")
            self.enabled = False


def _si(x: float) -> str:
    for unit in ("", "k", "M", "G", "T"):
        if abs(x) < 1000:
            return f"{x:.0f}{unit}" if unit == "" else f"{x:.1f}{unit}"
        x /= 1000
    return f"{x:.1f}P"
