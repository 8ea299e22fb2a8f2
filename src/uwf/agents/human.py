"""``uwf-human``: a person plays the role (docs/agents.md, "`uwf-human`").

In a terminal — ``$UWF_TTY``, which ``uwf thread step`` sets when it runs in one, or its own
stdin when run by hand — it shows what the role would be told (goal, task, what happened
since the role's last turn, the moderator's instruction), opens ``$VISUAL``/``$EDITOR`` on a
frontmatter template built from the role's schema, checks the answer like ``thread answer``
does (the schema, a rejection naming the field; the graph's routing) and opens the editor
again on a rejection. The answer becomes the step; its content is the markdown after the
frontmatter. Without a terminal (cron, CI), or when the person leaves the template unchanged,
it defers: exit 75, and the thread waits until someone answers (``uwf thread answer``) or a
step runs again in a terminal.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from uwf.agent_kit import args, runner
from uwf.agent_kit.context import AgentContext
from uwf.model import answer
from uwf.protocol.workflow import Workflow
from uwf.util.errors import Deferred

DESCRIPTION = """\
A person plays the role. In a terminal ($UWF_TTY, set by `uwf thread step` when it runs in
one, or stdin when run by hand) it shows the role's goal, the task, what happened since the
role's last turn and the moderator's instruction, then opens $VISUAL or $EDITOR (else vi)
on a template of the role's fields:

  ---
  status:  # required, approved | rejected
  comments:  # required, string
  ---

  (your notes: the step's content)

The answer is checked against the role's schema and the graph; a rejection opens the
editor again with the reason on top. Without a terminal, or when the template comes back
unchanged, it defers (exit 75): `uwf thread step` exits 6 and the thread shows status
waiting until someone answers with `uwf thread answer <thread>`.
"""

CONTEXT_QUOTA = 8000  # characters of recent steps shown on the terminal


def terminal() -> str | None:
    """The terminal to ask the person on: ``$UWF_TTY``, else our stdin's, else None."""
    tty = os.environ.get("UWF_TTY", "").strip()
    if tty:
        return tty
    try:
        return os.ttyname(0) if os.isatty(0) else None
    except OSError:
        return None


def context_text(ctx: AgentContext) -> str:
    """What the person reads before answering: the role, its goal, the task, the steps since
    the role's last turn and the moderator's instruction."""
    from uwf.agent_kit.thread_prompt import build_continuation_prompt

    since, offset = ctx.since_last_visit()
    goal = str(ctx.role_def.get("goal") or "").strip()
    parts = [f"# uwf-human: thread {ctx.thread}, step {ctx.depth + 1}, role {ctx.role}", ""]
    if goal:
        parts += ["## Goal", "", goal, ""]
    parts += ["## Task", "", ctx.task.strip(), ""]
    steps = [dict(s) for s in since]
    parts.append(
        build_continuation_prompt(
            steps,
            ctx.role,
            ctx.edge_prompt,
            include_content=True,
            quota=CONTEXT_QUOTA,
            offset=offset,
        )
    )
    if offset:
        parts.append(f"\n(the steps before: uwf thread read {ctx.thread})")
    return "\n".join(parts).rstrip() + "\n\nOpening your editor on the answer…\n"


class HumanAgent:
    label = answer.LABEL

    def run(self, ctx: AgentContext) -> runner.RunResult:
        tty = terminal()
        if tty is None:
            raise Deferred("no terminal to ask a person on")
        try:
            with open(tty, "w", encoding="utf-8") as out:
                out.write(context_text(ctx))
        except OSError as exc:
            raise Deferred(f"cannot open the terminal {tty}: {exc.strerror}") from None
        notes = [
            f"Answer as {ctx.role}: fill in the fields, write your notes after the block.",
            "Leave this unchanged to answer later (the thread waits).",
        ]
        text = answer.template(ctx.schema, notes=notes)
        workflow = Workflow(ctx.start.workflow, ctx.workflow)

        def take(written: str) -> tuple[str, str]:
            given = answer.parse_answer(written)
            return answer.accept(ctx.store, workflow, ctx.role, given.output), given.body

        taken = answer.edit_answer(text, take, tty=tty)
        if taken is None:
            raise Deferred("the answer template came back unchanged")
        output_hash, body = taken
        detail = answer.store_detail(
            ctx.store, ctx.head_node, body, {"via": "uwf-human"}, ctx.meter.elapsed_ms()
        )
        return runner.RunResult(body, detail, output_hash=output_hash)

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> None:
        return None  # the answer was checked before it was taken: nothing to correct


def main(argv: Sequence[str] | None = None) -> None:
    parser = args.parser(answer.LABEL, DESCRIPTION, head="")
    runner.cli(parser, lambda options: HumanAgent(), argv)


if __name__ == "__main__":
    main()
