"""The suffix rules' corpus: the sort, the build, the search and the file, against brute force."""

import json
import os

import numpy as np
import pytest

from hostile.mutations import forge, rehash, section
from ngramdraft import (
    BatchDrafter,
    ChecksumError,
    CorruptFileError,
    Drafter,
    NgramCache,
    StaticCache,
    TokenizerMismatchError,
    TruncatedFileError,
    VocabularyError,
    WrongFileKindError,
    build_static,
)
from ngramdraft.build.corpus import Corpus
from ngramdraft.build.suffixes import build_suffixes
from ngramdraft.caches.suffix_corpus import SuffixCorpus
from ngramdraft.cli import main as cli_main
from ngramdraft.files.ngd.header import KIND_SUFFIX, SLOTS
from ngramdraft.kernels import gramindex
from ngramdraft.kernels import suffixsearch as S
from ngramdraft.kernels.suffixsort import DEPTH, first_out_of_order, sort_shard
from ngramdraft.rulesets.suffix.state import CORPUS_ARGS
from ngramdraft.rulesets.suffix.step import CORPUS_MIN_COUNT, CORPUS_MIN_MATCH, CORPUS_MIN_SHARE
from suffix_reference import corpus_draft, suffix_key


def corpus_stream(rng, n, vocab, separators=0.0, repeats=True):
    """Random ids with, if asked, separators and long repeated passages (ties past the depth)."""
    tokens = rng.integers(0, vocab, n).astype(np.int32)
    if repeats and n > 200:
        passage = tokens[:90].copy()
        for at in rng.integers(100, n - 90, 3):
            tokens[at : at + 90] = passage
    cut = rng.random(n) < separators
    cut[[0, -1]] = False
    cut[1:] &= ~cut[:-1]  # no two in a row: token files joined make single separators
    tokens[cut] = -1
    return tokens


