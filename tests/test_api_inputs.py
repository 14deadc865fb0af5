"""Every public call given arguments of the wrong type or value: a named error, never a
generic exception (TypeError, AttributeError, numba's TypingError, an ambiguous truth
value) and never a silent wrong answer.

Each call below is tried with every one of ``ODD`` in one argument, the others valid;
it may succeed (an odd value can be a valid one) or raise an NgramdraftError; a path
that names no file ("x") raises FileNotFoundError, as open() does.
"""

import contextlib
import copy
import os
import pickle
import re
import threading

import numpy as np
import pytest

from ngramdraft import (
    AdaptiveLength,
    BatchDrafter,
    CostAwareLength,
    Drafter,
    InvalidParameterError,
    InvalidTokensError,
    NgramCache,
    NgramdraftError,
    RequestMemory,
    StaticCache,
    SuffixCorpus,
    WrongFileKindError,
    build_static,
    build_suffix_corpus,
    fetch_model,
    merge_static,
    replay,
    static_from_cache,
    static_from_llamacpp,
)

ODD = [
    None,
    "x",
    b"ab",
    3.5,
    True,
    -1,
    0,
    2**40,
    float("nan"),
    float("inf"),
    [],
    [[1, 2]],
    [1, "a"],
    [2**40],
    [-5],
    np.array([1.5]),
    np.array([[1, 2]]),
    np.int64(3),
    np.float32(1.0),
    {"a": 1},
    object(),
]
TOKENS = np.random.default_rng(0).integers(0, 50, 3000).astype(np.int32)
PROMPT = [1, 2, 3, 1, 2, 3, 1, 2]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    return d, build_static(TOKENS, d / "s.ngd"), build_suffix_corpus(TOKENS, d / "c.ngd")


def _cache():
    c = NgramCache()
    c.update(TOKENS[:200])
    return c


def _memory():
    m = RequestMemory()
    m.add(TOKENS[:100])
    return m


def _drafter(rules):
    d = Drafter(rules=rules, policy=CostAwareLength() if rules == "suffix" else None)
    d.start(PROMPT)
    return d


def _batch(rules):
    b = BatchDrafter(rules=rules, max_seqs=4)
    b.add(0, PROMPT)
    return b


