"""The suffix rules restated from docs/suffix.md in plain Python, by brute force.

No hashing, no chains: every earlier position is tried. The kernels must
draft exactly this wherever their chains hold every occurrence (fewer than
MAX_CHAIN per n-gram size, which the tests' streams ensure).
"""

from ngramdraft.caches.positions import MAX_MATCH
from ngramdraft.rules import suffix as R


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
    for step in range(2 * R.WINDOW + 1):
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

    def __init__(self, n_draft, min_match=R.MIN_MATCH_DEFAULT, memory=()):
        self.k, self.min_match, self.mem = n_draft, min_match, list(memory)
        self.seq = []
        self.src = None  # "seq" or "mem"
        self.pointer = self.agreed = self.misses = self.jumps = self.landed = self.hint = 0
        self.fresh = False

    def text(self, src):
        return self.seq if src == "seq" else self.mem

    def start(self, prompt):
        """A new sequence; the record of jumps is the drafter's and carries over."""
        self.seq, self.src, self.hint = list(prompt), None, 0

    def draft(self):
        n = len(self.seq)
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
        proven = self.agreed >= R.PROVEN or (self.agreed > 0 and not jumpable)
        if self.src is not None and proven and self.misses <= R.RESYNC_MISSES and length < R.TRUST:
            text = self.text(self.src)
            limit = n - 1 if self.src == "seq" else len(self.mem) - 1
            e, m = near_match(text, limit, self.seq, self.pointer - 1)
            where, start = self.src, (e + 1 if m > 0 else self.pointer)
        elif jumpable:
            start = j + 1
            if where != self.src or start != self.pointer:
                if length < R.LONG and self.landed + 1 < R.RELIABLE * (self.jumps + 2):
                    return []
                self.src, self.agreed, self.misses, self.fresh = where, 0, 0, True
        else:
            return []
        self.pointer = start
        out = []
        for d in range(self.k):
            p = start + d
            if where == "seq":
                t = self.seq[p] if p < n else out[p - n]
            else:
                t = self.mem[p] if p < len(self.mem) else -1
            if t < 0:
                break
            out.append(t)
        return out

    def at(self, p):
        text = self.text(self.src)
        return text[p] if p < len(text) else -1

    def accept(self, tokens):
        self.seq.extend(tokens)
        if self.src is None or not tokens:
            return
        p = self.pointer
        if self.fresh:
            self.fresh = False
            self.jumps += 1
            self.landed += self.at(p) == tokens[0]
        for t in tokens:
            if self.at(p) == t:
                self.agreed, self.misses = self.agreed + 1, 0
            else:
                self.misses += 1
            p += 1
        if self.misses > R.RESYNC_MISSES or self.at(p) < 0:
            if self.src == "seq":
                self.hint = p
            self.src = None
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
