"""Drafter: the README's decoding loop, the per-call API, errors, dynamic persistence."""

import re

import numpy as np
import pytest

from conftest import REPO
from ngramdraft import (
    Drafter,
    InvalidParameterError,
    InvalidTokensError,
    NgramdraftError,
    TokenizerMismatchError,
    build_static,
)


def test_readme_loop_runs_as_written_anywhere_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    pytest.importorskip("quicktok")
    readme = (REPO / "README.md").read_text()
    code = re.search(r"<!-- loop -->\n```python\n(.*?)```", readme, re.S).group(1)
    monkeypatch.chdir(tmp_path)  # a folder with nothing of the clone's in it
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    tokens, passes = map(int, re.match(r"(\d+) tokens in (\d+) forward passes", out).groups())
    assert (tokens, passes) == (680, 165)  # what the README says it prints
    assert not list(tmp_path.iterdir())


def test_draft_accept_follow_the_sequence():
    drafter = Drafter(n_draft=4)
    drafter.start([1, 2, 3, 4, 1, 2, 3, 4, 1, 2])
    assert drafter.draft().tolist() == [3, 4, 1, 2]
    drafter.accept([3, 4])
    assert drafter.tokens.tolist()[-3:] == [2, 3, 4]
    assert drafter.draft().dtype == np.int32


def test_finish_merges_into_dynamic_and_next_sequence_uses_it():
    drafter = Drafter(n_draft=2)
    drafter.start([5, 6, 7, 5, 6, 7, 5, 6, 7, 5, 6])
    drafter.finish()
    drafter.start([5, 6])  # the context knows nothing; the dynamic cache does
    assert drafter.draft().tolist() == [7, 5]


@pytest.mark.parametrize("name", ["dyn.ngd", "dyn.bin"])
def test_dynamic_path_is_loaded_and_saved_in_its_format(tmp_path, name):
    path = tmp_path / name
    first = Drafter(dynamic=path)
    first.start([1, 2, 3, 1, 2, 3, 1, 2, 3])
    first.finish()
    assert path.exists()
    with open(path, "rb") as f:
        assert (f.read(8) == b"NGRMDRFT") == (name.endswith(".ngd"))
    second = Drafter(dynamic=path)
    assert len(second.dynamic) == len(first.dynamic)


def test_drafters_share_a_static_cache(tmp_path):
    static = build_static([1, 2, 3] * 50, tmp_path / "s.ngd")
    a, b = Drafter(static), Drafter(static)
    a.start([9, 1, 2])
    b.start([7, 2, 3])
    assert a.draft().tolist()[:2] == [3, 1]
    assert b.draft().tolist()[:2] == [1, 2]


def test_tokenizer_mismatch_is_refused(tmp_path):
    from ngramdraft.build.counting import TokenTriples
    from ngramdraft.build.local import write_static

    meta = {"tokenizer": {"name": "llama3", "fingerprint": "abc"}}
    write_static([TokenTriples(np.arange(10, dtype=np.int32))], tmp_path / "s.ngd", meta=meta)
    with pytest.raises(TokenizerMismatchError, match="llama3"):
        Drafter(tmp_path / "s.ngd", tokenizer={"name": "qwen3", "fingerprint": "def"})
    Drafter(tmp_path / "s.ngd", tokenizer={"name": "llama3", "fingerprint": "abc"})


def test_bad_arguments_are_named():
    with pytest.raises(InvalidParameterError, match="n_draft"):
        Drafter(n_draft=0)
    with pytest.raises(InvalidParameterError, match="ngram_min"):
        Drafter(ngram_min=3, ngram_max=2)
    with pytest.raises(InvalidParameterError, match="ngram_max"):
        Drafter(ngram_max=5)
    with pytest.raises(InvalidParameterError, match="expected a cache or a path"):
        Drafter(static=42)
    drafter = Drafter()
    with pytest.raises(NgramdraftError, match="start"):
        drafter.draft()
    drafter.start([1, 2])
    with pytest.raises(InvalidTokensError, match="dtype"):
        drafter.accept(np.array([0.5]))
    with pytest.raises(InvalidTokensError, match="-1"):
        drafter.accept([-1])
    assert drafter.tokens.tolist() == [1, 2]  # a rejected accept changes nothing


def test_long_sequences_grow_the_buffers():
    drafter = Drafter(n_draft=3)
    drafter.start(np.arange(1000) % 17)
    expected = 1000
    for _ in range(100):
        accepted = [*drafter.draft()[:1].tolist(), 5]
        drafter.accept(accepted)
        expected += len(accepted)
    drafter.context.verify()
    assert len(drafter.tokens) == expected