def _calls(d, static, corpus):
    table = np.zeros((1, 8), dtype=np.int32)
    calls = {
        "NgramCache(role)": lambda v: NgramCache(role=v),
        "NgramCache(max_ngrams)": lambda v: NgramCache(max_ngrams=v),
        "NgramCache.followers": lambda v: _cache().followers(v),
        "NgramCache.update(tokens)": lambda v: _cache().update(v),
        "NgramCache.update(nnew)": lambda v: _cache().update(TOKENS[:50], nnew=v),
        "NgramCache.update(ngram_min)": lambda v: _cache().update(TOKENS[:50], ngram_min=v),
        "NgramCache.reserve(n_ngrams)": lambda v: _cache().reserve(v, 10),
        "NgramCache.reserve(n_entries)": lambda v: _cache().reserve(10, v),
        "NgramCache.rewind(tokens)": lambda v: _cache().rewind(v, 3),
        "NgramCache.rewind(n)": lambda v: _cache().rewind(TOKENS[:200], v),
        "NgramCache.grow": lambda v: _cache().grow(v),
        "NgramCache.merge": lambda v: _cache().merge(v),
        "NgramCache.save(path)": lambda v: _cache().save(v),
        "NgramCache.save(format)": lambda v: _cache().save(d / "d.ngd", format=v),
        "NgramCache.load": lambda v: NgramCache.load(v),
        "NgramCache.from_cache": lambda v: NgramCache.from_cache(v),
        "StaticCache.open(path)": lambda v: StaticCache.open(v),
        "StaticCache.open(verify)": lambda v: StaticCache.open(static.path, verify=v),
        "StaticCache.open(tokenizer)": lambda v: StaticCache.open(static.path, tokenizer=v),
        "StaticCache.followers": lambda v: static.followers(v),
        "StaticCache.check_tokens": lambda v: static.check_tokens(v),
        "StaticCache.verify": lambda v: static.verify(deep=v),
        "StaticCache.save(path)": lambda v: static.save(v),
        "StaticCache.save(format)": lambda v: static.save(d / "e.ngd", format=v),
        "build_static(tokens)": lambda v: build_static(v, d / "f.ngd"),
        "build_static(path)": lambda v: build_static(TOKENS[:100], v),
        "build_static(memory_limit)": lambda v: build_static(
            TOKENS[:100], d / "g.ngd", memory_limit=v
        ),
        "merge_static(caches)": lambda v: merge_static(v, d / "h.ngd"),
        "merge_static(path)": lambda v: merge_static([static], v),
        "static_from_cache": lambda v: static_from_cache(v),
        "static_from_llamacpp": lambda v: static_from_llamacpp(v),
        "SuffixCorpus.open": lambda v: SuffixCorpus.open(v),
        "SuffixCorpus.longest_match": lambda v: corpus.longest_match(v),
        "SuffixCorpus.check_tokens": lambda v: corpus.check_tokens(v),
        "SuffixCorpus.verify": lambda v: corpus.verify(deep=v),
        "build_suffix_corpus(tokens)": lambda v: build_suffix_corpus(v, d / "i.ngd"),
        "build_suffix_corpus(memory_limit)": lambda v: build_suffix_corpus(
            TOKENS[:100], d / "j.ngd", memory_limit=v
        ),
        "RequestMemory(max_tokens)": lambda v: RequestMemory(max_tokens=v),
        "RequestMemory.add": lambda v: _memory().add(v),
        "RequestMemory.hold(held)": lambda v: _memory().hold(v),
        "RequestMemory.hold(more)": lambda v: _memory().hold(TOKENS[:10], v),
        "RequestMemory.save": lambda v: _memory().save(v),
        "RequestMemory.load": lambda v: RequestMemory.load(v),
        "replay(tokens)": lambda v: replay(v),
        "replay(n_ctx)": lambda v: replay(TOKENS, n_ctx=v),
        "replay(n_draft)": lambda v: replay(TOKENS, n_draft=v),
        "replay(static)": lambda v: replay(TOKENS, static=v),
        "replay(dynamic)": lambda v: replay(TOKENS, dynamic=v),
        "replay(rules)": lambda v: replay(TOKENS, rules=v),
        "CostAwareLength(pass_cost)": lambda v: CostAwareLength(pass_cost=v),
        "CostAwareLength(decay)": lambda v: CostAwareLength(decay=v),
        "CostAwareLength.drafting_from": lambda v: CostAwareLength().drafting_from(v),
        "AdaptiveLength(n_min)": lambda v: AdaptiveLength(n_min=v),
        "AdaptiveLength(off_below)": lambda v: AdaptiveLength(off_below=v),
        "fetch_model": lambda v: fetch_model(v) if not isinstance(v, str) else None,
    }
    for rules in ("llamacpp", "suffix"):
        calls |= {
            f"{rules} Drafter(n_draft)": lambda v, r=rules: Drafter(rules=r, n_draft=v),
            f"{rules} Drafter(static)": lambda v, r=rules: Drafter(rules=r, static=v),
            f"{rules} Drafter(dynamic)": lambda v, r=rules: Drafter(rules=r, dynamic=v),
            f"{rules} Drafter(policy)": lambda v, r=rules: Drafter(rules=r, policy=v),
            f"{rules} Drafter.start": lambda v, r=rules: Drafter(rules=r).start(v),
            f"{rules} Drafter.accept": lambda v, r=rules: _drafter(r).accept(v),
            f"{rules} Drafter.rewind": lambda v, r=rules: _drafter(r).rewind(v),
            f"{rules} Drafter.sync": lambda v, r=rules: _drafter(r).sync(v),
            f"{rules} Drafter.check_vocabulary": lambda v, r=rules: _drafter(r).check_vocabulary(v),
            f"{rules} Drafter.observe_pass(n)": lambda v, r=rules: _drafter(r).observe_pass(v, 0.1),
            f"{rules} Drafter.observe_pass(s)": lambda v, r=rules: _drafter(r).observe_pass(2, v),
            f"{rules} BatchDrafter(max_seqs)": lambda v, r=rules: BatchDrafter(rules=r, max_seqs=v),
            f"{rules} BatchDrafter(static)": lambda v, r=rules: BatchDrafter(rules=r, static=v),
            f"{rules} BatchDrafter.add(id)": lambda v, r=rules: _batch(r).add(v, PROMPT),
            f"{rules} BatchDrafter.add(prompt)": lambda v, r=rules: _batch(r).add(1, v),
            f"{rules} BatchDrafter.draft": lambda v, r=rules: _batch(r).draft(v),
            f"{rules} BatchDrafter.accept(ids)": lambda v, r=rules: _batch(r).accept(v, [[1]]),
            f"{rules} BatchDrafter.accept(tokens)": lambda v, r=rules: _batch(r).accept([0], v),
            f"{rules} BatchDrafter.accept(lengths)": lambda v, r=rules: _batch(r).accept(
                [0], table, v
            ),
            f"{rules} BatchDrafter.sync(ids)": lambda v, r=rules: _batch(r).sync(v, table, [3]),
            f"{rules} BatchDrafter.sync(table)": lambda v, r=rules: _batch(r).sync([0], v, [3]),
            f"{rules} BatchDrafter.sync(lengths)": lambda v, r=rules: _batch(r).sync([0], table, v),
            f"{rules} BatchDrafter.sync(rows)": lambda v, r=rules: _batch(r).sync(
                [0], table, [3], v
            ),
            f"{rules} BatchDrafter.rewind(id)": lambda v, r=rules: _batch(r).rewind(v, 1),
            f"{rules} BatchDrafter.rewind(n)": lambda v, r=rules: _batch(r).rewind(0, v),
            f"{rules} BatchDrafter.finish": lambda v, r=rules: _batch(r).finish(v),
            f"{rules} BatchDrafter.tokens": lambda v, r=rules: _batch(r).tokens(v),
            f"{rules} BatchDrafter.observe_pass(id)": lambda v, r=rules: _batch(r).observe_pass(
                v, 2, 0.1
            ),
            f"{rules} BatchDrafter.observe_pass(n)": lambda v, r=rules: _batch(r).observe_pass(
                0, v, 0.1
            ),
        }
    return calls


