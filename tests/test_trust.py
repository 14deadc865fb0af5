"""Trust: damaged files, hostile arguments, crashed writers, and what a newcomer is told.

Each test reproduces a defect found on an earlier version (issue "Trust and
first use") and fails without its fix.
"""

import json
import os
import stat
import subprocess
import sys
import tracemalloc
import warnings

import numba
import numpy as np
import pytest

from hostile.mutations import forge, section
from ngramdraft import (
    CorpusError,
    CorruptFileError,
    Drafter,
    InvalidTokensError,
    NgramCache,
    StaticCache,
    TokenizerMismatchError,
    WrongFileKindError,
    build_static,
    replay,
    static_from_llamacpp,
)
from ngramdraft.errors import ShortStreamWarning
from ngramdraft.files.atomic import atomic_output
from ngramdraft.kernels.table import COUNT_MAX

# A stream whose every 2-gram has one follower, so the static cache drafts alone.
PATTERN = np.tile(np.arange(10, 60, dtype=np.int32), 40)


@pytest.fixture
def static_file(tmp_path):
    return build_static(PATTERN, tmp_path / "s.ngd").path


def _overwrite_stats(path, value, *, forge_checksums):
    raw = bytearray(path.read_bytes())
    offset, size = section(raw, "stats")
    stats = np.frombuffer(raw, "<i4", count=size // 4, offset=offset).copy().reshape(-1, 3)
    stats[:, 0] = value  # every key's best follower
    raw[offset : offset + size] = stats.tobytes()
    path.write_bytes(bytes(forge(raw) if forge_checksums else raw))


@pytest.mark.parametrize("forge_checksums", [False, True])
@pytest.mark.parametrize("value", [2_000_000_000, 11, -5])
def test_damaged_stats_never_reach_the_model(static_file, forge_checksums, value):
    """A static-only draft must be a bounds-checked follower of its 2-gram, within max_token."""
    _overwrite_stats(static_file, value, forge_checksums=forge_checksums)
    drafter = Drafter(static=static_file, n_draft=8)
    drafter.start(PATTERN[:30])
    try:
        draft = drafter.draft()
    except CorruptFileError:
        return
    # Only a value that is a real follower may pass: then the draft is in range.
    assert draft.size == 0 or (draft.min() >= 0 and draft.max() <= 59)


def test_stats_damage_without_forged_checksums_is_named(static_file):
    _overwrite_stats(static_file, 11, forge_checksums=False)  # in range, wrong follower
    drafter = Drafter(static=static_file)
    drafter.start(PATTERN[:30])
    with pytest.raises(CorruptFileError):
        drafter.draft()
    with pytest.raises(CorruptFileError):
        replay(PATTERN, 64, 8, static=static_file)


def _meta(path, text):
    raw = bytearray(path.read_bytes())
    offset, size = section(raw, "meta")
    data = text.encode()
    assert len(data) <= size + 4096
    raw[offset : offset + size] = data.ljust(size)[:size] if len(data) <= size else data[:size]
    path.write_bytes(bytes(forge(raw)))


def test_meta_that_nests_deeply_or_lies_about_the_tokenizer_is_named(tmp_path):
    deep = build_static(PATTERN, tmp_path / "deep.ngd", meta={"x": "y" * 400_000}).path
    _meta(deep, "[" * 200_000)
    with pytest.raises(CorruptFileError, match="nests"):
        StaticCache.open(deep)
    number = build_static(PATTERN, tmp_path / "n.ngd", meta={"pad": "x" * 40}).path
    _meta(number, '{"tokenizer": 12345}')
    with pytest.raises(CorruptFileError, match="tokenizer"):
        StaticCache.open(number, tokenizer="llama3")


def test_huge_token_ids_are_refused_before_anything_is_sized_by_them(tmp_path):
    tracemalloc.start()
    with pytest.raises(InvalidTokensError, match="token ids up to"):
        build_static(np.array([2**31 - 1, 1, 2, 2**31 - 1, 1, 3]), tmp_path / "h.ngd")
    lookup = tmp_path / "h.bin"
    np.array([2**31 - 2, 5, -1, -1, 1, 7, 1], dtype="<i4").tofile(lookup)
    with pytest.raises(InvalidTokensError, match="token ids up to"):
        static_from_llamacpp(lookup, tmp_path / "h2.ngd")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 << 20  # no 16 GiB histogram on the way (numpy's memory is traced)


def test_replay_n_ctx_is_bounded_by_the_stream():
    with pytest.warns(ShortStreamWarning, match="nothing was replayed"):
        result = replay(PATTERN, n_ctx=10**8)
    assert result.n_predict == 0


def test_a_static_file_is_not_taken_for_a_dynamic_one(static_file):
    before = static_file.read_bytes()
    with pytest.raises(WrongFileKindError, match="static cache"):
        Drafter(dynamic=static_file)
    assert static_file.read_bytes() == before


def test_counts_saturate_instead_of_wrapping(tmp_path):
    lookup = tmp_path / "big.bin"
    np.array([5, 6, -1, -1, 1, 7, COUNT_MAX - 3], dtype="<i4").tofile(lookup)
    cache = NgramCache.load(lookup)
    cache.update([5, 6, 7] * 4)
    cache.merge(NgramCache.load(lookup))
    cache.verify()
    tokens, counts = cache.followers((5, 6))
    assert tokens.tolist() == [7] and counts.tolist() == [COUNT_MAX]
    cache.save(tmp_path / "big.ngd")
    again = NgramCache.load(tmp_path / "big.ngd")  # a wrapped count would not load
    assert again.followers((5, 6))[1].tolist() == [COUNT_MAX]


def test_files_are_written_with_the_umask_like_open(tmp_path, static_file):
    old = os.umask(0o022)
    try:
        build_static(PATTERN, tmp_path / "a.ngd")
        assert stat.S_IMODE((tmp_path / "a.ngd").stat().st_mode) == 0o644
        os.umask(0o077)
        NgramCache.load(static_file).save(tmp_path / "b.bin", "llamacpp")
        assert stat.S_IMODE((tmp_path / "b.bin").stat().st_mode) == 0o600
        os.chmod(tmp_path / "a.ngd", 0o640)  # a replaced file keeps its mode, as with open()
        build_static(PATTERN, tmp_path / "a.ngd")
        assert stat.S_IMODE((tmp_path / "a.ngd").stat().st_mode) == 0o640
    finally:
        os.umask(old)


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_killed_writers_are_removed_on_the_next_write(tmp_path):
    target = tmp_path / "c.ngd"
    dead, alive = _dead_pid(), os.getpid()
    stale_file = tmp_path / f".c.ngd.ngd-tmp-{dead}-abc.tmp"
    stale_dir = tmp_path / f".c.ngd.ngd-tmp-{dead}-def"
    live_file = tmp_path / f".c.ngd.ngd-tmp-{alive}-ghi.tmp"
    other = tmp_path / f".d.ngd.ngd-tmp-{dead}-jkl.tmp"  # another target's
    stale_file.write_bytes(b"x")
    stale_dir.mkdir()
    (stale_dir / "keys").write_bytes(b"x" * 100)
    live_file.write_bytes(b"x")
    other.write_bytes(b"x")
    build_static(PATTERN, target)
    assert not stale_file.exists() and not stale_dir.exists()
    assert live_file.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [target.name, live_file.name, other.name]
    )


