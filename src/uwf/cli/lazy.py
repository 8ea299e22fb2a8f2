"""The command tree, built lazily: a command is imported and built only when it is used.

``uwf`` starts a fresh process for every command, so building Typer's whole tree (and
importing every command module) on each call would be paid by every step. Here:

- the root group knows each top-level command's name and one-line help from a table
  (``COMMANDS`` in ``cli/main.py``) and imports nothing: ``uwf --help`` lists the table;
- looking a name up (``uwf thread …``) imports that one module and lets Typer build the
  group, without its commands;
- looking a command up in that group (``uwf thread show``) lets Typer build that command
  alone; a command the group names by its "module:function" (``App.lazy``: the ``thread``
  group's) imports its module only then, so a call imports one command module.

Listing a group in full (``uwf thread --help``, ``uwf skill cli``) builds all of it.

Only Typer's and Click's public API is used (``tests/test_public_api.py`` checks it): a
group is Click's lazy group — a ``TyperGroup`` subclass, passed as ``typer.Typer(cls=…)``,
whose ``list_commands`` and ``get_command`` build on demand, its ``commands`` a mapping
(the type Click gives that attribute) that builds a command on its first read. Every
command is built by ``typer.main.get_command`` from a one-command ``typer.Typer`` that
registers it exactly as the group's module did, which ``App`` (the ``typer.Typer`` of each
command group) remembers. ``tests/test_cli_lazy.py`` checks that the lazy tree prints the
same help as Typer's eager one, and the table's help against the real commands.
"""

from __future__ import annotations  # no command is defined here (tests/test_startup.py)

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:  # annotations only (postponed): nothing to build at start-up
    # name -> ("module:attribute", one-line help); the attribute is an App (a command group)
    # or a command function
    Table = Mapping[str, tuple[str, str]]
    Function = TypeVar("Function", bound=Callable[..., Any])
    # builds one click command, given the help's markup mode of the root
    Builder = Callable[[Any], Any]


class HelpInstead(Exception):
    """A group run without a command (``no_args_is_help``): ``main`` prints its help on
    stderr and exits 2."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class App(typer.Typer):
    """The ``typer.Typer`` of a command group: commands, subgroups and the callback are
    registered through Typer as usual (so ``typer.main.get_command`` builds the whole group),
    and each registration is also kept, so that the lazy tree can build one command alone."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.lazy_settings = settings
        self.lazy_commands: dict[str, Builder] = {}
        self.lazy_groups: dict[str, Builder] = {}
        # name -> (the command's function, its settings), for ``eager``
        self.lazy_loads: dict[str, Callable[[], tuple[Callable[..., Any], dict[str, Any]]]] = {}
        self.lazy_subgroups: dict[str, tuple[typer.Typer, dict[str, Any]]] = {}
        self.lazy_callback: Callable[[typer.Typer], object] | None = None

    def command(self, name: str | None = None, **settings: Any) -> Callable[[Function], Function]:
        register = super().command(name, **settings)

        def keep(function: Function) -> Function:
            # Typer's default name: the function's, lower case, "_" as "-"
            key = name or function.__name__.lower().replace("_", "-")

            def build(markup: Any) -> Any:
                one = _parent(markup)
                one.command(name, **settings)(function)
                return typer.main.get_command(one)

            self.lazy_commands[key] = build
            self.lazy_loads[key] = lambda: (function, dict(settings))
            return register(function)

        return keep

    def lazy(
        self,
        name: str,
        target: str,
        settings: Callable[[Callable[..., Any]], dict[str, Any]] | None = None,
    ) -> None:
        """Register the function ``target`` ("module:function") as the command ``name``,
        without importing its module: it is imported when the command is built (when it runs,
        or a listing of the group needs it). ``settings`` gives ``command``'s settings from the
        function, when they need it (an alias's help is the function's own).

        Typer itself does not see the command: the lazy tree builds it, and ``eager`` makes
        the whole ``typer.Typer`` for what needs one."""

        def load() -> tuple[Callable[..., Any], dict[str, Any]]:
            module, _, attribute = target.partition(":")
            function = getattr(importlib.import_module(module), attribute)
            return function, settings(function) if settings is not None else {}

        def build(markup: Any) -> Any:
            function, options = load()
            one = _parent(markup)
            one.command(name, **options)(function)
            return typer.main.get_command(one)

        self.lazy_commands[name] = build
        self.lazy_loads[name] = load

    def eager(self) -> typer.Typer:
        """This group as a plain ``typer.Typer`` with every command registered (and every
        module named by ``lazy`` imported), in the order the lazy tree lists them: for what
        builds a group whole (``tests/test_cli_lazy.py`` compares the two trees)."""
        app = typer.Typer(**self.lazy_settings)
        if self.lazy_callback is not None:
            self.lazy_callback(app)
        for name, load in self.lazy_loads.items():
            function, options = load()
            app.command(name, **options)(function)
        for name, (group, settings) in self.lazy_subgroups.items():
            sub = group.eager() if isinstance(group, App) else group
            app.add_typer(sub, name=name, **settings)
        return app

    def callback(self, **settings: Any) -> Callable[[Function], Function]:
        register = super().callback(**settings)

        def keep(function: Function) -> Function:
            self.lazy_callback = lambda app: app.callback(**settings)(function)
            return register(function)

        return keep

    def add_typer(
        self, typer_instance: typer.Typer, *, name: str | None = None, **settings: Any
    ) -> None:
        if name is None:
            raise TypeError("a group of uwf is added with a name")
        super().add_typer(typer_instance, name=name, **settings)
        group = typer_instance
        self.lazy_subgroups[name] = (group, settings)
        self.lazy_groups[name] = lambda markup: build_group(group, name, markup, **settings)

    def shell(self) -> typer.Typer:
        """An app with this one's settings and callback, none of its commands, and the lazy
        group class."""
        shell = typer.Typer(**{**self.lazy_settings, "cls": LazyGroup})
        if self.lazy_callback is not None:
            self.lazy_callback(shell)
        return shell

    def builders(self) -> dict[str, Builder]:
        """Every entry, in the order Typer lists them: the commands, then the subgroups."""
        return {**self.lazy_commands, **self.lazy_groups}


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


