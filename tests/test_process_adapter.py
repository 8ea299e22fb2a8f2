"""``uwf.adapters.process.run``, the one process helper: what its callers (the step, uwf-cmd,
uwf-builtin's run_command, uwf-hermes) rely on beyond the step's own tests."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest

from uwf.adapters import process

PY = sys.executable


def test_stdin_cwd_and_whole_stdout(tmp_path: Path) -> None:
    code = "import os, sys; data = sys.stdin.read(); print(os.getcwd()); print(data * 600000)"
    ran = process.run([PY, "-c", code], stdin="ab", cwd=tmp_path, stdout_limit=None)
    cwd, big = ran.stdout.split("\n", 2)[:2]
    assert (ran.code, cwd, len(big)) == (0, str(tmp_path), 1_200_000)


def test_stdout_is_bounded_to_its_tail_by_default() -> None:
    code = "import sys; sys.stdout.write('x' * 3_000_000 + 'END')"
    ran = process.run([PY, "-c", code])
    assert len(ran.stdout) == process.STDOUT_LIMIT and ran.stdout.endswith("xEND")


def test_stderr_tail_keeps_the_last_characters(capfd: pytest.CaptureFixture[str]) -> None:
    code = "import sys\nfor i in range(5000): print(f'line {i}', file=sys.stderr)"
    ran = process.run([PY, "-c", code], stderr_prefix="", stderr_keep=50)
    assert len(ran.stderr_tail) == 50 and ran.stderr_tail.endswith("line 4999\n")
    passed = capfd.readouterr().err.splitlines()
    assert passed[0] == "line 0" and passed[-1] == "line 4999" and len(passed) == 5000


def test_a_command_that_cannot_start_names_what_and_keeps_the_cause(tmp_path: Path) -> None:
    with pytest.raises(process.CannotStart) as missing:
        process.run(["no-such-command-xyz"], what="agent command")
    assert missing.value.message == (
        "agent command not found: no-such-command-xyz (is it installed and on PATH?)"
    )
    assert isinstance(missing.value.cause, FileNotFoundError)
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(process.CannotStart) as denied:
        process.run([str(script)])
    assert denied.value.message == f"command is not executable: {script}"
    with pytest.raises(process.CannotStart) as too_long:
        process.run(["/bin/true", "x" * (1 << 20) * 3])
    assert too_long.value.cause.errno == errno.E2BIG


def test_a_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    ran = process.run([PY, "-c", code], timeout=1.0)
    assert ran.timed_out and ran.code < 0
    assert not _alive(int(pid_file.read_text()))


def _alive(pid: int) -> bool:
    """Running (a zombie left for a parent that does not reap it is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
