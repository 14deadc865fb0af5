"""The mutable n-gram table behind the context and dynamic caches.

Layout (``docs/layout.md`` walks through an example):

* ``slots``: an open-addressing hash table, int64[capacity, 8], one 64-byte
  row (one cache line) per slot, linear probing, load factor <= 1/2:

  ====  ========  =====================================================
  col   name      meaning
  ====  ========  =====================================================
  0     KEY01     tokens 0 and 1 of the key as two uint32 halves
  1     KEY23     tokens 2 and 3 (padding -1 is 0xFFFFFFFF)
  2     START     first index of the n-gram's part in the pool
  3     LENGTH    number of followers
  4     CAPAC     room reserved for the part in the pool
  5     TOTAL     exact sum of the part's counts
  6     MAXC      largest count in the part
  7     (spare)   keeps each row at 64 bytes
  ====  ========  =====================================================

* ``tags``: uint8[capacity], 0 for an empty slot, else 1..127 taken from
  the key's hash. Probes walk the tags and read a row only when its tag
  matches, so a lookup of an absent n-gram (most 3- and 4-grams) touches a
  few bytes of a small array instead of 64-byte rows of a large one; and
  clearing the table is a memset of the tags.
* ``tok``/``cnt``: the follower pool. A part is one contiguous span, sorted
  by token; counts saturate at 2**31 - 1 (TOTAL sums the stored counts). A
  part that outgrows its room moves to the end of the pool with twice the
  room; the room it leaves is counted as waste and reclaimed when the pool
  itself grows (compaction).
* ``meta``: [n-grams, pool used, entries, pool waste].
* ``marks``: uint64 words, one bit per slot. The bit of slot s is set once
  some n-gram homed at s (the slot its hash points to) may reach
  MARK_SAMPLE samples with MARK_PERCENT of them on its top follower
  (``dominance.may_reach``). Few do (about 3% of a replayed dynamic cache),
  and the bits are an eighth of the tags, small enough to stay cached: a
  clear bit answers "no part homed here can pass a rule at least that
  strict" without touching the table. Bits are never cleared except by
  ``clear`` and rebuilt on growth; a part that drops below again only costs
  a probe. Which rules may use the marks is the rules' business
  (``rulesets/llamacpp/step.py``); the marks only say what they mean.

Its arrays of a page and more are the arena's (``arena.py``): huge pages,
which a cold probe needs. A table travels between kernels as the namedtuple
:data:`Table`; kernels called from Python take it whole (one argument), and
the state kernels of ``rulesets/llamacpp/state.py`` rebuild it from a handle
(``handles.py``).

Every mutation merges a sorted run of (token, count) into one part, so a
cache merge and a bulk load share one routine (``_try_add``); the update of
one decoded token, by far the commonest, takes a one-pass shortcut to the
same state (``_add_one``). The routines the hot loops call are compiled
without numba's runtime (``_nrt=False``): they allocate nothing, and so
never touch the reference counts that passing arrays around otherwise costs
(two atomic operations per array per call). The largest of them are inlined
by numba (``inline="always"``): LLVM declines to, and a call that is not
inlined passes each array as seven scalars on the stack, which cost replay
a fifth of its time. TOTAL and MAXC let the drafter reject most parts
without reading them.
"""

from collections import namedtuple

import numpy as np
from numba import njit

from . import arena
from .dominance import may_reach
from .hashing import key_hash
from .prefetch import prefetch
from .search import find, floor_index

Table = namedtuple("Table", "slots tags tok cnt meta marks")

KEY01, KEY23, START, LENGTH, CAPAC, TOTAL, MAXC = range(7)
ROW = 8
N_NGRAMS, POOL_USED, N_ENTRIES, POOL_WASTE = range(4)
OK, NEED_SLOTS, NEED_POOL = range(3)

