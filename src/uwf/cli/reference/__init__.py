"""The "uwf CLI Reference" markdown, generated from the live command tree.

``uwf skill cli`` prints it and the agent kit embeds it (as ``agent_kit/cli_reference.md``)
in every role prompt, so it must never drift from the real commands: it is rendered from the
click command that Typer builds, using only public Command/Group/Parameter attributes, and
``tests/test_skill.py`` fails when the embedded copy differs. Regenerate that copy with::

    python -m uwf.cli.reference --write

(that entry, in ``__main__.py``, is the only part that imports the app of ``cli/main.py``: the
renderer gets the root command from its caller, so ``uwf skill cli`` never imports it back.)

Hidden commands are the old v0.5.0 names kept as aliases: a hidden command whose callback
is the same function as a visible one is listed as an alias of it; any other hidden command
or option is left out.
"""

import inspect
from enum import Enum
from pathlib import Path
from typing import Any

TITLE = "# uwf CLI Reference"

KEY_CONCEPTS = """\
## Key concepts

- **Workflow**: a YAML file of roles (each with a JSON Schema for its structured output) and a \
status-based routing graph `graph[<role or $START>][<status>] = {role, prompt}`. `$START` routes \
on the status `_` to the first role; routing to `$END` finishes the thread. `uwf workflow put` \
stores it in the content-addressed store (CAS) and names it in the registry.
- **Thread**: one run of a workflow on a task, identified by a ULID; an immutable chain of CAS \
nodes from a StartNode (the task prompt) to its head, the latest step. A thread is `active` \
until it is archived as `completed` (reached `$END`), `killed` (`uwf thread kill`) or \
`max_rounds` (its step limit).
- **Step**: one role's turn of work. `uwf thread step` runs exactly one moderator -> agent -> \
extract cycle: the moderator picks the next role from the last output's `status`, the agent \
writes a StepNode (structured output + detail) and the head moves to it.
- **Turn**: one message or tool call inside a step's detail (what the agent did).
- **Storage root**: `$UNCAGED_WORKFLOW_STORAGE_ROOT`, else `$WORKFLOW_STORAGE_ROOT`, else \
`~/.uncaged/workflow` (CAS, registry, threads, history, `config.yaml`, `.env`, logs).
- Hashes are 13 upper-case Crockford Base32 characters. Commands print compact JSON \
(`--format yaml` for YAML) or markdown; errors are one `error: <message>` line on stderr with \
exit status 1 (usage errors: 2).
"""


def _clean(text: str | None) -> str:
    """One line of help text: Typer's ``\\b`` markers dropped, whitespace collapsed."""
    return " ".join((text or "").replace("\b", " ").split())


def _summary(command: Any) -> str:
    """The first paragraph of a command's help (its short help when one is set)."""
    if getattr(command, "short_help", None):
        return _clean(command.short_help)
    help_text = (command.help or "").strip()
    return _clean(help_text.split("\n\n", 1)[0])


def _is_group(command: Any) -> bool:
    return callable(getattr(command, "list_commands", None))


def _subcommands(ctx: Any) -> list[tuple[str, Any, Any]]:
    """(name, command, its context) of every subcommand of ``ctx``'s group, in its order.

    Through the public ``list_commands``/``get_command``, so that the lazy root group
    (cli/lazy.py) builds every command it knows, hidden ones included.
    """
    import typer

    group = ctx.command
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None:
            out.append((name, command, typer.Context(command, info_name=name, parent=ctx)))
    return out


def _is_option(param: Any) -> bool:
    return any(opt.startswith("-") for opt in param.opts)


def _metavar(param: Any) -> str:
    """The explicit metavar, the choices of an Enum default (``json|yaml``), or the name."""
    explicit = getattr(param, "metavar", None)
    if explicit:
        return str(explicit)
    default = param.default
    if isinstance(default, Enum):
        return "|".join(str(member.value) for member in type(default))
    return str(param.name).upper()


def _argument_usage(param: Any) -> str:
    name = _metavar(param)
    if param.nargs == -1:
        name += "..."
    return name if param.required else f"[{name}]"


def _option_usage(param: Any) -> str:
    names = ", ".join(param.opts)
    secondary = getattr(param, "secondary_opts", None) or []
    if secondary:
        return f"{names} / {', '.join(secondary)}"
    if getattr(param, "is_flag", False):
        return names
    return f"{names} {_metavar(param)}"


def _default(param: Any) -> str | None:
    if getattr(param, "show_default", True) is False:
        return None
    default = param.default
    if default is None or default is False or callable(default):
        return None
    if isinstance(default, (list, tuple)) and not default:
        return None
    if default is True:
        return "on"
    return str(getattr(default, "value", default))


def _param_line(param: Any) -> str:
    head = _option_usage(param) if _is_option(param) else _metavar(param)
    notes = []
    if _is_option(param) and param.required:
        notes.append("required")
    if getattr(param, "multiple", False):
        notes.append("repeatable")
    default = _default(param)
    if default is not None:
        notes.append(f"default: {default}")
    line = f"  - `{head}`"
    if notes:
        line += f" ({', '.join(notes)})"
    help_text = _clean(param.help)
    return f"{line} — {help_text}" if help_text else line


