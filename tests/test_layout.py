"""The package's layout holds (docs/architecture.md): no import cycles between uwf's modules
but the few written down here with their reason, no module longer than a person can hold but
the few written down here, and every public face says what it exports (``__all__``).

Every import counts — at the top of a module, inside a function (a cycle there is still a
cycle, only hidden until the function runs) and under ``TYPE_CHECKING`` — read from the
source with ``ast``: the cycle test imports nothing of uwf.
"""

from __future__ import annotations

import ast
import functools
import importlib
import tomllib
from pathlib import Path

from support import REPO

SRC = REPO / "src"
PACKAGE = SRC / "uwf"

# No cycle is allowed: the test fails when a new one comes (and a cycle that must stay is
# written down here with its reason).
ALLOWED_CYCLES: dict[frozenset[str], str] = {}

# Modules over LIMIT lines, each with its length when it was written down: one may shrink
# (and leave this list), never grow past it.
LIMIT = 500
LONG_MODULES: dict[str, int] = {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _owner(name: str) -> str | None:
    """The uwf module an imported name lives in: the module itself, else its package."""
    modules = _modules()
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str, path: Path) -> set[str]:
    """The uwf modules ``name`` imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(_owner(alias.name) for alias in node.names if alias.name.startswith("uwf"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            if base == "uwf" or base.startswith("uwf."):
                for alias in node.names:  # `from uwf.x import y`: y may be a module of x
                    whole = f"{base}.{alias.name}"
                    found.add(whole if whole in _modules() else _owner(base))
    found.discard(name)
    return {module for module in found if module is not None}


def _graph() -> dict[str, set[str]]:
    return {name: _imports(name, path) for name, path in _modules().items()}


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, by
    hand with an explicit stack so that a deep graph cannot overflow Python's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    """Two modules importing each other, a three-module ring, and a chain that is no cycle."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c", "f"}, "f": set()}
    assert sorted(sorted(c) for c in _cycles(graph)) == [["a", "b"], ["c", "d", "e"]]


def test_imports_are_read_wherever_they_are() -> None:
    """The scan sees imports inside functions and under TYPE_CHECKING, which a cycle hides in:
    ``uwf.agent_kit.context`` reads its history inside a property, and the history module
    describes the context it is given rather than importing it."""
    graph = _graph()
    assert "uwf.agent_kit.history" in graph["uwf.agent_kit.context"]  # a function-level import
    assert "uwf.agent_kit.context" not in graph["uwf.agent_kit.history"]
    assert "uwf.util.outputs" in graph["uwf.engine.threads.lifecycle"]  # under TYPE_CHECKING


def test_no_import_cycles_but_the_written_ones() -> None:
    cycles = set(_cycles(_graph()))
    assert sorted(sorted(c) for c in cycles - set(ALLOWED_CYCLES)) == [], "a new import cycle"
    assert sorted(sorted(c) for c in set(ALLOWED_CYCLES) - cycles) == [], (
        "a written-down cycle is gone: remove it from ALLOWED_CYCLES"
    )


def test_no_module_over_the_limit_but_the_written_ones() -> None:
    lengths = {
        str(path.relative_to(SRC)): len(path.read_text(encoding="utf-8").splitlines())
        for path in _modules().values()
    }
    over = {name: n for name, n in lengths.items() if n > LIMIT and name not in LONG_MODULES}
    assert over == {}, f"split these along a line a reader would name (at most {LIMIT} lines)"
    grown = {
        name: lengths.get(name) for name, n in LONG_MODULES.items() if lengths.get(name, 0) > n
    }
    assert grown == {}, "a written-down long module grew"
    gone = [name for name in LONG_MODULES if lengths.get(name, 0) <= LIMIT]
    assert gone == [], "a written-down module is short now: remove it from LONG_MODULES"


def test_every_public_face_says_what_it_exports() -> None:
    """``uwf``, ``uwf.testing`` and every package — each layer's and the subpackages within
    them — declare ``__all__`` (an empty one when the package itself exports nothing and its
    modules are the faces), and every name listed there exists."""
    faces = ["uwf", "uwf.testing"]
    faces += sorted(_module_name(p) for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    missing, absent = [], []
    for name in faces:
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        if exported is None:
            missing.append(name)
            continue
        absent += [f"{name}.{attr}" for attr in exported if not hasattr(module, attr)]
    assert missing == [], "declare __all__ in these packages' __init__"
    assert absent == [], "__all__ names what is not there"


def _parts() -> set[str]:
    """The parts of uwf: its subpackages and its top-level modules (``uwf.testing``)."""
    found = {f"uwf.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    found |= {f"uwf.{p.stem}" for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    return found


def _contract(name: str) -> dict[str, object]:
    """The import-linter contract ``name`` of pyproject.toml."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    found: list[dict[str, object]] = [c for c in contracts if c["name"] == name]
    assert len(found) == 1, f"pyproject.toml has no contract {name!r}"
    return found[0]


def test_the_layers_contract_places_every_part_of_uwf() -> None:
    """A new subpackage (or top-level module) of uwf is given its layer in pyproject.toml
    and in docs/architecture.md's table; none is left to import what it likes."""
    layers = _contract("Layers: lower never imports higher")["layers"]
    assert isinstance(layers, list)
    listed = {part.strip() for layer in layers for part in layer.split("|")}
    assert sorted(_parts() - listed) == [], "give these their layer in pyproject.toml"
    assert sorted(listed - _parts()) == [], "the layers contract names what is not there"
    table = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for part in _parts():
        path = f"src/uwf/{part.removeprefix('uwf.')}"
        assert f"`{path}/`" in table or f"`{path}.py`" in table, f"{part}: not in the layer table"


def test_only_the_cli_imports_typer() -> None:
    """The typer contract covers every part of uwf but the CLI, a new one included."""
    sources = _contract("Only the CLI imports typer")["source_modules"]
    assert isinstance(sources, list)
    assert sorted(_parts() - {"uwf.cli"} - set(sources)) == []
    assert "uwf.cli" not in sources
