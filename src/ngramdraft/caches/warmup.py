"""A read-only mapped file's pages mapped, then its checksums checked, in one background thread."""

import mmap
import threading

from ..errors import ChecksumError
from ..files.ngd.header import Header
from ..files.ngd.reading import populate, verify_sections


class Warmup:
    """Maps a file's pages, then checks its checksums, in one daemon thread.

    ``mapped`` is set once every page is mapped (what replay waits for before
    its clock starts), ``done`` once the checksums are checked; ``damage`` is
    then None or the ChecksumError to raise.
    """

    def __init__(self, mm: mmap.mmap, header: Header, path: object) -> None:
        self.mapped = threading.Event()
        self.done = threading.Event()
        self.damage: ChecksumError | None = None

        def run() -> None:
            try:
                populate(mm)
                self.mapped.set()
                verify_sections(mm, header, path)
            except ChecksumError as e:
                self.damage = e
            finally:
                self.mapped.set()
                self.done.set()

        threading.Thread(target=run, daemon=True, name="ngramdraft-warmup").start()

    def wait(self) -> None:
        """Block until the check is done; raise ChecksumError if it found damage."""
        self.done.wait()
        if self.damage is not None:
            raise self.damage


class NoWarmup:
    """The warm-up of no static cache: nothing to wait for, no damage."""

    damage = None
    mapped = done = threading.Event()
    done.set()

    def wait(self) -> None:
        pass


NO_WARMUP = NoWarmup()
