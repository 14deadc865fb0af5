"""Rewind: after Drafter.rewind(n) everything is as if those n tokens had never been accepted.

Seeded stress in the manner of sortedcontainers: every mutation is followed
by the table's full invariant check, and the state is compared with a fresh
drafter that only ever saw the kept tokens.
"""

import numpy as np
import pytest

from ngramdraft import Drafter, build_static
from ngramdraft.errors import InvalidParameterError


def _same(a, b):
    for x, y in zip(a.context.arrays(), b.context.arrays(), strict=True):
        assert np.array_equal(x, y)
    assert len(a.context) == len(b.context) and a.context.n_entries == b.context.n_entries
    assert a.tokens.tolist() == b.tokens.tolist()
    assert a.draft().tolist() == b.draft().tolist()


@pytest.mark.parametrize("seed", range(6))
def test_rewind_equals_never_having_accepted(seed, tmp_path):
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(2, 12))
    static = build_static(rng.integers(0, vocab, 3000), tmp_path / "s.ngd")
    drafter = Drafter(static=static, n_draft=6)
    seq = list(rng.integers(0, vocab, 20))
    drafter.start(seq)
    for _ in range(300):
        if rng.random() < 0.6 or len(seq) < 2:
            new = list(rng.integers(0, vocab, int(rng.integers(1, 6))))
            drafter.accept(new)
            seq += new
        else:
            n = int(rng.integers(0, min(len(seq), 40) + 1))
            drafter.rewind(n)
            seq = seq[: len(seq) - n]
        drafter.context.verify()
        if rng.random() < 0.1:
            fresh = Drafter(static=static, n_draft=6)
            fresh.start(seq)
            _same(drafter, fresh)
    fresh = Drafter(static=static, n_draft=6)
    fresh.start(seq)
    _same(drafter, fresh)


def test_rewinding_everything_empties_the_context():
    drafter = Drafter()
    drafter.start([1, 2, 3, 1, 2, 3, 1, 2])
    drafter.rewind(8)
    drafter.context.verify()
    assert len(drafter.context) == 0 and drafter.context.n_entries == 0
    assert drafter.draft().tolist() == []


def test_rewinding_more_than_the_sequence_holds_is_named():
    drafter = Drafter()
    drafter.start([1, 2, 3])
    for bad in (4, -1, 1.5, True):
        with pytest.raises(InvalidParameterError, match="holds 3"):
            drafter.rewind(bad)
    assert drafter.tokens.tolist() == [1, 2, 3]
