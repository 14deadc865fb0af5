"""The suffix rules restated from docs/suffix.md in plain Python, by brute force.

No hashing, no chains: every earlier position is tried. The kernels must
draft exactly this wherever their chains hold every occurrence (fewer than
MAX_CHAIN per n-gram size, which the tests' streams ensure).
"""

from ngramdraft.caches.positions import MAX_MATCH
from ngramdraft.rulesets.suffix.state import SUBSTITUTIONS
from ngramdraft.rulesets.suffix.step import (
    GATED_MATCH,
    MIN_MATCH_DEFAULT,
    OVERRIDE_MATCH,
    PROVEN,
    RELIABLE,
    RESYNC_MISSES,
    WINDOW,
)
from ngramdraft.rulesets.suffix.substitutions import RECUR, SPAN


def longest(text, limit, pattern, near):
    """(end, length): the longest match of pattern's suffix ending before limit (>= 2 tokens).

    Ties: the end whose continuation is nearest ``near`` (>= 0), else the latest.
    """
    best, best_len, best_gap = -1, 0, None
    for j in range(limit - 1, -1, -1):
        n = 0
        while n < MAX_MATCH and n <= j and n < len(pattern) and text[j - n] == pattern[-1 - n]:
            n += 1
        if n < 2:
            continue
        gap = abs(j + 1 - near) if near >= 0 else 0
        if n > best_len or (n == best_len and gap < best_gap):
            best, best_len, best_gap = j, n, gap
    return best, best_len


def near_match(text, limit, pattern, center):
    """The longest match of pattern's suffix ending within WINDOW of center, nearest first."""
    best, best_len = -1, 0
    for step in range(2 * WINDOW + 1):
        j = center + (step + 1) // 2 if step % 2 else center - step // 2
        if not 0 <= j < limit:
            continue
        n = 0
        while n < MAX_MATCH and n <= j and n < len(pattern) and text[j - n] == pattern[-1 - n]:
            n += 1
        if n > best_len:
            best, best_len = j, n
    return best, best_len


