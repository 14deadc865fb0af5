"""The suffix rules: the kernels against the brute-force reference; the drafter."""

import hashlib
import json
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from ngramdraft import (
    BatchDrafter,
    Drafter,
    InvalidParameterError,
    NgramCache,
    VocabularyError,
    WrongFileKindError,
    build_static,
    build_suffix_corpus,
    replay,
)
from ngramdraft.caches.positions import MAX_MATCH, PositionIndex
from ngramdraft.caches.requests import RequestMemory
from ngramdraft.drafting.batch import PARALLEL_FROM
from ngramdraft.drafting.policy import CostAwareLength
from ngramdraft.files.tokens import tokens_of
from ngramdraft.kernels.chains import _hash as chain_hash
from ngramdraft.kernels.chains import longest_match
from ngramdraft.kernels.handles import SIZES
from ngramdraft.rulesets.suffix.drafter import SuffixDrafter
from ngramdraft.rulesets.suffix.state import APPLIED, ENTRY_WORDS, LEARNED, SEEN, SUBSTITUTIONS
from ngramdraft.rulesets.suffix.substitutions import RECUR
from suffix_reference import Reference


def edited(rng, base, rate=0.03):
    """base with tokens replaced, inserted and dropped here and there (as an edit would)."""
    out = []
    for t in base:
        r = rng.random()
        if r < rate:
            out.append(int(rng.integers(0, 40)))  # replaced
        elif r < 2 * rate:
            out.extend([t, int(rng.integers(0, 40))])  # inserted after
        elif r >= 3 * rate:
            out.append(t)  # (else dropped)
    return out


def teacher_forced(drafter, prompt, output):
    """Drafts at every step, accepting the right prefix of each plus one true token."""
    drafts, i = [], 0
    drafter.start(prompt)
    while i < len(output):
        d = [int(t) for t in drafter.draft()]
        drafts.append(d)
        a = 0
        while a < len(d) and i + a < len(output) and d[a] == output[i + a]:
            a += 1
        drafter.accept(list(output[i : i + a + 1]))
        i += a + 1
    return drafts


@pytest.mark.parametrize("seed", range(12))
def test_drafts_equal_the_reference(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.choice([1, 4, 8, 16]))
    memory = RequestMemory()
    drafter, reference = Drafter(n_draft=k, rules="suffix", dynamic=memory), Reference(k)
    for _ in range(3):  # requests to one drafter: an old text, then its edited copy
        base = [int(t) for t in rng.integers(0, 40, int(rng.integers(20, 200)))]
        prompt, output = [1, 2, 3, *base, 4], edited(rng, base)
        assert teacher_forced(drafter, prompt, output) == teacher_forced(reference, prompt, output)
        drafter.finish()
        reference.mem += [*prompt, *output, -1]
        memory.index._check()


def test_repetition_drafts_its_period_again():
    d = Drafter(n_draft=10, rules="suffix")
    d.start([7, 8, 9, 7, 8, 9, 7, 8])
    assert d.draft().tolist() == [9, 7, 8, 9, 7, 8, 9, 7, 8, 9]


def test_an_edited_token_keeps_the_copy_in_step():
    old = list(range(100, 140))
    d = Drafter(n_draft=8, rules="suffix")
    d.start([*old, 1, *old[:2]])
    assert d.draft().tolist() == old[2:10]  # a jump to the old text
    d.accept(old[2:12])
    d.accept([999])  # one token replaced: no match ends with it
    assert d.draft().tolist() == old[13:21]


def test_the_worked_example_of_docs_suffix_md():
    d = Drafter(n_draft=4, rules="suffix")
    d.start([10, 11, 12, 13, 14, 15, 10, 11])
    assert d.draft().tolist() == [12, 13, 14, 15]
    d.accept([12, 13, 99])
    assert d.draft().tolist() == [15, 10, 11, 12]
    e = Drafter(n_draft=4, rules="suffix")  # the same, "13 99" standing far off
    e.start([10, 11, 12, 13, 14, 15, *range(30, 50), 13, 99, 5, 6, 7, 10, 11])
    e.draft()
    e.accept([12, 13, 99])
    assert e.draft().tolist() == [5, 6, 7, 10]  # its jump wins over the pointer


