"""The documentation: the site builds with nothing broken, the README stays short, and what
it tells a newcomer to run prints what it says.

``mkdocs build --strict`` fails on a link to a missing page or anchor, a page
the navigation leaves out, and an API reference entry whose object is gone.
"""

import re
import shlex
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


def test_the_command_line_page_lists_every_command():
    """docs/cli.md's synopsis once left out `tokenize`."""
    from ngramdraft.cli.parser import parser

    subparsers = next(a for a in parser()._actions if a.dest == "command")
    page = (REPO / "docs" / "cli.md").read_text()
    synopsis = re.search(r"```sh\n(.*?)\n```", page, re.S).group(1)
    missing = [c for c in subparsers.choices if f"ngramdraft {c} " not in synopsis]
    assert not missing, f"docs/cli.md's synopsis leaves out {missing}"


def test_mkdocs_output_is_ignored():
    """`mkdocs build` writes site/, which once showed in `git status`."""
    assert "/site/" in (REPO / ".gitignore").read_text().splitlines()


def test_ci_runs_the_readmes_test_command_word_for_word():
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r"```sh\n(.*?)\n```", readme, re.S)
    test_command = next(c for c in commands if "pytest" in c)
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_command in ci, "the README's test command is not .ci/run's"


def test_the_readmes_main_job_prints_what_the_readme_says(cli, tmp_path):
    """The README's first command, run as written but for where the cache goes; its
    figures are the ones the README tells a newcomer to expect."""
    readme = (REPO / "README.md").read_text()
    job = next(c for c in re.findall(r"```sh\n(.*?)\n```", readme, re.S) if "replay" in c)
    steps = [shlex.split(step) for step in job.split("&&")]
    assert steps[0][:2] == ["pip", "install"]
    out = ""
    for argv in steps[1:]:
        assert argv[0] == "ngramdraft"
        args: list[object] = []
        for arg in argv[1:]:
            if "*" in arg:
                args += sorted(REPO.glob(arg))
            elif arg.endswith(".ngd"):
                args.append(tmp_path / "cache.ngd")
            else:
                args.append(REPO / arg if (REPO / arg).exists() else arg)
        status, out, err = cli(*args)
        assert status == 0, err
    per_pass = float(re.search(r"([\d.]+) tokens per pass", out)[1])
    accept = float(re.search(r"accept\s*= ([\d.]+)%", out)[1])
    said = re.search(r"about ([\d.]+) tokens per forward pass and (\d+)% of drafted", readme)
    assert said, "the README no longer says what the main job prints"
    assert (float(said[1]), int(said[2])) == (round(per_pass, 2), round(accept))


@pytest.mark.engine
def test_the_readmes_llama_cpp_snippet_runs_as_written(tiny_gguf, capsys):
    """The snippet, a tiny random model in place of the one it fetches (it once stopped on
    `NameError: name 'request' is not defined`, after fetching a 491 MB model)."""
    pytest.importorskip("llama_cpp")
    readme = (REPO / "README.md").read_text()
    code = re.search(r"<!-- llama_cpp -->\n```python\n(.*?)\n```", readme, re.S).group(1)
    fetched = 'fetch_model("qwen2.5-coder-0.5b-instruct")'
    assert fetched in code
    exec(compile(code.replace(fetched, repr(str(tiny_gguf))), "README.md", "exec"), {})
    assert capsys.readouterr().out.strip()  # the reply was printed


@pytest.mark.engine
def test_the_readmes_transformers_snippet_runs_as_written(smollm, capsys):
    """The snippet as written: its model is the trained one the tests fetch anyway."""
    pytest.importorskip("transformers")
    readme = (REPO / "README.md").read_text()
    code = re.search(r"<!-- transformers -->\n```python\n(.*?)\n```", readme, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip()  # the reply was printed


CITED = re.compile(r"benchmarks/results/[\w./-]+?(?:\{[\w,]+\}|\.\w+)(?=[`\s),;:]|$)")
INDEX = REPO / "benchmarks" / "results" / "README.md"


def cited_results():
    """{results file: the pages citing it}, ``NAME.{md,json}`` read as both files."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    cited: dict[str, set[str]] = {}
    for page in pages:
        for match in CITED.findall(page.read_text()):
            stem, _, rest = match.partition("{")
            names = [stem + ext for ext in rest.rstrip("}").split(",")] if rest else [match]
            for name in names:
                if name != "benchmarks/results/README.md":
                    cited.setdefault(name, set()).add(str(page.relative_to(REPO)))
    return cited


def results_index():
    """The index's text: every cited results file, with the pages that cite it."""
    lines = [
        "# Results",
        "",
        "Each benchmark files its runs in a folder of its own, `<benchmark>/STAMP.{md,json}`",
        "(the machine and the command are in each file). The files the README and the",
        "documentation cite, and where (`python tests/test_docs.py` writes this list):",
        "",
        "| results file | cited by |",
        "|---|---|",
    ]
    for name, pages in sorted(cited_results().items()):
        lines.append(
            f"| `{name.removeprefix('benchmarks/results/')}` | {', '.join(sorted(pages))} |"
        )
    lines += ["", "The latest run of each benchmark, kept whether cited or not:", ""]
    lines += [f"- `{stem}`" for stem in sorted(latest_runs())]
    return "\n".join(lines) + "\n"


def latest_runs():
    """``<benchmark>/STAMP`` of each benchmark's newest run."""
    root = REPO / "benchmarks" / "results"
    return {
        f"{folder.name}/{max(f.name.split('.')[0] for f in folder.iterdir())}"
        for folder in root.iterdir()
        if folder.is_dir() and any(folder.iterdir())
    }


def test_results_kept_are_cited_or_the_latest():
    """457 of 708 tracked files were results, 85 of them cited: now a run is kept while a
    page cites it, and each benchmark's latest."""
    root = REPO / "benchmarks" / "results"
    kept = {f"{f.parent.name}/{f.name.split('.')[0]}" for f in root.glob("*/*")}
    cited = {name.removeprefix("benchmarks/results/").split(".")[0] for name in cited_results()}
    assert kept - cited - latest_runs() == set()


def test_every_cited_results_file_exists_and_is_indexed():
    missing = [name for name in cited_results() if not (REPO / name).exists()]
    assert not missing, f"cited but not in the repository: {missing}"
    assert INDEX.read_text() == results_index(), "run `python tests/test_docs.py` to rewrite it"


if __name__ == "__main__":
    INDEX.write_text(results_index())
