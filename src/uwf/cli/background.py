"""The worker process of ``uwf thread step --background`` (docs/architecture.md, "Background
runs"): ``python -P -m uwf.cli.background <thread> <count> [--agent A] [--timeout S]``.

``engine.step.background.launch`` starts it detached, its stdout and stderr appended to the run's
log file, and waits on the pipe named by ``$UWF_READY_FD`` for its first answer. The log then
holds what a foreground ``thread step -c N`` would print: one JSON line per step, the agents'
stderr (prefixed with their names), an ``error:`` line for a failure; framed by a ``uwf:``
line when the run starts and one saying why it ended. A run killed before it could say why
(SIGKILL, the OOM killer) gets that last line from its epitaph (``adapters.process.Epitaph``).
"""

import contextlib
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwf.util.ulid import ThreadId

if TYPE_CHECKING:
    from uwf.adapters.process import Epitaph
    from uwf.backend.base import Backend

# ``-P``: the working directory (where agents run) is not put on ``sys.path``, so nothing in
# it can stand in for uwf's own modules.
WORKER = (sys.executable, "-P", "-m", "uwf.cli.background")


def _say(text: str) -> None:
    now = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    print(f"uwf: {now} {text}", flush=True)


class _Ready:
    """Answers the launcher once on the ready pipe; an accepted run is announced in the log.
    A refused run writes nothing to the log (the launcher reports the refusal): the log may
    be that of the run that holds the thread."""

    def __init__(self, thread: str, count: int, log: Path | None) -> None:
        from uwf.adapters.process import READY_FD

        self.fd = int(os.environ.pop(READY_FD, "-1"))  # not passed on to agents
        self.thread, self.count, self.log = thread, count, log
        self.started = False
        self.epitaph: Epitaph | None = None

    def __call__(self, answer: dict[str, Any]) -> None:
        if answer.get("ok") is True:
            self.started = True
            from uwf.engine.step.background import steps

            _say(
                f"background run of thread {self.thread} started: pid {os.getpid()}, "
                f"up to {steps(self.count)}"
            )
            if self.log is not None:  # a run killed (SIGKILL) still gets its last line
                from uwf.adapters.process import Epitaph

                self.epitaph = Epitaph(
                    self.log,
                    f"uwf: {{now}} background run of thread {self.thread} ended: its process "
                    f"(pid {os.getpid()}) died before it could end the run (SIGKILL, the OOM "
                    "killer or a crash)",
                )
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.write(self.fd, json.dumps(answer).encode())
                os.close(self.fd)


def main(argv: list[str] | None = None) -> int:
    from uwf.backend import open_backend
    from uwf.config import secrets
    from uwf.engine.step import background
    from uwf.util.errors import printable
    from uwf.util.jsonfmt import dumps
    from uwf.util.signals import interrupt_on_signals

    args = sys.argv[1:] if argv is None else argv
    thread, count = args[0], int(args[1])
    options = dict(zip(args[2::2], args[3::2], strict=True))
    timeout = options.get("--timeout")
    backend = open_backend()
    secrets.install(backend.root)
    ready = _Ready(thread, count, _log_of(backend, thread))
    with interrupt_on_signals():
        ended = background.run(
            backend,
            thread,
            count=count,
            agent=options.get("--agent"),
            timeout=float(timeout) if timeout is not None else None,
            ready=ready,
            on_result=lambda result: print(dumps(result.as_json()), flush=True),
        )
    if ready.started:
        if ended.error is not None:
            print(f"error: {printable(ended.error)}", flush=True)
        _say(f"background run of thread {thread} ended: {ended.reason}")
        if ready.epitaph is not None:
            ready.epitaph.said()
    return ended.code


def _log_of(backend: "Backend", thread: str) -> Path | None:
    """The run's log (where its stdout goes), None for a malformed thread id (refused)."""
    from uwf.engine.step.background import log_path
    from uwf.util.ulid import is_thread_id

    return log_path(backend, ThreadId(thread)) if is_thread_id(thread) else None


if __name__ == "__main__":
    sys.exit(main())
