"""The suffix rules' learned substitutions: a rename seen twice is drafted wherever met.

When a copy from the sequence diverges (a token not the source's after
agreeing) and a later draft's start finds its place again (the tokens
before the start equal the sequence's last ones), the tokens skipped in the
source (1 to ``SPAN``) and those written instead (0 to ``SPAN``) are
recorded as a substitution, in the state's table of ``SUBSTITUTIONS``
entries (the fewest sightings, then the oldest, make room). One seen
``RECUR`` times since it last got a token wrong is applied: a copy from the
sequence reaching its old tokens (all earlier than the sequence's last)
drafts its new ones instead, and the pointer walks over them the same way
(``walk`` serves both, so they cannot disagree). Specified in
``docs/suffix.md``, "Learned substitutions".
"""

from numba import njit

from ...kernels.chains import match_length
from .state import (
    APPLIED,
    DIVERGED,
    EMITTING,
    ENTRY_WORDS,
    LEARNED,
    N_DRAFT,
    NEW_AT,
    NEW_LEN,
    OLD_AT,
    OLD_LEN,
    SEEN,
    SUBSTITUTIONS,
)

SPAN = 16  # the most tokens a substitution replaces, and writes instead
RECUR = 2  # sightings (net of misses) before a substitution applies


@njit(cache=True, nogil=True, inline="always")
def copy_seq(seq, n, st, start, out, k):
    """Up to k tokens copied from the sequence at start, learned substitutions applied; past
    its end, from out itself, as LZ77's copies run into what they write."""
    p, sub, at = start, st[EMITTING], st[EMITTING + 1]
    d = 0
    while d < k:
        q, _, p, sub, at = walk(seq, n, st, p, sub, at)
        if q < n:
            out[d] = seq[q]
        elif q - n < d:
            out[d] = out[q - n]
        else:
            break
        d += 1
    return d


@njit(cache=True, nogil=True, inline="always")
def walk(seq, n, st, p, sub, at):
    """One token of a copy from the sequence: (its position, the substitution it came from
    or -1, then p, sub and at after it).

    p is the source's position; sub and at the substitution whose new tokens
    are being written and how many are (``EMITTING``). A substitution applies
    where its old tokens start at p and end before n, the sequence's length
    when the copy was drafted: so drafting and following walk alike.
    """
    if sub < 0 and st[APPLIED] > 0:
        sub, at = _substituted(seq, n, st, p), 0
        if sub >= 0:
            e = LEARNED + sub * ENTRY_WORDS
            p += st[e + OLD_LEN]
            if st[e + NEW_LEN] == 0:  # a deletion writes nothing
                sub = -1
    if sub < 0:
        return p, -1, p + 1, sub, at
    e = LEARNED + sub * ENTRY_WORDS
    q, used = st[e + NEW_AT] + at, sub
    at += 1
    if at == st[e + NEW_LEN]:
        sub = -1
    return q, used, p, sub, at


@njit(cache=True, nogil=True, inline="always")
def _same(seq, a, b, length):
    i = 0
    while i < length and seq[a + i] == seq[b + i]:
        i += 1
    return i == length


@njit(cache=True, nogil=True, inline="always")
def _substituted(seq, n, st, p):
    """The applied substitution whose old tokens start at p and end before n; -1 if none."""
    for s in range(SUBSTITUTIONS):
        e = LEARNED + s * ENTRY_WORDS
        m = st[e + OLD_LEN]
        if st[e + SEEN] >= RECUR and p + m < n and _same(seq, st[e + OLD_AT], p, m):
            return s
    return -1


@njit(cache=True, nogil=True, inline="always")
def learn(seq, n, st, start):
    """Record the pending divergence as a substitution if a copy from start has found its
    place again: the tokens before start equal the sequence's last (module's doc)."""
    p0, o0 = st[DIVERGED], st[DIVERGED + 1]
    # A draft since the divergence that was accepted whole (n_draft and the model's token)
    # ends at most this far on; farther, drafts from elsewhere came between.
    if n - o0 > SPAN + st[N_DRAFT] + 1:
        st[DIVERGED + 1] = -1
        return
    back = match_length(seq, start - 1, seq, n, n - o0)
    if back == 0:  # the last token missed: not in step yet
        if n - o0 > SPAN:  # and the span written instead is already too long to record
            st[DIVERGED + 1] = -1
        return
    st[DIVERGED + 1] = -1
    old_len, new_len = start - back - p0, n - back - o0
    if 1 <= old_len <= SPAN and 0 <= new_len <= SPAN:
        _record(seq, st, p0, old_len, o0, new_len)


@njit(cache=True, nogil=True, inline="always")
def _record(seq, st, old_at, old_len, new_at, new_len):
    """One more sighting of old -> new: its entry's, else a new entry in place of the one
    seen fewest times (then the oldest)."""
    slot = -1
    for s in range(SUBSTITUTIONS):
        e = LEARNED + s * ENTRY_WORDS
        if (
            st[e + OLD_LEN] == old_len
            and st[e + NEW_LEN] == new_len
            and _same(seq, st[e + OLD_AT], old_at, old_len)
            and _same(seq, st[e + NEW_AT], new_at, new_len)
        ):
            st[e + SEEN] += 1
            count_applied(st)
            return
        f = LEARNED + slot * ENTRY_WORDS
        if (
            slot < 0
            or st[e + SEEN] < st[f + SEEN]
            or (st[e + SEEN] == st[f + SEEN] and st[e + NEW_AT] < st[f + NEW_AT])
        ):
            slot = s
    if st[EMITTING] == slot:
        st[EMITTING] = -1
    e = LEARNED + slot * ENTRY_WORDS
    st[e + OLD_AT], st[e + OLD_LEN], st[e + NEW_AT], st[e + NEW_LEN] = (
        old_at, old_len, new_at, new_len
    )  # fmt: skip
    st[e + SEEN] = 1
    count_applied(st)


@njit(cache=True, nogil=True, inline="always")
def count_applied(st):
    c = 0
    for s in range(SUBSTITUTIONS):
        c += st[LEARNED + s * ENTRY_WORDS + SEEN] >= RECUR
    st[APPLIED] = c