def _choices(param: Any) -> tuple[str, ...]:
    return tuple(getattr(param.type, "choices", ()) or ())


def _visible_params(command: Any, global_opts: dict[str, tuple[str, ...]]) -> list[Any]:
    """Parameters worth listing: not hidden, not a repeat of a global option (same name and
    values: `workflow graph --format mermaid|dot` is its own option)."""

    def repeats_global(p: Any) -> bool:
        return _is_option(p) and all(global_opts.get(o) == _choices(p) for o in p.opts)

    return [p for p in command.params if not getattr(p, "hidden", False) and not repeats_global(p)]


def _usage(path: str, params: list[Any]) -> str:
    parts = [path]
    optional = False
    for p in params:
        if _is_option(p):
            if p.required:
                parts.append(f"{p.opts[0]} {_metavar(p)}")
            else:
                optional = True
    if optional:
        parts.append("[OPTIONS]")
    parts.extend(_argument_usage(p) for p in params if not _is_option(p))
    return " ".join(parts)


def _walk(ctx: Any, path: str, hidden: bool = False) -> list[tuple[str, Any, bool]]:
    """Every leaf command under ``ctx``'s group as (path, command, hidden), in its order."""
    out: list[tuple[str, Any, bool]] = []
    for name, sub, sub_ctx in _subcommands(ctx):
        sub_path = f"{path} {name}"
        sub_hidden = hidden or bool(getattr(sub, "hidden", False))
        if _is_group(sub):
            out.extend(_walk(sub_ctx, sub_path, sub_hidden))
        else:
            out.append((sub_path, sub, sub_hidden))
    return out


def _target(command: Any) -> Any:
    """The function behind a command (Typer wraps it; the wrapper keeps ``__wrapped__``)."""
    callback = getattr(command, "callback", None)
    return inspect.unwrap(callback) if callback is not None else None


def _command_entry(
    path: str, command: Any, global_opts: dict[str, tuple[str, ...]], aliases: list[str]
) -> list[str]:
    params = _visible_params(command, global_opts)
    summary = _summary(command)
    lines = [f"- `{_usage(path, params)}`" + (f" — {summary}" if summary else "")]
    lines.extend(_param_line(p) for p in params)
    if aliases:
        lines.append("  - Alias: " + ", ".join(f"`{a}`" for a in aliases))
    return lines


def render_reference(command: Any, prog: str = "uwf") -> str:
    """The markdown reference of the click command tree ``command`` (the root group)."""
    import typer

    ctx = typer.Context(command, info_name=prog)
    root_params = [p for p in command.params if not getattr(p, "hidden", False)]
    global_opts = {opt: _choices(p) for p in root_params if _is_option(p) for opt in p.opts}

    leaves = _walk(ctx, prog)
    visible_by_target: dict[Any, str] = {}
    for path, cmd, hidden in leaves:
        target = _target(cmd)
        if not hidden and target is not None:
            visible_by_target.setdefault(target, path)
    aliases: dict[str, list[str]] = {}
    for path, cmd, hidden in leaves:
        primary = visible_by_target.get(_target(cmd))
        if hidden and primary is not None:
            aliases.setdefault(primary, []).append(path)

    lines = [TITLE, "", KEY_CONCEPTS.rstrip("\n"), "", "## Global options", ""]
    lines.append(
        "Given before the command (`uwf --format yaml thread list`); commands that print JSON "
        "also accept `--format` after their name. Every command accepts `--help`."
    )
    lines.append("")
    lines.extend(_param_line(p)[2:] for p in root_params)

    for name, sub, sub_ctx in _subcommands(ctx):
        if getattr(sub, "hidden", False):
            continue
        lines.extend(["", f"## {prog} {name}", ""])
        if _is_group(sub):
            summary = _summary(sub)
            own = f"{prog} {name}"
            if _visible_params(sub, global_opts):  # a group that runs by itself: `uwf worker`
                lines.extend(_command_entry(own, sub, global_opts, aliases.get(own, [])))
            elif summary:
                lines.extend([summary, ""])
            for path, cmd, hidden in _walk(sub_ctx, f"{prog} {name}"):
                if not hidden:
                    lines.extend(_command_entry(path, cmd, global_opts, aliases.get(path, [])))
        else:
            path = f"{prog} {name}"
            lines.extend(_command_entry(path, sub, global_opts, aliases.get(path, [])))
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.rstrip("\n") + "\n"


def reference_path() -> Path:
    """Where the agent kit reads the embedded copy (found by path: the CLI never imports it)."""
    return Path(__file__).resolve().parents[2] / "agent_kit" / "cli_reference.md"


__all__ = ["KEY_CONCEPTS", "TITLE", "reference_path", "render_reference"]
