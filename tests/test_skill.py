"""`uwf skill cli`: the CLI reference is generated from the live app (docs/architecture.md,
"The command line")."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from uwf.cli.reference import reference_path, render_reference


def live_command() -> Any:
    """The root command as `uwf --help` has it (with the completion options)."""
    from uwf.cli.main import root_command

    return root_command([])


def walk(command: Any, ctx: Any, path: str) -> list[tuple[str, Any]]:
    """Every command under ``command``, hidden ones included, through the public
    ``list_commands``/``get_command`` (the lazy tree builds each as it is asked for)."""
    out = []
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        sub_path = f"{path} {name}"
        out.append((sub_path, sub))
        if callable(getattr(sub, "list_commands", None)):
            out.extend(walk(sub, typer.Context(sub, info_name=name, parent=ctx), sub_path))
    return out


def is_group(command: Any) -> bool:
    return callable(getattr(command, "list_commands", None))


def test_skill_cli_prints_the_reference(cli: Any) -> None:
    result = cli("skill", "cli")
    assert result.code == 0 and result.err == ""
    assert result.out.startswith("# uwf CLI Reference\n")
    assert "## Key concepts" in result.out
    for word in ("$START", "$END", "WORKFLOW_STORAGE_ROOT", "Thread", "Step", "Turn"):
        assert word in result.out
    assert result.out == render_reference(live_command())


def test_reference_mentions_every_command_of_the_live_app(cli: Any) -> None:
    from test_cli_lazy import eager_root, paths

    text = cli("skill", "cli").out
    command = live_command()
    every = walk(command, typer.Context(command, info_name="uwf"), "uwf")
    # the walk reaches every command Typer's eager tree has (nested groups included)
    assert sorted(p for p, _ in every) == sorted(
        " ".join(("uwf", *path)) for path in paths(eager_root())
    )
    visible = [(p, c) for p, c in every if not c.hidden]
    for path, sub in visible:
        if is_group(sub):  # a section per top-level group; a nested one's commands are in it
            assert path.count(" ") > 1 or f"## {path}\n" in text, f"no section for {path}"
            continue
        assert f"- `{path}" in text, f"command {path} missing from the reference"
        for param in sub.params:
            if param.hidden or param.opts == ["--format"]:
                continue
            assert param.opts[0] in text or str(param.name).upper() in text, (path, param.name)
    for param in command.params:
        assert param.opts[0] in text


def test_hidden_aliases_are_listed_under_their_command() -> None:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Root."""

    group = typer.Typer(help="Things.")
    app.add_typer(group, name="thing")

    def put(
        file: Annotated[str, typer.Argument(help="The file.")],
        count: Annotated[int, typer.Option("--count", "-c", help="How many.")] = 1,
        wait: Annotated[bool, typer.Option("--wait", help="Wait.")] = False,
        secret: Annotated[str, typer.Option("--secret", hidden=True)] = "",
    ) -> None:
        """Store a thing.

        Longer text that is not part of the summary.
        """

    def gone() -> None:
        """A removed command."""

    group.command("put")(put)
    group.command("add", hidden=True)(put)
    group.command("old", hidden=True)(gone)
    text = render_reference(typer.main.get_command(app))
    assert text.startswith("# uwf CLI Reference\n")
    assert "## uwf thing\n\nThings.\n" in text
    assert "- `uwf thing put [OPTIONS] FILE` — Store a thing.\n" in text
    assert "  - `FILE` — The file.\n" in text
    assert "  - `--count, -c COUNT` (default: 1) — How many.\n" in text
    assert "  - `--wait` — Wait.\n" in text
    assert "  - Alias: `uwf thing add`\n" in text
    assert "Longer text" not in text
    assert "--secret" not in text and "old" not in text.split("## uwf thing", 1)[1]
    assert inspect.unwrap(put) is put


def test_agent_kit_copy_is_up_to_date() -> None:
    path: Path = reference_path()
    expected = render_reference(live_command())
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    assert current == expected, (
        f"{path} is out of date with the commands: run `python -m uwf.cli.reference --write`"
    )


def test_module_entry_check() -> None:
    from uwf.cli.reference.__main__ import main

    code = main(["--check"])
    assert code == 0, "run `python -m uwf.cli.reference --write`"
