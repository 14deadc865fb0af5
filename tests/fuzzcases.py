"""Seeded mutations of cache files, and what is done with each (run by test_fuzz.py).

    python tests/fuzzcases.py BASE_DIR KIND FIRST COUNT

runs cases FIRST .. FIRST+COUNT-1 of one kind (static, dynamic, lookup, suffix) in
this process, printing ``start N`` before case N and ``done N OUTCOME`` after
it, so that the parent can tell which case a crash or a hang happened in.
An outcome is ``ok`` (the file worked), ``named:<Error>`` (a named error), or
``FAIL:<what>`` (a generic exception, or a drafted token out of range).

Mutations: bit flips anywhere; truncation; a header field set to an extreme
value (header checksum recomputed); and, for native files, a section body
overwritten with every checksum recomputed, so that only the structure checks
and the kernels' guards stand between the damage and the model.

The command-line steps run in this process, and every ``PROCESS_EVERY``-th
case as real processes whose output is a pipe (``_cli_process``).
"""

import contextlib
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile.mutations import forge, rehash, section
from ngramdraft import (
    Drafter,
    NgramCache,
    NgramdraftError,
    RequestMemory,
    StaticCache,
    build_static,
    merge_static,
    replay,
    static_from_cache,
)
from ngramdraft.build.corpus import Corpus
from ngramdraft.build.suffixes import build_suffixes
from ngramdraft.caches.suffix_corpus import SuffixCorpus
from ngramdraft.cli import main as cli_main
from ngramdraft.files.ngd.header import KIND_REQUESTS, KIND_SUFFIX, SECTIONS, SECTIONS_OF, SLOTS

KINDS = {
    "static": "static.ngd",
    "dynamic": "dynamic.ngd",
    "lookup": "lookup.bin",
    "suffix": "suffix.ngd",
    "requests": "requests.ngd",
}
KIND_OF = {"suffix": KIND_SUFFIX, "requests": KIND_REQUESTS}
# Every this many cases, the command-line steps run as processes (each start costs a
# second: the imports and the kernels' loading); the others run them in this process.
PROCESS_EVERY = 250
EXTREMES = (0, 1, 2, 7, 2**31 - 1, 2**31, 2**32 - 1, 2**63 - 1, 2**64 - 1)
# Header fields past the magic (docs/format.md): u32 at 8..27, u64 at 28..95,
# then the section table (u64 offset, size, checksum, reserved per section).
U32_FIELDS = (8, 12, 16, 20, 24)
U64_FIELDS = tuple(range(28, 96, 8)) + tuple(
    96 + 32 * i + j for i in range(len(SLOTS)) for j in (0, 8)
)


def make_bases(directory):
    """The base files of a fuzz run, built from one seeded stream."""
    rng = np.random.default_rng(7)
    stream = np.concatenate([rng.integers(0, 40, 1500), np.tile(np.arange(40, 60), 80)])
    stream = stream.astype(np.int32)
    directory = Path(directory)
    build_static(stream, directory / KINDS["static"])
    dyn = NgramCache()
    dyn.update(stream)
    dyn.save(directory / KINDS["dynamic"])
    dyn.save(directory / KINDS["lookup"], "llamacpp")
    half = len(stream) // 2  # two token files: the suffix file holds a separator
    stream[:half].tofile(directory / "a.i32")
    stream[half:].tofile(directory / "b.i32")
    build_suffixes(
        Corpus.of([directory / "a.i32", directory / "b.i32"]), directory / KINDS["suffix"]
    )
    memory = RequestMemory()
    for start in range(0, len(stream), 300):
        memory.add(stream[start : start + 300])
    memory.save(directory / KINDS["requests"])
    np.save(directory / "stream.npy", stream)


