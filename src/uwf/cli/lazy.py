"""The command tree, built lazily: a command is imported and built only when it is used.

``uwf`` starts a fresh process for every command, so building Typer's whole tree (and
importing every command module) on each call would be paid by every step. Here:

- the root group (``LazyGroup``) knows each top-level command's name and one-line help from
  a table (``COMMANDS`` in ``cli/main.py``) and imports nothing: ``uwf --help`` lists the
  table;
- looking a name up (``uwf thread …``) imports that one module and lets Typer build the
  group, without its commands;
- looking a command up in that group (``uwf thread show``) builds that command alone.

Listing a group in full (``uwf thread --help``, ``uwf skill cli`` through ``list_commands``
and ``get_command``) builds all of it. Every command is built by Typer itself, from the same
app settings as ``app.add_typer(group, name=…)`` / ``app.command(name)(function)`` on the
root would use; ``tests/test_cli_lazy.py`` checks that the lazy tree prints the same help as
that eager tree, and the table's help against the real commands.
"""

import copy
import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup

# name -> ("module:attribute", one-line help); the attribute is a typer.Typer (a command
# group) or a command function
Table = Mapping[str, tuple[str, str]]


class LazyCommands(MutableMapping[str, Any]):
    """A group's ``commands``: every name up front, each command built on its first read.

    Listing the names (``keys``, ``in``, the "Did you mean" suggestions for a mistyped name)
    builds nothing.
    """

    def __init__(
        self, names: Iterable[str], build: Callable[[str], Any], added: Mapping[str, Any]
    ) -> None:
        self.names = list(dict.fromkeys([*names, *added]))
        self.build = build
        self.built: dict[str, Any] = dict(added)

    def __getitem__(self, name: str) -> Any:
        command = self.built.get(name)
        if command is None:
            if name not in self.names:
                raise KeyError(name)
            command = self.built[name] = self.build(name)
        return command

    def __setitem__(self, name: str, command: Any) -> None:
        if name not in self.names:
            self.names.append(name)
        self.built[name] = command

    def __delitem__(self, name: str) -> None:
        self.names.remove(name)
        self.built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.names))

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.names


def _parent(markup: Any) -> typer.Typer:
    """An app to build one command in, with the root's settings (no completion options)."""
    return typer.Typer(
        add_completion=False, rich_markup_mode=markup, pretty_exceptions_enable=False
    )


def _build_group(app: typer.Typer, name: str, markup: Any) -> Any:
    """The click group of ``app``, its commands built one by one on first use.

    Typer builds the group itself (help, callback, options, nested groups) from a copy of
    the app without its commands; each command is then built from its registration alone.
    """
    shell = copy.copy(app)
    shell.registered_commands = []
    parent = _parent(markup)
    parent.add_typer(shell, name=name)
    group = typer.main.get_command(parent).commands[name]  # type: ignore[attr-defined]
    infos = {
        info.name or typer.main.get_command_name(info.callback.__name__): info  # type: ignore[union-attr]
        for info in app.registered_commands
    }

    def build_one(command_name: str) -> Any:
        one = _parent(markup)
        one.registered_commands.append(infos[command_name])
        return typer.main.get_command(one)

    group.commands = LazyCommands(infos, build_one, added=group.commands)
    return group


def build(target: str, name: str, markup: Any = None) -> Any:
    """Import ``target`` ("module:attribute") and build its command under ``name``."""
    module, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module), attribute)
    if isinstance(value, typer.Typer):
        return _build_group(value, name, markup)
    parent = _parent(markup)
    parent.command(name)(value)
    return typer.main.get_command(parent)


class LazyGroup(TyperGroup):
    """The root group: subcommands from ``table``, each imported and built on first use.

    Subclass it with a ``table`` and pass the subclass as ``typer.Typer(cls=…)``.
    """

    table: ClassVar[Table] = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.lazy = LazyCommands(
            self.table,
            lambda name: build(self.table[name][0], name, self.rich_markup_mode),
            added=self.commands,
        )
        self.commands = self.lazy

    def list_commands(self, ctx: Any) -> list[str]:
        """Every name, in table order, without building anything."""
        return list(self.lazy)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The "Commands" section of ``--help`` from the table: nothing is imported.

        A row is shortened exactly as click shortens a real command's help, by a bare
        stand-in command carrying the table's line as its help.
        """
        entries = [(name, self.lazy.built.get(name)) for name in self.list_commands(ctx)]
        if not entries:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in entries)
        rows = []
        for name, command in entries:
            if command is None:
                command = TyperCommand(name=name, help=self.table[name][1])
            if not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
