"""What the tests share, imported by name (``from support import …``; never from conftest):
paths, the result of running ``uwf``, running it in-process or as a process, reaping processes,
reading a terminal, snapshots of a storage root, the scripted outputs of the solve-issue
example, and the state of the store a test's ``uwf`` uses.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
BIN = Path(sys.executable).parent


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def jsonl(self) -> list[Any]:
        """JSON Lines (``thread step`` prints one object per step)."""
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]

    @property
    def err_line(self) -> str:
        lines = self.err.strip().splitlines()
        return lines[0] if lines else ""


def cli(*args: str | int) -> Result:
    """``uwf <args>`` in-process, through ``uwf.cli.main.run`` (its error handling included).

    The command tree is lazy (cli/lazy.py), so each call builds only the command it runs.
    """
    from uwf.cli.main import run

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run([str(a) for a in args])
    return Result(code, out.getvalue(), err.getvalue())


def run(
    *args: str,
    prog: str = "uwf",
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> Result:
    """``<prog> <args>`` (default: the installed ``uwf``) in a subprocess, with this venv's
    scripts first on PATH; stdin is ``input`` (empty by default: never the terminal)."""
    full_env = dict(os.environ)
    full_env["PATH"] = f"{BIN}{os.pathsep}{full_env.get('PATH', '')}"
    if env:
        full_env.update(env)
    exe = shutil.which(prog, path=full_env["PATH"]) or prog
    proc = subprocess.run(
        [exe, *[str(a) for a in args]],
        capture_output=True,
        text=True,
        input="" if input is None else input,  # never our terminal (agents get UWF_TTY)
        env=full_env,
        timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def given(threads: list[str]) -> list[str]:
    """``uwf worker``'s ``--thread`` for each of ``threads``: a worker given its threads exits
    once they have all ended, with no idle wait at the end."""
    return [arg for thread in threads for arg in ("--thread", thread)]


def spawn_uwf(*args: str | int) -> subprocess.Popen[str]:
    """Start the installed ``uwf`` as a process of its own (to signal, kill or race it)."""
    return subprocess.Popen(
        [str(BIN / "uwf"), *[str(a) for a in args]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def reap(proc: subprocess.Popen[Any]) -> None:
    """End a process a test started (killed if it still runs) and close its pipes: warnings
    are errors, an unclosed pipe included."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, e.g. an orphan nobody reaps, counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_dead(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            raise AssertionError(f"process {pid} still running after {timeout}s")
        time.sleep(0.01)


def read_terminal(primary: int) -> bytes:
    """Everything a pseudo-terminal's other side wrote, until it is quiet for 0.5 s or closed."""
    import select

    screen = b""
    while select.select([primary], [], [], 0.5)[0]:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        screen += chunk
    return screen


def take_snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (except the debug log) with its bytes."""
    if not path.exists():
        return {}
    out = {}
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if p.is_file() and not rel.startswith("logs/"):
            out[rel] = p.read_bytes()
    return out


PLAN = "---\nstatus: _\nplan: do it\nsteps:\n  - one\n  - two\n---\nThe plan."
DEV = "---\nstatus: _\nfilesChanged: [a.py]\nsummary: did it\n---\nImplemented."
REJECT = "---\nstatus: rejected\ncomments: add tests\n---\nNeeds tests."
APPROVE = "---\nstatus: approved\ncomments: looks good\n---\nLGTM."
ONE_REJECTION = {"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT, APPROVE]}


def store_state() -> tuple[list[Any], list[Any]]:
    """The active threads (sorted) and the history of the store this test's ``uwf`` uses
    (``UWF_STORE`` or the storage root), read through the backend."""
    from uwf.backend import open_backend

    with open_backend() as backend:
        active = sorted(backend.threads.active(), key=lambda r: r.thread)
        return active, backend.threads.history()


def history_lines() -> list[dict[str, Any]]:
    """The store's history as the JSON lines of ``history.jsonl``."""
    return [entry.as_json() for entry in store_state()[1]]


# -- tiers --------------------------------------------------------------------------------------

#: The stress tier's limit per test (pytest-timeout; the default run's is in pyproject.toml).
STRESS_TIMEOUT = 900


def tiers(name: str, smoke: Any, full: Any) -> Any:
    """Run a long test at two sizes: ``smoke`` in the default run, ``full`` in the stress tier
    (``pytest -m stress``, README.md "Tests"), the same body and the same checks at both::

        @tiers("threads", 8, THREADS)
        def test_workers_drain_threads(threads: int) -> None: ...
    """
    return pytest.mark.parametrize(
        name,
        [
            pytest.param(smoke, id="smoke"),
            pytest.param(
                full,
                id="full",
                marks=[pytest.mark.stress, pytest.mark.timeout(STRESS_TIMEOUT)],
            ),
        ],
    )
