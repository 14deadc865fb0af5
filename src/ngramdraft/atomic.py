"""Atomic file replacement: a crash leaves the old file or the new one, never half of one."""

import contextlib
import errno
import os
import tempfile
from pathlib import Path


def output_directory(path):
    """The directory ``path`` will be written in; a named error if it does not exist."""
    directory = Path(path).parent
    if not directory.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such directory", str(directory))
    return directory


@contextlib.contextmanager
def atomic_output(path):
    """Yield a binary file opened on a temporary sibling of ``path``.

    On success the data is fsynced, renamed over ``path`` and the directory
    fsynced; on any exception the temporary file is removed and ``path`` is
    left as it was.
    """
    path = Path(path)
    directory = output_directory(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w+b") as f:
            yield f
            f.flush()
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
