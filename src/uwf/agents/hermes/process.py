"""Running the ``hermes`` command and reading what it said.

Hermes runs without a shell, stdin closed, its output captured, in its own process group
(``uwf.adapters.process``). Its stderr is passed through
to ours, prefixed ``hermes: `` (its ``session_id:`` line excepted); when it fails, the error
quotes what it said (the end of its stderr, else the start of its stdout).
"""

from __future__ import annotations

import errno
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from uwf.util.errors import AgentFailed

PACKAGE = "hermes-agent"
STDERR_KEEP = 20_000  # characters of Hermes' stderr passed through (the tail)
QUOTE = 400  # characters of Hermes' own words quoted in an error message
EXPORT_TIMEOUT = 120.0  # seconds; an export takes well under one

# patterns compiled on first use, not at import (tests/test_startup.py)
_ANSI = r"\x1b\[[0-9;?]*[ -/]*[@-~]"
_SESSION_LINE = r"(?im)^\s*session_id:\s*(\S+)\s*$"
# Lines of Hermes' stdout that say nothing about a failure.
_NOISE = (r"^⚠ tirith security scanner", r"^↻ Resumed session")


class HermesMissing(AgentFailed):
    """``hermes`` is not installed (or not on PATH): nothing a retry can fix."""


def hermes_executable() -> str:
    found = shutil.which("hermes")
    if found is None:
        raise HermesMissing(_missing_message())
    return found


def _missing_message() -> str:
    return (
        f"hermes not found on PATH: uwf-hermes drives the Hermes agent; install it with "
        f"`pip install {PACKAGE}` (or `pip install 'uwf[hermes]'`), then configure a model "
        "with `hermes setup`"
    )


def parse_session_id(*texts: str) -> str | None:
    """The id of the first ``session_id: <id>`` line (any case) in the texts, in order."""
    for text in texts:
        found = re.search(_SESSION_LINE, text)
        if found:
            return found.group(1)
    return None


def _flat(text: str) -> str:
    return " ".join(text.split())


def _quote_head(text: str) -> str:
    flat = _flat(text)
    return flat if len(flat) <= QUOTE else flat[: QUOTE - 1] + "…"


def _quote_tail(text: str) -> str:
    flat = _flat(text)
    return flat if len(flat) <= QUOTE else "…" + flat[-(QUOTE - 1) :]


def _meaningful(text: str) -> str:
    """The lines of Hermes' output that can explain a failure (no session line, no noise)."""
    keep = []
    for line in re.sub(_ANSI, "", text).splitlines():
        stripped = line.strip()
        if not stripped or re.match(_SESSION_LINE, stripped):
            continue
        if any(re.match(p, stripped) for p in _NOISE):
            continue
        keep.append(stripped)
    return "\n".join(keep)


def failure_text(stdout: str, stderr: str) -> str:
    """What Hermes said about a failure: the end of its stderr (of a traceback, only the
    exception), else the start of its stdout (in quiet mode the error replaces the answer)."""
    err = _meaningful(stderr)
    lines = err.splitlines()
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        return _quote_tail(lines[-1])  # the exception; the frames are in the passed-through stderr
    if err:
        return _quote_tail(err)
    return _quote_head(_meaningful(stdout))


def pass_stderr(stderr: str) -> None:
    """Copy Hermes' stderr to ours (the tail, if huge), minus its ``session_id:`` line."""
    kept = stderr[-STDERR_KEEP:]
    lines = [
        line
        for line in kept.splitlines()
        if line.strip() and not re.match(_SESSION_LINE, line.strip())
    ]
    if lines:
        from uwf.util.secrets import redact
        from uwf.util.terminal import visible

        text = visible(redact("".join(f"hermes: {line}\n" for line in lines)))
        sys.stderr.write(text)
        sys.stderr.flush()


def run_hermes(
    argv: list[str], what: str, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """Run Hermes to its end through ``uwf.adapters.process`` (its own process group, killed
    with ours); its whole stdout and the last ``STDERR_KEEP`` characters of its stderr.

    Hermes runs the model's commands with its environment, so it gets ours without store
    credentials and the ``secrets:`` of config.yaml (``uwf.config.secrets.command_env``;
    Hermes removes its providers' keys from its commands itself)."""
    import os

    from uwf.adapters import process
    from uwf.config.secrets import command_env, model_config
    from uwf.util.root import storage_root

    env = command_env(os.environ, model_config(storage_root()), provider_keys=True)
    if any(len(a.encode()) >= process.ARG_LIMIT for a in argv):
        raise AgentFailed(
            f"{what} could not start: the prompt is {max(len(a.encode()) for a in argv)} bytes, "
            f"over the limit of {process.ARG_LIMIT - 1} bytes Linux sets on one command-line "
            "argument (MAX_ARG_STRLEN)"
        )
    try:
        ran = process.run(argv, env, timeout=timeout, stdout_limit=None, stderr_keep=STDERR_KEEP)
    except process.CannotStart as exc:
        raise _cannot_start(exc.cause, argv, what) from None
    if ran.timed_out:
        raise AgentFailed(f"{what} did not finish within {timeout:g}s")
    return subprocess.CompletedProcess(argv, ran.code, ran.stdout, ran.stderr_tail)


def _cannot_start(cause: OSError, argv: list[str], what: str) -> AgentFailed:
    if isinstance(cause, FileNotFoundError):
        return HermesMissing(_missing_message())
    if cause.errno == errno.E2BIG:
        return AgentFailed(
            f"{what} could not start: its arguments and environment are over the limit Linux "
            f"sets on them together (ARG_MAX; the prompt is {sum(len(a) for a in argv)} "
            "characters)"
        )
    return AgentFailed(f"{what} could not start: {cause.strerror or cause}")


def chat_argv(exe: str, prompt: str, options: Sequence[str], resume: str | None) -> list[str]:
    argv = [exe, "chat", "-Q", "-q", prompt, "--source", "tool"]
    if resume is not None:
        argv += ["--resume", resume, "--no-restore-cwd"]
    return argv + list(options)


def export_session(exe: str, session_id: str) -> dict[str, Any]:
    """The session as ``hermes sessions export --session-id <id> -`` prints it."""
    what = f"hermes sessions export --session-id {session_id}"
    argv = [exe, "sessions", "export", "--session-id", session_id, "-"]
    proc = run_hermes(argv, what, EXPORT_TIMEOUT)
    pass_stderr(proc.stderr)
    said = failure_text(proc.stdout, proc.stderr)
    if proc.returncode != 0:
        raise AgentFailed(
            f"{what} failed with exit code {proc.returncode}" + (f": {said}" if said else "")
        )
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            session = json.loads(line)
        except ValueError:
            continue
        if isinstance(session, dict) and session.get("id") == session_id:
            if not isinstance(session.get("messages"), list):
                raise AgentFailed(f"{what} printed a session without messages")
            return session
    raise AgentFailed(
        f"{what} printed no session (one JSON line with id {session_id} was expected)"
        + (f": {said}" if said else "")
    )
