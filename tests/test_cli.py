"""The command line: every form scripts rely on, exit statuses and messages."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO

DATA = REPO / "data"


@pytest.fixture
def small(tmp_path):
    tokens = tmp_path / "t.npy"
    np.save(tokens, np.fromfile(DATA / "gutenberg.llama3.i32", "<i4")[:40000])
    return tokens


def test_build_replay_inspect_convert_merge(cli, tmp_path, small):
    cache = tmp_path / "c.ngd"
    assert cli("build-static", small, "-o", cache, "--memory-limit", "300M")[0] == 0
    status, out, _ = cli(
        "replay",
        DATA / "heldout.llama3.i32",
        "--static",
        cache,
        "--n-ctx",
        1024,
        "--n-draft",
        8,
        "--json",
    )
    assert status == 0
    summary = json.loads(out)
    for key in (
        "n_drafted",
        "n_accept",
        "accept",
        "t_draft_ms",
        "us_per_drafted",
        "n_calls",
        "t_load_ms",
    ):
        assert key in summary
    status, out, _ = cli("replay", DATA / "heldout.llama3.i32", "--n-ctx", 512, "--n-draft", 4)
    assert status == 0 and "n_drafted" in out and "us per drafted token" in out

    status, out, _ = cli("inspect", cache, "--verify", "--json")
    info = json.loads(out)
    assert status == 0 and info["verified"] and info["n_2grams"] > 0
    assert info["format_version"] == 2 and info["max_count"] >= 1

    lookup = tmp_path / "c.bin"
    assert cli("convert", cache, "--to-llamacpp", "-o", lookup)[0] == 0
    back = tmp_path / "back.ngd"
    assert cli("convert", lookup, "-o", back)[0] == 0
    status, out, _ = cli("inspect", lookup)
    assert status == 0 and "llama.cpp lookup file" in out
    status, _, err = cli("convert", cache, "-o", tmp_path / "x.ngd")
    assert status == 1 and "already a native cache" in err

    merged = tmp_path / "m.ngd"
    assert cli("merge-static", cache, back, "-o", merged, "-q")[0] == 0
    a = json.loads(cli("inspect", cache, "--json")[1])
    m = json.loads(cli("inspect", merged, "--json")[1])
    assert m["n_entries"] == a["n_entries"] and m["n_2grams"] == a["n_2grams"]
    assert m["max_count"] == 2 * a["max_count"]  # the same corpus twice


def test_replay_dynamic_file_and_dump(cli, tmp_path):
    dyn = tmp_path / "d.bin"
    from ngramdraft import NgramCache

    cache = NgramCache()
    cache.update(np.fromfile(DATA / "gutenberg.llama3.i32", "<i4")[:20000])
    cache.save(dyn, "llamacpp")
    dump = tmp_path / "d.dump"
    status, out, _ = cli(
        "replay",
        DATA / "heldout.llama3.i32",
        "--dynamic",
        dyn,
        "--n-ctx",
        512,
        "--n-draft",
        3,
        "--dump",
        dump,
        "--json",
    )
    assert status == 0
    words = np.fromfile(dump, "<i4")
    assert words[0] == 0 and words[1] == 1  # first call: chunk 0, one token known
    assert json.loads(out)["n_calls"] > 0


def test_usage_errors_exit_2(capsys):
    from ngramdraft.cli import main

    for argv in (
        ["replay", "x.i32", "--n-ctx", "0", "--n-draft", "1"],
        ["build-static", "x.i32", "-o", "c", "--memory-limit", "lots"],
        [],
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    capsys.readouterr()


def test_runtime_errors_are_one_line(cli, tmp_path):
    status, _, err = cli("replay", tmp_path / "missing.i32", "--n-ctx", 8, "--n-draft", 2)
    assert status == 1 and err.count("\n") == 1 and "no such token file" in err
    status, _, err = cli("build-static", "-o", tmp_path / "c.ngd")
    assert status == 1 and "exactly one corpus" in err
    status, _, err = cli("build-static", DATA / "heldout-uneasy-money.txt", "-o", tmp_path / "c")
    assert status == 1 and "--tokenizer" in err
    status, _, err = cli("replay", DATA / "heldout-uneasy-money.txt", "--n-ctx", 8, "--n-draft", 1)
    assert status == 1 and "--tokenizer" in err


def test_module_entry_point_and_console_script_exit_as_main_returns(tmp_path):
    """Both run main() and exit with its status (cli.run: they freeze what is left for the
    process's exit, which an in-process main() must not)."""
    script = Path(sys.executable).parent / "ngramdraft"
    for launcher in ([sys.executable, "-m", "ngramdraft"], [str(script)]):
        out = subprocess.run([*launcher, "--version"], capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout.startswith("ngramdraft ")
        missing = [*launcher, "replay", str(tmp_path / "missing.i32"), "--n-ctx", "8"]
        failed = subprocess.run(missing, capture_output=True, text=True)
        assert failed.returncode == 1 and failed.stderr.count("\n") == 1


def test_parse_size():
    from ngramdraft.cli.args import parse_size

    assert parse_size("1G") == 1 << 30
    assert parse_size("512M") == 512 << 20
    assert parse_size("1.5GiB") == 3 << 29
    assert parse_size("2048") == 2048


def test_short_streams_replay_nothing_and_say_so(cli, tmp_path):
    """A stream no longer than n_ctx has no chunk: every count is 0, and a warning says why."""
    for n in (0, 1, 8):
        path = tmp_path / f"t{n}.i32"
        np.arange(n, dtype="<i4").tofile(path)
        status, out, err = cli("replay", path, "--n-ctx", 8, "--n-draft", 2, "--json")
        summary = json.loads(out)
        assert status == 0 and summary["n_predict"] == 0 and summary["n_calls"] == 0
        assert err.startswith("ngramdraft: warning: the stream has") and "lower n_ctx" in err


def test_missing_output_directory_is_named(cli, tmp_path):
    status, _, err = cli(
        "build-static", DATA / "heldout.llama3.i32", "-o", tmp_path / "no" / "such" / "c.ngd"
    )
    assert status == 1
    assert err == f"ngramdraft: error: {tmp_path / 'no' / 'such'}: no such directory\n"


@pytest.mark.parametrize(
    ("argv", "module", "extra"),
    [
        (("generate", "m.gguf", "-p", "x"), "llama_cpp", "llama"),
        (("serve", "m.gguf"), "fastapi", "server"),
        (("build-static", "c.txt", "--tokenizer", "m.gguf", "-o", "c.ngd"), "llama_cpp", "llama"),
    ],
)
def test_missing_engine_package_is_a_one_line_error(
    cli, monkeypatch, tmp_path, argv, module, extra
):
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.setitem(sys.modules, name, None)
        elif name.startswith("ngramdraft.integrations"):
            # Imported by an earlier test, an adapter would not import the package again.
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.txt").write_text("some text\n")
    status, _, err = cli(*argv)
    assert status == 1
    assert f"pip install 'ngramdraft[{extra}]'" in err and err.count("\n") == 1


@pytest.mark.parametrize("kind", [(), ("--suffix",)])
def test_a_corpus_that_drafts_nothing_is_said_in_one_warning_line(cli, tmp_path, kind):
    """Both kinds of static file: before, an empty corpus built a suffix file silently."""
    for n in (0, 2):
        tokens = tmp_path / f"t{n}.i32"
        np.arange(n, dtype="<i4").tofile(tokens)
        status, _, err = cli("build-static", tokens, *kind, "-o", tmp_path / "c.ngd", "-q")
        assert status == 0 and err.count("\n") == 1, err
        assert err.startswith("ngramdraft: warning: ") and "drafts nothing" in err
    np.arange(3, dtype="<i4").tofile(tmp_path / "t3.i32")
    status, _, err = cli("build-static", tmp_path / "t3.i32", *kind, "-o", tmp_path / "c.ngd", "-q")
    assert status == 0 and err == ""


def test_only_ngramdrafts_own_warnings_become_warning_lines(cli, monkeypatch, tmp_path):
    """A stray warning from elsewhere (an unclosed file collected mid-command) is not ours."""
    import warnings

    from ngramdraft.cli import files as files_module
    from ngramdraft.errors import NgramdraftError

    def command(args):
        warnings.warn("unclosed file", ResourceWarning, stacklevel=1)
        raise NgramdraftError("boom")

    monkeypatch.setattr(files_module, "inspect_command", command)
    status, _, err = cli("inspect", tmp_path / "x.ngd")
    assert status == 1 and err.splitlines()[-1] == "ngramdraft: error: boom"
    assert "ngramdraft: warning" not in err


@pytest.mark.parametrize("command", ["build-static", "replay"])
def test_text_without_a_tokenizer_is_told_the_choices(cli, tmp_path, command):
    """Before, build-static said only "text needs --tokenizer NAME", and replay's help "a
    bundled name" without naming one."""
    text = DATA / "heldout-uneasy-money.txt"
    argv = (
        [command, text, "-o", tmp_path / "c.ngd"] if command == "build-static" else [command, text]
    )
    status, _, err = cli(*argv)
    assert status == 1 and err.count("\n") == 1
    assert all(name in err for name in ("llama3", "qwen3", "cl100k_base", "o200k_base", ".gguf"))
