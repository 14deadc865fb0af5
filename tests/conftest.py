"""Shared fixtures: the parity data of ../shared, decompressed once per session."""

import json
import lzma
import os
from pathlib import Path

import numpy as np
import pytest

from ngramdraft import build_static
from ngramdraft.cli import main

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NGRAMDRAFT_SHARED", REPO.parent / "shared"))
PARITY = SHARED / "parity"

# vLLM pins numba and numpy below what the rest is tested with: it lives in a
# virtual environment of its own, which the README's test command makes.
VLLM_PYTHON = Path(
    os.environ.get("NGRAMDRAFT_VLLM_PYTHON", REPO / ".venvs" / "vllm" / "bin" / "python")
)


@pytest.fixture(scope="session")
def vllm_python():
    """The interpreter of the vLLM environment (skips where there is none)."""
    import subprocess

    if not VLLM_PYTHON.exists():
        pytest.skip(f"no vLLM environment at {VLLM_PYTHON} (the README's test command makes it)")
    done = subprocess.run([str(VLLM_PYTHON), "-c", "import vllm"], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"{VLLM_PYTHON} cannot import vllm: {done.stderr.strip()[-300:]}")
    return str(VLLM_PYTHON)


needs_shared = pytest.mark.skipif(
    not PARITY.is_dir() and not os.environ.get("CI"),
    reason="../shared/parity is not present (set NGRAMDRAFT_SHARED)",
)


@pytest.fixture(scope="session")
def parity_dir(tmp_path_factory):
    """PARITY with every .xz file decompressed next to the plain ones."""
    if not PARITY.is_dir():
        pytest.fail(f"parity data not found at {PARITY}")
    out = tmp_path_factory.mktemp("parity")
    for f in PARITY.iterdir():
        if f.suffix == ".xz":
            with lzma.open(f) as src:
                (out / f.stem).write_bytes(src.read())
        else:
            (out / f.name).symlink_to(f)
    return out


@pytest.fixture(scope="session")
def summary(parity_dir):
    return json.loads((parity_dir / "summary.json").read_text())


@pytest.fixture(scope="session")
def static25(parity_dir, tmp_path_factory):
    """The native static cache of train-25M (the P2 replay's static cache)."""
    path = tmp_path_factory.mktemp("static") / "train25.ngd"
    return build_static(np.fromfile(parity_dir / "train-25M.llama3.i32", "<i4"), path)


@pytest.fixture
def cli(capsys):
    """Run the CLI in-process: returns (exit status, stdout, stderr).

    The one-time notice that the kernels are compiling is left out of stderr:
    it appears in whichever test runs the CLI first in a fresh checkout
    (test_trust.py checks it in a child process).
    """

    def run(*argv):
        status = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        err = "".join(
            line
            for line in err.splitlines(keepends=True)
            if not line.startswith("ngramdraft: compiling the kernels")
        )
        return status, out, err

    return run


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    """A random-weight llama GGUF of a few hundred KB (SentencePiece vocab, byte fallback)."""
    pytest.importorskip("gguf")
    from random_gguf import write_random_gguf

    return write_random_gguf(tmp_path_factory.mktemp("models") / "tiny.gguf")


@pytest.fixture(scope="session")
def smollm():
    """SmolLM2-135M-Instruct (Q4_1, 98 MB): trained weights, fetched once (fetch_model)."""
    from ngramdraft import fetch_model

    return fetch_model("smollm2-135m-instruct")


# A request whose answer copies its input, as edits and quotes do: the drafts have
# something to find, and a trained model follows it.
EDIT_REQUEST = (
    "Rewrite this passage with every 'sea' replaced by 'ocean'. Reply with the passage only.\n\n"
    "He was an old man who fished alone in a skiff in the Gulf Stream and he had gone "
    "eighty-four days now without taking a fish. In the first forty days a boy had been with "
    "him. But after forty days without a fish the boy's parents had told him that the old man "
    "was now definitely and finally salao, which is the worst form of unlucky, and the boy had "
    "gone at their orders in another boat which caught three good fish the first week. The sea "
    "was calm and the sea was dark, and the old man looked at the sea for a long time."
)


@pytest.fixture
def servers():
    """``server_client.start``, each server still running when the test ends killed: a
    failed assertion leaves no process behind."""
    from server_client import start

    started = []

    def launch(*args, **kwargs):
        proc, port, dynamic = start(*args, **kwargs)
        started.append(proc)
        return proc, port, dynamic

    yield launch
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        proc.log.close()