def test_position_index_stress_keeps_its_invariants():
    rng = np.random.default_rng(5)
    index, held = PositionIndex(), []
    for _ in range(300):
        op = rng.random()
        if op < 0.6:
            new = rng.integers(-1, 12, int(rng.integers(1, 40))).astype(np.int32)
            index.append(new)
            held += new.tolist()
        elif op < 0.95:
            k = int(rng.integers(0, len(held) + 1))
            index.rewind(k)
            held = held[: len(held) - k]
        else:
            index.clear()
            held = []
        assert index.tokens.tolist() == held
        index._check()


def test_positions_are_filed_as_one_at_a_time_filing_would():
    """The kernel files long runs in prefetched blocks; each chain must be what filing the
    positions one by one in order makes (restated here with the kernel's hash)."""
    rng = np.random.default_rng(9)
    text = rng.integers(-1, 50, 3000).astype(np.int32)
    index = PositionIndex()
    for cut in (0, 37, 200, 1900, 3000):  # appends that start inside and across blocks
        index.append(text[len(index.tokens) : cut])
    width = index.head.shape[1]
    head = np.full((len(SIZES), width), -1, dtype=np.int32)
    prev = np.full((len(SIZES), len(text)), -1, dtype=np.int32)
    for i in range(len(text)):
        for lv, m in enumerate(SIZES):
            if i + 1 >= m:
                h = getattr(chain_hash, "py_func", chain_hash)(text, i, int(m), width - 1)
                prev[lv, i], head[lv, h] = head[lv, h], i
    assert np.array_equal(index.head, head)
    assert np.array_equal(index.prev[:, : len(text)], prev)


def test_a_floor_on_the_match_changes_only_what_is_below_it():
    """``longest_match(..., shortest)``, which skips the short sizes' chains, finds what the
    full search finds when that is at least ``shortest`` long, and nothing otherwise."""
    rng = np.random.default_rng(11)
    base = rng.integers(0, 6, 400).astype(np.int32)  # short repeats, chains of every size
    text = np.concatenate([base, base[50:90], rng.integers(0, 6, 200).astype(np.int32)])
    index = PositionIndex()
    index.append(text)
    found = set()
    for pn in range(8, len(text), 7):
        full = longest_match(
            text, pn - 1, SIZES, index.prev, index.head, text, pn, MAX_MATCH, 32, -1, 0
        )
        for shortest in (2, 3, 4, 5, 8, 9):
            floored = longest_match(
                text, pn - 1, SIZES, index.prev, index.head, text, pn, MAX_MATCH, 32, -1, shortest
            )
            assert floored == (full if full[1] >= shortest else (-1, 0))
            found.add(full[1] >= shortest)
    assert found == {True, False}


def test_a_memory_rebuilds_its_index_without_its_lock(monkeypatch):
    """Holding another writer's requests reindexes them all: drafters sharing the memory
    must wait only for the swap of arrays, not the reindexing."""
    memory = RequestMemory()
    memory.add([1, 2, 3, 4])
    drafter = Drafter(n_draft=4, rules="suffix", dynamic=memory)
    built_locked = []
    of = PositionIndex.of

    def watched(tokens, capacity=0):
        built_locked.append(memory.lock.locked())
        return of(tokens, capacity)

    monkeypatch.setattr(PositionIndex, "of", staticmethod(watched))
    memory.hold(np.array([5, 6, 7, 8, -1], dtype=np.int32), [[9, 5, 6, 7, 10]])
    assert built_locked == [False]
    memory.index._check()
    drafter.start([0, 9, 5])
    assert drafter.draft().tolist() == [6, 7, 10]  # the new index, through the drafter's handle
    small = RequestMemory(max_tokens=40)  # past its budget, an add rebuilds it: also unlocked
    memory = small  # the memory watched() looks at
    for i in range(7):
        small.add([i] * 5)
    assert built_locked == [False, False]
    small.index._check()
    assert small.index.tokens.tolist() == [4] * 5 + [-1] + [5] * 5 + [-1] + [6] * 5 + [-1]


