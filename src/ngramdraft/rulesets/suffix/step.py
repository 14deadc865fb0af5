"""The suffix rules (opt-in, ``rules="suffix"``): copy what followed the longest earlier match.

Specified in ``docs/suffix.md`` (with the measurements behind each
constant); in short, at each step:

1. **Match.** The longest suffix of the sequence (up to ``MAX_MATCH``
   tokens) that occurred earlier in the sequence, and the longest that
   occurred in the earlier requests; the longer wins, the sequence on a tie.
   Among equally long occurrences, the one whose continuation is nearest
   where the pointer stands (below); with no pointer, nearest where the
   last one was lost (a copy interrupted by new text resumes near where it
   stopped), else the earliest (the prompt's, which the output copies).
2. **Follow.** While the pointer's source has proved itself (``PROVEN``
   tokens accepted, or one when no match can jump instead; at most
   ``RESYNC_MISSES`` missed in a row) and no match of ``OVERRIDE_MATCH`` tokens
   says otherwise, draft from the source near the pointer: the end of
   the sequence matched within ``WINDOW`` positions of it (an edit that
   inserted or dropped a few tokens leaves the copy a few positions off),
   else the pointer itself (an edit that replaced a token
   by one of the same length leaves it in step).
3. **Jump.** Otherwise draft from the longest match if it is at least
   ``min_match`` long. A jump to a new place is a guess: a drafter whose
   jumps have mostly missed (their first token right in fewer than
   ``RELIABLE`` of them, counting one hit and one miss beforehand) jumps
   only on a match of ``GATED_MATCH`` tokens or more. On prose, chance matches of
   two to five tokens are right about one time in seven whatever their
   length, while on code and edits they are right more often than not.
4. **Draft** up to ``n_draft`` tokens of what follows, one path; in the
   sequence a copy may run into the tokens it is drafting, as LZ77's does,
   so a repetition drafts its period again.

The pointer is the position in its source standing for the next token. It
moves one position with every accepted token, whether or not the token
equalled the source's, and is dropped after ``RESYNC_MISSES`` misses in a
row (a pointer into the sequence leaves its position as the hint for
ties above).

**Learned substitutions.** An edit that renames something replaces the
same old tokens by the same new ones wherever they occur. When a copy
from the sequence diverges (a token not the source's after agreeing) and
a later draft's start finds its place again (the tokens before the start
equal the sequence's last ones), the tokens skipped in the source (1 to
``SPAN``) and those written instead (0 to ``SPAN``) are recorded as a
substitution, in a table of ``SUBSTITUTIONS`` (the fewest sightings, then
the oldest, make room). One seen ``RECUR`` times since it last got a token
wrong is applied: a copy from the sequence reaching its old tokens (all
earlier than the sequence's last) drafts its new ones instead, and the
pointer walks over them the same way. A rename seen once is not applied:
on edits that change each thing once, guessing from one sighting loses
more than it wins (``docs/suffix.md``).

5. **The corpus**, if there is one and steps 1-4 drafted nothing: its
   commonest continuation of the longest match (``kernels/suffixsearch.py``),
   restrained by the ``CORPUS_*`` constants. It sets no pointer.
"""

from numba import njit

from ...kernels.chains import (
    MAX_CHAIN,
    MAX_MATCH,
    file_positions,
    longest_match,
    match_near,
)
from ...kernels.handles import POSITIONS_N, SIZES, int32s, int64s, positions_at
from ...kernels.suffixsearch import draft as corpus_draft
from .state import (
    AGREED,
    CORPUS_ARGS,
    CORPUS_BUCKETS,
    CORPUS_GRAMS,
    CORPUS_LAST,
    CORPUS_LAST_WORDS,
    CORPUS_SA,
    CORPUS_TEXT,
    DIVERGED,
    EMITTING,
    ENTRY_WORDS,
    FROM_CORPUS,
    HINT,
    JUMPS,
    JUST_JUMPED,
    LANDED,
    LEARNED,
    MEM,
    MEM_INDEX,
    MEM_N,
    MIN_MATCH,
    MISSES,
    N_DRAFT,
    NONE,
    OUT,
    POINTER,
    SEEN,
    SEQ,
    SEQ_INDEX,
    SOURCE,
    N,
)
from .substitutions import copy_seq, count_applied, learn, walk

