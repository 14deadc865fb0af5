"""Where ngramdraft keeps what it caches for a user: token files, compiled-kernel marks,
pass timings (each in a folder of its own beneath)."""

import os
from pathlib import Path

CACHE_ENV = "NGRAMDRAFT_CACHE"


def cache_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit``, $NGRAMDRAFT_CACHE or ~/.cache/ngramdraft."""
    return Path(explicit or os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ngramdraft")