def test_a_memory_never_grows_its_arrays_under_its_lock(monkeypatch):
    """Growing the arrays refiles every token: a memory does it as a rebuild, without its
    lock, from empty to past its budget and after."""
    memory = RequestMemory(max_tokens=5000)
    allocated_locked = []
    alloc = PositionIndex._alloc

    def watched(index, capacity):
        allocated_locked.append(memory.lock.locked())
        alloc(index, capacity)

    monkeypatch.setattr(PositionIndex, "_alloc", watched)
    for i in range(300):  # about 10,000 tokens: growths, then evictions
        memory.add([i] * int(10 + i % 50))
    assert len(allocated_locked) >= 4 and not any(allocated_locked)
    memory.index._check()


def test_an_evicted_memory_fills_its_budget_again_without_refiling():
    """A memory rebuilt at half its budget keeps room for the whole budget."""
    memory = RequestMemory(max_tokens=2000)
    for i in range(21):  # the 21st is past the budget: the newest 1,000 tokens stay
        memory.add([i] * 99)
    assert len(memory) == 1000
    arrays = memory.index.text
    for i in range(21, 31):
        memory.add([i] * 99)
    assert len(memory) == 2000 and memory.index.text is arrays
    memory.index._check()


def test_a_loaded_requests_file_drafts_as_the_memory_that_saved_it(tmp_path):
    """The chains' hashes are masked by their table's width, which must be a power of two
    however many tokens a file holds; else a loaded memory's chains collide and its
    queries, capped at MAX_CHAIN candidates, miss what the saved one finds."""
    rng = np.random.default_rng(4)
    phrases = rng.integers(0, 50, (400, 8))
    saved = RequestMemory()
    for _ in range(60):
        saved.add(phrases[rng.integers(0, 400, 200)].ravel())
    saved.save(tmp_path / "r.ngd")
    loaded = RequestMemory.load(tmp_path / "r.ngd")
    width = loaded.index.head.shape[1]
    assert width & (width - 1) == 0
    a = Drafter(n_draft=8, rules="suffix", dynamic=saved)
    b = Drafter(n_draft=8, rules="suffix", dynamic=loaded)
    drafted = 0
    for i in range(40):
        probe = phrases[rng.integers(0, 400, 3)].ravel()[: 12 + i % 8]
        a.start(probe)
        b.start(probe)
        draft = a.draft().tolist()
        assert b.draft().tolist() == draft
        drafted += len(draft)
    assert drafted > 100