# The marks' definition: llama.cpp's strict (dynamic-role) thresholds at
# their least, over every n-gram position, so that they serve that role.
MARK_SAMPLE = 2
MARK_PERCENT = 66
# Counts saturate here, as the static build's do: a count that wrapped would
# turn negative and the file holding it would no longer load.
COUNT_MAX = np.int64(2**31 - 1)
_SEED = np.uint64(0)
_LOW = np.int64(0xFFFFFFFF)
_S57 = np.uint64(57)


def new_table(slots: int = 16, pool: int = 64) -> Table:
    """An empty table; ``slots`` must be a power of two."""
    return Table(
        slots=arena.zeros((slots, ROW), np.int64),
        tags=arena.zeros(slots, np.uint8),
        tok=arena.zeros(pool, np.int32),
        cnt=arena.zeros(pool, np.int32),
        meta=arena.zeros(4, np.int64),
        # Python's own function: loading a kernel to divide costs a process 50 ms.
        marks=arena.zeros(mark_words(slots), np.uint64),
    )


def mark_words(slots):
    """The 64-bit words of the marks of a table of ``slots`` slots."""
    return max(1, slots // 64)


@njit(cache=True, _nrt=False)
def _pack(a, b):
    return (np.int64(a) << 32) | (np.int64(b) & _LOW)


@njit(cache=True, _nrt=False)
def unpack_key(slots, s):
    k01 = slots[s, KEY01]
    k23 = slots[s, KEY23]
    return (np.int32(k01 >> 32), np.int32(k01 & _LOW), np.int32(k23 >> 32), np.int32(k23 & _LOW))


@njit(cache=True, _nrt=False)
def _tag(h):
    return np.uint8(1 + (h >> _S57))


@njit(cache=True, _nrt=False)
def _probe(slots, tags, k01, k23, h):
    """The key's row, or the empty row where it would go."""
    mask = tags.shape[0] - 1
    tag = _tag(h)
    s = np.int64(h & np.uint64(mask))
    while True:
        g = tags[s]
        if g == 0 or (g == tag and slots[s, KEY01] == k01 and slots[s, KEY23] == k23):
            return s
        s = (s + 1) & mask


@njit(cache=True, _nrt=False)
def ngram_hash(key):
    """The hash every table uses for this n-gram key (one per draft step serves all tables)."""
    return key_hash(key[0], key[1], key[2], key[3], _SEED)


@njit(cache=True, _nrt=False)
def lookup(slots, tags, key):
    """Row of the n-gram key (4 ids, padded with -1), or -1 if absent."""
    return lookup_hashed(slots, tags, key, ngram_hash(key))


@njit(cache=True, _nrt=False)
def lookup_hashed(slots, tags, key, h):
    """lookup() of a key whose hash h is known."""
    s = _probe(slots, tags, _pack(key[0], key[1]), _pack(key[2], key[3]), h)
    return s if tags[s] else -1


@njit(cache=True, _nrt=False)
def _home(tags, h):
    return np.int64(h & np.uint64(tags.shape[0] - 1))


@njit(cache=True, _nrt=False)
def _mark(slots, tags, marks, s, h):
    """Set the mark of hash h's home slot if row s (holding h) may reach the marks' shares."""
    if may_reach(slots[s, TOTAL], slots[s, MAXC], MARK_SAMPLE, MARK_PERCENT):
        i = _home(tags, h)
        marks[i >> 6] |= np.uint64(1) << np.uint64(i & 63)


@njit(cache=True, _nrt=False)
def marked(tags, marks, h):
    """False when no n-gram homed where hash h is may reach the marks' shares."""
    i = _home(tags, h)
    return (marks[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) != 0


@njit(cache=True, _nrt=False)
def prefetch_slot(slots, tags, h):
    """Start loading the first slot a probe for hash h reads."""
    s = np.int64(h & np.uint64(tags.shape[0] - 1))
    prefetch(tags, s)
    prefetch(slots, s * ROW)


def _grow_slots(t: Table, capacity: int) -> Table:
    """The table rehashed into ``capacity`` slots (a larger power of two)."""
    rows = arena.zeros((capacity, ROW), np.int64)
    tags = arena.zeros(capacity, np.uint8)
    marks = arena.zeros(mark_words(capacity), np.uint64)
    _rehash(t, rows, tags, marks)
    return Table(rows, tags, t.tok, t.cnt, t.meta, marks)


@njit(cache=True, _nrt=False)
def _rehash(t, rows, tags, marks):
    """File every n-gram of t into the empty slots ``rows``, ``tags``, ``marks``."""
    old = t.slots
    for s in range(old.shape[0]):
        if t.tags[s]:
            h = ngram_hash(unpack_key(old, s))
            d = _probe(rows, tags, old[s, KEY01], old[s, KEY23], h)
            for c in range(ROW):
                rows[d, c] = old[s, c]
            tags[d] = _tag(h)
            _mark(rows, tags, marks, d, h)


def _grow_pool(t: Table, need: int) -> Table:
    """A pool with room for ``need`` more entries, parts compacted in row order."""
    live = int(t.meta[POOL_USED] - t.meta[POOL_WASTE])
    # A power of two: the arena's block for it is then used whole.
    size = 1 << (max(2 * (live + int(need)), 64) - 1).bit_length()
    tok = arena.zeros(size, np.int32)
    cnt = arena.zeros(size, np.int32)
    _compact(t, tok, cnt)
    return Table(t.slots, t.tags, tok, cnt, t.meta, t.marks)


@njit(cache=True, _nrt=False)
def _compact(t, tok, cnt):
    """Copy t's parts into the empty pool ``tok``, ``cnt``, in row order, without waste."""
    used = 0
    for s in range(t.slots.shape[0]):
        if t.tags[s] == 0:
            continue
        a = t.slots[s, START]
        for j in range(t.slots[s, LENGTH]):
            tok[used + j] = t.tok[a + j]
            cnt[used + j] = t.cnt[a + j]
        t.slots[s, START] = used
        used += t.slots[s, CAPAC]
    t.meta[POOL_USED] = used
    t.meta[POOL_WASTE] = 0


@njit(cache=True, _nrt=False)
def _merge_run(t, s, run_tok, run_cnt, lo, n):
    """Merge the sorted run run_tok[lo:lo+n] (counts run_cnt[lo:lo+n]) into row s's part.

    The caller has made room: a part that must move needs at most
    max(2 * CAPAC, LENGTH + n) free pool entries.
    """
    slots, tok, cnt, meta = t.slots, t.tok, t.cnt, t.meta
    a, m = slots[s, START], slots[s, LENGTH]
    mx = slots[s, MAXC]
    new = 0
    for j in range(lo, lo + n):
        i = find(tok, a, m, run_tok[j])
        if i >= 0:
            c = min(np.int64(cnt[i]) + run_cnt[j], COUNT_MAX)
            slots[s, TOTAL] += c - cnt[i]
            cnt[i] = c
            mx = max(mx, c)
        else:
            slots[s, TOTAL] += run_cnt[j]
            new += 1
    if new:
        need = m + new
        if need > slots[s, CAPAC]:
            room = max(2 * slots[s, CAPAC], need)
            used = meta[POOL_USED]
            for i in range(m):
                tok[used + i] = tok[a + i]
                cnt[used + i] = cnt[a + i]
            meta[POOL_WASTE] += slots[s, CAPAC]
            meta[POOL_USED] = used + room
            slots[s, START] = used
            slots[s, CAPAC] = room
            a = used
        # From the back: each new token shifts the block above it once, so the
        # part is rewritten in place in O(m + n) moves.
        i = a + m
        w = a + need
        for j in range(lo + n - 1, lo - 1, -1):
            x = run_tok[j]
            p = a
            if i > a:
                f = floor_index(tok, a, i - a, x)
                if tok[f] == x:
                    continue  # already counted above
                p = f + 1 if tok[f] < x else f
            k = i - p
            for q in range(k - 1, -1, -1):
                tok[w - k + q] = tok[p + q]
                cnt[w - k + q] = cnt[p + q]
            w -= k + 1
            i = p
            tok[w] = x
            cnt[w] = run_cnt[j]
            mx = max(mx, np.int64(cnt[w]))
        slots[s, LENGTH] = need
        meta[N_ENTRIES] += new
    slots[s, MAXC] = mx


@njit(cache=True, _nrt=False, inline="always")
def _add_one(t, s, x):
    """_merge_run of the one-token run (x, count 1), the update of every decoded token.

    Ends in the state the general merge would leave, in one pass: a part that
    must move is copied with the gap for x already open.
    """
    slots, tok, cnt, meta = t.slots, t.tok, t.cnt, t.meta
    a, m = slots[s, START], slots[s, LENGTH]
    p = a
    if m > 0:
        f = floor_index(tok, a, m, x)
        if tok[f] == x:
            if cnt[f] < COUNT_MAX:
                cnt[f] += 1
                slots[s, TOTAL] += 1
                slots[s, MAXC] = max(slots[s, MAXC], np.int64(cnt[f]))
            return
        p = f + 1 if tok[f] < x else f
    slots[s, TOTAL] += 1
    c = slots[s, CAPAC]
    if m + 1 > c:
        b = meta[POOL_USED]
        room = max(2 * c, m + 1)
        for i in range(a, a + m):
            j = b + i - a + (i >= p)
            tok[j] = tok[i]
            cnt[j] = cnt[i]
        meta[POOL_WASTE] += c
        meta[POOL_USED] = b + room
        slots[s, START] = b
        slots[s, CAPAC] = room
        p += b - a
    else:
        for i in range(a + m, p, -1):
            tok[i] = tok[i - 1]
            cnt[i] = cnt[i - 1]
    tok[p] = x
    cnt[p] = 1
    slots[s, LENGTH] = m + 1
    slots[s, MAXC] = max(slots[s, MAXC], np.int64(1))
    meta[N_ENTRIES] += 1


@njit(cache=True, _nrt=False, inline="always")
def _slot_for(t, key, n):
    """(OK, row, hash) of an n-gram about to get n more followers, created if
    new, or (what must grow first, -1, hash).
    """
    slots, tags, meta = t.slots, t.tags, t.meta
    h = ngram_hash(key)
    if (meta[N_NGRAMS] + 1) * 2 > slots.shape[0]:
        return NEED_SLOTS, -1, h
    k01 = _pack(key[0], key[1])
    k23 = _pack(key[2], key[3])
    s = _probe(slots, tags, k01, k23, h)
    fresh = tags[s] == 0
    m = 0 if fresh else slots[s, LENGTH]
    c = 0 if fresh else slots[s, CAPAC]
    if m + n > c and meta[POOL_USED] + max(2 * c, m + n) > t.tok.shape[0]:
        return NEED_POOL, -1, h
    if fresh:
        tags[s] = _tag(h)
        slots[s, KEY01] = k01
        slots[s, KEY23] = k23
        for col in range(START, ROW):
            slots[s, col] = 0
        meta[N_NGRAMS] += 1
    return OK, s, h


@njit(cache=True, _nrt=False, inline="always")
def _try_add(t, key, run_tok, run_cnt, lo, n):
    """Add the sorted run run_tok/run_cnt[lo:lo+n] to an n-gram: OK, or what must grow first."""
    status, s, h = _slot_for(t, key, n)
    if status == OK:
        _merge_run(t, s, run_tok, run_cnt, lo, n)
        _mark(t.slots, t.tags, t.marks, s, h)
    return status


@njit(cache=True, _nrt=False, inline="always")
def _try_add_one(t, seq, i, size):
    """Count seq[i] as a follower of the n-gram of this size before it: OK, or what must grow."""
    status, s, h = _slot_for(t, ngram_at(seq, i, size), 1)
    if status == OK:
        _add_one(t, s, seq[i])
        _mark(t.slots, t.tags, t.marks, s, h)
    return status


def grow(t: Table, status: int, n: int = 1) -> Table:
    """The table with room for what ``status`` asked for (and ``n`` more pool entries)."""
    if status == NEED_SLOTS:
        return _grow_slots(t, 2 * t.slots.shape[0])
    return _grow_pool(t, n + 2 * t.tok.shape[0] // 8)


def reserve(t: Table, n_ngrams: int, n_entries: int) -> Table:
    """t grown once for n_ngrams more n-grams and n_entries more followers.

    A merge or load knows its size: one rehash and one pool copy instead of
    a doubling at a time. Only a hint: what still does not fit grows later.
    """
    need = 2 * (int(t.meta[N_NGRAMS]) + int(n_ngrams))
    if need > t.slots.shape[0]:
        t = _grow_slots(t, 1 << (need - 1).bit_length())
    if t.meta[POOL_USED] + n_entries > t.tok.shape[0]:
        t = _grow_pool(t, int(n_entries))
    return t


@njit(cache=True, _nrt=False)
def ngram_at(seq, end, size):
    """The 4-slot key of seq[end-size:end], padded with -1."""
    k0 = seq[end - size]
    k1 = seq[end - size + 1] if size > 1 else np.int32(-1)
    k2 = seq[end - size + 2] if size > 2 else np.int32(-1)
    k3 = seq[end - size + 3] if size > 3 else np.int32(-1)
    return k0, k1, k2, k3


@njit(cache=True, _nrt=False, inline="always")
def update_from(t, seq, length, nnew, sizes, resume):
    """llama.cpp's common_ngram_cache_update over seq[:length], without growing the table.

    Counts, for each n-gram size in ``sizes`` (min, max), the last ``nnew``
    tokens as followers, sizes as the outer loop as upstream. The call stops
    before an insert that does not fit and returns ``position << 2 |
    status`` (position counts the (size, i) inserts done, status says what
    must grow); -1 when everything was added. Called again with ``resume =
    position`` after growing, it goes on where it stopped: an insert either
    happens whole or not at all.
    """
    position = 0
    for size in range(sizes[0], sizes[1] + 1):
        for i in range(max(length - nnew, size), length):
            if position >= resume:
                status = _try_add_one(t, seq, i, size)
                if status != OK:
                    return (position << 2) | status
            position += 1
    return -1


@njit(cache=True, _nrt=False)
def _update_kernel(t, seq, length, nnew, sizes, resume):
    return update_from(t, seq, length, nnew, sizes, resume)


def update(t: Table, seq: np.ndarray, length: int, nnew: int, sizes: tuple[int, int]) -> Table:
    """update_from, growing the table as needed; returns the table."""
    return _growing(t, _update_kernel, (seq, length, nnew, sizes))


def _growing(t, kernel, args, part_length=None):
    """Call kernel(t, *args, resume) until it returns -1, growing t as it asks.

    The kernel returns ``position << 2 | status`` when the part at
    ``position`` did not fit; part_length(position) is that part's length
    (None: one token). A Python loop on purpose: numba boxes a returned Table
    slowly, and a table grows O(log n) times.
    """
    resume = 0
    while True:
        done = kernel(t, *args, resume)
        if done < 0:
            return t
        resume = done >> 2
        t = grow(t, done & 3, 1 if part_length is None else part_length(resume))


@njit(cache=True, _nrt=False, inline="always")
def append_token(t, seq, length):
    """update_from(seq, length, nnew=1, sizes 1..4) without growing the table.

    Returns OK, or what must grow (the table may then hold part of the token).
    Replay's chunks are sized never to need growth and redo a chunk that does.
    """
    i = length - 1
    for size in range(1, 5):
        if i >= size:
            status = _try_add_one(t, seq, i, size)
            if status != OK:
                return status
    return OK


@njit(cache=True, _nrt=False)
def rewind(t, seq, length, n):
    """Undo the update of seq[length-n:length] (every size): counts go down, empty parts go.

    The exact inverse of counting those tokens, in O(n) probes plus the
    length of each part touched. Returns the number of counts that were not
    there to remove (0 unless the table and seq disagree).
    """
    missing = 0
    for size in range(1, 5):
        for i in range(max(length - n, size), length):
            if not _remove_one(t, ngram_at(seq, i, size), seq[i]):
                missing += 1
    return missing


@njit(cache=True, _nrt=False)
def _remove_one(t, key, x):
    """Take one count of follower x from the n-gram; False if there was none.

    A part with fewer samples can reach shares it did not before (2 of 3 is
    66%, 2 of 4 is not), so the mark is set again as after an insert.
    """
    slots, tags, tok, cnt, meta = t.slots, t.tags, t.tok, t.cnt, t.meta
    h = ngram_hash(key)
    s = _probe(slots, tags, _pack(key[0], key[1]), _pack(key[2], key[3]), h)
    if tags[s] == 0:
        return False
    a, m = slots[s, START], slots[s, LENGTH]
    f = find(tok, a, m, x)
    if f < 0:
        return False
    old = np.int64(cnt[f])
    slots[s, TOTAL] -= 1
    if old > 1:
        cnt[f] = old - 1
    else:
        for i in range(f, a + m - 1):
            tok[i] = tok[i + 1]
            cnt[i] = cnt[i + 1]
        slots[s, LENGTH] = m - 1
        meta[N_ENTRIES] -= 1
        if m == 1:  # the n-gram has no follower left: it leaves the table
            meta[POOL_WASTE] += slots[s, CAPAC]
            meta[N_NGRAMS] -= 1
            _delete_row(slots, tags, s)
            return True
    if old == slots[s, MAXC]:
        mx = np.int64(0)
        for i in range(a, a + slots[s, LENGTH]):
            mx = max(mx, np.int64(cnt[i]))
        slots[s, MAXC] = mx
    _mark(slots, tags, t.marks, s, h)
    return True


@njit(cache=True, _nrt=False)
def _delete_row(slots, tags, s):
    """Empty row s, shifting later rows of its probe run back (linear probing's deletion).

    No tombstones: every row stays reachable from its home slot with no empty
    row in between, which is what _probe relies on. Rows keep their hashes,
    so their homes' marks stay right.
    """
    mask = tags.shape[0] - 1
    hole = s
    j = s
    while True:
        j = (j + 1) & mask
        if tags[j] == 0:
            break
        home = _home(tags, ngram_hash(unpack_key(slots, j)))
        # Row j may fill the hole unless its home lies cyclically in (hole, j].
        if (home - hole - 1) & mask < (j - hole) & mask:
            continue
        for col in range(ROW):
            slots[hole, col] = slots[j, col]
        tags[hole] = tags[j]
        hole = j
    tags[hole] = 0
    for col in range(ROW):
        slots[hole, col] = 0


# How far ahead of its adds a merge requests what they read, in source n-grams.
# Each add starts at a random row of a table larger than the CPU's caches and
# waits for it: requested ROWS_AHEAD adds early, the row (its tag and slots)
# arrives while the adds in between run. PARTS_AHEAD adds early the row is
# there to say where the n-gram's followers are, and they are requested in
# turn. A merge into a long-lived dynamic cache (`ab.py`'s ``finish`` probe)
# takes 0.7-0.8 of the time it took without.
ROWS_AHEAD = 16
PARTS_AHEAD = 8


@njit(cache=True, _nrt=False, inline="always")
def _next_filled(tags, s):
    """The first row from s on that holds an n-gram, or tags.shape[0]."""
    while s < tags.shape[0] and tags[s] == 0:
        s += 1
    return s


@njit(cache=True, _nrt=False, inline="always")
def _request_row(t, src, s):
    """Request the row of t that adding src's row s first reads; the next row after s."""
    if s == src.tags.shape[0]:
        return s
    prefetch_slot(t.slots, t.tags, ngram_hash(unpack_key(src.slots, s)))
    return _next_filled(src.tags, s + 1)


@njit(cache=True, _nrt=False, inline="always")
def _request_part(t, src, s):
    """Request the followers and the mark that adding src's row s reads, where t holds its
    n-gram (its row, requested earlier, says where); the next row after s."""
    if s == src.tags.shape[0]:
        return s
    key = unpack_key(src.slots, s)
    h = ngram_hash(key)
    row = _probe(t.slots, t.tags, _pack(key[0], key[1]), _pack(key[2], key[3]), h)
    if t.tags[row]:
        prefetch(t.tok, t.slots[row, START])
        prefetch(t.cnt, t.slots[row, START])
    prefetch(t.marks, _home(t.tags, h) >> 6)
    return _next_filled(src.tags, s + 1)


@njit(cache=True, _nrt=False)
def _merge_kernel(t, src, resume):
    """Add the parts of src's rows resume.. into t, without growing it.

    Returns -1 when every part was added, else ``row << 2 | status`` for the
    first source row whose part did not fit (see update_from).
    """
    s = rows_at = parts_at = _next_filled(src.tags, resume)
    for _ in range(ROWS_AHEAD):
        rows_at = _request_row(t, src, rows_at)
    for _ in range(PARTS_AHEAD):
        parts_at = _request_part(t, src, parts_at)
    while s < src.tags.shape[0]:
        rows_at = _request_row(t, src, rows_at)
        parts_at = _request_part(t, src, parts_at)
        a, m = src.slots[s, START], src.slots[s, LENGTH]
        status = _try_add(t, unpack_key(src.slots, s), src.tok, src.cnt, a, m)
        if status != OK:
            return (s << 2) | status
        s = _next_filled(src.tags, s + 1)
    return -1


def merge(t: Table, src: Table) -> Table:
    """Add every (n-gram, token, count) of src into t; returns t (grown as needed)."""
    if src.slots is t.slots:
        # Growing t would move the parts src is being read from.
        src = Table(*(a.copy() for a in src))
    t = reserve(t, src.meta[N_NGRAMS], src.meta[N_ENTRIES])
    return _growing(t, _merge_kernel, (src,), lambda row: src.slots[row, LENGTH])


@njit(cache=True, _nrt=False, inline="always")
def _key_of(keys, i):
    """Row i of keys[K, 2..4] as a 4-slot key, padded with -1."""
    width = keys.shape[1]
    k2 = keys[i, 2] if width > 2 else np.int32(-1)
    k3 = keys[i, 3] if width > 3 else np.int32(-1)
    return keys[i, 0], keys[i, 1], k2, k3


@njit(cache=True, _nrt=False)
def _load_kernel(t, keys, offsets, tokens, counts, resume):
    """Add keys[resume:] (keys[i] owns tokens/counts[offsets[i]:offsets[i+1]]), without growing.

    Returns -1 or ``i << 2 | status`` (see update_from).
    """
    for i in range(resume, min(resume + ROWS_AHEAD, keys.shape[0])):
        prefetch_slot(t.slots, t.tags, ngram_hash(_key_of(keys, i)))
    for i in range(resume, keys.shape[0]):
        if i + ROWS_AHEAD < keys.shape[0]:  # as a merge does: the row is read later
            prefetch_slot(t.slots, t.tags, ngram_hash(_key_of(keys, i + ROWS_AHEAD)))
        key = _key_of(keys, i)
        a, m = offsets[i], offsets[i + 1] - offsets[i]
        status = _try_add(t, key, tokens, counts, a, m)
        if status != OK:
            return (i << 2) | status
    return -1


def load_sorted(
    t: Table, keys: np.ndarray, offsets: np.ndarray, tokens: np.ndarray, counts: np.ndarray
) -> Table:
    """Add the n-grams of flat arrays (keys[i] owns tokens/counts[offsets[i]:offsets[i+1]])."""
    t = reserve(t, len(keys), len(tokens))
    return _growing(
        t, _load_kernel, (keys, offsets, tokens, counts), lambda i: offsets[i + 1] - offsets[i]
    )


@njit(cache=True)
def clear(t):
    t.tags[:] = 0
    t.meta[:] = 0
    t.marks[:] = 0


@njit(cache=True)
def export(t):
    """keys[K, 4] and the rows holding them, in row order."""
    rows = np.empty(t.meta[N_NGRAMS], dtype=np.int64)
    keys = np.empty((t.meta[N_NGRAMS], 4), dtype=np.int32)
    j = 0
    for s in range(t.slots.shape[0]):
        if t.tags[s]:
            rows[j] = s
            keys[j, 0], keys[j, 1], keys[j, 2], keys[j, 3] = unpack_key(t.slots, s)
            j += 1
    return keys, rows


@njit(cache=True)
def gather(t, rows):
    """Flat offsets/tokens/counts of the given rows' parts, in that order."""
    offsets = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    for j in range(rows.shape[0]):
        offsets[j + 1] = offsets[j] + t.slots[rows[j], LENGTH]
    tok = np.empty(offsets[-1], dtype=np.int32)
    cnt = np.empty(offsets[-1], dtype=np.int32)
    for j in range(rows.shape[0]):
        a = t.slots[rows[j], START]
        m = t.slots[rows[j], LENGTH]
        tok[offsets[j] : offsets[j + 1]] = t.tok[a : a + m]
        cnt[offsets[j] : offsets[j + 1]] = t.cnt[a : a + m]
    return offsets, tok, cnt


@njit(cache=True)
def check(t):
    """The first row that breaks an invariant, or -1 (see NgramCache.verify)."""
    used = t.slots.shape[0]  # reported when a table-wide count is wrong
    spans = np.empty((t.meta[N_NGRAMS], 2), dtype=np.int64)
    n = 0
    entries = 0
    for s in range(t.slots.shape[0]):
        row = t.slots[s]
        if t.tags[s] == 0:
            continue
        key = unpack_key(t.slots, s)
        h = ngram_hash(key)
        if (
            key[0] < 0
            or t.tags[s] != _tag(h)
            or _probe(t.slots, t.tags, row[KEY01], row[KEY23], h) != s
        ):
            return s
        a, m = row[START], row[LENGTH]
        if m < 1 or m > row[CAPAC] or a < 0 or a + row[CAPAC] > t.meta[POOL_USED]:
            return s
        total = np.int64(0)
        mx = np.int64(0)
        for i in range(a, a + m):
            if t.cnt[i] < 1 or t.tok[i] < 0 or (i > a and t.tok[i] <= t.tok[i - 1]):
                return s
            total += t.cnt[i]
            mx = max(mx, np.int64(t.cnt[i]))
        if total != row[TOTAL] or mx != row[MAXC] or n >= spans.shape[0]:
            return s
        reaches = may_reach(row[TOTAL], row[MAXC], MARK_SAMPLE, MARK_PERCENT)
        if reaches and not marked(t.tags, t.marks, h):
            return s
        spans[n, 0] = a
        spans[n, 1] = a + row[CAPAC]
        n += 1
        entries += m
    if n != t.meta[N_NGRAMS] or entries != t.meta[N_ENTRIES]:
        return used
    order = np.argsort(spans[:n, 0])
    for j in range(1, n):
        if spans[order[j], 0] < spans[order[j - 1], 1]:
            return used
    return -1
