"""uwf uses Typer's and Click's public API only (docs/architecture.md, "The command line").

Typer vendors Click as ``typer._click``, a private module: Click's classes reach uwf only as
the objects Typer hands out (commands, contexts, exceptions), used through their documented
methods and attributes. This test reads every module of ``src/uwf`` and fails on:

- an import of ``click``, of a ``_`` module or name of Typer, or of a Typer name that Typer
  does not document (``PUBLIC``);
- a dotted name ``typer.…`` that is not public, or that reaches into a public name's
  ``_`` attributes (``typer.BadParameter.__mro__``);
- in a module that imports Typer, a ``_`` attribute read from anything but ``self``/``cls``
  or a name the module itself defines (``ctx._protected_args``); anywhere, one asked for
  with ``getattr``;
- a string naming one of Typer's or Click's undocumented classes: finding a class by its
  name (``type(exc).__name__ == "NoArgsIsHelpError"``).
"""

from __future__ import annotations

import ast
import inspect
import pkgutil
from functools import cache
from importlib import import_module
from pathlib import Path

import typer

SRC = Path(__file__).resolve().parent.parent / "src" / "uwf"

# Typer's documented names beyond those its package re-exports (``typer.<name>``), and where
# Typer documents them.
DOCUMENTED = {
    "typer.main.get_command",  # "Using Click": the click command of a Typer app
    "typer.core.TyperGroup",  # typer.Typer(cls=…): "should be a subtype of TyperGroup"
    "typer.core.TyperCommand",  # app.command(cls=…): "should be a subtype of TyperCommand"
}


@cache
def public() -> frozenset[str]:
    """``typer.<name>`` for every name Typer's package re-exports, plus ``DOCUMENTED``."""
    exported = {
        f"typer.{name}"
        for name, value in vars(typer).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    return frozenset(exported | DOCUMENTED)


@cache
def undocumented_classes() -> frozenset[str]:
    """The names of the classes Typer's modules (its vendored Click too) define and Typer
    does not make public."""
    names: set[str] = set()
    for info in pkgutil.walk_packages(typer.__path__, "typer."):
        if info.name.endswith(("__main__", "_winconsole")) or info.name == "typer.cli":
            continue  # typer's own CLI program, and Windows-only modules
        for name, value in vars(import_module(info.name)).items():
            if inspect.isclass(value) and value.__module__.startswith("typer"):
                names.add(name)
    shown = {name.rsplit(".", 1)[1] for name in public()}
    return frozenset(names - shown)


@cache
def undocumented_attributes() -> frozenset[str]:
    """What a ``typer.Typer`` keeps of its registrations (``registered_commands``, …): set by
    its constructor, but none of its parameters. (``info`` too, left out here: a word uwf
    uses for its own records.)"""
    parameters = set(inspect.signature(typer.Typer.__init__).parameters)
    return frozenset(set(vars(typer.Typer())) - parameters - {"info"})


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for an attribute chain on a plain name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def allowed(name: str) -> bool:
    """Typer itself, a public name, or a public name's non-``_`` attributes
    (``typer.Exit.exit_code``)."""
    if name == "typer":
        return True
    for known in public():
        if name == known:
            return True
        if name.startswith(known + "."):
            return not any(p.startswith("_") for p in name[len(known) + 1 :].split("."))
    return False


def imports(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """(local name -> what it names in typer or click, the names the module defines or
    imports from elsewhere)."""
    aliases: dict[str, str] = {}
    defined = {"self", "cls"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ("typer", "click"):
                    aliases[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0]
                    )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if node.module.split(".")[0] in ("typer", "click"):
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                else:
                    defined.add(a.asname or a.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    return aliases, defined


@cache
def foreign_classes() -> frozenset[str]:
    """Typer's and Click's undocumented class names, but for the names uwf itself exports
    (``uwf.__all__``: its own ``UsageError`` is not Click's)."""
    import uwf

    return undocumented_classes() - set(uwf.__all__)


def problems(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases, defined = imports(tree)
    found = [
        f"imports {target}"
        for target in aliases.values()
        if target.split(".")[0] == "click" or not allowed(target)
    ]
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute):
            name = dotted(node)
            head = name.split(".")[0] if name else ""
            if name and head in aliases and id(node) not in inner:
                full = aliases[head] + name[len(head) :]
                if not allowed(full):
                    found.append(f"{where}: {full}")
            private = node.attr.startswith("_") and not node.attr.endswith("__")
            mine = isinstance(node.value, ast.Name) and node.value.id in defined
            if private and aliases and not mine:  # where Typer's objects are handled
                found.append(f"{where}: reads .{node.attr}")
            if node.attr in ("__mro__", "__subclasses__", "__bases__"):
                found.append(f"{where}: walks a class hierarchy (.{node.attr})")
            if node.attr in undocumented_attributes():
                found.append(f"{where}: Typer's registrations (.{node.attr})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) > 1:
                key = node.args[1]
                if isinstance(key, ast.Constant) and str(key.value).startswith("_"):
                    found.append(f"{where}: {node.func.id}(…, {key.value!r})")
        elif isinstance(node, ast.Constant) and node.value in foreign_classes():
            found.append(f"{where}: names Typer's or Click's class {node.value!r}")
    return found


def test_uwf_uses_only_the_public_api_of_typer_and_click() -> None:
    found = {str(path.relative_to(SRC)): problems(path) for path in sorted(SRC.rglob("*.py"))}
    assert {path: lines for path, lines in found.items() if lines} == {}


def test_the_check_finds_each_private_use(tmp_path: Path) -> None:
    """Each kind of private use that uwf once made (cli/lazy.py, cli/main.py,
    cli/options.py before they kept to the public API) is caught."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import typer\n"
        "from typer.core import TyperGroup, _split_opt\n"
        "from typer.models import CommandInfo\n"
        "import click\n"
        "def f(app, ctx, exc):\n"
        "    app.registered_commands = []\n"
        "    typer.main.get_command_name('x')\n"
        "    typer.main.get_current_context(silent=True)\n"
        "    next(c for c in typer.BadParameter.__mro__ if c.__name__ == 'ClickException')\n"
        "    type(exc).__name__ == 'NoArgsIsHelpError'\n"
        "    ctx._protected_args\n"
        "    getattr(ctx, '_opt_prefixes')\n"
        "    typer.main.get_command(app).commands\n"
        "    typer.Option('--x')\n"
        "    typer.Exit().exit_code\n"
        "    return TyperGroup\n",
        encoding="utf-8",
    )
    assert sorted(problems(sample)) == sorted(
        [
            "imports typer.core._split_opt",
            "imports typer.models.CommandInfo",
            "imports click",
            "line 6: Typer's registrations (.registered_commands)",
            "line 7: typer.main.get_command_name",
            "line 8: typer.main.get_current_context",
            "line 9: typer.BadParameter.__mro__",
            "line 9: walks a class hierarchy (.__mro__)",
            "line 9: names Typer's or Click's class 'ClickException'",
            "line 10: names Typer's or Click's class 'NoArgsIsHelpError'",
            "line 11: reads ._protected_args",
            "line 12: getattr(…, '_opt_prefixes')",
        ]
    )