class Reference:
    """One sequence, drafted by the suffix rules; ``memory`` is the earlier requests' tokens."""

    def __init__(self, n_draft, min_match=MIN_MATCH_DEFAULT, memory=()):
        self.k, self.min_match, self.mem = n_draft, min_match, list(memory)
        self.seq = []
        self.src = None  # "seq" or "mem"
        self.pointer = self.agreed = self.misses = self.jumps = self.landed = self.hint = 0
        self.fresh = False
        self.restart()

    def restart(self):
        self.div = None  # (source position, sequence position) where a copy diverged
        self.emitting = None  # (entry, tokens of its new span written)
        self.table = [[0, 0, 0, 0, 0] for _ in range(SUBSTITUTIONS)]  # OLD_AT .. SEEN

    def text(self, src):
        return self.seq if src == "seq" else self.mem

    def start(self, prompt):
        """A new sequence; the record of jumps is the drafter's and carries over."""
        self.seq, self.src, self.hint = list(prompt), None, 0
        self.restart()

    def draft(self):
        n, src = len(self.seq), self.src
        near = {"seq": self.pointer, None: self.hint}.get(self.src, -1)
        j, length = longest(self.seq, n - 1, self.seq, near)
        jm, lm = longest(
            self.mem, len(self.mem) - 1, self.seq, self.pointer if self.src == "mem" else -1
        )
        where = None
        if lm > length:
            j, length, where = jm, lm, "mem"
        elif length > 0:
            where = "seq"
        jumpable = where is not None and length >= self.min_match
        proven = self.agreed >= PROVEN or (self.agreed > 0 and not jumpable)
        if (
            self.src is not None
            and proven
            and self.misses <= RESYNC_MISSES
            and length < OVERRIDE_MATCH
        ):
            text = self.text(self.src)
            limit = n - 1 if self.src == "seq" else len(self.mem) - 1
            e, m = near_match(text, limit, self.seq, self.pointer - 1)
            where, start = self.src, (e + 1 if m > 0 else self.pointer)
        elif jumpable:
            start = j + 1
            if where != self.src or start != self.pointer:
                if length < GATED_MATCH and self.landed + 1 < RELIABLE * (self.jumps + 2):
                    return []
                self.src, self.agreed, self.misses, self.fresh = where, 0, 0, True
        else:
            return []
        if start != self.pointer or where != src:
            self.emitting = None
        self.pointer = start
        out = []
        if where == "mem":
            for p in range(start, min(start + self.k, len(self.mem))):
                if self.mem[p] < 0:
                    break
                out.append(self.mem[p])
            return out
        if self.div is not None:
            self.learn(start)
        p, emitting = start, self.emitting
        while len(out) < self.k:
            q, _, p, emitting = self.walk(n, p, emitting)
            if q < n:
                out.append(self.seq[q])
            elif q - n < len(out):
                out.append(out[q - n])
            else:
                break
        return out

    def walk(self, n, p, emitting):
        """One token of a copy from the sequence at p: (its position, the entry it came
        from or None, then p and emitting after it)."""
        if emitting is None:
            for e, (old_at, old_len, _, new_len, seen) in enumerate(self.table):
                old = self.seq[old_at : old_at + old_len]
                if seen >= RECUR and p + old_len < n and self.seq[p : p + old_len] == old:
                    p += old_len
                    emitting = (e, 0) if new_len else None
                    break
        if emitting is None:
            return p, None, p + 1, None
        e, at = emitting
        new_at, new_len = self.table[e][2], self.table[e][3]
        return new_at + at, e, p, (None if at + 1 == new_len else (e, at + 1))

    def learn(self, start):
        (p0, o0), n = self.div, len(self.seq)
        if n - o0 > SPAN + self.k + 1:
            self.div = None
            return
        back, seq = 0, self.seq
        while back < n - o0 and back < start and seq[start - 1 - back] == seq[n - 1 - back]:
            back += 1
        if back == 0:
            if n - o0 > SPAN:
                self.div = None
            return
        self.div = None
        old_len, new_len = start - back - p0, n - back - o0
        if not (1 <= old_len <= SPAN and 0 <= new_len <= SPAN):
            return
        old, new = self.seq[p0 : p0 + old_len], self.seq[o0 : o0 + new_len]
        for entry in self.table:
            a, m, b, k, _ = entry
            if (m, k) == (old_len, new_len) and (seq[a : a + m], seq[b : b + k]) == (old, new):
                entry[4] += 1
                return
        slot = min(range(SUBSTITUTIONS), key=lambda e: (self.table[e][4], self.table[e][2]))
        if self.emitting is not None and self.emitting[0] == slot:
            self.emitting = None
        self.table[slot] = [p0, old_len, o0, new_len, 1]

    def at(self, p):
        text = self.text(self.src)
        return text[p] if p < len(text) else -1

    def accept(self, tokens):
        n = len(self.seq)
        self.seq.extend(tokens)
        if self.src is None or not tokens:
            return
        p, emitting = self.pointer, self.emitting
        for i, t in enumerate(tokens):
            if self.src == "seq":
                q, used, after, emitting = self.walk(n, p, emitting)
                expected = self.seq[q]
            else:
                q, used, after, expected = p, None, p + 1, self.at(p)
            if self.fresh:
                self.fresh = False
                self.jumps += 1
                self.landed += expected == t
            if expected == t:
                self.agreed, self.misses = self.agreed + 1, 0
            else:
                if used is not None:
                    self.table[used][4] = 0
                elif self.src == "seq" and not self.misses and self.agreed and self.div is None:
                    self.div = (q, n + i)
                self.misses += 1
            p = after
        self.emitting = emitting
        if self.misses > RESYNC_MISSES or self.at(p) < 0:
            if self.src == "seq":
                self.hint = p
            self.src, self.emitting = None, None
        self.pointer = p


def suffix_key(tokens, i, depth):
    """What orders the suffix at i in a suffix file: its first tokens, cut at a separator."""
    head = []
    for d in range(depth):
        t = int(tokens[i + d]) if i + d < len(tokens) else -1
        head.append(t)
        if t < 0:
            break
    return head, i


def corpus_draft(tokens, pattern, k, min_match, min_count, min_share, depth):
    """The corpus's draft for pattern by brute force: every position of the corpus is tried."""
    n = len(tokens)

    def occurrences(p):
        m = len(p)
        return [i for i in range(n - m + 1) if list(tokens[i : i + m]) == list(p)]

    length = 0
    for m in range(1, min(depth, len(pattern)) + 1):
        if occurrences(pattern[len(pattern) - m :]):
            length = m
        else:
            break
    if length < min_match:
        return []
    path = list(pattern[len(pattern) - length :])
    draft = []
    while len(draft) < k and len(path) < depth:
        at = occurrences(path)
        follow = {}
        for i in at:
            t = int(tokens[i + len(path)]) if i + len(path) < n else -1
            follow[t] = follow.get(t, 0) + 1
        # The first (smallest) of the commonest, as the sorted suffixes meet them.
        ranked = sorted(follow.items(), key=lambda item: (-item[1], item[0]))
        best, count = next(((t, c) for t, c in ranked if t >= 0), (-1, 0))
        if best < 0 or count < min_count or count * 100 < min_share * len(at):
            break
        draft.append(best)
        path.append(best)
    return draft
