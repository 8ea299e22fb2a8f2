"""`uwf thread answer`, `thread resume`, `thread poke`, `thread priority` and the edits of
`thread fork --output/--edit`: steering a thread by hand (docs/agents.md, "People as
roles"). Registered on the thread group by ``uwf.cli.thread`` (rerun and retry, which also
act in bulk: in ``uwf.cli.thread.bulk``)."""

import time
from typing import TYPE_CHECKING, Annotated

import typer

from uwf.cli.options import (
    AgentOpt,
    FormatOpt,
    ThreadArg,
    TimeoutOpt,
    WaitOpt,
    backend,
    emit,
    emit_stream,
    loop_contract,
    read_input,
)
from uwf.util.errors import InvalidInput, UsageError

if TYPE_CHECKING:
    from uwf.backend.base import Backend
    from uwf.util.outputs import ForkedEdited


def fork_edited(
    b: "Backend", step_hash: str, output: str | None, edit: bool, cwd: str | None = None
) -> "ForkedEdited":
    """``thread fork --output FILE`` or ``--edit``: the new thread, or an error."""
    from uwf.engine.threads import steer

    if output is not None and edit:
        raise UsageError("give --output or --edit, not both")
    if output is not None:
        text = read_input(output, "output")
        return steer.fork_edited(b, step_hash, text, via="thread fork --output", cwd=cwd)
    from uwf.model.answer import edit_answer

    began = time.monotonic()
    text = steer.edit_template(b, step_hash)
    forked = edit_answer(
        text,
        lambda written: steer.fork_edited(
            b,
            step_hash,
            written,
            via="thread fork --edit",
            duration_ms=int((time.monotonic() - began) * 1000),
            cwd=cwd,
        ),
    )
    if forked is None:
        raise InvalidInput("the output was left unchanged: no thread was created")
    return forked


def answer(
    thread: ThreadArg,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            help="The output's status field ($status in a version-1 workflow).",
            show_default=False,
        ),
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="FIELD=VALUE",
            help="An output field (repeatable); a VALUE that parses as JSON is that value "
            "(true, 3, [1, 2]), else text.",
            show_default=False,
        ),
    ] = None,
    message: Annotated[
        str | None,
        typer.Option("--message", "-m", help="The step's content (markdown).", show_default=False),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option(
            "--file",
            metavar="FILE",
            help="The whole answer: frontmatter with the fields, then the content ('-': stdin).",
            show_default=False,
        ),
    ] = None,
    wait: WaitOpt = False,
    fmt: FormatOpt = None,
) -> None:
    """Write the step of the role a thread waits for, as a person.

    The role is the one the thread waits for (status waiting: its agent deferred or
    suspended), or else the one that runs next. The output is --file's frontmatter, then
    --status and --set over it; the content is -m or --file's body. It is checked like an
    agent's step — the role's schema (a rejection names the field), the graph's routing, the
    step lock — and committed. Prints the step's line, as thread step does, with the same
    exit codes.
    """
    from uwf.engine.threads import steer

    if message is not None and file is not None:
        raise UsageError("give -m or --file, not both")
    fields = steer.parse_sets(sets or [])
    text = read_input(file, "answer") if file is not None else None
    with loop_contract():
        result = steer.answer_step(
            backend(), thread, fields=fields, text=text, message=message, wait=wait, status=status
        )
        emit_stream(result.as_json(), fmt)


def resume(
    thread: ThreadArg,
    prompt: Annotated[
        str | None,
        typer.Option(
            "--prompt",
            "-p",
            help="What the person adds: the answer the agent asked for ('-' reads stdin).",
            show_default=False,
        ),
    ] = None,
    agent: AgentOpt = None,
    timeout: TimeoutOpt = None,
    fmt: FormatOpt = None,
) -> None:
    """Continue a waiting thread, or one that has ended, with a person's text.

    A thread that waits (its agent suspended the step with $SUSPEND, or deferred it): the
    role it waits for runs again, its prompt followed by why it waited and the text of -p.
    A thread that has ended, whose workflow has a $START.resume edge: a new thread continues
    its chain through $START.resume (the ended thread is never changed); its line then has
    "resumedFrom". Prints the step's line, as thread step does, with the same exit codes (6:
    it waits again). `thread answer` writes the role's output by hand instead.
    """
    from uwf.engine.threads.resume import resume as resume_thread

    text = read_input("-", "prompt") if prompt == "-" else prompt
    with loop_contract():
        emit_stream(resume_thread(backend(), thread, text, agent=agent, timeout=timeout), fmt)


def poke(
    thread: ThreadArg,
    prompt: Annotated[
        str | None,
        typer.Option(
            "--prompt",
            "-p",
            help="What the person adds: a hint, what to change ('-' reads stdin). Needed to "
            "poke an idle thread.",
            show_default=False,
        ),
    ] = None,
    agent: AgentOpt = None,
    timeout: TimeoutOpt = None,
    wait: WaitOpt = False,
    fmt: FormatOpt = None,
) -> None:
    """Nudge a thread now: run again what it waits for, or its last step.

    A waiting thread (its agent suspended or deferred the step): the role it waits for runs
    again now, re-checking what it waited for. A fan-out parent: its children are checked
    again, and the joining role runs if every one has ended. A failing thread: the step runs
    again now, before its back-off ends (a failed one needs `thread retry`). An idle thread:
    its last step's role runs once more with the prompt it was given and -p TEXT (required),
    and the new step follows it (the chain keeps both). -p TEXT follows the step's prompt
    under "## Poked". The step lock is taken as by `thread step` (busy: exit 4, or --wait),
    and nothing runs if the thread moved meanwhile. Prints the step's line, as thread step
    does, plus "poked" (waiting, fanned-out, failing, idle) and "redid" (the step done again),
    with the same exit codes (6: it waits again).
    """
    from uwf.engine.threads.poke import poke as poke_thread

    text = read_input("-", "prompt") if prompt == "-" else prompt
    with loop_contract():
        emit_stream(
            poke_thread(backend(), thread, text, agent=agent, timeout=timeout, wait=wait), fmt
        )


def priority(
    thread: ThreadArg,
    value: Annotated[
        int,
        typer.Argument(
            metavar="PRIORITY",
            help="An integer; higher is stepped first (default of a thread: 0).",
            show_default=False,
        ),
    ],
    fmt: FormatOpt = None,
) -> None:
    """Set how soon --next and workers step an active thread.

    --next and workers take the highest priority first, oldest first within one; a thread
    gains one level for every priorityAging seconds (config.yaml, default 300) since it was
    created, so a low one is never starved (docs/format.md, "Priorities"). Prints
    {"thread","priority","previous"}.
    """
    from uwf.engine.threads import steer

    emit(steer.prioritize(backend(), thread, value), fmt)