def test_a_memory_shared_by_threads_keeps_whole_sequences_in_order():
    """Threads adding to one memory past its budget many times over, with rebuilds made
    outside its lock: what it holds is always whole sequences, each thread's in the order
    it added them, none twice, within the budget, and its index is exact."""
    memory = RequestMemory(max_tokens=300)
    rng = np.random.default_rng(11)
    lengths = rng.integers(1, 40, (4, 150))

    def add(thread):
        for i, n in enumerate(lengths[thread]):
            memory.add([1000 * thread + i] * int(n))

    workers = [threading.Thread(target=add, args=(t,)) for t in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    memory.index._check()
    held = memory.index.tokens.tolist()
    assert len(held) <= 300 and held[-1] == -1
    seqs = [run.split() for run in " ".join(map(str, held)).split(" -1") if run.strip()]
    ids = [int(run[0]) for run in seqs]
    assert all(len(set(run)) == 1 for run in seqs)  # each a whole sequence
    assert all(len(run) == lengths[i // 1000, i % 1000] for run, i in zip(seqs, ids, strict=True))
    assert len(set(ids)) == len(ids)
    for t in range(4):
        mine = [i for i in ids if i // 1000 == t]
        assert mine == sorted(mine)
    assert memory.max_token == max(ids)


def test_rewind_drafts_as_a_fresh_start():
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 30, 400).tolist()
    a = Drafter(n_draft=8, rules="suffix")
    a.start(tokens[:300])
    a.accept(tokens[300:])
    a.rewind(100)
    b = Drafter(n_draft=8, rules="suffix")
    b.start(tokens[:300])
    a._index._check()
    for t in tokens[300:340]:
        assert a.draft().tolist() == b.draft().tolist()
        a.accept([t])
        b.accept([t])
    assert a.tokens.tolist() == b.tokens.tolist()


def test_request_memory_evicts_the_oldest_whole_sequences():
    memory = RequestMemory(max_tokens=100)
    for i in range(10):
        memory.add([i] * 30)
        memory.index._check()
        held = memory.index.tokens.tolist()
        assert len(held) <= 100 and held[-1] == -1 and held[-31:-1] == [i] * 30
        firsts = {held[0]} | {held[j + 1] for j in range(len(held) - 1) if held[j] == -1}
        assert firsts == {t for t in held if t >= 0}  # whole sequences only
    too_long = list(range(500))
    memory.add(too_long)
    assert memory.index.tokens.tolist() == [*too_long[-99:], -1]


def test_earlier_requests_are_shared_and_drafted_from():
    memory = RequestMemory()
    template = list(range(200, 260))
    first = Drafter(n_draft=8, rules="suffix", dynamic=memory)
    first.start([1, 2])
    first.accept(template)
    first.finish()
    second = Drafter(n_draft=8, rules="suffix", dynamic=memory)
    second.start([5, 6, *template[:5]])
    assert second.draft().tolist() == template[5:13]


def test_policy_and_sync_work_as_with_llamacpp_rules():
    d = Drafter(n_draft=8, rules="suffix", policy=CostAwareLength([1.0] + [1.05] * 8))
    seq = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3]
    assert d.sync(seq) is False
    assert d.sync([*seq, 4]) is True
    assert 0 < len(d.draft()) <= 8
    assert d.tokens.tolist() == [*seq, 4]


def test_no_draft_holds_a_token_the_sequence_and_memory_lack():
    rng = np.random.default_rng(9)
    memory = RequestMemory()
    memory.add(rng.integers(0, 50, 500).tolist())
    d = Drafter(n_draft=16, rules="suffix", dynamic=memory)
    d.start(rng.integers(0, 50, 300).tolist())
    seen = set(d.tokens.tolist()) | set(memory.index.tokens.tolist())
    for t in rng.integers(0, 50, 300).tolist():
        assert set(d.draft().tolist()) <= seen
        d.accept([t])
        seen.add(t)


def test_bad_arguments_get_named_errors():
    with pytest.raises(InvalidParameterError, match="unknown rule set"):
        Drafter(rules="vllm")
    with pytest.raises(InvalidParameterError, match="SuffixCorpus"):
        Drafter(static=[1, 2, 3], rules="suffix")
    with pytest.raises(InvalidParameterError, match="ngram_min"):
        Drafter(None, None, 8, 2, rules="suffix")
    with pytest.raises(InvalidParameterError, match="max_dynamic_ngrams"):
        Drafter(rules="suffix", max_dynamic_ngrams=5)
    with pytest.raises(InvalidParameterError, match="min_match"):
        Drafter(rules="suffix", min_match=1)
    with pytest.raises(InvalidParameterError, match="min_match"):
        Drafter(rules="suffix", min_match=MAX_MATCH + 1)
    d = Drafter(rules="suffix")
    assert isinstance(d, SuffixDrafter)
    d.start([5, 6, 70000])
    d.finish()
    with pytest.raises(VocabularyError, match="70000"):
        d.check_vocabulary(32000)
    d.check_vocabulary(70001)


def _table(sequences):
    """An engine's token table: row i holds sequences[i], then zeros; and the lengths."""
    table = np.zeros((len(sequences), max(map(len, sequences))), dtype=np.int32)
    for row, held in zip(table, sequences, strict=True):
        row[: len(held)] = held
    return table, [len(held) for held in sequences]


# one thread, the machine's threads, and a policy (each row drafted by its own call),
# given the pass costs or learning them from the passes each sequence is told of
@pytest.mark.parametrize(
    ("rows", "costs"), [(4, None), (PARALLEL_FROM + 8, None), (4, 1.3), (4, "learned")]
)
def test_batch_drafts_as_one_drafter_per_sequence(rows, costs):
    rng = np.random.default_rng(4)
    policy = None if costs is None else CostAwareLength()
    if isinstance(costs, float):
        policy = CostAwareLength([1.0] + [costs] * 6)
    batch = BatchDrafter(n_draft=6, rules="suffix", policy=policy)
    memory = RequestMemory()
    singles = {}
    for i in range(rows):
        prompt = rng.integers(0, 12, 60).tolist()
        batch.add(i, prompt)
        singles[i] = Drafter(n_draft=6, rules="suffix", dynamic=memory, policy=policy)
        singles[i].start(prompt)
    ids = list(singles)
    drafted = 0
    for step in range(40):
        tokens, lengths = batch.draft(ids)
        drafted += lengths.sum()
        for i, row, n in zip(ids, tokens, lengths, strict=True):
            assert row[:n].tolist() == singles[i].draft().tolist()
            # Passes dearer past two tokens, as on a CPU: a learning policy cuts drafts.
            seconds = 1.0 + 2.0 * max(0, int(n) - 1)
            batch.observe_pass(i, int(n) + 1, seconds)
            singles[i].observe_pass(int(n) + 1, seconds)
        new = [rng.integers(0, 12, int(rng.integers(1, 4))).tolist() for _ in ids]
        if step in (20, 31):  # more than a row's index holds: it grows in the middle of a batch
            new[step % 3] = rng.integers(0, 12, 900).tolist()
        if step % 2:  # told the whole sequences, as an engine hands them over
            whole = [singles[i].tokens.tolist() + t for i, t in zip(ids, new, strict=True)]
            table, lengths = _table(whole)
            assert not batch.sync(ids, table, lengths).any()
        else:
            batch.accept(ids, new)
        for i, t in zip(ids, new, strict=True):
            singles[i].accept(t)
    assert drafted > 0
    table, lengths = _table([singles[i].tokens.tolist() for i in ids])
    assert not batch.sync(ids, table, lengths).any()
    assert all(np.array_equal(batch.tokens(i), singles[i].tokens) for i in ids)
    table[0, 0] += 1
    assert batch.sync(ids, table, lengths).tolist() == [True] + [False] * (rows - 1)
    batch.finish(0)
    assert 0 not in batch and len(batch) == rows - 1


def _replayed_by_calls(stream, n_ctx, n_draft):
    """replay's protocol by the suffix rules, one Drafter call at a time: (calls, drafted,
    accepted, dump)."""
    drafter, dump, counts = SuffixDrafter(n_draft=n_draft), [], [0, 0, 0]
    for start in range(0, len(stream) - n_ctx, n_ctx):
        chunk, n_out = stream[start : start + n_ctx], 1
        drafter.start(chunk[:1])
        while n_out < n_ctx:
            draft = drafter.draft().tolist()
            dump += [start, n_out, len(draft), *draft]
            accepted = 0
            for token, true in zip(draft, chunk[n_out:], strict=False):
                if token != true:
                    break
                accepted += 1
            counts = [counts[0] + 1, counts[1] + len(draft), counts[2] + accepted]
            step = chunk[n_out : n_out + accepted + 1]
            drafter.accept(step)
            n_out += len(step)
        drafter.finish()
    return (*counts, dump)


def test_replay_is_what_the_drafter_calls_give():
    rng = np.random.default_rng(8)
    base = rng.integers(0, 40, 500)
    stream = np.concatenate([base, rng.integers(0, 40, 100), base[:300], base]).astype(np.int32)
    got = replay(stream, 256, 6, dump=True, rules="suffix")
    calls, drafted, accepted, dump = _replayed_by_calls(stream, 256, 6)
    assert (got.n_calls, got.n_drafted, got.n_accept) == (calls, drafted, accepted)
    assert got.dump.tolist() == dump and accepted > 200


def test_each_rule_set_names_the_others_caches(tmp_path):
    """Given the other rule set's cache, every entry point (replay, Drafter, BatchDrafter)
    raises WrongFileKindError naming the rules it belongs to (before, llama.cpp's rules given
    a SuffixCorpus or a RequestMemory said only "expected a cache or a path", and the suffix
    rules given a StaticCache raised InvalidParameterError)."""
    rng = np.random.default_rng(3)
    base = rng.integers(0, 50, 400).astype(np.int32)
    stream = np.concatenate([base, base]).astype(np.int32)
    corpus = build_suffix_corpus(base, tmp_path / "c.ngd")
    memory = RequestMemory()
    static = build_static(base, tmp_path / "s.ngd")
    crossed = {
        "llamacpp": ({"static": corpus}, {"dynamic": memory}),
        "suffix": ({"static": static}, {"dynamic": NgramCache()}),
    }
    for rules, caches in crossed.items():
        for cache in caches:
            for make in (partial(replay, stream, 256, 6), Drafter, BatchDrafter):
                with pytest.raises(WrongFileKindError, match=r"llama\.cpp's rules"):
                    make(**cache, rules=rules)
    with pytest.raises(InvalidParameterError, match="unknown rule set"):
        replay(stream, 256, 6, rules="Suffix")


def _timings(result):
    """A replay's figures that are times, which differ from run to run."""
    figures = json.loads(result) if isinstance(result, str) else result
    return {k: v for k, v in figures.items() if k.startswith("t_") or k.startswith("us_")}


def test_replay_cli_takes_the_suffix_rules(cli, tmp_path):
    rng = np.random.default_rng(2)
    base = rng.integers(0, 100, 600)
    path = tmp_path / "t.i32"
    np.concatenate([base, base, base]).astype("<i4").tofile(path)
    status, out, err = cli("replay", path, "--n-ctx", 512, "--rules", "suffix", "--json")
    assert status == 0, err
    figures = json.loads(out)
    assert figures["n_accept"] > 500 and figures["n_predict"] == 1536
    # --dynamic: the earlier requests a replay starts from, as lookup-stats reads -lcd: a
    # missing file holds none, and the file is never written (before, a replay saved its
    # text there, and the next replay drafted that text from memory).
    args = ("replay", path, "--n-ctx", 512, "--rules", "suffix", "--json")
    requests = tmp_path / "d.ngd"
    status, out, err = cli(*args, "--dynamic", requests)
    assert status == 0 and json.loads(out) == {**figures, **_timings(out)}, err
    assert not requests.exists()
    drafter = Drafter(rules="suffix", dynamic=requests)
    drafter.start(base)
    drafter.finish()
    saved = requests.read_bytes()
    runs = [json.loads(cli(*args, "--dynamic", requests)[1]) for _ in range(2)]
    assert runs[0]["n_accept"] > figures["n_accept"] and runs[1] == {**runs[0], **_timings(runs[1])}
    assert requests.read_bytes() == saved
    memory = RequestMemory.load(requests)
    replay(np.concatenate([base, base]).astype(np.int32), 512, 8, dynamic=memory, rules="suffix")
    assert memory.index.tokens.tobytes() == RequestMemory.load(requests).index.tokens.tobytes()
    status, out, err = cli(*args, "--dynamic", tmp_path / "t.i32")
    assert status != 0 and len(err.strip().splitlines()) == 1 and "t.i32" in err


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_a_drafter_refuses_to_be_copied(rules):
    """Its state holds its arrays' addresses: a copy would read them after they were freed."""
    import copy
    import pickle

    drafter = Drafter(rules=rules)
    drafter.start([1, 2, 3])
    for duplicate in (pickle.dumps, copy.deepcopy, copy.copy):
        with pytest.raises(InvalidParameterError, match="cannot be copied or pickled"):
            duplicate(drafter)


def test_a_copy_interrupted_by_new_text_resumes_near_where_it_stopped():
    old = [50, 51, 52, *range(100, 120), 50, 51, 53, *range(200, 220), 50, 51, 54, 7]
    d = Drafter(n_draft=3, rules="suffix")
    d.start([1, *old, 2])
    d.accept(old[:2])
    assert d.draft().tolist() == [52, 100, 101]  # no pointer yet: the earliest "50 51"
    d.accept(old[2:32])
    d.accept(list(range(900, 906)))  # new text: the copy's pointer is lost
    d.accept([50, 51])  # three earlier "50 51"s: the pointer was lost nearest the last
    assert d.draft().tolist() == [54, 7, 2]


def renamed(rng, base, renames):
    """base with each old span of ``renames`` written as its new one (but one in five left
    as it was), and edited a little."""
    out, i = [], 0
    while i < len(base):
        for old, new in renames:
            if base[i : i + len(old)] == old and rng.random() < 0.8:
                out += new
                i += len(old)
                break
        else:
            out.append(base[i])
            i += 1
    return edited(rng, out, rate=0.01)


@pytest.mark.parametrize("seed", range(8))
def test_learned_substitutions_draft_as_the_reference(seed):
    """Renames of 1-3 tokens into 0-3 (more than the table holds), applied everywhere."""
    rng = np.random.default_rng(seed)
    k = int(rng.choice([1, 4, 8, 16]))
    drafter, reference = Drafter(n_draft=k, rules="suffix"), Reference(k)
    applied = replaced = forgotten = 0
    for _ in range(3):
        words = [list(rng.integers(100, 130, int(rng.integers(1, 4)))) for _ in range(24)]
        base = [  # text that copies unambiguously, the words here and there in it
            int(t)
            for w in rng.choice(len(words), 60)
            for t in (*words[w], *rng.integers(300, 900, 4))
        ]
        renames = [
            ([int(t) for t in words[w]], rng.integers(200, 230, rng.integers(0, 4)).tolist())
            for w in rng.choice(len(words), SUBSTITUTIONS + 4, replace=False)
        ]
        prompt, output = [1, 2, 3, *base, 4], renamed(rng, base, renames)
        steps, before = [], np.zeros(SUBSTITUTIONS, dtype=np.int64)
        drafter.start(prompt)
        i = 0
        while i < len(output):  # teacher_forced's, watching the drafter's table
            d = [int(t) for t in drafter.draft()]
            steps.append(d)
            a = 0
            while a < len(d) and i + a < len(output) and d[a] == output[i + a]:
                a += 1
            drafter.accept(output[i : i + a + 1])
            i += a + 1
            applied = max(applied, int(drafter._st[APPLIED]))
            table = drafter._st[LEARNED:].reshape(-1, ENTRY_WORDS)
            seen = table[:, SEEN].copy()
            replaced += int(np.count_nonzero(seen)) == SUBSTITUTIONS
            forgotten += int(np.any((before >= RECUR) & (seen == 0)))
            before = seen
        assert steps == teacher_forced(reference, prompt, output)
    assert applied >= 2 and replaced and forgotten  # the streams exercise the table


def test_a_rename_seen_twice_is_drafted_the_third_time():
    lines = [[10 + i, 11 + i, 500, 12 + i, 13 + i, 14 + i] for i in range(0, 60, 6)]
    old = [t for line in lines for t in line]
    new = [990 if t == 500 else t for t in old]
    d = Drafter(n_draft=6, rules="suffix")
    d.start([1, *old, 2, *new[:2]])
    drafts = []
    for _ in lines:  # a line a step, whatever was drafted
        at = len(d.tokens) - len(old) - 2  # where the output stands in the copy
        drafts.append(d.draft().tolist())
        d.accept(new[at : at + 6])
    # The first miss follows a jump, which proved nothing: the rename is seen at
    # the second and third lines, and drafted from the fourth on.
    assert [draft[0] for draft in drafts] == [500] * 3 + [990] * 7
    assert drafts[3] == new[20:26]
    d.rewind(6)  # what was learned goes with the tokens it was learned from
    fresh = Drafter(n_draft=6, rules="suffix")
    fresh.start(d.tokens)
    assert d.draft().tolist() == fresh.draft().tolist() == [64, 65, 500, 66, 67, 68]


# The suffix rules' drafts on the repository's own texts, recorded (as sha256 of replay's dump,
# docs/rules.md's format) by commit b6c3f50, before the rule sets became packages: a change
# of the suffix rules' drafts, meant or not, shows here.
RECORDED = {
    ("alone", 8): (
        28647,
        344,
        11,
        "b7a465073a11330082d6e640cba5aeedbda52e28e620d3c03a5734c743144a16",
    ),
    ("alone", 32): (
        28647,
        1376,
        11,
        "e1f02b5c83aa7c1f92feaf4aa78d67398f5c0e7339b9b90a240f891db28f11ac",
    ),
    ("corpus", 8): (
        28523,
        640,
        135,
        "048ebd4dd6066a94235a159a102754f0c3751bdf0f3e38b873b148f4ba82bfca",
    ),
    ("corpus", 32): (
        28523,
        1672,
        135,
        "da719c1f4e6060d623c7d08a41351c209c9eca9e68a77ac010c2488d76ee1bdd",
    ),
    ("corpus+memory", 8): (
        25886,
        3184,
        2773,
        "483e866a3e1a419b5f9ed1987921a6d860c621496ff9dbad509fabca54cf1d8d",
    ),
    ("corpus+memory", 32): (
        25643,
        4165,
        3015,
        "ff1c0e999470ceca3a0d9652c070b31911e9b550e6270859aef8a0b85a8581c7",
    ),
    ("edits", 8): (
        3626,
        5176,
        4566,
        "23e7b9eee162db9c1626c51489c42dfdda20c13c8cc5c7a5ef27f5dc2eeeb048",
    ),
    ("edits", 32): (
        3213,
        7488,
        4979,
        "033f83b0c1b5bcdf9d9de68e9672dd0cd3bc822160261a5dff03cfb9cab1422b",
    ),
}


@pytest.fixture(scope="module")
def repository_texts(tmp_path_factory):
    data = Path(__file__).resolve().parents[1] / "data"
    books, held = (
        tokens_of(data / name) for name in ("gutenberg.llama3.i32", "heldout.llama3.i32")
    )
    corpus = build_suffix_corpus(books, tmp_path_factory.mktemp("recorded") / "books.ngd")
    return books, held, corpus


@pytest.mark.parametrize(("workload", "n_draft"), list(RECORDED))
def test_the_suffix_rules_draft_as_recorded(repository_texts, workload, n_draft):
    books, held, corpus = repository_texts
    memory = RequestMemory()
    memory.add(held[:3000])
    caches = {
        "alone": {},
        "corpus": {"static": corpus},
        "corpus+memory": {"static": corpus, "dynamic": memory},
    }
    if workload == "edits":  # the substitutions' machinery: a text, edited copies of it
        base, rng = held[:3000].copy(), np.random.default_rng(0)
        edited = base.copy()
        edited[rng.choice(3000, 40, replace=False)] = books[:40]
        inserted = np.insert(edited, sorted(rng.choice(3000, 20, replace=False)), books[100:120])
        stream = np.concatenate([base, edited, inserted, base[:1000]]).astype(np.int32)
        result = replay(stream, 8192, n_draft, dump=True, rules="suffix")
    else:
        result = replay(held, 2048, n_draft, dump=True, rules="suffix", **caches[workload])
    digest = hashlib.sha256(result.dump.astype("<i4").tobytes()).hexdigest()
    assert (result.n_calls, result.n_drafted, result.n_accept, digest) == RECORDED[
        workload, n_draft
    ]
