"""A plain-Python reference of llama.cpp's n-gram cache, written from docs/rules.md.

Dicts and lists only, no numpy and no numba: it exists to be obviously right.
The property tests compare the numba kernels with it, and the benchmarks use
it as the baseline that the speed-ups are measured against. A cache is a dict
``ngram (4-tuple padded with -1) -> {token: count}``; followers are visited in
ascending token order, as in the recorded parity drafts.
"""

NGRAM_MIN, NGRAM_MAX, NGRAM_STATIC = 1, 4, 2
LAX = ((2, 2, 1, 1), (66, 50, 50, 50))
STRICT = ((4, 3, 2, 2), (75, 66, 66, 66))


def wrap32(x):
    """x as a C++ int32 would hold it (two's complement wrap-around)."""
    return (x + 2**31) % 2**32 - 2**31


def key(tokens, start, size):
    return tuple(tokens[start : start + size]) + (-1,) * (NGRAM_MAX - size)


def update(cache, nmin, nmax, tokens, nnew):
    for size in range(nmin, nmax + 1):
        for i in range(max(len(tokens) - nnew, size), len(tokens)):
            part = cache.setdefault(key(tokens, i - size, size), {})
            part[tokens[i]] = wrap32(part.get(tokens[i], 0) + 1)


def merge(target, add):
    for ngram, part in add.items():
        into = target.setdefault(ngram, {})
        for tok, count in part.items():
            into[tok] = wrap32(into.get(tok, 0) + count)


def _try_primary(cache, ngrams, static_part, thresholds):
    min_sample, min_percent = thresholds
    for i in range(len(ngrams) - 1, -1, -1):
        part = cache.get(ngrams[i]) if ngrams[i] is not None else None
        if part is None:
            continue
        best, max_cp, max_cs, acc = -1, 0, 0, 0
        for tok in sorted(part):
            count = part[tok]
            s = static_part.get(tok, 0)
            weight = wrap32(100 * s) if s > 0 else 1
            if wrap32(count * weight) > wrap32(max_cp * max_cs):
                best, max_cp, max_cs = tok, count, weight
            acc = wrap32(acc + count)
        if acc < min_sample[i] or wrap32(100 * max_cp) < wrap32(min_percent[i] * acc):
            continue
        return best
    return -1


def _try_static(static_part):
    best, mx, acc = -1, 0, 0
    for tok in sorted(static_part):
        if static_part[tok] > mx:
            best, mx = tok, static_part[tok]
        acc = wrap32(acc + static_part[tok])
    min_sample, min_percent = LAX[0][NGRAM_STATIC - 1], LAX[1][NGRAM_STATIC - 1]
    if acc < min_sample or wrap32(100 * mx) < wrap32(min_percent * acc):
        return -1
    return best


def draft(inp, n_draft, nmin, nmax, context, dynamic, static):
    """The drafted tokens after the sequence ``inp`` (a list)."""
    if len(inp) < NGRAM_STATIC:
        return []
    seq = list(inp[-NGRAM_MAX:])
    offset = len(inp) - len(seq)  # seq[j] is inp[offset + j]
    drafted = []
    while len(drafted) < n_draft:
        static_part = static.get(key(seq, len(seq) - 2, 2), {})
        ngrams = []
        for size in range(nmin, nmax + 1):
            start = len(seq) - size
            # An n-gram that would start before the sequence is absent.
            ngrams.append(key(seq, start, size) if offset + start >= 0 else None)
        tok = _try_primary(context, ngrams, static_part, LAX)
        if tok < 0:
            tok = _try_primary(dynamic, ngrams, static_part, STRICT)
        if tok < 0:
            tok = _try_static(static_part)
        if tok < 0:
            break
        drafted.append(tok)
        seq.append(tok)
    return drafted


def static_cache(corpus):
    """The static cache of a corpus: its 2-grams only."""
    cache = {}
    update(cache, NGRAM_STATIC, NGRAM_STATIC, list(corpus), len(corpus))
    return cache


def replay(tokens, n_ctx, n_draft, static=None, dynamic=None):
    """lookup-stats: returns (n_calls, n_drafted, n_accept, dump words)."""
    tokens = list(tokens)
    static = static if static is not None else {}
    dynamic = dynamic if dynamic is not None else {}
    n_calls = n_drafted = n_accept = 0
    dump = []
    start = 0
    while start + n_ctx < len(tokens):
        chunk = tokens[start : start + n_ctx]
        context = {}
        out = [chunk[0]]
        while len(out) < n_ctx:
            drafted = draft(out, n_draft, NGRAM_MIN, NGRAM_MAX, context, dynamic, static)
            n_calls += 1
            n_drafted += len(drafted)
            dump += [start, len(out), len(drafted), *drafted]
            for tok in drafted:
                if len(out) == n_ctx or tok != chunk[len(out)]:
                    break
                n_accept += 1
                out.append(tok)
                update(context, NGRAM_MIN, NGRAM_MAX, out, 1)
            if len(out) < n_ctx:
                out.append(chunk[len(out)])
                update(context, NGRAM_MIN, NGRAM_MAX, out, 1)
        merge(dynamic, context)
        start += n_ctx
    return n_calls, n_drafted, n_accept, dump
