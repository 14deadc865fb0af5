"""Atomic file replacement: a crash leaves the old file or the new one, never half of one.

Temporary files and spool folders live beside their target and are named
``.<target name>.ngd-tmp-<pid>-<random><suffix>``: a writer killed before it
could clean up leaves them, and the next write to the same target removes
those whose process no longer runs (provably ours, provably abandoned).
The file written gets the permissions ``open()`` would give it: those of the
file it replaces, or 0666 less the umask for a new one. A write that runs out
of space raises DiskFullError naming the file, the space it needed and the
space left, after removing what it wrote.
"""

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO

import numpy as np

from ..errors import DiskFullError, LockTimeoutError
from ..validation import check_path

_TAG = ".ngd-tmp-"


def output_directory(path: str | os.PathLike[str]) -> Path:
    """The directory ``path`` will be written in; a named error if it does not exist."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory (give a file path)", str(path))
    directory = path.parent
    if not directory.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such directory", str(directory))
    return directory


def temporary_prefix(path: str | os.PathLike[str]) -> str:
    """The name prefix of this process's temporary files for ``path``."""
    return f".{Path(path).name}{_TAG}{os.getpid()}-"


def remove_abandoned(path: str | os.PathLike[str]) -> None:
    """Remove temporary files and folders for ``path`` whose writer process is gone."""
    path = Path(path)
    mine = f".{path.name}{_TAG}"
    with contextlib.suppress(OSError):
        for entry in path.parent.iterdir():
            if not entry.name.startswith(mine):
                continue
            pid = entry.name[len(mine) :].split("-", 1)[0]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _mode_for(path: Path) -> int:
    """The permission bits open() would give ``path``: its own, or 0666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    # Read, not set: os.umask() changes it for every thread while it is read.
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FULL = (errno.ENOSPC, errno.EDQUOT)


def write_array(f: IO[bytes], array: np.ndarray) -> None:
    """Write an array's bytes; unlike ``ndarray.tofile``, a full disk keeps its errno."""
    if array.size:
        f.write(np.ascontiguousarray(array).view(np.uint8).reshape(-1).data)


@contextlib.contextmanager
def disk_full_named(path: str | os.PathLike[str], size: int | None = None) -> Iterator[None]:
    """Turn a write to ``path`` that runs out of space (or quota) into DiskFullError."""
    try:
        yield
    except OSError as e:
        if e.errno not in _FULL:
            raise
        directory = Path(path).parent
        try:
            st = os.statvfs(directory)
            free = f"{st.f_bavail * st.f_frsize:,} bytes are free"
        except OSError:
            free = "its free space is unknown"
        need = f"the file needs about {size:,} bytes, " if size else ""
        raise DiskFullError(
            f"{path}: no space left on the device of {directory} ({need}{free}). The old "
            "file is intact and nothing was left behind: free space there, or write elsewhere"
        ) from e


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], size: int | None = None) -> Iterator[BinaryIO]:
    """Yield a binary file opened on a temporary sibling of ``path``.

    On success the data is fsynced, given open()'s permissions, renamed over
    ``path`` and the directory fsynced; on any exception the temporary file is
    removed and ``path`` is left as it was. ``size``, the bytes to be written
    if known, is named when the disk fills.
    """
    path = Path(check_path(path))
    directory = output_directory(path)
    remove_abandoned(path)
    with disk_full_named(path, size):
        fd, tmp = tempfile.mkstemp(prefix=temporary_prefix(path), suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w+b") as f:
                yield f
                f.flush()
                os.fchmod(f.fileno(), _mode_for(path))
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def spool_directory(path: str | os.PathLike[str]) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder beside ``path`` for a build's spools (a context manager)."""
    path = Path(check_path(path))
    directory = output_directory(path)
    remove_abandoned(path)
    return tempfile.TemporaryDirectory(prefix=temporary_prefix(path), dir=directory)


@contextlib.contextmanager
def locked(path: str | os.PathLike[str], timeout: float) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a sidecar ``.<name>.lock`` file) for a read-modify-write.

    Waits up to ``timeout`` seconds, then raises LockTimeoutError. The lock is
    flock(2)'s: released by the kernel if the holder dies, so a killed writer
    never leaves the file locked; the sidecar itself stays, empty.
    """
    path = Path(check_path(path))
    lock_path = path.with_name(f".{path.name}.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"{path}: another writer has held its lock ({lock_path}) for over "
                        f"{timeout:g} s; nothing was written. Retry, or raise lock_timeout"
                    ) from None
                time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the lock
