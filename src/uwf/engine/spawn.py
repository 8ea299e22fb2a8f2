"""Running an agent process: no shell, own process group, live stderr, bounded capture.

The agent's stderr is copied to ours line by line as it arrives (and its tail kept for the
error message); its stdout is kept only up to a bound, since all uwf needs is the last line.
A timeout kills the whole process group, so an agent's children die with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from typing import IO

from uwf.util.errors import AgentFailed

STDOUT_LIMIT = 1 << 20  # bytes of stdout kept (the tail); an agent printing more is not an error
STDERR_TAIL = 2000  # characters of stderr quoted in an error message


@dataclass(frozen=True)
class AgentRun:
    code: int
    stdout: str
    stderr_tail: str
    timed_out: bool


def _pump_stdout(stream: IO[bytes], sink: bytearray) -> None:
    while chunk := stream.read(65536):
        sink.extend(chunk)
        if len(sink) > 2 * STDOUT_LIMIT:
            del sink[: len(sink) - STDOUT_LIMIT]
    stream.close()


def _pump_stderr(stream: IO[bytes], tail: deque[str], prefix: str | None) -> None:
    out = sys.stderr
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        tail.append(line)
        if prefix is not None:
            try:
                out.write(prefix + line if line.endswith("\n") else prefix + line + "\n")
                out.flush()
            except (OSError, ValueError):
                prefix = None
    stream.close()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=2)
            return
        except subprocess.TimeoutExpired:
            continue


def run_agent(
    argv: list[str], env: dict[str, str], timeout: float | None, passthrough: bool = True
) -> AgentRun:
    """Run ``argv`` to completion (or timeout) and return what uwf needs of it.

    Passed-through stderr lines are prefixed with the agent's name (``uwf-mock: …``) so they
    are never mistaken for uwf's own ``error:`` line.
    """
    prefix = f"{os.path.basename(argv[0])}: " if passthrough else None
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise AgentFailed(
            f"agent command not found: {argv[0]} (is it installed and on PATH?)"
        ) from None
    except PermissionError:
        raise AgentFailed(f"agent command is not executable: {argv[0]}") from None
    except OSError as exc:
        raise AgentFailed(f"agent command could not start: {argv[0]}: {exc.strerror}") from None
    assert proc.stdout is not None and proc.stderr is not None
    out = bytearray()
    tail: deque[str] = deque(maxlen=200)
    readers = [
        threading.Thread(target=_pump_stdout, args=(proc.stdout, out), daemon=True),
        threading.Thread(target=_pump_stderr, args=(proc.stderr, tail, prefix), daemon=True),
    ]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
    except BaseException:
        _kill_group(proc)
        raise
    for reader in readers:
        reader.join(timeout=5)
    stderr_text = "".join(tail)
    return AgentRun(
        code=proc.returncode if proc.returncode is not None else -9,
        stdout=bytes(out[-STDOUT_LIMIT:]).decode("utf-8", "replace"),
        stderr_tail=stderr_text[-STDERR_TAIL:],
        timed_out=timed_out,
    )
