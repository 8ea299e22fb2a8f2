"""Shared fixtures: every test gets its own storage root and working directory.

``cli`` runs the real app in-process (fast); ``cli_proc`` runs the installed ``uwf`` script
in a subprocess (the real thing, exit codes and all). ``snapshot`` captures a storage root
byte for byte, to prove that bad input changes nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import support
from support import BIN, EXAMPLES, ONE_REJECTION, take_snapshot


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
    """Run ``uwf <args>`` in-process and capture what it prints (``support.cli``)."""
    return support.cli


@pytest.fixture
def cli_proc() -> Any:
    """Run the installed ``uwf`` (or another console script) in a subprocess
    (``support.run``)."""
    return support.run


@pytest.fixture
def snapshot() -> Any:
    return take_snapshot


# -- threads: the solve-issue example, uwf-mock scenarios and scripted agents ----------------


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents (uwf-mock, uwf-cmd) are spawned by name: put this venv's scripts on PATH."""
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture
def scenario(tmp_path: Path) -> Any:
    """Write a uwf-mock scenario (role -> entries) and return its ``--agent`` command line:
    by default uwf-mock run in the stepping process (``python:uwf-mock``, docs/api.md "Python
    agents": the same StepNode and detail, no process started per step); with
    ``inprocess=False`` the ``uwf-mock`` process, for tests whose subject is the process
    boundary (an agent's exit code, stderr, signals, environment or timing)."""
    import yaml

    counter = iter(range(1000))

    def make(roles: dict[str, Any] | None = None, *, inprocess: bool = True) -> str:
        path = tmp_path / f"scenario-{next(counter)}.yaml"
        path.write_text(yaml.safe_dump({"roles": roles or ONE_REJECTION}))
        return f"{'python:' if inprocess else ''}uwf-mock --scenario {path}"

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


@pytest.fixture(scope="session")
def _solve_issue_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A storage root where examples/solve-issue.yaml was put, once per worker, and its hash."""
    prepared = tmp_path_factory.mktemp("prepared") / "root"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("UNCAGED_WORKFLOW_STORAGE_ROOT", str(prepared))
        env.delenv("UWF_STORE", raising=False)
        result = support.cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    assert result.code == 0, result.err
    return prepared, str(result.json()["hash"])


@pytest.fixture
def solve_issue(cli: Any, root: Path, _solve_issue_root: tuple[Path, str]) -> str:
    """Register examples/solve-issue.yaml; return its workflow hash. On the filesystem the
    prepared root is copied in (~3 ms; a put is ~80 ms), on PostgreSQL it is put."""
    prepared, workflow = _solve_issue_root
    if "UWF_STORE" in os.environ or (root / "registry.yaml").exists():
        result = cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
        assert result.code == 0, result.err
        assert result.json()["hash"] == workflow
        return workflow
    shutil.copytree(prepared, root, symlinks=True, dirs_exist_ok=True)
    return workflow


@pytest.fixture
def new_thread(cli: Any, solve_issue: str) -> Any:
    """Start a solve-issue thread; return its id."""

    def make(prompt: str = "Fix the login bug") -> str:
        result = cli("thread", "start", "solve-issue", "-p", prompt)
        assert result.code == 0, result.err
        return str(result.json()["thread"])

    return make


# -- PostgreSQL: one real server per session (per xdist worker), one database emptied per test --


@pytest.fixture(scope="session")
def pg_server() -> Any:
    """A PostgreSQL server on loopback for the whole session (tests/pgserver.py)."""
    import pgserver

    with pgserver.running() as server:
        yield server


@pytest.fixture(scope="session")
def _pg_database(pg_server: Any) -> str:
    return str(pg_server.fresh())


@pytest.fixture
def pg_url(pg_server: Any, _pg_database: str) -> str:
    """The URL (with its password) of an empty store: this worker's database, emptied."""
    return str(pg_server.empty(_pg_database))


@pytest.fixture
def pg_fresh_url(pg_server: Any) -> Any:
    """The URL of a database uwf never touched (schema version 0); dropped afterwards."""
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


def pytest_unconfigure(config: pytest.Config) -> None:
    """End the watchdog the in-process CLI started (uwf.adapters.watchdog.close), so that a
    worker's interpreter does not exit with it still running (a ResourceWarning)."""
    watchdog = sys.modules.get("uwf.adapters.watchdog")
    if watchdog is not None:
        watchdog.close()