MIN_MATCH_DEFAULT = 2
PROVEN = 4
RESYNC_MISSES = 6
OVERRIDE_MATCH = 4  # a match this long overrides the pointer's source
WINDOW = 12
GATED_MATCH = 8  # the shortest match a drafter whose jumps mostly missed jumps on
RELIABLE = 0.3
# The corpus (``kernels/suffixsearch.py``), asked when neither the sequence nor
# the earlier requests draft: a match of this many tokens, a continuation
# that follows this many of its occurrences and this share (percent) of them
# (benchmarks/corpus_rules.py: on prose, how often a continuation followed
# decides its precision, the match's length barely does).
CORPUS_MIN_MATCH = 2
CORPUS_MIN_COUNT = 4
CORPUS_MIN_SHARE = 50


@njit(cache=True, nogil=True, inline="always")
def _copy(text, tn, start, out, k):
    """Up to k tokens of the earlier requests from start into out (a request's end stops it)."""
    d = 0
    while d < k and start + d < tn and text[start + d] >= 0:  # -1: a separator
        out[d] = text[start + d]
        d += 1
    return d


@njit(cache=True, nogil=True)
def draft_step(st):
    """Draft into the state's buffer for its sequence; returns the count drafted."""
    seq, seq_prev, seq_head, seq_h = positions_at(st, SEQ_INDEX)
    mem, mem_prev, mem_head, mem_h = positions_at(st, MEM_INDEX)
    out = int32s(st, OUT)
    st[N], st[MEM_N] = seq_h[POSITIONS_N], mem_h[POSITIONS_N]
    d = _draft(seq, seq_prev, seq_head, mem, mem_prev, mem_head, st, out)
    st[FROM_CORPUS] = 0
    if d == 0 and st[CORPUS_SA + 1] > 0:
        text, sa = int32s(st, CORPUS_TEXT), int32s(st, CORPUS_SA)
        buckets, grams = int64s(st, CORPUS_BUCKETS), int64s(st, CORPUS_GRAMS).reshape((-1, 2))
        params = st[CORPUS_ARGS : CORPUS_ARGS + 4]
        last = st[CORPUS_LAST : CORPUS_LAST + CORPUS_LAST_WORDS]
        d = corpus_draft(text, sa, buckets, grams, seq, st[N], params, last, out)
        st[FROM_CORPUS] = d > 0
    return d


