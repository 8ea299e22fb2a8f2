"""A thread's last failure (docs/format.md, "Thread state"): every stepper records it.

``step_held`` — the one function through which a foreground ``thread step``, ``--next``,
``uwf worker`` and a background run step a thread — calls ``record_failure`` when a step
fails with the loop contract's 1 (an error) or 5 (the agent failed), under the step lock.
The thread table keeps the error line, the exit code, when, the role and agent, the host,
and how many attempts failed at this head since the last step landed; a landed step clears
it. Busy (4), a thread that ended (3), a deferral (6), a stop asked for (``thread stop``) and
signals are not failures of the thread and leave it alone.

The retry policy in force (``retry_policy``: config.yaml's overrides for the role and the
workflow, the workflow file's role and top, config.yaml's ``retry``, key by key) gives each
record its next allowed attempt, or marks the thread ``failed`` after its last
(docs/format.md, "Retries"); fleet steppers honour both, and ``step`` refuses a ``failed``
thread (``exhausted``).
"""

from __future__ import annotations

import os

from uwf.backend.base import Backend, Failure, RetryPolicy
from uwf.config.config import Config, load_config
from uwf.engine.step.plan import StepPlan
from uwf.util.base32 import NodeHash
from uwf.util.errors import NothingToStep, Stopped, UwfError, exit_code
from uwf.util.log import ProcessLog
from uwf.util.ulid import ThreadId, now_ms

FAILURE_CODES = (1, 5)
ERROR_LIMIT = 1000  # characters of the error line kept in the thread state


def record_failure(
    backend: Backend,
    thread: ThreadId,
    head: NodeHash,
    plan: StepPlan | None,
    exc: UwfError,
    log: ProcessLog,
) -> Failure | None:
    """Record ``exc`` as the thread's last failure at ``head``; the record, or None when the
    error is not a failure of the thread or could not be recorded (a head that moved, a store
    that is away: the step's own error is what the caller reports)."""
    code = exit_code(exc, loop=True)
    if code not in FAILURE_CODES or isinstance(exc, Stopped):
        return None
    message = " ".join(exc.message.split())
    if len(message) > ERROR_LIMIT:
        message = message[: ERROR_LIMIT - 1] + "…"
    failure = Failure(
        head,
        message,
        code,
        now_ms(),
        role=plan.role if plan is not None else None,
        agent=plan.argv[0] if plan is not None and plan.argv else None,
        host=os.uname().nodename,
    )
    try:
        policy = retry_policy(load_config(backend.root), plan)
    except UwfError:  # a config.yaml that cannot be read: the plan reported it already
        policy = RetryPolicy()
    try:
        stored = backend.threads.fail(thread, failure, policy)
    except UwfError as error:
        log.write("G5Q9W2R7", f"failure not recorded: {error.message}")
        return None
    log.write("F8K3M6T2", f"failure recorded attempts={stored.attempts} code={code}")
    return stored


def retry_policy(config: Config, plan: StepPlan | None) -> RetryPolicy:
    """The policy for a failed step of ``plan``: each key from the first place that sets it,
    in this order — config.yaml's ``retryOverrides`` for the role
    (``retryOverrides.<workflow>.roles.<role>``), then for the workflow
    (``retryOverrides.<workflow>.retry``): an operator's override —; the workflow file's
    role (``roles.<role>.retry``), then its top (``retry``): the author's default —;
    config.yaml's ``retry``; else the default (no limit, 1 s doubling up to 60 s)."""
    levels = [config.retry]
    if plan is not None:
        levels.extend(plan.file_retry)
        entry = config.retry_overrides.get(plan.workflow_name)
        if entry is not None:
            levels.append(entry["retry"])
            if plan.role is not None:
                levels.append(entry["roles"].get(plan.role, {}))
    merged: dict[str, float] = {}
    for level in levels:
        merged.update(level)
    default = RetryPolicy()
    attempts = merged.get("attempts")
    return RetryPolicy(
        int(attempts) if attempts is not None else None,
        float(merged.get("backoff", default.backoff)),
        float(merged.get("maxBackoff", default.max_backoff)),
    )


def refuse_failed(failure: Failure | None, thread: str) -> None:
    """A ``failed`` thread is nothing left to do (exit 3) until ``thread retry``."""
    if failure is not None and failure.exhausted:
        raise NothingToStep(
            f"thread {thread} failed after {failure.attempts} attempts (last error: "
            f"{failure.error}); `uwf thread retry {thread}` steps it again"
        )
