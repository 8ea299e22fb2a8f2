"""Shared fixtures: every test gets its own storage root and working directory.

``cli`` runs the real app in-process (fast); ``cli_proc`` runs the installed ``uwf`` script
in a subprocess (the real thing, exit codes and all). ``snapshot`` captures a storage root
byte for byte, to prove that bad input changes nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
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


@pytest.fixture(autouse=True)
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the storage root at a temp dir and run from an empty working directory."""
    storage = tmp_path / "root"
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.setenv("UNCAGED_WORKFLOW_STORAGE_ROOT", str(storage))
    monkeypatch.delenv("WORKFLOW_STORAGE_ROOT", raising=False)
    monkeypatch.delenv("UWF_DEBUG", raising=False)
    monkeypatch.delenv("UWF_MOCK_SCENARIO", raising=False)
    monkeypatch.chdir(work)
    return storage


@pytest.fixture
def cli() -> Any:
    """Run ``uwf <args>`` in-process and capture what it prints."""
    from uwf.cli.main import run

    def invoke(*args: str) -> Result:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run([str(a) for a in args])
        return Result(code, out.getvalue(), err.getvalue())

    return invoke


@pytest.fixture
def cli_proc() -> Any:
    """Run the installed ``uwf`` (or another console script) in a subprocess."""

    def invoke(
        *args: str,
        prog: str = "uwf",
        input: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> Result:
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

    return invoke


def spawn_uwf(*args: str) -> subprocess.Popen[str]:
    """Start the installed ``uwf`` as a process of its own (to signal, kill or race it)."""
    return subprocess.Popen(
        [str(BIN / "uwf"), *args],
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


@pytest.fixture
def snapshot() -> Any:
    return take_snapshot


# -- threads: the solve-issue example, uwf-mock scenarios and scripted agents ----------------

PLAN = "---\nstatus: _\nplan: do it\nsteps:\n  - one\n  - two\n---\nThe plan."
DEV = "---\nstatus: _\nfilesChanged: [a.py]\nsummary: did it\n---\nImplemented."
REJECT = "---\nstatus: rejected\ncomments: add tests\n---\nNeeds tests."
APPROVE = "---\nstatus: approved\ncomments: looks good\n---\nLGTM."
ONE_REJECTION = {"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT, APPROVE]}


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents (uwf-mock, uwf-cmd) are spawned by name: put this venv's scripts on PATH."""
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture
def scenario(tmp_path: Path) -> Any:
    """Write a uwf-mock scenario (role -> entries) and return its ``--agent`` command line."""
    import yaml

    counter = iter(range(1000))

    def make(roles: dict[str, Any] | None = None) -> str:
        path = tmp_path / f"scenario-{next(counter)}.yaml"
        path.write_text(yaml.safe_dump({"roles": roles or ONE_REJECTION}))
        return f"uwf-mock --scenario {path}"

    return make


@pytest.fixture
def agent_script(tmp_path: Path) -> Any:
    """Write a Python agent script and return its ``--agent`` command line."""
    counter = iter(range(1000))

    def make(body: str) -> str:
        path = tmp_path / f"agent-{next(counter)}.py"
        path.write_text("import os, sys, time\n" + body)
        return f"{sys.executable} {path}"

    return make


@pytest.fixture
def solve_issue(cli: Any) -> str:
    """Register examples/solve-issue.yaml; return its workflow hash."""
    result = cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    assert result.code == 0, result.err
    return str(result.json()["hash"])


@pytest.fixture
def new_thread(cli: Any, solve_issue: str) -> Any:
    """Start a solve-issue thread; return its id."""

    def make(prompt: str = "Fix the login bug") -> str:
        result = cli("thread", "start", "solve-issue", "-p", prompt)
        assert result.code == 0, result.err
        return str(result.json()["thread"])

    return make


# -- PostgreSQL: one real server per session, a fresh database per test ---------------------


@pytest.fixture(scope="session")
def pg_server() -> Any:
    """A PostgreSQL server on loopback for the whole session (tests/pgserver.py)."""
    import pgserver

    with pgserver.running() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: Any) -> Any:
    """The URL (with its password) of a fresh, empty database; dropped afterwards."""
    url = pg_server.fresh()
    yield url
    pg_server.drop(url)


@pytest.fixture(params=["fs", "pg"])
def any_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, root: Path) -> str:
    """Run the test on both backends: the storage root, then a fresh PostgreSQL database
    (``UWF_STORE``, which uwf and every agent it spawns open). Returns the backend's kind."""
    if request.param == "pg":
        monkeypatch.setenv("UWF_STORE", request.getfixturevalue("pg_url"))
    else:
        monkeypatch.delenv("UWF_STORE", raising=False)
    return str(request.param)


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
