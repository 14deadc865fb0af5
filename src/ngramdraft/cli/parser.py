"""The command line's parser: every command group's options under one program."""

import argparse

from .._version import __version__
from . import build, engines, files, replay

GROUPS = (build, replay, files, engines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ngramdraft",
        description="Prompt-lookup (n-gram) speculative drafting with llama.cpp's rules: build "
        "caches, replay texts as llama.cpp's lookup-stats does, generate and serve with a model.",
        epilog="Run 'ngramdraft COMMAND --help' for a command's options and examples.",
    )
    p.add_argument("--version", action="version", version=f"ngramdraft {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return p