@njit(cache=True, nogil=True, inline="always")
def _draft(seq, seq_prev, seq_head, mem, mem_prev, mem_head, st, out):
    """Steps 1-4 (the module's doc) into out; returns the count drafted."""
    n, k = st[N], min(st[N_DRAFT], out.shape[0])
    max_match, max_chain, sizes = MAX_MATCH, MAX_CHAIN, SIZES
    src = st[SOURCE]
    near_seq = st[POINTER] if src == SEQ else (st[HINT] if src == NONE else -1)
    near_mem = st[POINTER] if src == MEM else -1
    gated = (st[LANDED] + 1) < RELIABLE * (st[JUMPS] + 2)
    # With no pointer every draft is a jump: shorter matches than it may take are not
    # looked for (on prose, the commonest case, the chains of 2- and 4-grams are long).
    shortest = max(st[MIN_MATCH], GATED_MATCH if gated else 0) if src == NONE else 0
    j, length = longest_match(
        seq, n - 1, sizes, seq_prev, seq_head, seq, n, max_match, max_chain, near_seq, shortest
    )
    jm, length_m = longest_match(
        mem, st[MEM_N] - 1, sizes, mem_prev, mem_head, seq, n, max_match, max_chain, near_mem,
        shortest,
    )  # fmt: skip
    where, start = NONE, -1
    if length_m > length:
        j, length, where = jm, length_m, MEM
    elif length > 0:
        where = SEQ
    jumpable = where != NONE and length >= st[MIN_MATCH]
    proven = st[AGREED] >= PROVEN or (st[AGREED] > 0 and not jumpable)
    if src != NONE and proven and st[MISSES] <= RESYNC_MISSES and length < OVERRIDE_MATCH:
        text, tn = (seq, n - 1) if src == SEQ else (mem, st[MEM_N] - 1)
        e, near_len = match_near(text, tn, seq, n, st[POINTER] - 1, WINDOW, max_match)
        if near_len > 0:
            where, start = src, e + 1
        else:
            where, start = src, st[POINTER]
    elif jumpable:
        start = j + 1
        if src != where or start != st[POINTER]:  # a jump: the new source has proved nothing
            if length < GATED_MATCH and gated:
                return 0
            st[SOURCE], st[AGREED], st[MISSES], st[JUST_JUMPED] = where, 0, 0, 1
    else:
        return 0
    if start != st[POINTER] or where != src:
        st[EMITTING] = -1  # the copy starts afresh, not inside a substitution
    st[POINTER] = start
    if where == SEQ:
        if st[DIVERGED + 1] >= 0:
            learn(seq, n, st, start)
        return copy_seq(seq, n, st, start, out, k)
    return _copy(mem, st[MEM_N], start, out, k)


@njit(cache=True, nogil=True)
def follow(seq, mem, st, new, n):
    """Move the pointer over the accepted tokens ``new`` (already appended to seq at n)."""
    src = st[SOURCE]
    if src == NONE or new.shape[0] == 0:
        return
    p, sub, at = st[POINTER], st[EMITTING], st[EMITTING + 1]
    for i in range(new.shape[0]):
        if src == SEQ:
            q, used, p_next, sub, at = walk(seq, n, st, p, sub, at)
            expected = seq[q]  # q is below n + i, the position of the token it stands for
        else:
            q, used, p_next = p, -1, p + 1
            expected = mem[p] if p < st[MEM_N] else -1
        if st[JUST_JUMPED]:  # the first token after a jump: did it land?
            st[JUST_JUMPED] = 0
            st[JUMPS] += 1
            st[LANDED] += expected == new[i]
        if expected == new[i]:
            st[AGREED] += 1
            st[MISSES] = 0
        else:
            if used >= 0:  # a substitution got a token wrong: seen anew before it applies again
                e = LEARNED + used * ENTRY_WORDS + SEEN
                st[e] = 0
                count_applied(st)
            elif src == SEQ and st[MISSES] == 0 and st[AGREED] > 0 and st[DIVERGED + 1] < 0:
                st[DIVERGED], st[DIVERGED + 1] = q, n + i
            st[MISSES] += 1
        p = p_next
    st[EMITTING], st[EMITTING + 1] = sub, at
    if st[MISSES] > RESYNC_MISSES or (src == MEM and (p >= st[MEM_N] or mem[p] < 0)):
        st[SOURCE], st[EMITTING] = NONE, -1  # lost its place, or past that request's end
        if src == SEQ:
            st[HINT] = p
    st[POINTER] = p


@njit(cache=True, nogil=True)
def accept_step(st, new):
    """Append new to the sequence (the caller made room), file its positions, follow them."""
    seq, seq_prev, seq_head, seq_h = positions_at(st, SEQ_INDEX)
    mem, _, _, mem_h = positions_at(st, MEM_INDEX)
    n = seq_h[POSITIONS_N]
    st[MEM_N] = mem_h[POSITIONS_N]
    seq[n : n + new.shape[0]] = new
    file_positions(seq, SIZES, seq_prev, seq_head, n, n + new.shape[0])
    follow(seq, mem, st, new, n)
    st[N] = seq_h[POSITIONS_N] = n + new.shape[0]
