"""BatchDrafter: drafts identical to one Drafter per sequence, whatever the interleaving."""

import numpy as np
import pytest

from ngramdraft import (
    BatchDrafter,
    CostAwareLength,
    Drafter,
    InvalidParameterError,
    InvalidTokensError,
    NgramCache,
    UnknownSequenceError,
    build_static,
)


@pytest.mark.parametrize("seed", range(4))
def test_batch_equals_one_drafter_per_sequence(seed, tmp_path):
    """Seeded server simulation: adds, drafts, accepts, rewinds and finishes interleaved."""
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(3, 12))
    static = build_static(rng.integers(0, vocab, 4000), tmp_path / "s.ngd")
    shared = NgramCache()  # the single drafters share one dynamic cache, as the batch does
    batch = BatchDrafter(static=static, n_draft=5, max_seqs=80)
    single = {}
    next_id = 0
    for _ in range(120):
        if len(single) < 70 and (not single or rng.random() < 0.3):
            for _ in range(int(rng.integers(1, 8))):
                prompt = rng.integers(0, vocab, int(rng.integers(0, 60))).tolist()
                batch.add(next_id, prompt)
                single[next_id] = Drafter(static=static, dynamic=shared, n_draft=5)
                single[next_id].start(prompt)
                next_id += 1
        ids = list(single)
        rng.shuffle(ids)
        ids = ids[: int(rng.integers(1, len(ids) + 1))]
        out, lengths = batch.draft(ids)
        assert out.shape == (len(ids), 5) and out.dtype == np.int32
        for k, i in enumerate(ids):
            assert out[k, : lengths[k]].tolist() == single[i].draft().tolist()
        # Accept a prefix of the draft plus one token, as a verifier would.
        new = []
        for k in range(len(ids)):
            n = int(rng.integers(0, lengths[k] + 1))
            new.append(
                [*out[k, :n].tolist(), int(rng.integers(0, vocab))] * int(rng.integers(1, 3))
            )
        batch.accept(ids, new)
        for i, tokens in zip(ids, new, strict=True):
            single[i].accept(tokens)
        for i in list(single):
            r = rng.random()
            if r < 0.05:
                n = int(rng.integers(0, len(single[i].tokens) + 1))
                batch.rewind(i, n)
                single[i].rewind(n)
            elif r < 0.12:
                batch.finish(i)
                single.pop(i).finish()
        for i in single:
            assert batch.tokens(i).tolist() == single[i].tokens.tolist()
    for x, y in zip(batch.dynamic.arrays(), shared.arrays(), strict=True):
        assert np.array_equal(x, y)


def test_the_same_ids_step_after_step_and_an_id_back_on_another_row(tmp_path):
    """A server asks for the same running ids every step, and the batch keeps their rows
    from the last call; an id finished and added again (on another row), or a list of ids
    changed in place, must still reach its own sequence."""
    rng = np.random.default_rng(7)
    static = build_static(rng.integers(0, 6, 3000), tmp_path / "s.ngd")
    batch = BatchDrafter(static=static, n_draft=4, max_seqs=4)
    single = {}

    def add(i):
        prompt = rng.integers(0, 6, 40).tolist()
        batch.add(i, prompt)
        single[i] = Drafter(static=static, dynamic=batch.dynamic, n_draft=4)
        single[i].start(prompt)

    def step(ids):
        out, lengths = batch.draft(ids)
        for k, i in enumerate(ids):
            assert out[k, : lengths[k]].tolist() == single[i].draft().tolist(), i
        new = [[int(rng.integers(0, 6))] for _ in ids]
        batch.accept(ids, new)
        for i, tokens in zip(ids, new, strict=True):
            single[i].accept(tokens)

    for i in "abc":
        add(i)
    ids = ["a", "b", "c"]
    for _ in range(5):
        step(ids)
    batch.finish("a")
    single.pop("a").finish()
    add("d")  # takes the row "a" had
    add("a")  # back, on another row
    for _ in range(3):
        step(["a", "b", "c"])  # the ids of the last call
    ids[0] = "d"  # the same list, changed in place
    for _ in range(3):
        step(ids)


def test_accept_takes_drafts_as_returned():
    batch = BatchDrafter(n_draft=4)
    for i in range(3):
        batch.add(f"s{i}", [1, 2, 3, 1, 2, 3, 1, 2])
    out, lengths = batch.draft(["s0", "s1", "s2"])
    batch.accept(["s0", "s1", "s2"], out, lengths)
    assert batch.tokens("s1").tolist() == [1, 2, 3, 1, 2, 3, 1, 2, *out[1, : lengths[1]]]


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_accept_reads_an_engines_padded_table_only_where_lengths_say(rules):
    """vLLM's sampler pads each row of accepted tokens with -1: a table is read only up to
    each row's length, and a bad id within it is named by row and column, nothing taken."""
    ids = [0, 1, 2]
    table = np.array([[5, 6, -1, -1], [7, -1, -1, -1], [-1, -1, -1, -1]])
    padded, listed = (BatchDrafter(rules=rules) for _ in range(2))
    for batch in (padded, listed):
        for i in ids:
            batch.add(i, [1, 2, 3, 5, 6, 1, 2])
    padded.accept(ids, table, [2, 1, 0])
    listed.accept(ids, [[5, 6], [7], []])
    wide = np.array([[3, 2**40], [3, 2**40], [3, -(2**40)]], dtype=np.int64)
    padded.accept(ids, wide, [1, 1, 1])  # an int64 table whose padding int32 cannot hold
    listed.accept(ids, [[3], [3], [3]])
    for i in ids:
        assert padded.tokens(i).tolist() == listed.tokens(i).tolist()
    for got, want in zip(padded.draft(ids), listed.draft(ids), strict=True):
        assert np.array_equal(got, want)
    before = [padded.tokens(i).tolist() for i in ids]
    with pytest.raises(InvalidTokensError, match=r"tokens\[0, 2\] = -1 .*lengths\[0\] = 3"):
        padded.accept(ids, table, [3, 1, 0])
    with pytest.raises(InvalidTokensError, match=r"tokens\[2, 1\] = -1099511627776"):
        padded.accept(ids, wide, [1, 1, 2])
    assert [padded.tokens(i).tolist() for i in ids] == before