def mutate(raw, kind, seed):
    rng = np.random.default_rng(seed)
    raw = bytearray(raw)
    native = kind != "lookup"
    how = int(rng.integers(0, 4 if native else 3))
    if how == 0:  # bit flips
        for _ in range(int(rng.integers(1, 9))):
            i = int(rng.integers(0, len(raw)))
            raw[i] ^= 1 << int(rng.integers(0, 8))
    elif how == 1:  # truncation
        del raw[int(rng.integers(0, len(raw))) :]
    elif how == 2 and native:  # an extreme header field, header checksum forged
        value = EXTREMES[int(rng.integers(0, len(EXTREMES)))]
        if rng.random() < 0.3:
            struct.pack_into("<I", raw, int(rng.choice(U32_FIELDS)), value & 0xFFFFFFFF)
        else:
            struct.pack_into("<Q", raw, int(rng.choice(U64_FIELDS)), value)
        rehash(raw)
    elif how == 2:  # a lookup file's word set to an extreme int32
        words = len(raw) // 4
        if words:
            value = (0, 1, -1, -2, 2**31 - 1, -(2**31), 1000, 5)[int(rng.integers(0, 8))]
            struct.pack_into("<i", raw, 4 * int(rng.integers(0, words)), value)
    else:  # a section body overwritten, every checksum forged
        names = SECTIONS_OF[KIND_OF[kind]] if kind in KIND_OF else SECTIONS
        name = str(rng.choice(names[1:]))
        offset, size = section(raw, name)
        if size:
            for _ in range(int(rng.integers(1, 6))):
                i = offset + int(rng.integers(0, size))
                if rng.random() < 0.5:
                    raw[i] = int(rng.integers(0, 256))
                else:  # a whole word, to an extreme
                    i -= (i - offset) % 4
                    if i + 4 <= offset + size:
                        v = (0, -1, 2**31 - 1, -(2**31), 1, 100000)[int(rng.integers(0, 6))]
                        struct.pack_into("<i", raw, i, v)
        forge(raw)
    return bytes(raw)


class OutOfRange(Exception):
    """A drafted token the file does not allow: the failure the fuzzer exists to find."""


