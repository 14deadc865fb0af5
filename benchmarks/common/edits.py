"""Real edits no one here wrote: the Python files that changed between two releases of a package.

Each pair of releases below is downloaded once from the registry as source
distributions (``pip download --no-binary :all:``, kept in
``benchmarks/.data/sdists``). Every ``.py`` file present in both whose text
changed, and whose old text is at most ``MAX_TOKENS`` tokens, makes one
request: the prompt is an instruction naming the package, the releases and
the file, then the old file; the output is the new file. Files are taken in
path order, one package after another in turn (so every package takes part
in a short run), until ``n`` output tokens are reached.
"""

import itertools
import subprocess
import sys
import tarfile

from . import corpora

SDISTS = corpora.DATA / "sdists"
MAX_TOKENS = 6000
PIP_DOWNLOAD = (sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:")
# Well-known pure-Python packages, consecutive releases that changed code.
RELEASES = (
    ("click", "8.1.6", "8.1.7"),
    ("attrs", "23.1.0", "23.2.0"),
    ("packaging", "23.1", "23.2"),
    ("requests", "2.31.0", "2.32.3"),
    ("jinja2", "3.1.3", "3.1.4"),
)


def _sdist(name, version):
    """The path of the release's sdist, downloaded once."""
    SDISTS.mkdir(parents=True, exist_ok=True)
    found = [p for p in SDISTS.glob("*.tar.gz") if _is(p, name, version)]
    if not found:
        subprocess.run(
            [*PIP_DOWNLOAD, f"{name}=={version}", "-d", str(SDISTS)],
            check=True,
        )
        found = [p for p in SDISTS.glob("*.tar.gz") if _is(p, name, version)]
    return found[0]


def _is(path, name, version):
    return path.name.lower().replace("_", "-") == f"{name}-{version}.tar.gz".lower()


def _python_files(path):
    """{path inside the release: text} of its .py files."""
    out = {}
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".py"):
                inner = member.name.split("/", 1)[1]
                out[inner] = tar.extractfile(member).read().decode("utf-8", "replace")
    return out


def pairs():
    """(package, old release, new release, file, old text, new text) of every changed file."""
    for name, old, new in RELEASES:
        before, after = _python_files(_sdist(name, old)), _python_files(_sdist(name, new))
        for inner in sorted(before.keys() & after.keys()):
            if before[inner] != after[inner]:
                yield name, old, new, inner, before[inner], after[inner]


def in_turn():
    """pairs(), one package's next file after another's."""
    queues = {}
    for pair in pairs():
        queues.setdefault(pair[0], []).append(pair)
    for turn in itertools.zip_longest(*queues.values()):
        yield from (pair for pair in turn if pair is not None)


def requests(n, encode):
    """(prompt, output) token lists of real edits, about n output tokens in all."""
    out, total = [], 0
    for name, old, new, inner, a, b in in_turn():
        if total >= n:
            break
        prompt_text = (
            f"Update `{inner}` from {name} {old} to {name} {new}. Output the whole new file.\n\n"
            f"```python\n{a}```\n\n```python\n"
        )
        prompt, output = encode(prompt_text), encode(b)
        if len(prompt) > MAX_TOKENS + 64:
            continue
        out.append((prompt, output))
        total += len(output)
    return out
