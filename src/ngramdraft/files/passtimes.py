"""Pass timings kept per model and machine: a model's passes are timed once, not at every load.

A policy that learns the engine's pass costs (``CostAwareLength()``, the
suffix rules' default in the engine adapters) has a few pass sizes timed
before the first request (``NgramDraftModel.time_passes``). That costs
seconds at every load (about 2.5 s for Qwen2.5-Coder-0.5B Q4_K_M on 2
threads), which a one-shot ``ngramdraft generate`` pays before its first
token, often more than drafting a short answer saves. So the timings are
kept in the cache folder (``NGRAMDRAFT_CACHE``, by default
``~/.cache/ngramdraft``), as ``passes/KEY.json``, where KEY is a hash of
what the adapter knows a pass's cost depends on (the model file's real
path, size and modification time, the threads, the batch sizes, the
context, the CPU, llama.cpp's version, the sizes timed and how). A load
with the same key reads them instead of timing, after timing a one-token
pass: where the kept one took much longer, they were timed on a busy
moment and are timed again (``kept_on_a_busier_moment`` in
``integrations/llama_cpp.py``), as the requests' passes would never
correct the sizes a policy prices too dear to submit. The requests' own
passes go on refining the costs (each size's fastest pass ever counts).
Deleting the folder times them again.

The file is a JSON object ``{"sizes": {"1": [s, s, s], "2": [...], ...}}``
(seconds), written atomically. It is read bounded: at most ``MAX_BYTES``,
exactly the sizes asked for, each with the number of timings asked for, each
a finite number of seconds above 0 and below ``MAX_SECONDS``. A file that is
anything else (damaged, foreign, from another version) is not used: the
passes are timed again and the file rewritten: a damaged file costs a
load its timing, never a wrong cost.
"""

import contextlib
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import xxhash

from ..errors import NgramdraftError
from .atomic import atomic_output
from .folders import cache_dir

VERSION = 1  # of the file's layout: part of the key, so an older layout is never read
MAX_BYTES = 1 << 16  # far above any file this module writes (a few hundred bytes)
MAX_SECONDS = 3600.0  # a pass timed longer was not one of a model's passes


def key(facts: dict[str, object]) -> str:
    """The name of the timings of a model's passes under ``facts`` (JSON-able values)."""
    text = json.dumps({"version": VERSION, **facts}, sort_keys=True, default=str)
    return xxhash.xxh3_128_hexdigest(text.encode())


def path_of(name: str) -> Path:
    return cache_dir() / "passes" / f"{name}.json"


def read(name: str, sizes: Sequence[int], reps: int) -> dict[int, list[float]] | None:
    """The timings kept as ``name`` of ``reps`` passes of each of ``sizes``, or None where
    there are none, or none that are exactly that (the module's doc)."""
    try:
        with open(path_of(name), "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_BYTES:
        return None
    try:
        kept = json.loads(data)["sizes"]
    except (ValueError, TypeError, KeyError, IndexError, RecursionError):
        return None
    if not isinstance(kept, dict) or set(kept) != {str(k) for k in sizes}:
        return None
    timings = {}
    for k in sizes:
        seconds = kept[str(k)]
        if not (
            isinstance(seconds, list)
            and len(seconds) == reps
            and all(_plausible(s) for s in seconds)
        ):
            return None
        timings[k] = [float(s) for s in seconds]
    return timings


def _plausible(seconds: object) -> bool:
    return (
        isinstance(seconds, int | float)
        and not isinstance(seconds, bool)
        and math.isfinite(seconds)
        and 0.0 < seconds < MAX_SECONDS
    )


def write(name: str, timings: dict[int, list[float]]) -> None:
    """Keep ``timings`` as ``name``. Where the cache folder cannot be written (read-only,
    full) nothing is kept: the next load times the passes again, as it would have."""
    text = json.dumps({"sizes": {str(k): v for k, v in sorted(timings.items())}})
    path = path_of(name)
    with contextlib.suppress(OSError, NgramdraftError):
        os.makedirs(path.parent, exist_ok=True)
        with atomic_output(path) as f:
            f.write(text.encode())