class LazyGroup(TyperGroup):
    """A group whose subcommands are built on first use (Click's lazy group).

    ``lines`` (the root's table) gives the "Commands" section of ``--help`` without building
    anything; a group without it builds its commands to list them, as Typer does.
    """

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.lines: Mapping[str, str] = {}

    def set_commands(self, builders: Mapping[str, Callable[[], Any]]) -> None:
        """Make ``builders`` (name -> build that command) this group's commands."""
        self.commands = LazyCommands(builders, lambda name: builders[name](), added=self.commands)

    def list_commands(self, ctx: Any) -> list[str]:
        """Every name, in order, without building anything."""
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command ``cmd_name`` (built now, the first time), None if there is none."""
        return self.commands.get(cmd_name)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            raise HelpInstead(ctx.get_help())
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The "Commands" section of ``--help``; from ``lines`` for what is not built yet.

        A row is shortened exactly as click shortens a real command's help, by a bare
        stand-in command carrying the table's line as its help.
        """
        if not self.lines:
            return super().format_commands(ctx, formatter)
        built = self.commands.built if isinstance(self.commands, LazyCommands) else {}
        entries = [(name, built.get(name)) for name in self.list_commands(ctx)]
        if not entries:
            return None
        limit = formatter.width - 6 - max(len(name) for name, _ in entries)
        rows = []
        for name, command in entries:
            if command is None:
                command = TyperCommand(name=name, help=self.lines[name])
            if not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
        return None


def _parent(markup: Any) -> typer.Typer:
    """An app to build one command in, with the root's settings (no completion options)."""
    return typer.Typer(
        add_completion=False, rich_markup_mode=markup, pretty_exceptions_enable=False
    )


def build_group(app: typer.Typer, name: str, markup: Any, **settings: Any) -> Any:
    """The click group of ``app`` under ``name``, its commands built one by one on first use.

    Typer builds the group itself (help, options) from an app with ``app``'s settings and
    none of its commands, added to a parent as ``add_typer(app, name=…)`` would add it; an
    app that is not an ``App`` is built whole.
    """
    parent = _parent(markup)
    if not isinstance(app, App):
        parent.add_typer(app, name=name, **settings)
        return _only_command(parent, name)
    parent.add_typer(app.shell(), name=name, **settings)
    group = _only_command(parent, name)
    group.set_commands({key: _bind(build, markup) for key, build in app.builders().items()})
    return group


def _bind(build: Builder, markup: Any) -> Callable[[], Any]:
    return lambda: build(markup)


def _only_command(parent: typer.Typer, name: str) -> Any:
    root = typer.main.get_command(parent)
    assert isinstance(root, TyperGroup)
    return root.commands[name]


def build(target: str, name: str, markup: Any = None) -> Any:
    """Import ``target`` ("module:attribute") and build its command under ``name``."""
    module, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module), attribute)
    if isinstance(value, typer.Typer):
        return build_group(value, name, markup)
    parent = _parent(markup)
    parent.command(name)(value)
    return typer.main.get_command(parent)


class Root(LazyGroup):
    """The root group: subcommands from ``table``, each imported and built on first use.

    Subclass it with a ``table`` and pass the subclass as ``typer.Typer(cls=…)``.
    """

    table: ClassVar[Table] = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.lines = {name: line for name, (_target, line) in self.table.items()}
        self.set_commands(
            {name: _bind_target(target, name, self) for name, (target, _line) in self.table.items()}
        )


def _bind_target(target: str, name: str, group: TyperGroup) -> Callable[[], Any]:
    return lambda: build(target, name, group.rich_markup_mode)
