"""Peers that need building here: SuffixDecoding (arctic-inference, vLLM's ``suffix`` method).

The package as a whole needs CUDA; its ``csrc/suffix_decoding`` module (a
suffix tree in C++ behind nanobind) and the Python ``SuffixDecodingCache``
over it need only a C++ compiler. :func:`suffix_decoding` downloads the
sdist once (``benchmarks/.data/arctic``), builds ``_C`` with CMake and
nanobind, and imports ``arctic_inference.suffix_decoding`` from there,
unchanged. Nothing of it is committed: it is built on the machine that
measures.
"""

import importlib
import re
import subprocess
import sys
import tarfile
import urllib.request

from . import corpora

VERSION = "0.3.0"
ROOT = corpora.DATA / "arctic"
INDEX = "https://pypi.org/simple/arctic-inference/"


def _sdist():
    path = ROOT / f"arctic_inference-{VERSION}.tar.gz"
    if not path.exists():
        ROOT.mkdir(parents=True, exist_ok=True)
        page = urllib.request.urlopen(INDEX, timeout=60).read().decode()
        url = re.search(rf'href="([^"]*arctic_inference-{VERSION}\.tar\.gz)[^"]*"', page)[1]
        urllib.request.urlretrieve(url, path.with_suffix(".part"))
        path.with_suffix(".part").replace(path)
    return path


def _built():
    """The sdist's ``arctic_inference/suffix_decoding`` folder, its ``_C`` module built."""
    src = ROOT / f"arctic_inference-{VERSION}"
    package = src / "arctic_inference" / "suffix_decoding"
    if not list(package.glob("_C*.so")):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "nanobind"], check=True)
        with tarfile.open(_sdist()) as tar:
            tar.extractall(ROOT, filter="data")
        build, py = ROOT / "build", f"-DPython_EXECUTABLE={sys.executable}"
        subprocess.run(
            ["cmake", "-S", src / "csrc" / "suffix_decoding", "-B", build, py],
            check=True,
            capture_output=True,
        )
        subprocess.run(["make", "-C", build, "-j2"], check=True, capture_output=True)
        (package / next(build.glob("_C*.so")).name).write_bytes(
            next(build.glob("_C*.so")).read_bytes()
        )
    return package


def suffix_decoding():
    """arctic_inference.suffix_decoding, built here on first use."""
    package = _built()
    # Only the suffix_decoding subpackage: the package's own __init__ imports CUDA parts.
    spec = importlib.util.spec_from_file_location(
        "arctic_inference",
        package.parent / "__init__.py",
        submodule_search_locations=[str(package.parent)],
    )
    parent = importlib.util.module_from_spec(spec)
    sys.modules["arctic_inference"] = parent  # not executed: its __init__ wants vLLM
    return importlib.import_module("arctic_inference.suffix_decoding")


def suffix_decoding_path():
    """A folder for ``PYTHONPATH`` in which ``import arctic_inference.suffix_decoding`` finds
    the built package: what vLLM's ``suffix`` method imports, in vLLM's own processes.

    The package's ``__init__`` is replaced by an empty one (it imports the CUDA
    parts); ``suffix_decoding`` itself is the sdist's, unchanged.
    """
    package = _built()
    folder = ROOT / "path"
    shim = folder / "arctic_inference"
    if not (shim / "suffix_decoding").exists():
        shim.mkdir(parents=True, exist_ok=True)
        (shim / "__init__.py").write_text("")
        (shim / "suffix_decoding").symlink_to(package, target_is_directory=True)
    return folder