def test_bad_ids_and_capacity_are_named():
    batch = BatchDrafter(max_seqs=2)
    batch.add("a", [1, 2])
    with pytest.raises(InvalidParameterError, match="already active"):
        batch.add("a", [3])
    batch.add("b", [1])
    with pytest.raises(InvalidParameterError, match="max_seqs=2"):
        batch.add("c", [1])
    with pytest.raises(UnknownSequenceError, match="'zzz'"):
        batch.draft(["a", "zzz"])
    with pytest.raises(InvalidParameterError, match="twice"):
        batch.draft(["a", "a"])
    with pytest.raises(InvalidParameterError, match="holds 2"):
        batch.rewind("a", 3)
    with pytest.raises(InvalidTokensError):
        batch.accept(["a"], [[-1]])
    with pytest.raises(InvalidTokensError, match="2 token sequences for 1"):
        batch.accept(["a"], [[1], [2]])
    # A sequence's tokens nested one level too deep reached the kernel as a 2-D array
    # (numba's typing error); tokens as floats or with an empty list are named or joined.
    for nested in ([np.array([[1, 2]])], [[[1, 2]]]):
        with pytest.raises(InvalidTokensError, match="flat sequence of ids"):
            batch.accept(["a"], nested)
    with pytest.raises(InvalidTokensError, match="dtype float64"):
        batch.accept(["a"], [np.array([1.5])])
    batch.accept(["a", "b"], [np.array([3], dtype=np.int32), []])
    assert batch.tokens("a").tolist() == [1, 2, 3] and batch.tokens("b").tolist() == [1]
    batch.finish("a")
    with pytest.raises(UnknownSequenceError):
        batch.finish("a")
    batch.add("c", [5, 6])  # a finished sequence's room is reused
    assert len(batch) == 2 and "c" in batch and "a" not in batch
    batch.observe_pass("c", 2, 0.01)  # no policy here: nothing learns it, nothing fails
    with pytest.raises(UnknownSequenceError):
        batch.observe_pass("a", 2, 0.01)
    # llama.cpp's rules' kernels draft every sequence whole in one call: a policy is named.
    with pytest.raises(InvalidParameterError, match="takes no policy"):
        BatchDrafter(policy=CostAwareLength())


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_tokens_given_flat_instead_of_one_sequence_each_are_named(rules):
    # A flat list of ids (one sequence's tokens, not a list of them) was a TypeError
    # from len().
    batch = BatchDrafter(max_seqs=2, rules=rules)
    batch.add("a", [1, 2])
    for flat in ([5], 5, [None], np.int32(5)):
        with pytest.raises(InvalidTokensError, match="one sequence of ids per seq_id"):
            batch.accept(["a"], flat)
    assert batch.tokens("a").tolist() == [1, 2]


def test_sequences_longer_than_their_buffers_grow(tmp_path):
    batch = BatchDrafter(dynamic=tmp_path / "d.ngd")
    batch.add(0, [1, 2, 3])
    long = np.tile(np.arange(50), 40).tolist()
    batch.accept([0], [long])  # past the sequence buffer and the table's first sizes
    assert batch.tokens(0).tolist() == [1, 2, 3, *long]
    batch.finish(0)
    assert NgramCache.load(tmp_path / "d.ngd").followers((1, 2))[0].tolist() == [3]


def test_sync_follows_a_token_table_and_names_bad_input():
    batch = BatchDrafter(n_draft=3)
    batch.add("a", [1, 2, 3])
    batch.add("b", [7, 8])
    table = np.zeros((2, 6), dtype=np.int32)
    table[0, :5] = [1, 2, 3, 1, 2]  # "a" grew by two tokens
    table[1, :3] = [9, 8, 7]  # another sequence sits where "b" was
    mismatch = batch.sync(["a", "b"], table, [5, 3])
    assert mismatch.tolist() == [False, True]
    assert batch.tokens("a").tolist() == [1, 2, 3, 1, 2] and batch.tokens("b").tolist() == [7, 8]
    table[0, 5] = -1
    assert batch.sync(["a"], table, [6]).tolist() == [True]  # a negative id: not followed
    with pytest.raises(InvalidTokensError, match="2-D int32"):
        batch.sync(["a"], table.astype(np.int64), [5])
    with pytest.raises(InvalidParameterError, match=r"lengths must be 0 \.\. 6"):
        batch.sync(["a"], table, [7])
    with pytest.raises(InvalidParameterError, match=r"rows must be 0 \.\. 1"):
        batch.sync(["a"], table, [5], rows=[2])
    with pytest.raises(UnknownSequenceError):
        batch.sync(["zzz"], table, [5])
