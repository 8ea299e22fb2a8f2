"""uwf without its extras, as ``pip install uwf`` resolves it today (stress tier).

The suite's venv carries every extra, and an extra can pin a shared dependency: ``hermes``
pins PyYAML 6.0.3, whose libyaml words deep nesting differently from 6.0.4's. Here a fresh
venv gets uwf with the ``dev`` extra alone (whatever releases the resolver picks today) and
runs the tests of what every user sees — the error catalogue, YAML's limits, the CLI's
start-up — plus each missing extra's one-line hint, so that no user-facing text depends on
which extra happened to be installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, STRESS_TIMEOUT

pytestmark = [pytest.mark.stress, pytest.mark.timeout(STRESS_TIMEOUT)]

TESTS = ["tests/test_yamlio.py", "tests/test_errors_catalogue.py", "tests/test_startup.py"]


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with uwf and its dev extra only; its bin directory."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run(
        [*pip, "--disable-pip-version-check", "-e", f"{REPO}[dev]"],
        check=True,
        timeout=600,
        capture_output=True,
    )
    return venv / "bin"


def _env(bare: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UWF_", "PYTEST_"))}
    env["PATH"] = f"{bare}{os.pathsep}{env.get('PATH', '')}"
    env.pop("VIRTUAL_ENV", None)
    return env


def test_the_user_facing_tests_pass_without_the_extras(bare: Path) -> None:
    missing = subprocess.run(
        [str(bare / "python"), "-c", "import psycopg2"], capture_output=True, timeout=60
    )
    assert missing.returncode != 0  # no extra came in through another door
    run = subprocess.run(
        [str(bare / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", *TESTS],
        cwd=REPO,
        env=_env(bare),
        capture_output=True,
        text=True,
        timeout=STRESS_TIMEOUT - 120,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # exit 0 is every test passed (none collected would be 5); -q on top of addopts' -q
    # prints the progress, not the summary line
    assert run.stdout.rstrip().endswith("[100%]"), run.stdout[-2000:]


def test_each_missing_extra_is_one_line_naming_its_install(bare: Path, tmp_path: Path) -> None:
    env = {**_env(bare), "UNCAGED_WORKFLOW_STORAGE_ROOT": str(tmp_path / "root")}

    def uwf(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(bare / "uwf"), *args],
            capture_output=True,
            text=True,
            env={**env, **extra},
            timeout=60,
        )

    pg = uwf("--store", "postgresql://u@127.0.0.1:9/x", "thread", "list")
    assert (pg.returncode, pg.stderr) == (
        1,
        "error: PostgreSQL support is not installed: pip install 'uwf[postgres]'\n",
    )
    ui = uwf("ui", "--port", "0")
    assert ui.returncode == 1
    assert ui.stderr.startswith("error: the web view needs the ui extra (")
    assert ui.stderr.endswith("missing): pip install 'uwf[ui]'\n")
    assert len(ui.stderr.splitlines()) == 1
