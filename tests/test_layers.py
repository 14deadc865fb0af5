"""The package's layers (docs/architecture.md): what each folder may import, no cycles, no
private names taken from another module. Every import counts, those inside functions too."""

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ngramdraft"
BASE = {"errors", "optional", "validation", "progress", "_version"}

# Each layer may import the layers listed, and itself; nothing above it.
MAY_IMPORT = {
    "base": set(),
    "kernels": {"base"},
    "files": {"base", "kernels"},
    "tokenizers": {"base", "files"},
    "caches": {"base", "kernels", "files", "tokenizers"},
    # Building returns the file it wrote, opened: a cache.
    "build": {"base", "kernels", "files", "tokenizers", "caches"},
    "drafting": {"base", "kernels", "files", "tokenizers", "caches"},
    # Above the interfaces it implements; drafting finds a rule set by name
    # (drafting/rulesets.py), not by an import.
    "rulesets": {"base", "kernels", "files", "tokenizers", "caches", "build", "drafting"},
    "integrations": {"base", "files", "tokenizers", "caches", "drafting"},
    "cli": {"base", "kernels", "files", "tokenizers", "build", "caches", "drafting"}
    | {"rulesets", "integrations"},
    "package": {"base", "files", "caches", "build", "drafting"},  # ngramdraft/__init__.py
}


def _modules():
    """{dotted name: path} of every module of the package."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _layer(name):
    parts = name.split(".")
    if len(parts) == 1:
        return "package"
    if parts[1] == "__main__":  # python -m ngramdraft is the command line
        return "cli"
    if parts[1] in BASE:
        return "base"
    return parts[1]


def _base(name, node):
    """The absolute module an ``ImportFrom`` in module ``name`` imports from."""
    if not node.level:
        return node.module or ""
    package = name if MODULES[name].name == "__init__.py" else name.rsplit(".", 1)[0]
    parts = package.split(".")
    return ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))


def _resolve(name, node):
    """The ngramdraft modules an import statement in module ``name`` names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "ngramdraft"]
    base = _base(name, node)
    if base.split(".")[0] != "ngramdraft":
        return []
    # `from . import state` names a module; `from .table import lookup` a name in one.
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def _scan(name, tree):
    """(imported (module, line) pairs, private names taken) of module ``name``'s source tree."""
    targets, private, aliases = set(), [], {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        resolved = _resolve(name, node)
        targets.update((t, node.lineno) for t in resolved)
        if isinstance(node, ast.ImportFrom) and resolved:
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    private.append(f"{name}:{node.lineno} imports {a.name}")
                if f"{_base(name, node)}.{a.name}" in MODULES:
                    aliases[a.asname or a.name] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            private.append(f"{name}:{node.lineno} uses {node.value.id}.{node.attr}")
    return targets, private


def _imports():
    """{module: {(imported module, line)}}, and the private names taken from other modules."""
    graph, private = {}, []
    for name, path in MODULES.items():
        graph[name], taken = _scan(name, ast.parse(path.read_text(), str(path)))
        private += taken
    return graph, private


GRAPH, PRIVATE = _imports()


def test_the_import_graph_has_no_cycle():
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for target, _ in sorted(GRAPH.get(m, ())):
            if target == m or target not in GRAPH:
                continue
            if state.get(target) == "open":
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[m] = "done"

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_every_import_points_down_the_layers():
    wrong = []
    for name, targets in GRAPH.items():
        mine = _layer(name)
        for target, line in targets:
            theirs = _layer(target)
            if theirs != mine and theirs not in MAY_IMPORT[mine]:
                wrong.append(f"{name}:{line} ({mine}) imports {target} ({theirs})")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_module_takes_another_modules_private_names():
    assert not PRIVATE, "\n".join(PRIVATE)


@pytest.mark.parametrize(
    "name, layer",
    [
        ("ngramdraft", "package"),
        ("ngramdraft.errors", "base"),
        ("ngramdraft.kernels.table", "kernels"),
        ("ngramdraft.cli.build", "cli"),
    ],
)
def test_modules_are_placed_in_their_layer(name, layer):
    assert name in MODULES and _layer(name) == layer


def test_lazy_imports_and_private_names_are_seen():
    """The checks see what they look for, in a module of lazy imports written here."""
    source = (
        "from .kernels import table as T\n"
        "def f():\n"
        "    from .drafting.drafter import Drafter\n"
        "    from .kernels.handles import _pointer\n"
        "    return T._grow_slots\n"
    )
    targets, private = _scan("ngramdraft.errors", ast.parse(source))
    assert {t for t, _ in targets} >= {"ngramdraft.drafting.drafter", "ngramdraft.kernels.handles"}
    assert _layer("ngramdraft.drafting.drafter") not in MAY_IMPORT["base"]
    assert private == [
        "ngramdraft.errors:4 imports _pointer",
        "ngramdraft.errors:5 uses T._grow_slots",
    ]


def test_every_module_is_under_version_control():
    """An ignore pattern once hid four modules of ``build/`` from git: the tree passed here
    and a clean clone failed to import."""
    root = PACKAGE.parents[1]
    if not (root / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    ignored = subprocess.run(
        ["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--", "src"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not [p for p in ignored if p.endswith(".py")], ignored