def test_leftovers_of_a_failed_write_are_removed_at_once(tmp_path):
    with pytest.raises(RuntimeError), atomic_output(tmp_path / "x.ngd") as f:
        f.write(b"partial")
        raise RuntimeError("writer failed")
    assert list(tmp_path.iterdir()) == []


def test_misspelled_tokenizer_fails_fast_with_close_matches(static_file, tmp_path, monkeypatch):
    import ngramdraft.tokenizers.huggingface as hub

    def never(*args):  # a misspelled name fails on its name: it never goes to the hub
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(hub.HFTokenizer, "__init__", never)
    for call in (
        lambda: StaticCache.open(
            build_static(PATTERN, tmp_path / "t.ngd", meta={"tokenizer": _ident()}).path,
            tokenizer="Llama3",
        ),
        lambda: Drafter(static=static_file, tokenizer="Llama3"),
    ):
        with pytest.raises(CorpusError, match="did you mean 'llama3'"):
            call()
    # A recorded name is checked by name, without loading anything.
    cache = StaticCache.open(tmp_path / "t.ngd")
    cache.check_tokenizer("llama3")
    with pytest.raises(TokenizerMismatchError):
        cache.check_tokenizer("qwen3")


def _ident():
    return {"name": "llama3", "kind": "quicktok", "n_vocab": 128256, "fingerprint": "0" * 16}


def test_token_file_paths_are_accepted_wherever_tokens_are(tmp_path):
    path = tmp_path / "tokens.i32"
    PATTERN.astype("<i4").tofile(path)
    np.save(tmp_path / "tokens.npy", PATTERN.astype(np.int64))
    a = build_static(str(path), tmp_path / "a.ngd")
    b = build_static(tmp_path / "tokens.npy", tmp_path / "b.ngd")
    assert a.header.sections["tokens"][2] == b.header.sections["tokens"][2]
    assert replay(path, 64, 8).n_accept == replay(PATTERN, 64, 8).n_accept > 0


def test_token_ids_beyond_the_caches_vocabulary_are_named(tmp_path):
    cache = build_static(PATTERN, tmp_path / "v.ngd", meta={"tokenizer": _ident()})
    with pytest.raises(TokenizerMismatchError, match="128256"):
        replay(np.array([1, 2, 3, 200_000] * 50), 64, 8, static=cache)


def test_foreign_files_get_one_message_everywhere(tmp_path, cli):
    text = tmp_path / "notes.txt"
    text.write_text("not a cache at all\n" * 10)
    messages = set()
    for call in (
        lambda: StaticCache.open(text),
        lambda: NgramCache.load(text),
        lambda: Drafter(static=text),
        lambda: Drafter(dynamic=text),
    ):
        with pytest.raises(WrongFileKindError) as info:
            call()
        messages.add(str(info.value))
    assert len(messages) == 1 and "nor a llama.cpp lookup file" in messages.pop()
    for argv in (
        ("replay", text, "--static", text, "--tokenizer", "llama3"),
        ("replay", text, "--dynamic", text, "--tokenizer", "llama3"),
        ("convert", text, "-o", tmp_path / "x.ngd"),
        ("inspect", text),
    ):
        status, _, err = cli(*argv)
        assert status == 1 and "nor a llama.cpp lookup file" in err, argv


