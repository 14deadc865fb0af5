"""The documentation: the site builds with nothing broken, and the README stays short.

``mkdocs build --strict`` fails on a link to a missing page or anchor, a page
the navigation leaves out, and an API reference entry whose object is gone.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").exists()


def test_the_readme_is_read_in_five_minutes():
    text = (REPO / "README.md").read_text()
    assert len(text) <= 20_000, f"the README has {len(text)} characters: move some to docs/"


def test_every_docs_page_is_in_the_navigation():
    yml = (REPO / "mkdocs.yml").read_text()
    pages = {p.name for p in (REPO / "docs").glob("*.md")}
    assert {p for p in pages if p not in yml} == set()


def test_ci_runs_the_readmes_test_command_word_for_word():
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r"```sh\n(.*?)\n```", readme, re.S)
    test_command = next(c for c in commands if "pytest" in c)
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_command in ci, "the README's test command is not .ci/run's"
