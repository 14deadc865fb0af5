"""The single-machine static build: count 2-gram triples in passes, write one file.

The build runs in passes, one per range of first tokens; each range is chosen
from a histogram of first tokens so that its triples fit the memory budget.
A pass gathers its triples from every source (reading token files in
chunks), sorts and counts them, and hands the resulting keys, spans and
followers to the format's writer (``files/ngd/writing.py``), which spools them.
Ranges are visited in ascending order, so the spools are already in file
order: no k-way merge and no second sort are needed, and the output is the
same byte for byte whatever the number of passes.

Memory: one pass holds its triples (8 bytes each, sorted in place) plus their
counts; the constmap needs about 60 bytes per distinct 2-gram at the end.
"""

import itertools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..files.ngd.header import KIND_STATIC, Header
from ..files.ngd.writing import NgdWriter
from ..kernels import triples as triple_kernels
from ..progress import Progress
from .counting import CacheTriples, TokenTriples, add_counts, count_pass, pass_budget, plan_ranges


def write_static(
    sources: Sequence[TokenTriples | CacheTriples],
    path: str | os.PathLike[str],
    *,
    memory_limit: int | None = None,
    meta: dict[str, Any] | None = None,
    quiet: bool = True,
) -> Header:
    """Count the 2-gram triples of ``sources`` and write a static cache file at ``path``.

    Returns the file's Header.
    """
    total_tokens = sum(s.n_tokens for s in sources if isinstance(s, TokenTriples))
    with Progress("scanning", total_tokens or None, " tok", quiet=quiet) as p:
        for s in sources:
            s.scan(p)
    max_token = max((s.max_token for s in sources), default=-1)
    bits = max(1, max_token.bit_length())
    histogram = np.zeros(0, dtype=np.int64)
    for s in sources:
        histogram = add_counts(histogram, s.histogram)
    bounds = plan_ranges(histogram, pass_budget(memory_limit))
    with NgdWriter(path, KIND_STATIC, quiet=quiet) as out:
        with Progress("counting", int(histogram.sum()), " triples", quiet=quiet) as progress:
            for lo, hi in itertools.pairwise(bounds):
                packed, counts = count_pass([s.triples(lo, hi, bits) for s in sources])
                out.add(*triple_kernels.group(packed, counts, bits))
                progress.update(int(histogram[lo:hi].sum()))
        return out.finish(sum(s.n_tokens for s in sources), meta)
