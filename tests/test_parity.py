"""Parity with the drafts recorded from llama.cpp's reference C++ (../shared/parity)."""

import numpy as np
import pytest

from conftest import needs_shared
from ngramdraft import NgramCache

pytestmark = [needs_shared, pytest.mark.slow]

REPLAYS = {
    "P1": ("test-200k.llama3.i32", None, 4096, 8),
    "P2": ("test-200k.llama3.i32", "static", 4096, 8),
    "P3": ("test-20k.llama3.i32", None, 512, 4),
}


def _replay(cli, parity_dir, static25, tmp_path, name, static=None):
    tokens, needs_static, n_ctx, n_draft = REPLAYS[name]
    dump = tmp_path / f"{name}.dump"
    args = [parity_dir / tokens, "--n-ctx", n_ctx, "--n-draft", n_draft, "--dump", dump, "--json"]
    if needs_static:
        args += ["--static", static or static25.path]
    status, out, err = cli("replay", *args)
    assert status == 0, err
    import json

    return json.loads(out), dump.read_bytes()


@pytest.mark.parametrize("name", sorted(REPLAYS))
def test_dump_equals_ordered_recording(cli, parity_dir, static25, summary, tmp_path, name):
    result, dump = _replay(cli, parity_dir, static25, tmp_path, name)
    assert dump == (parity_dir / f"{name}.ordered.dump").read_bytes()
    for key in ("n_calls", "n_drafted", "n_accept", "n_predict"):
        assert result[key] == summary[name]["ordered"][key], key


def test_llamacpp_static_file_drafts_like_native(cli, parity_dir, static25, tmp_path):
    _, dump = _replay(
        cli, parity_dir, static25, tmp_path, "P2", static=parity_dir / "llamacpp-static-25M.bin"
    )
    assert dump == (parity_dir / "P2.ordered.dump").read_bytes()


def _calls(path):
    """{(chunk_start, position): drafted tokens} of a dump file."""
    words = np.fromfile(path, dtype="<i4")
    calls, i = {}, 0
    while i < len(words):
        chunk, pos, n = words[i : i + 3]
        calls[(int(chunk), int(pos))] = words[i + 3 : i + 3 + n].tolist()
        i += 3 + n
    return calls


def _score(part, static_part, tok):
    s = static_part.get(tok, 0)
    return part[tok] * (100 * s if s > 0 else 1)


@pytest.mark.parametrize("name", sorted(REPLAYS))
def test_upstream_differs_only_at_ties(parity_dir, static25, name):
    """Where llama.cpp's hash-order drafts differ from ours, two followers tied.

    For every (chunk_start, position) drafted in both recordings, the drafts
    agree up to a first differing token (or one stops early); there, a part
    that drafting consulted has two followers with an equal top score.
    """
    import reference as R

    tokens_file, needs_static, n_ctx, _ = REPLAYS[name]
    ours = _calls(parity_dir / f"{name}.ordered.dump")
    theirs = _calls(parity_dir / f"{name}.upstream.dump")
    tokens = np.fromfile(parity_dir / tokens_file, "<i4").tolist()
    static = {}
    if needs_static:
        for ngram, toks, counts in static25:
            static[(*ngram, -1, -1)] = dict(zip(toks.tolist(), counts.tolist(), strict=True))
    # Rebuild, per chunk, the reference caches at each call to check the tie.
    differing = {k for k in ours.keys() & theirs.keys() if ours[k] != theirs[k]}
    assert differing, "the recordings are expected to contain ties"
    checked = 0
    dynamic = {}
    for start in range(0, len(tokens) - n_ctx, n_ctx):
        chunk = tokens[start : start + n_ctx]
        context = {}
        out = [chunk[0]]
        for pos in range(1, n_ctx):
            key = (start, pos)
            if key in differing:
                a, b = ours[key], theirs[key]
                j = next(
                    (i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b))
                )
                assert _top_tie(out + a[:j], context, dynamic, static), key
                checked += 1
            out.append(chunk[pos])
            R.update(context, 1, 4, out, 1)
        R.merge(dynamic, context)
    assert checked == len(differing)


def _parts(seq, context, dynamic, static):
    """(part, static part for scoring) of every cache lookup a draft step makes."""
    import reference as R

    static_part = static.get(R.key(seq, len(seq) - 2, 2), {})
    for cache in (context, dynamic):
        for size in range(4, 0, -1):
            if size <= len(seq) and (part := cache.get(R.key(seq, len(seq) - size, size))):
                yield part, static_part
    yield static_part, {}  # the static-only fallback compares raw counts


def _top_tie(seq, context, dynamic, static):
    """Some consulted part has two followers sharing the top score.

    Drafts can then differ at that token, or later than a tied pick whose
    count fails the percent threshold where the other's passes (a tie in
    score, count * static weight, need not be a tie in count).
    """
    for part, static_part in _parts(seq, context, dynamic, static):
        scores = sorted((_score(part, static_part, t) for t in part), reverse=True)
        if len(scores) > 1 and scores[0] == scores[1]:
            return True
    return False


@needs_shared
@pytest.mark.slow
def test_converted_lookup_file_is_what_llama_cpp_writes(cli, parity_dir, static25, tmp_path):
    """`convert --to-llamacpp` writes llama-lookup-create's file, record order aside.

    llama-server (`--spec-type ngram-cache -lcs X.bin`) and llama-lookup read
    such a file into a hash map, so record and follower order cannot matter:
    equal records and an equal size are what it takes to feed them.
    """
    ours = tmp_path / "static.bin"
    assert cli("convert", static25.path, "--to-llamacpp", "-o", ours)[0] == 0
    theirs = parity_dir / "llamacpp-static-25M.bin"
    assert ours.stat().st_size == theirs.stat().st_size
    for a, b in zip(NgramCache.load(ours).arrays(), NgramCache.load(theirs).arrays(), strict=True):
        assert np.array_equal(a, b)
