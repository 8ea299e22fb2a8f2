"""``uwf thread poke``: nudge a thread now (docs/format.md, "Poking a thread").

uwf 0.8's ``thread poke <thread> -p TEXT`` re-ran the head step's agent with the text,
replacing the head step; it worked on idle and suspended threads and refused running and
ended ones. Here nodes never change and a waiting thread has no step for the role it waits
for, so poking acts on what the thread is doing, under its step lock like any step (busy:
exit 4, or ``--wait``), and the person's text (``-p``) follows the step's edge prompt under
``## Poked``:

- **waiting** (its agent suspended or deferred the step): the role it waits for runs again
  now — re-checking whatever it waited for; ``-p`` is optional.
- **fanned out** (it waits for the children its fan-out started): the join is checked again;
  it runs when every child has ended, else the thread still waits (exit 6).
- **failing** (its last attempt failed, retried later): the step runs again now, before its
  back-off ends. A ``failed`` thread (a dead letter) is refused as by ``thread step`` (exit 3
  until ``thread retry``).
- **idle**, its head a step: that step's role runs once more, with the prompt it was given
  and ``-p`` (required: what to change), and the new step follows it — the chain keeps both
  (0.8 replaced the head; ``thread rerun <step>`` forks beside it instead). Routing goes on
  from the new step. A failure of this step is not recorded as the thread's.

Each acts only if the thread is still as it was seen: a thread that moved meanwhile is a
Conflict and nothing runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from uwf.backend.base import Backend, Waiting
from uwf.engine.step import step
from uwf.engine.step.run import SUSPENDED, Runner, process_runner
from uwf.engine.threads.resume import check_text
from uwf.model import chain
from uwf.model.threads import fanned_out, require_active
from uwf.util.errors import InvalidInput, UsageError

if TYPE_CHECKING:
    from uwf.util.outputs import PokeLine

__all__ = ["poke", "poke_note"]


def poke_note(why: str, text: str | None) -> str:
    """What follows the edge prompt of a poked step: why it runs again, and the text."""
    said = text.strip() if text else ""
    wrote = f"A person poked it and wrote:\n\n{said}" if said else "A person poked it."
    return f"## Poked\n\n{why}\n{wrote}"


def _waited(waiting: Waiting) -> str:
    reason = waiting.reason or ""
    if reason.startswith(SUSPENDED):
        return (
            f"You suspended this step ({reason.removeprefix(SUSPENDED).strip()}); it runs again "
            "now: go on if you can."
        )
    said = f" ({reason})" if reason else ""
    return f"This step waited{said}; it runs again now: go on if you can."


def poke(
    backend: Backend,
    thread: str,
    text: str | None = None,
    *,
    agent: str | None = None,
    timeout: float | None = None,
    wait: bool = False,
    runner: Runner = process_runner,
) -> PokeLine:
    """Poke ``thread`` as it is now (see the module); the step's line, with ``poked`` (what
    the thread was doing) and, for an idle thread, ``redid`` (the step done again)."""
    check_text(text)
    tid, head = require_active(backend, thread)
    record = backend.threads.get(tid)
    waiting = record.waiting if record is not None else None
    failure = record.failure if record is not None else None

    def run(note: str | None, poked: str, again: bool = False) -> PokeLine:
        line = step(
            backend,
            tid,
            agent=agent,
            timeout=timeout,
            wait=wait,
            runner=runner,
            extra_prompt=note,
            expected=head,
            again=again,
        ).as_json()
        out = cast("PokeLine", {**line, "poked": poked})
        if again:
            out["redid"] = head
        return out

    if waiting is not None and fanned_out(waiting):
        note = poke_note("Its children were checked again.", text) if text else None
        return run(note, "fanned-out")
    if waiting is not None:
        return run(poke_note(_waited(waiting), text), "waiting")
    if failure is not None:  # a dead letter (exhausted) is refused under the lock: exit 3
        why = (
            f"The last attempt at this step failed ({failure.attempts} so far); it runs again now."
        )
        return run(poke_note(why, text), "failing")
    node = chain.load_head(backend.nodes, head)
    if not isinstance(node, chain.Step):
        raise InvalidInput(
            f"thread {tid} has no step to poke: it has not run one yet; "
            f"`uwf thread step {tid}` runs its first step"
        )
    if not (text or "").strip():
        raise UsageError(
            f"thread {tid} is idle: poke does its last step ({node.role}, {head}) again and "
            "needs -p TEXT saying what to change; `uwf thread step` runs its next step"
        )
    why = (
        f"A person asked for this step again: your last answer to it is step "
        f"{chain.depth_of(backend.nodes, node)} ({head}), and this one follows it."
    )
    return run(poke_note(why, text), "idle", again=True)
