"""The suffix rules' earlier requests in a file: shared by drafters and processes, nothing lost."""

import subprocess
import sys

import numpy as np
import pytest

from hostile.mutations import forge, section
from ngramdraft import (
    BatchDrafter,
    ChecksumError,
    CorruptFileError,
    Drafter,
    NgramCache,
    RequestMemory,
    StaticCache,
    WrongFileKindError,
    build_static,
    build_suffix_corpus,
)
from ngramdraft.errors import LockTimeoutError, UnsavedCountsWarning
from ngramdraft.files.atomic import locked

WRITER = """
import sys
from ngramdraft import Drafter
path, who = sys.argv[1], int(sys.argv[2])
drafter = Drafter(rules="suffix", dynamic=path)
for i in range(20):
    drafter.start([1000 + who, 2000 + i, 7])  # one sequence per (writer, round)
    drafter.finish()
"""


def _sequences(path):
    tokens = RequestMemory.load(path).index.tokens.tolist()
    out, seq = set(), []
    for t in tokens:
        if t == -1:
            out.add(tuple(seq))
            seq = []
        else:
            seq.append(t)
    return out


def test_two_processes_finishing_on_one_path_lose_nothing(tmp_path):
    path = tmp_path / "requests.ngd"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(who)]) for who in range(2)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    expected = {(1000 + who, 2000 + i, 7) for who in range(2) for i in range(20)}
    assert _sequences(path) == expected


def test_a_new_drafter_drafts_from_what_others_saved(tmp_path):
    path = tmp_path / "requests.ngd"
    first, second = Drafter(rules="suffix", dynamic=path), Drafter(rules="suffix", dynamic=path)
    first.start([5, 6, 7, 8, 9, 10])
    first.finish()
    second.start([40, 41, 42])
    second.finish()  # the file changed under it: the save builds on it
    assert _sequences(path) == {(5, 6, 7, 8, 9, 10), (40, 41, 42)}
    assert len(second.dynamic) == 11  # and it learned the first one's sequence
    third = Drafter(rules="suffix", dynamic=str(path))
    third.start([99, 5, 6, 7])
    assert third.draft().tolist() == [8, 9, 10]


def test_batch_rows_finish_into_the_file(tmp_path):
    path = tmp_path / "requests.ngd"
    batch = BatchDrafter(rules="suffix", dynamic=path, save_every=3600)
    for i in range(3):
        batch.add(i, [100 + i, 1, 2])
    for i in range(3):
        batch.finish(i)
    assert not path.exists()  # spaced saves: nothing yet
    batch.flush()
    assert _sequences(path) == {(100 + i, 1, 2) for i in range(3)}


def test_a_lock_not_taken_in_time_is_named_and_loses_nothing(tmp_path):
    path = tmp_path / "requests.ngd"
    drafter = Drafter(rules="suffix", dynamic=path, lock_timeout=0.2)
    drafter.start([1, 2, 3])
    with locked(path, 1.0), pytest.warns(UnsavedCountsWarning, match="lock"):
        drafter.finish()
    with locked(path, 1.0), pytest.raises(LockTimeoutError, match="lock"):
        drafter.flush()
    drafter.start([4, 5, 6])
    drafter.finish()
    assert _sequences(path) == {(1, 2, 3), (4, 5, 6)}


def test_the_budget_keeps_the_newest_sequences(tmp_path):
    path = tmp_path / "requests.ngd"
    drafter = Drafter(rules="suffix", dynamic=path, max_dynamic_tokens=40)
    for i in range(30):
        drafter.start([500 + i, 1, 2])
        drafter.finish()
    held = _sequences(path)
    assert (529, 1, 2) in held and (500, 1, 2) not in held
    assert len(RequestMemory.load(path).index.tokens) <= 40
    RequestMemory.load(path, 40).index._check()


def test_merge_dynamic_joins_requests_files_in_order_and_refuses_other_kinds(tmp_path, cli):
    """Servers that each kept a requests file of their own, joined into one as llama.cpp's
    lookup-merge adds up their dynamic caches (before, merge-dynamic refused them)."""
    paths = [tmp_path / f"server-{i}.ngd" for i in range(2)]
    for i, path in enumerate(paths):
        drafter = Drafter(rules="suffix", dynamic=path)
        for j in range(3):
            drafter.start([100 * i + j, 7, 8])
            drafter.finish()
    joined = tmp_path / "requests.ngd"
    status, out, err = cli("merge-dynamic", *paths, "-o", joined)
    assert status == 0 and "6 sequences, 18 tokens" in out, err
    held = RequestMemory.load(joined).index.tokens.reshape(-1, 4)
    assert held[:, 0].tolist() == [0, 1, 2, 100, 101, 102] and (held[:, 3] == -1).all()
    drafter = Drafter(rules="suffix", dynamic=joined, max_dynamic_tokens=12)
    drafter.start([5])
    drafter.finish()  # past its budget: the first file's sequences go first
    assert (101, 7, 8) not in _sequences(joined) and (102, 7, 8) in _sequences(joined)
    dynamic = tmp_path / "dynamic.ngd"
    NgramCache().save(dynamic)
    for argv, words in [
        ((paths[0], dynamic, "-o", tmp_path / "m.ngd"), "dynamic.ngd: a dynamic file among"),
        ((paths[0], "-o", tmp_path / "m.bin"), "no llama.cpp form"),
    ]:
        status, _, err = cli("merge-dynamic", *argv)
        assert status == 1 and words in err and err.count("\n") == 1
    assert not (tmp_path / "m.ngd").exists() and not (tmp_path / "m.bin").exists()


def test_wrong_kinds_are_named(tmp_path):
    requests = tmp_path / "requests.ngd"
    memory = RequestMemory()
    memory.add(np.arange(50, dtype=np.int32) % 7)
    memory.save(requests)
    static = tmp_path / "static.ngd"
    build_static(np.arange(50, dtype=np.int32) % 7, static)
    dynamic = tmp_path / "dynamic.ngd"
    NgramCache().save(dynamic)
    corpus = build_suffix_corpus(np.arange(50, dtype=np.int32) % 7, tmp_path / "corpus.ngd")
    with pytest.raises(WrongFileKindError, match="requests file"):
        Drafter(dynamic=requests)  # llama.cpp's rules
    with pytest.raises(WrongFileKindError, match="requests file"):
        StaticCache.open(requests)
    with pytest.raises(WrongFileKindError, match="requests"):
        Drafter(rules="suffix", static=requests)
    for other in (static, dynamic, corpus.path):
        with pytest.raises(WrongFileKindError, match="not a requests file"):
            Drafter(rules="suffix", dynamic=other)


def test_damaged_requests_files_are_named(tmp_path):
    path = tmp_path / "requests.ngd"
    memory = RequestMemory()
    memory.add([1, 2, 3])
    memory.add([4, 5])
    memory.save(path)
    raw = bytearray(path.read_bytes())
    offset, size = section(raw, "tokens")
    flipped = bytearray(raw)
    flipped[offset + 4] ^= 0x40
    (tmp_path / "flipped.ngd").write_bytes(flipped)
    with pytest.raises(ChecksumError, match="tokens section"):
        RequestMemory.load(tmp_path / "flipped.ngd")
    unended = bytearray(raw)
    unended[offset + size - 4 : offset + size] = np.int32(9).tobytes()  # the last -1, gone
    (tmp_path / "unended.ngd").write_bytes(forge(unended))
    with pytest.raises(CorruptFileError, match="each ended by -1"):
        Drafter(rules="suffix", dynamic=tmp_path / "unended.ngd")