def test_directories_and_pipes_get_plain_answers(tmp_path, cli, static_file):
    status, _, err = cli("build-static", tmp_path / "x.i32", "-o", tmp_path)
    assert status == 1 and "ngramdraft: error:" in err
    np.arange(100, dtype="<i4").tofile(tmp_path / "x.i32")
    status, _, err = cli("build-static", tmp_path / "x.i32", "-o", tmp_path)
    assert status == 1 and "is a directory" in err
    status, _, err = cli("inspect", tmp_path)
    assert status == 1 and "ngramdraft: error:" in err and "Traceback" not in err
    inspect = subprocess.run(
        f"{sys.executable} -m ngramdraft inspect {static_file} | head -1",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert inspect.stderr == "" and inspect.stdout.startswith("path:")


def test_an_empty_corpus_is_warned_about(tmp_path, cli):
    empty = tmp_path / "empty.i32"
    empty.write_bytes(b"")
    status, _, err = cli("build-static", empty, "-o", tmp_path / "e.ngd")
    assert status == 0 and "ngramdraft: warning:" in err and "no 2-gram" in err


def test_replay_explains_its_figures_and_times_startup_apart(cli, tmp_path):
    path = tmp_path / "t.i32"
    np.tile(PATTERN, 3).astype("<i4").tofile(path)
    status, out, _ = cli("replay", path, "--n-ctx", 512)
    assert status == 0
    for words in ("came from accepted drafts", "forward passes", "tokens per pass", "t_startup"):
        assert words in out
    status, out, _ = cli("replay", path, "-c", 512, "--draft", 4, "--json")
    figures = json.loads(out)
    assert (
        figures["n_draft"] == 4 and figures["passes"] == figures["n_predict"] - figures["n_accept"]
    )
    assert "t_startup_ms" in figures


def test_help_describes_every_command_and_option():
    from ngramdraft.cli.parser import parser

    commands = parser()._subparsers._group_actions[0].choices
    assert {"build-static", "replay", "generate", "serve", "convert", "inspect"} <= set(commands)
    for name, sub in commands.items():
        text = sub.format_help()
        assert sub.description and "examples:" in text, name
        assert "``" not in text and "**" not in text, name
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings or action.dest}"
    replay_help = commands["replay"].format_help()
    for alias in ("-lcs", "-lcd", "--draft", "default: 4096", "default: 8"):
        assert alias in replay_help


def test_the_package_declares_its_types():
    import ngramdraft

    assert (os.path.dirname(ngramdraft.__file__) + "/py.typed") and os.path.exists(
        os.path.join(os.path.dirname(ngramdraft.__file__), "py.typed")
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Drafter.draft.__annotations__["return"] is not None


@pytest.mark.slow  # compiles every kernel in a new cache: two minutes
@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="the coverage run compiles nothing")
def test_an_installation_says_it_compiles_once(static_file, tmp_path):
    """The first run that compiles says so, and compiles what the other commands need too:
    before, the README's first command (build-static, then replay) said "once for this
    installation" twice. And a run that compiles nothing says nothing (before, the notice
    looked for one kernel's cache file, and every run of the suffix rules alone printed it)."""
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"),  # a new installation's cache
        "NGRAMDRAFT_CACHE": str(tmp_path / "ngramdraft-cache"),
    }

    def run(*args):
        done = subprocess.run(
            [sys.executable, "-m", "ngramdraft", *map(str, args)],
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    assert run("inspect", static_file) == ""  # reads a header: no kernel
    cold = run("inspect", static_file, "--verify")  # checks spans with a kernel
    assert cold.startswith("ngramdraft: compiling the kernels, once") and cold.count("\n") == 1
    assert run("inspect", static_file, "--verify") == ""  # the same kernel, now cached
    tokens = tmp_path / "t.i32"
    np.tile(np.arange(50, dtype="<i4"), 40).tofile(tokens)
    for rules in ("llamacpp", "suffix"):  # kernels of other commands: compiled then too
        assert run("build-static", tokens, "-o", tmp_path / "s.ngd", "-q") == ""
        assert run("replay", tokens, "--rules", rules, "-c", "256", "-q") == ""
    # A batch's span kernels inline a rule set's step: compiled once each, not a second
    # time for a constant first row (numba compiles a call with a constant for that
    # constant): llama.cpp's rules' draft span alone took half a minute of the first run.
    spans = [p.relative_to(tmp_path) for p in tmp_path.rglob("rows._*_span-*.nbc")]
    kernels = {(p.parent, p.name.split(".py")[0]) for p in spans}
    assert len(kernels) == 6 and len(spans) == len(kernels), sorted(spans)
