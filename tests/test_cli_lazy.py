"""The lazy command tree (cli/lazy.py): the same commands and help as Typer's eager tree,
each built only when it is used, and a table whose help cannot drift from the commands."""

from __future__ import annotations

import contextlib
import importlib
import io
from typing import Any

import typer

from uwf.cli import main
from uwf.cli.lazy import App
from uwf.cli.reference import render_reference


def eager_root() -> Any:
    """The tree Typer builds when every command is added to the root up front (as uwf did
    before the lazy tree), its top-level commands in the table's order, with Typer's
    completion options (which `uwf --help` shows)."""
    app = typer.Typer(
        name="uwf",
        help=main.HELP,
        no_args_is_help=True,
        add_completion=True,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )
    app.callback()(main._root)
    for name, (target, _help) in main.COMMANDS.items():
        module, _, attribute = target.partition(":")
        value = getattr(importlib.import_module(module), attribute)
        if isinstance(value, App):
            app.add_typer(value.eager(), name=name)  # its commands named by module too
        elif isinstance(value, typer.Typer):
            app.add_typer(value, name=name)
        else:
            app.command(name)(value)
    root = typer.main.get_command(app)
    root.commands = {name: root.commands[name] for name in main.COMMANDS}
    return root


def paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``command``, hidden ones included."""
    out = []
    for name, sub in getattr(command, "commands", {}).items():
        out.append((*prefix, name))
        out.extend(paths(sub, (*prefix, name)))
    return out


def eager_help(root: Any, path: tuple[str, ...]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        root.main(args=[*path, "--help"], prog_name="uwf", standalone_mode=False)
    return out.getvalue()


def summary(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n", 1)[0].split())


def test_table_help_is_each_commands_own_first_paragraph() -> None:
    root = eager_root()
    for name, (_target, line) in main.COMMANDS.items():
        command = root.commands[name]
        assert line == summary(command.help), f"COMMANDS[{name!r}] differs from its help"
        assert not command.hidden, "the root lists every table entry in --help"


def test_lazy_tree_prints_the_help_of_the_eager_tree(cli: Any) -> None:
    root = eager_root()
    every = paths(root)
    assert ("thread", "exec") in every and ("workflow", "add") in every  # hidden aliases
    assert ("cas", "schema", "list") in every  # a nested group
    for path in [(), *every]:
        result = cli(*path, "--help")
        assert result.code == 0, (path, result.err)
        assert result.out == eager_help(root, path), path


def test_reference_sees_every_command_of_the_lazy_tree() -> None:
    lazy = main.root_command([])
    text = render_reference(lazy)
    assert text == render_reference(eager_root())
    assert "  - Alias: `uwf thread exec`\n" in text  # hidden commands are built too
    assert "  - Alias: `uwf thread cancel`\n" in text


def test_only_what_is_looked_up_is_built() -> None:
    root: Any = typer.main.get_command(main.app)
    ctx = typer.Context(root, info_name="uwf")
    root.get_help(ctx)
    assert root.list_commands(ctx) == list(main.COMMANDS)
    assert root.commands.built == {}  # --help lists the table
    thread = root.get_command(ctx, "thread")
    assert list(root.commands.built) == ["thread"]
    assert dict(thread.commands.built) == {}
    show = thread.get_command(typer.Context(thread, info_name="thread", parent=ctx), "show")
    assert show.name == "show" and list(thread.commands.built) == ["show"]
    assert root.get_command(ctx, "nope") is None and thread.get_command(ctx, "nope") is None


def test_mistyped_names_get_suggestions(cli: Any) -> None:
    close = "'thread', 'store'"  # difflib's close matches, best first
    assert cli("thred").err == f"error: No such command 'thred'. Did you mean {close}?\n"
    assert cli("thread", "shw", "x").err == ("error: No such command 'shw'. Did you mean 'show'?\n")


def test_main_imports_no_command_module() -> None:
    """Command modules are named in the table, never imported by cli/main.py (which is how
    `skill` could once import `main` back through `reference`)."""
    import grimp

    graph = grimp.build_graph("uwf")
    for target, _help in main.COMMANDS.values():
        module = target.partition(":")[0]
        assert graph.find_shortest_chain(importer="uwf.cli.main", imported=module) is None
        assert graph.find_shortest_chain(importer=module, imported="uwf.cli.main") is None
