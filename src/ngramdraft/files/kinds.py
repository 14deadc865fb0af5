"""What a path holds: a native cache of which kind, a llama.cpp lookup file, a GGUF model.

Every command and constructor that takes a path asks here first, so that a
file of the wrong kind gets the same one-line answer everywhere.
"""

import os
from pathlib import Path

from ..errors import ModelFileError
from ..validation import check_file, check_path
from .ngd.header import HEADER_SIZE, KIND_NAMES, MAGIC, NATIVE_SUFFIX, parse_header, read_header

GGUF_MAGIC = b"GGUF"


def file_format(path: str | os.PathLike[str]) -> str:
    """'native' if the file starts with the ngramdraft magic, else 'llamacpp'.

    A ``.ngd`` file without the magic is not taken for a llama.cpp file (an
    empty or foreign file would otherwise read as an empty lookup cache).
    """
    with open(check_file(path), "rb") as f:
        head = f.read(HEADER_SIZE)
    if head[: len(MAGIC)] == MAGIC:
        return "native"
    if Path(path).suffix == NATIVE_SUFFIX:
        parse_header(head, os.path.getsize(path), path)  # raises, naming the problem
    return "llamacpp"


def file_kind(path: str | os.PathLike[str]) -> str:
    """'static' or 'dynamic' for a native cache file, 'llama.cpp lookup file' otherwise."""
    if file_format(path) == "llamacpp":
        return "llama.cpp lookup file"
    return KIND_NAMES[read_header(path).kind]


def check_gguf(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path if it is a GGUF file, else ModelFileError saying what it is."""
    path = Path(check_path(path, "model_path"))
    if not path.exists():
        raise ModelFileError(f"{path}: no such model file")
    if not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file"
        raise ModelFileError(f"{path}: {what}, not a GGUF model file")
    with open(path, "rb") as f:
        head = f.read(4)
    if head != GGUF_MAGIC:
        raise ModelFileError(
            f"{path}: not a GGUF model file (llama.cpp models start with 'GGUF'; "
            "convert other formats with llama.cpp's convert_hf_to_gguf.py)"
        )
    return path