CALLS = sorted(_calls(None, None, None))


def _generic(call, values):
    """What ``call`` raised, for each of ``values``, that is not a named error."""
    generic = []
    for value in values:
        try:
            call(value)
        except (NgramdraftError, FileNotFoundError):
            pass
        except Exception as e:  # what this test looks for
            generic.append(f"{value!r}: {type(e).__name__}: {str(e)[:120]}")
    return generic


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("call", CALLS)
def test_odd_arguments_get_named_errors(call, files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "x" is a path too: what it writes goes there
    generic = _generic(_calls(*files)[call], ODD)
    assert not generic, "\n".join(generic)


@pytest.mark.parametrize(
    "read", [StaticCache.open, NgramCache.load, SuffixCorpus.open, RequestMemory.load]
)
def test_a_file_descriptor_is_not_a_path(read):
    """An int once reached open() as a file descriptor, read from it and closed it:
    "opening" 1 closed the process's standard output."""
    r, w = os.pipe()
    os.write(w, b"not a cache file")
    os.close(w)  # a read finds the end, where it would otherwise wait for more
    try:
        with pytest.raises(InvalidParameterError, match="must be a file path"):
            read(r)
        os.fstat(r)  # still open
    finally:
        with contextlib.suppress(OSError):  # closed by the read, before the fix
            os.close(r)


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_an_engine_rows_lengths_are_not_cut_to_ints(rules):
    """A float length was once cut to an int (7.5 read as 7) instead of refused."""
    b = _batch(rules)
    with pytest.raises(InvalidParameterError, match="lengths must be 1 integers"):
        b.sync([0], np.array([PROMPT], dtype=np.int32), [7.5])
    assert b.tokens(0).tolist() == PROMPT


def test_held_ids_past_int32_are_refused_not_wrapped():
    """A held id over 2**31 - 1 once wrapped around to a negative int32 silently."""
    with pytest.raises(InvalidTokensError, match="held must be token ids"):
        RequestMemory().hold(np.array([1, 2**32 + 5, -1]))


def test_pass_times_are_checked_and_a_zero_time_is_ignored():
    d = Drafter(rules="suffix", n_draft=8, policy=CostAwareLength())
    for bad in [(0, 0.1), (2, -0.5), (2, float("nan")), (2, float("inf")), (2.5, 0.1)]:
        with pytest.raises(InvalidParameterError):
            d.observe_pass(*bad)
    d.observe_pass(40, 0.1)  # not one of this drafter's passes: ignored
    policy = CostAwareLength()
    policy.observe_pass(2, 0.0)  # a clock too coarse to time the pass
    assert not policy._timed
    policy.observe_pass(np.int64(2), np.float32(0.5))  # numpy's numbers are numbers
    assert list(policy._timed) == [2]


def test_odd_arguments_to_the_llama_cpp_adapter(tiny_gguf, tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp")
    from ngramdraft.integrations.llama_cpp import (
        NgramDraftModel,
        load_llama,
        plain_llama,
        sizes_timed_at_load,
    )

    monkeypatch.chdir(tmp_path)
    calls = {
        "NgramDraftModel(n_draft)": lambda v: NgramDraftModel(n_draft=v),
        "NgramDraftModel(static)": lambda v: NgramDraftModel(static=v),
        "NgramDraftModel(policy)": lambda v: NgramDraftModel(rules="suffix", policy=v),
        "load_llama(model_path)": lambda v: load_llama(v),
        "load_llama(n_ctx)": lambda v: load_llama(tiny_gguf, n_ctx=v),
        "plain_llama(model_path)": lambda v: plain_llama(v),
        "sizes_timed_at_load": lambda v: sizes_timed_at_load(v),
    }
    # Valid sizes (0: the model's own) would load the model.
    sizes = [v for v in ODD if not (type(v) in (int, np.int64) and 0 <= v <= 1 << 24)]
    generic = [
        f"{name} {failure}"
        for name, call in calls.items()
        for failure in _generic(call, sizes if name == "load_llama(n_ctx)" else ODD)
    ]
    assert not generic, "\n".join(generic)


@pytest.mark.parametrize(
    "read", [StaticCache.open, NgramCache.load, SuffixCorpus.open, RequestMemory.load]
)
def test_a_pipe_or_a_device_is_not_a_cache_file(read, tmp_path):
    """Opening a pipe no process writes to once waited for a writer forever, and a
    device's size, read as 0, made /dev/null an empty cache."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/null", tmp_path):
        raised = []

        def run(path=path, raised=raised):
            try:
                read(path)
            except Exception as e:  # what the test looks at
                raised.append(e)

        reader = threading.Thread(target=run, daemon=True)  # a hang fails, not waits
        reader.start()
        reader.join(30)
        assert not reader.is_alive(), f"{path}: still reading after 30 s"
        assert raised and isinstance(raised[0], WrongFileKindError), (path, raised)
        assert re.search("directory|not a regular file", str(raised[0]))


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_a_step_of_no_sequences_takes_empty_lists(rules):
    """[] is float64 to numpy: no lengths for no sequences are integers all the same."""
    b = _batch(rules)
    assert b.sync([], np.zeros((0, 4), np.int32), []).shape == (0,)
    b.accept([], np.zeros((0, 4), np.int32), [])
    assert b.draft([])[0].shape == (0, b.n_draft)


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, pickle.dumps])
def test_a_batch_cannot_be_copied(rules, how):
    """A shallow copy once shared the original's kernel states (two batches writing one
    sequence's rows); pickling raised whatever its attributes made of it."""
    with pytest.raises(InvalidParameterError, match="cannot be copied or pickled"):
        how(_batch(rules))