def _cli(*argv):
    """Run a command in this process; a named error is exit status 1 and one line on stderr."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        status = cli_main(list(argv))
    if status == 1:
        raise CommandFailed(argv[0])


def _cli_process(*argv):
    """Run a command as a user does, a process whose output is a pipe: what only a real
    process meets (the output's encoding, signals, exit statuses) is tried too. Exit status
    0, or 1 with one ``ngramdraft: error:`` line; every line on stderr is ngramdraft's."""
    done = subprocess.run(
        [sys.executable, "-m", "ngramdraft", *argv], capture_output=True, timeout=600
    )
    err = done.stderr.decode("utf-8", "replace").splitlines()
    foreign = [line for line in err if not line.startswith("ngramdraft: ")]
    if done.returncode not in (0, 1) or foreign:
        raise ProcessFailed(f"{argv[0]}: exit status {done.returncode}: {(foreign or err)[-1:]}")
    if done.returncode == 1:
        if sum(line.startswith("ngramdraft: error: ") for line in err) != 1:
            raise ProcessFailed(f"{argv[0]}: exit status 1 without one error line: {err}")
        raise CommandFailed(argv[0])


class CommandFailed(NgramdraftError):
    """The command line reported a named error (exit status 1)."""


class ProcessFailed(Exception):
    """The command's process ended otherwise: a traceback, a signal, lines not ours."""


def _checked(tokens, top):
    if len(tokens) and (tokens.min() < 0 or tokens.max() > top):
        raise OutOfRange(f"drafted {tokens.tolist()}, max_token {top}")


def _drafts(drafter, stream, top):
    for start in (0, 700, 1600):
        drafter.start(stream[start : start + 40])
        for i in range(3):
            _checked(drafter.draft(), top)
            drafter.accept(stream[start + 40 + i : start + 41 + i])


def exercise(path, kind, stream, out, cli=_cli):
    """Every entry point that takes a cache file, on one file; returns the named errors seen.

    Each step runs whatever the one before said (verification failing does
    not stop drafting: a caller who never verifies must be safe too). A
    generic exception propagates; a drafted token outside the file's range
    raises OutOfRange. ``out`` is a folder for what the copying steps write; ``cli``
    runs the command-line steps (in this process, or ``_cli_process``).
    """
    named = []

    def step(fn):
        try:
            fn()
        except NgramdraftError as e:
            named.append(type(e).__name__)

    if kind == "suffix":
        return _exercise_suffix(path, stream, out, step, named, cli)
    if kind == "requests":
        return _exercise_requests(path, stream, out, step, named, cli)
    if kind == "static":
        cache = StaticCache.open(path)  # a named error here ends the case
        top = cache.header.max_token
        step(lambda: cache.verify(deep=True))
        static, dynamic = cache, None
    else:
        cache = NgramCache.load(path)  # the lookup kind's `convert` reads it so too
        top = cache.max_token
        step(cache.verify)
        static, dynamic = None, cache

    top = max(top, int(stream.max()))  # the context drafts the stream's own tokens too
    copy = lambda: NgramCache.from_cache(dynamic) if dynamic else None  # noqa: E731
    step(lambda: _drafts(Drafter(static=static, dynamic=copy()), stream, top))
    step(lambda: replay(stream[:600], 128, 8, static=static, dynamic=dynamic))
    # The paths that copy or convert the whole cache.
    step(lambda: _drafts(Drafter(dynamic=cache), stream, top))  # a cache in the dynamic role
    step(lambda: _drafts(Drafter(static=path), stream, top))  # a path in the static role
    step(lambda: NgramCache.from_cache(cache))
    step(lambda: static_from_cache(cache, out / "frozen.ngd"))
    step(lambda: cache.save(out / "lookup.bin", "llamacpp"))
    step(lambda: cli("inspect", str(path), "--verify"))
    step(lambda: cli("inspect", str(path), "--json"))
    if kind == "static":
        step(lambda: merge_static([cache, path], out / "merged.ngd"))
        step(lambda: cli("convert", str(path), "--to-llamacpp", "-o", str(out / "c.bin")))
    else:
        step(lambda: cli("merge-dynamic", str(path), str(path), "-o", str(out / "m.ngd")))
        step(lambda: cli("merge-dynamic", str(path), "-o", str(out / "m.bin")))
    if kind == "lookup":
        step(lambda: cli("convert", str(path), "-o", str(out / "c.ngd")))
    return named


def _exercise_suffix(path, stream, out, step, named, cli):
    """exercise() for a suffix file: the suffix rules' paths, and the 2-gram paths refusing it."""
    corpus = SuffixCorpus.open(path)  # a named error here ends the case
    top = max(corpus.max_token, int(stream.max()))
    step(lambda: corpus.verify(deep=True))
    step(lambda: _drafts(Drafter(rules="suffix", static=corpus), stream, top))
    step(lambda: _drafts(Drafter(rules="suffix", static=path, n_draft=32), stream, top))
    step(lambda: replay(stream[:600], 128, 8, corpus, rules="suffix"))
    step(lambda: cli("replay", str(out / "t.npy"), "--rules", "suffix", "--static", str(path)))
    step(lambda: cli("inspect", str(path), "--verify"))
    step(lambda: cli("inspect", str(path), "--json"))
    # The 2-gram paths that copy or convert a cache: each must refuse the file by name.
    step(lambda: StaticCache.open(path))
    step(lambda: NgramCache.load(path))
    step(lambda: Drafter(static=path))
    step(lambda: cli("convert", str(path), "--to-llamacpp", "-o", str(out / "c.bin")))
    step(lambda: cli("merge-static", str(path), "-o", str(out / "m.ngd")))
    step(lambda: cli("merge-dynamic", str(path), "-o", str(out / "m.bin")))
    return named


def _exercise_requests(path, stream, out, step, named, cli):
    """exercise() for a requests file: loaded, drafted from, added to and saved, and refused
    by every 2-gram path."""
    copy = out / "requests-copy.ngd"
    copy.write_bytes(path.read_bytes())
    memory = RequestMemory.load(path)  # a named error here ends the case
    top = max(memory.max_token, int(stream.max()))
    step(lambda: _drafts(Drafter(rules="suffix", dynamic=memory), stream, top))
    step(lambda: _drafts(Drafter(rules="suffix", dynamic=copy), stream, top))  # saves to it
    step(lambda: replay(stream[:600], 128, 8, None, copy, rules="suffix"))
    step(lambda: cli("inspect", str(path), "--verify"))
    step(lambda: cli("replay", str(out / "t.npy"), "--rules", "suffix", "--dynamic", str(copy)))
    step(lambda: StaticCache.open(path))
    step(lambda: NgramCache.load(path))
    step(lambda: Drafter(dynamic=path))
    step(lambda: SuffixCorpus.open(path))
    step(lambda: cli("convert", str(path), "--to-llamacpp", "-o", str(out / "c.bin")))
    step(lambda: cli("merge-dynamic", str(path), str(copy), "-o", str(out / "joined.ngd")))
    step(lambda: cli("merge-dynamic", str(path), "-o", str(out / "m.bin")))
    return named


def main():
    base, kind, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    raw = (Path(base) / KINDS[kind]).read_bytes()
    stream = np.load(Path(base) / "stream.npy")
    suffix = Path(KINDS[kind]).suffix
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "t.npy", stream[:300])
        for case in range(first, first + count):
            print(f"start {case}", flush=True)
            # A new file each case: rewriting one in place under a mapping that a
            # warm-up thread may still read would be this harness's SIGBUS.
            path = Path(tmp) / f"case{case}{suffix}"
            path.write_bytes(mutate(raw, kind, case))
            cli = _cli_process if case % PROCESS_EVERY == 0 else _cli
            try:
                named = exercise(path, kind, stream, Path(tmp), cli)
                outcome = f"named:{named[0]}" if named else "ok"
            except NgramdraftError as e:
                outcome = f"named:{type(e).__name__}"
            except Exception as e:  # what the test exists to find
                outcome = f"FAIL:{type(e).__name__}: {e}"
            path.unlink()
            print(f"done {case} {outcome}", flush=True)


if __name__ == "__main__":
    main()