@pytest.mark.parametrize("seed", range(12))
def test_sort_is_the_reference_order(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    vocab = int(rng.choice([1, 2, 3, 200_000]))  # one id (all ties) .. above the positions
    tokens = corpus_stream(rng, n, vocab, separators=float(rng.choice([0.0, 0.05])))
    expected = sorted(range(n), key=lambda i: suffix_key(tokens, i, DEPTH))
    assert sort_shard(tokens, n).tolist() == expected
    assert first_out_of_order(tokens, sort_shard(tokens, n).astype(np.int32)) == -1


def _token_file(tmp_path, tokens, name="corpus.i32"):
    path = tmp_path / name
    np.asarray(tokens, dtype="<i4").tofile(path)
    return path


@pytest.mark.parametrize("shard", [7, 64, 1000])
def test_sharded_build_is_the_same_file(tmp_path, shard):
    """Shards sorted apart and merged: the whole corpus sorted at once, byte for byte."""
    rng = np.random.default_rng(shard)
    a = _token_file(tmp_path, corpus_stream(rng, 700, 5), "a.i32")
    b = _token_file(tmp_path, corpus_stream(rng, 300, 50_000), "b.i32")
    corpus = Corpus.of([a, b])
    whole = build_suffixes(corpus, tmp_path / "whole.ngd")
    build_suffixes(corpus, tmp_path / "sharded.ngd", shard_tokens=shard)
    assert (tmp_path / "whole.ngd").read_bytes() == (tmp_path / "sharded.ngd").read_bytes()
    assert whole.kind == KIND_SUFFIX
    opened = SuffixCorpus.open(tmp_path / "whole.ngd", verify=True)
    opened.verify(deep=True)
    # The streams are joined with one separator, which no match crosses.
    assert len(opened) == 1001 and opened.text[700] == -1
    assert opened.header.n_source_tokens == 1000


def test_documents_are_kept_apart(tmp_path):
    texts = []
    for i, words in enumerate(("one two three", "four five six", "seven eight")):
        texts.append(str(tmp_path / f"doc{i}.txt"))
        (tmp_path / f"doc{i}.txt").write_text(words + "\n", encoding="utf-8")
    out = tmp_path / "docs.ngd"
    build = ["build-static", *texts, "--tokenizer", "llama3", "--suffix", "-q"]
    cli_main([*build, "-o", str(out)])
    cli_main([*build, "--separate-documents", "-o", str(tmp_path / "apart.ngd")])
    joined = SuffixCorpus.open(out)
    apart = SuffixCorpus.open(tmp_path / "apart.ngd")
    assert (joined.text < 0).sum() == 0
    assert (apart.text < 0).sum() == 2
    assert np.array_equal(apart.text[apart.text >= 0], joined.text)
    assert apart.meta["tokenizer"]["name"] == "llama3"


@pytest.mark.parametrize("seed", range(10))
def test_search_and_draft_match_brute_force(tmp_path, seed):
    rng = np.random.default_rng(seed)
    tokens = corpus_stream(rng, 600, int(rng.choice([3, 6])), separators=0.02)
    corpus = SuffixCorpus.open(_built(tmp_path, tokens))
    share = int(rng.choice([50, 60]))
    params = np.array([corpus.max_token, 2, 2, share], dtype=np.int64)
    out = np.zeros(8, dtype=np.int32)
    for _ in range(25):
        pattern = rng.integers(0, 6, int(rng.integers(1, 80))).astype(np.int32)
        if rng.random() < 0.5:  # a pattern the corpus holds, with or without a new ending
            at = int(rng.integers(0, 500))
            pattern = np.concatenate([pattern[:5], np.maximum(tokens[at : at + 70], 0)])
        pn = len(pattern)
        length, lo, hi = S.longest(
            corpus.text, corpus.sa, corpus.buckets, corpus.grams, pattern, pn, 1, DEPTH
        )
        if length:
            ends = [i for i in range(len(tokens)) if _occurs(tokens, i, pattern[pn - length :])]
            assert hi - lo == len(ends) and sorted(corpus.sa[lo:hi].tolist()) == ends
        if length < min(pn, DEPTH):
            longer = pattern[pn - length - 1 :]
            assert not any(_occurs(tokens, i, longer) for i in range(len(tokens)))
        fresh = np.array([-1, 0, 0, 0], dtype=np.int64)  # no previous search
        d = S.draft(
            corpus.text, corpus.sa, corpus.buckets, corpus.grams, pattern, pn, params, fresh, out
        )
        assert out[:d].tolist() == corpus_draft(tokens, pattern, 8, 2, 2, share, DEPTH)


@pytest.mark.parametrize("seed", range(4))
def test_the_index_holds_each_frequent_ngram_with_its_range(tmp_path, seed):
    rng = np.random.default_rng(seed)
    tokens = corpus_stream(rng, 3000, int(rng.choice([3, 4])), separators=0.02)
    corpus = SuffixCorpus.open(_built(tmp_path, tokens))
    n, grams = len(tokens), corpus.grams
    held = 0
    for m in gramindex.GRAMS:
        counts = {}
        for i in range(n - m + 1):
            gram = tuple(tokens[i : i + m].tolist())
            if min(gram) >= 0:
                counts[gram] = counts.get(gram, 0) + 1
        for gram, count in counts.items():
            a, b, c = (*gram, -1)[:3]
            pattern = np.array(gram, dtype=np.int32)
            if count >= gramindex.MIN_COUNT:
                held += 1
                assert gramindex.lookup(grams, n, a, b, c) == S.find(
                    *_unindexed(corpus), pattern, 0, m
                )
            else:
                assert gramindex.lookup(grams, n, a, b, c) == (-1, -1)
    assert held > 0 and len(grams) >= 2 * held and len(grams) & (len(grams) - 1) == 0
    assert (grams[:, 0] != 0).sum() == held


def _unindexed(corpus):
    return corpus.text, corpus.sa, corpus.buckets, np.zeros((0, 2), dtype=np.int64)


@pytest.mark.parametrize("seed", range(4))
def test_the_index_changes_no_search(tmp_path, seed):
    """The same match, range, draft and next search with the index as without it."""
    rng = np.random.default_rng(seed)
    tokens = corpus_stream(rng, 4000, 3, separators=0.01)
    corpus = SuffixCorpus.open(_built(tmp_path, tokens))
    assert len(corpus.grams)
    params = np.array([corpus.max_token, 2, 2, 50], dtype=np.int64)
    indexed = (corpus.text, corpus.sa, corpus.buckets, corpus.grams)
    sequence = np.maximum(tokens[rng.integers(0, 3000) :][:600], 0).copy()
    sequence[rng.random(len(sequence)) < 0.1] = 2  # drifting off the corpus now and then
    last = [np.array([-1, 0, 0, 0], dtype=np.int64) for _ in range(2)]
    out = [np.zeros(8, dtype=np.int32) for _ in range(2)]
    for pn in range(1, len(sequence)):
        d = [
            S.draft(*args, sequence, pn, params, last[i], out[i])
            for i, args in enumerate((indexed, _unindexed(corpus)))
        ]
        assert d[0] == d[1] and out[0][: d[0]].tolist() == out[1][: d[1]].tolist()
        assert last[0].tolist() == last[1].tolist()


def test_a_continuation_holding_half_may_sit_above_the_middle(tmp_path):
    # "5 6" is followed by two separators, then by 9 twice: 9 holds the upper middle
    tokens = np.array([5, 6, -1, 5, 6, -1, 5, 6, 9, 5, 6, 9, 1], dtype=np.int32)
    corpus = SuffixCorpus.open(_built(tmp_path, tokens))
    params = np.array([corpus.max_token, 2, 2, 50], dtype=np.int64)
    pattern, out = np.array([5, 6], dtype=np.int32), np.zeros(4, dtype=np.int32)
    fresh = np.array([-1, 0, 0, 0], dtype=np.int64)
    d = S.draft(
        corpus.text, corpus.sa, corpus.buckets, corpus.grams, pattern, 2, params, fresh, out
    )
    assert out[:d].tolist() == [9] == corpus_draft(tokens, pattern, 4, 2, 2, 50, DEPTH)


@pytest.mark.parametrize("share", [50, 60])
def test_a_continuation_holding_just_enough_is_found_wherever_it_sits(tmp_path, share):
    # "5 6" followed h times, by a run of 9s just long enough (or one short)
    # with `o` smaller ids before it: the run may reach the middle from either side
    pattern, out = np.array([5, 6], dtype=np.int32), np.zeros(4, dtype=np.int32)
    for h in range(4, 12):
        need = -(-share * h // 100)
        for run in (need, need - 1):
            for o in range(h - run + 1):
                followers = [*range(1, o + 1), *[9] * run, *range(10, 10 + h - run - o)]
                tokens = np.array([t for f in followers for t in (5, 6, f, -1)][:-1], np.int32)
                corpus = SuffixCorpus.open(_built(tmp_path, tokens, f"c{h}-{run}-{o}"))
                params = np.array([corpus.max_token, 2, 2, share], dtype=np.int64)
                fresh = np.array([-1, 0, 0, 0], dtype=np.int64)
                d = S.draft(
                    corpus.text,
                    corpus.sa,
                    corpus.buckets,
                    corpus.grams,
                    pattern,
                    2,
                    params,
                    fresh,
                    out,
                )
                expected = corpus_draft(tokens, pattern, 4, 2, 2, share, DEPTH)
                assert out[:d].tolist() == expected == ([9] if run >= max(need, 2) else [])


@pytest.mark.parametrize("seed", range(6))
def test_a_search_started_from_the_last_one_finds_the_same(tmp_path, seed):
    rng = np.random.default_rng(seed)
    tokens = corpus_stream(rng, 800, 4, separators=0.01)
    corpus = SuffixCorpus.open(_built(tmp_path, tokens))
    args = corpus.text, corpus.sa, corpus.buckets, corpus.grams
    floor = int(rng.integers(1, 4))
    sequence, last = [], np.array([-1, 0, 0, 0], dtype=np.int64)
    for _ in range(300):
        r = rng.random()
        if r < 0.05:  # a rewind: the drafter forgets the last search
            del sequence[len(sequence) - int(rng.integers(0, 6)) :]
            last[S.LAST_N] = -1
        elif r < 0.1:  # steps the corpus was not asked at
            sequence += rng.integers(0, 4, int(rng.integers(1, 8))).tolist()
        else:  # copying the corpus, which extends the match, or not
            at = int(rng.integers(0, 700))
            copied = np.maximum(tokens[at : at + int(rng.integers(1, 4))], 0).tolist()
            sequence += copied if rng.random() < 0.7 or not sequence else [sequence[-1]]
        pattern = np.array(sequence or [0], dtype=np.int32)
        got = S.match(*args, pattern, len(sequence), floor, last)
        assert got == S.longest(*args, pattern, len(sequence), floor, DEPTH)
        assert last.tolist() == [len(sequence), *got]


def _occurs(tokens, i, pattern):
    return i + len(pattern) <= len(tokens) and tokens[i : i + len(pattern)].tolist() == list(
        pattern
    )


def _built(tmp_path, tokens, name="corpus"):
    """A suffix file of tokens, each separator (-1) a boundary between two token files."""
    path = tmp_path / f"{name}.ngd"
    pieces = np.split(tokens, np.flatnonzero(tokens < 0))
    files = [
        _token_file(tmp_path, piece[piece >= 0], f"{name}-{i}.i32")
        for i, piece in enumerate(pieces)
    ]
    build_suffixes(Corpus.of(files), path)
    assert np.array_equal(SuffixCorpus.open(path).text, tokens)
    return path


def test_drafter_asks_the_corpus_when_the_sequence_is_silent(tmp_path):
    rng = np.random.default_rng(3)
    phrase = rng.integers(1000, 2000, 12).astype(np.int32)
    background = rng.integers(0, 5000, 3000).astype(np.int32)
    parts = [background[:1000]]
    for i in range(CORPUS_MIN_COUNT):  # often enough to be drafted
        parts += [phrase, background[1000 + 100 * i : 1100 + 100 * i]]
    tokens = np.concatenate(parts)
    path = _built(tmp_path, tokens)
    plain = Drafter(rules="suffix")
    with_corpus = Drafter(rules="suffix", static=str(path))
    prompt = np.concatenate([background[2000:2100], phrase[:4]])
    for drafter in (plain, with_corpus):
        drafter.start(prompt)
    assert len(plain.draft()) == 0
    assert with_corpus.draft().tolist() == phrase[4:12].tolist()
    # Where the sequence drafts, the corpus is not asked: the sequence's copy wins.
    own = np.concatenate([phrase[:4], [7, 7, 7, 7], prompt])
    with_corpus.start(own)
    assert with_corpus.draft().tolist()[:4] == [7, 7, 7, 7]


def test_corpus_restraint_on_a_split_continuation(tmp_path):
    """A continuation is drafted while it follows enough occurrences, and a share of them."""
    a, b, c, d = [1, 2, 3], [10, 11, 12, 13], [20, 21, 22, 23], [30, 31]
    rep = CORPUS_MIN_COUNT
    assert 100 // 3 < CORPUS_MIN_SHARE <= 75
    tokens = np.array((a + b) * rep + (a + c) * rep + (a + d) * rep + [99] * 5, dtype=np.int32)
    corpus = SuffixCorpus.open(_built(tmp_path, tokens))
    drafter = Drafter(rules="suffix", static=corpus)
    drafter.start([50, 51, 1, 2, 3])
    assert drafter.draft().tolist() == []  # 10, 20 or 30: a third each
    drafter.start([50, 51, 1, 2, 3, 10])
    # Then 1 2 3 follow all rep occurrences; after them 10 follows rep - 1: too few.
    assert drafter.draft().tolist() == [11, 12, 13, 1, 2, 3]


def test_wrong_kinds_are_named(tmp_path):
    tokens = np.arange(100, dtype=np.int32) % 17
    suffix_path = _built(tmp_path, tokens)
    static_path = tmp_path / "static.ngd"
    build_static(tokens, static_path)
    with pytest.raises(WrongFileKindError, match="suffix file"):
        StaticCache.open(suffix_path)
    with pytest.raises(WrongFileKindError, match="suffix file"):
        NgramCache.load(suffix_path)
    with pytest.raises(WrongFileKindError, match="suffix file"):
        Drafter(static=str(suffix_path))
    with pytest.raises(WrongFileKindError, match="build-static --suffix"):
        Drafter(rules="suffix", static=str(static_path))
    for argv in (
        ["merge-static", str(suffix_path), "-o", str(tmp_path / "m.ngd")],
        ["convert", "--to-llamacpp", str(suffix_path), "-o", str(tmp_path / "x.bin")],
        ["replay", str(tmp_path / "corpus-0.i32"), "--static", str(suffix_path)],
    ):
        assert cli_main(argv) == 1


def test_tokenizer_and_vocabulary_checks(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat " * 20, encoding="utf-8")
    out = tmp_path / "t.ngd"
    cli_main(["build-static", str(text), "--tokenizer", "llama3", "--suffix", "-o", str(out), "-q"])
    with pytest.raises(TokenizerMismatchError, match="llama3"):
        Drafter(rules="suffix", static=str(out), tokenizer="qwen3")
    drafter = Drafter(rules="suffix", static=str(out), tokenizer="llama3")
    with pytest.raises(VocabularyError, match="another tokenizer"):
        drafter.check_vocabulary(100)


def test_damaged_files_are_named_and_never_draft_out_of_range(tmp_path):
    rng = np.random.default_rng(11)
    tokens = corpus_stream(rng, 3000, 40, separators=0.01)
    path = _built(tmp_path, tokens)
    raw = bytearray(path.read_bytes())
    (tmp_path / "cut.ngd").write_bytes(raw[: len(raw) - 100])
    with pytest.raises(TruncatedFileError):
        SuffixCorpus.open(tmp_path / "cut.ngd")
    sa_at, sa_size = section(raw, "suffixes")
    tok_at, tok_size = section(raw, "tokens")
    sa = np.frombuffer(raw, dtype="<i4", count=sa_size // 4, offset=sa_at).copy()
    sa[::7] = rng.integers(-(2**31), 2**31 - 1, len(sa[::7]))  # out of bounds, out of order
    text = np.frombuffer(raw, dtype="<i4", count=tok_size // 4, offset=tok_at).copy()
    text[::13] = 2**31 - 1  # ids above the recorded largest
    raw[sa_at : sa_at + sa_size] = sa.tobytes()
    raw[tok_at : tok_at + tok_size] = text.tobytes()
    (tmp_path / "bad.ngd").write_bytes(raw)
    with pytest.raises(ChecksumError):
        SuffixCorpus.open(tmp_path / "bad.ngd").verify()
    drafter = Drafter(rules="suffix", static=str(tmp_path / "bad.ngd"))
    drafter.static.prefault().done.wait()
    drafter.start(tokens[:20].clip(0))
    with pytest.raises(ChecksumError):  # drafting stops once the warm-up found the damage
        drafter.draft()
    batch = BatchDrafter(rules="suffix", static=drafter.static)
    batch.add("a", tokens[:20].clip(0))
    with pytest.raises(ChecksumError):  # and a batch's, whose rows are drafted in one call
        batch.draft(["a"])
    # Checksums forged: only the kernels' bounds stand between the damage and the model.
    (tmp_path / "forged.ngd").write_bytes(forge(raw))
    forged = SuffixCorpus.open(tmp_path / "forged.ngd")
    forged.verify()
    with pytest.raises(CorruptFileError):
        forged.verify(deep=True)
    drafter = Drafter(rules="suffix", static=forged, n_draft=16)
    top = forged.max_token
    drafted = 0
    for start in range(0, 2900, 97):
        drafter.start(tokens[start : start + 30].clip(0))
        for _ in range(5):
            d = drafter.draft()
            drafted += len(d)
            assert len(d) == 0 or (d.min() >= 0 and d.max() <= top)
            drafter.accept([int(rng.integers(0, 40))])
    assert drafted > 0


def test_a_damaged_index_is_named_and_never_drafts_out_of_range(tmp_path):
    rng = np.random.default_rng(12)
    tokens = corpus_stream(rng, 4000, 4, separators=0.01)
    raw = bytearray(_built(tmp_path, tokens).read_bytes())
    at, size = section(raw, "grams")
    grams = np.frombuffer(raw, dtype="<i8", count=size // 8, offset=at).reshape(-1, 2).copy()
    held = grams[:, 0] != 0
    assert held.any()
    grams[held, 1] = rng.integers(-(2**62), 2**62, int(held.sum()))  # ranges anywhere
    raw[at : at + size] = grams.tobytes()
    (tmp_path / "forged.ngd").write_bytes(forge(raw))
    forged = SuffixCorpus.open(tmp_path / "forged.ngd")
    forged.verify()
    with pytest.raises(CorruptFileError, match="n-gram index disagrees"):
        forged.verify(deep=True)
    drafter = Drafter(rules="suffix", static=forged, n_draft=16)
    for start in range(0, 3900, 97):
        drafter.start(tokens[start : start + 30].clip(0))
        for _ in range(5):
            d = drafter.draft()
            assert len(d) == 0 or (d.min() >= 0 and d.max() <= forged.max_token)
            drafter.accept([int(rng.integers(0, 4))])


def test_a_file_written_before_the_index_drafts_as_before(tmp_path, capsys):
    """Files from before the n-gram index have its header row all zeros: no index, no error."""
    rng = np.random.default_rng(13)
    tokens = corpus_stream(rng, 4000, 4, separators=0.01)
    path = _built(tmp_path, tokens)
    raw = bytearray(path.read_bytes())
    assert section(raw, "grams")[1] > 0
    row = 96 + 32 * SLOTS.index("grams")
    raw[row : row + 32] = bytes(32)
    (tmp_path / "old.ngd").write_bytes(rehash(raw))
    old, new = SuffixCorpus.open(tmp_path / "old.ngd"), SuffixCorpus.open(path)
    old.verify(deep=True)
    assert old.grams.shape == (0, 2) and len(new.grams)
    for file, size in ((tmp_path / "old.ngd", 0), (path, new.grams.nbytes)):
        assert cli_main(["inspect", str(file), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["ngram_index_bytes"] == size
    drafters = [Drafter(rules="suffix", static=c, n_draft=8) for c in (old, new)]
    drafted = 0
    for start in range(0, 3800, 131):
        for drafter in drafters:
            drafter.start(tokens[start : start + 30].clip(0))
        for token in tokens[start + 30 : start + 40].clip(0).tolist():
            drafts = [drafter.draft().tolist() for drafter in drafters]
            assert drafts[0] == drafts[1]
            drafted += len(drafts[0])
            for drafter in drafters:
                drafter.accept([token])
    assert drafted > 0


def test_a_drafters_corpus_thresholds_default_to_the_rules():
    args = Drafter(rules="suffix").kernel_state[CORPUS_ARGS : CORPUS_ARGS + 4]
    assert args[S.MIN_MATCH] == CORPUS_MIN_MATCH and args[S.MAX_TOKEN] == -1
    assert args[S.MIN_COUNT] == CORPUS_MIN_COUNT and args[S.MIN_SHARE] == CORPUS_MIN_SHARE


def test_format_worked_example(tmp_path):
    """docs/format.md's worked example of the suffix kind."""
    path = _built(tmp_path, np.array([5, 6, 5, 7, -1, 5, 6], dtype=np.int32))
    corpus = SuffixCorpus.open(path)
    assert corpus.sa.tolist() == [4, 5, 0, 2, 6, 1, 3]
    assert S.find(
        corpus.text, corpus.sa, corpus.buckets, corpus.grams, np.array([5], np.int32), 0, 1
    ) == (1, 4)
    assert corpus.buckets.tolist() == [0, 1, 1, 1, 1, 1, 1, 4, 6, 7]
    assert corpus.grams.shape == (0, 2) and gramindex.key(5, 6, -1) == 6 << 42 | 7 << 21


def test_batch_rows_share_the_corpus(tmp_path):
    """Every row of a BatchDrafter drafts from the corpus as a lone Drafter does."""
    rng = np.random.default_rng(5)
    tokens = corpus_stream(rng, 2000, 30)
    path = _built(tmp_path, tokens)
    batch = BatchDrafter(rules="suffix", static=str(path), n_draft=6)
    starts = [0, 400, 900, 1500]
    for i, s in enumerate(starts):
        batch.add(i, tokens[s : s + 20])
    drafts, lengths = batch.draft(list(range(len(starts))))
    for i, s in enumerate(starts):
        alone = Drafter(rules="suffix", static=str(path), n_draft=6)
        alone.start(tokens[s : s + 20])
        assert drafts[i, : lengths[i]].tolist() == alone.draft().tolist()
    assert lengths.sum() > 0
    assert batch.static is not None


def test_the_suffix_rules_run_as_plain_python(tmp_path):
    """The coverage command runs the kernels with NUMBA_DISABLE_JIT=1. Before this test, the
    suffix rules' state failed there (a handle's address could not become a pointer), and
    the corpus's n-gram index missed every key (an int32 token shifted past its 32 bits)."""
    import subprocess
    import sys

    script = """
import numpy as np
from ngramdraft import Drafter, SuffixCorpus, build_suffix_corpus
from ngramdraft.kernels import gramindex
tokens = np.tile(np.arange(3, 40, dtype=np.int32), 100)
build_suffix_corpus(tokens, "c.ngd")
corpus = SuffixCorpus.open("c.ngd")
pattern = np.array([3, 4], dtype=np.int32)  # as the search reads a sequence's tokens
lo, hi = gramindex.lookup(corpus.grams, len(corpus.sa), pattern[0], pattern[1], -1)
assert hi - lo == 100, (lo, hi)
assert gramindex.key(*pattern, np.int32(5)) == gramindex.key(3, 4, 5)  # as a compiled build's
d = Drafter(rules="suffix", static=corpus, n_draft=4)
d.start([1, 2, 3, 4, 5])
assert d.draft().tolist() == [6, 7, 8, 9], d.draft()  # from the corpus, through its index
d.accept([6, 99, 1, 2])
assert d.draft().tolist() == [3, 4, 5, 6], d.draft()  # from the sequence
"""
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
