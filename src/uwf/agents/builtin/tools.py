"""The three tools of ``uwf-builtin``: ``read_file``, ``write_file`` and ``run_command``.

Tools never crash the agent: every problem — malformed JSON arguments, an unknown tool, a
path outside the working directory (refused unless ``--allow-outside``), a file over 512 KiB,
a command timeout (the command's process group is killed) — goes back to the model as an
``Error: …`` tool message. ``run_command`` runs a shell (through ``uwf.adapters.process``) in
the working directory with the agent's environment minus every secret uwf knows (store
credentials, API keys, ``.env`` entries, the ``secrets:`` of config.yaml); every result has
known secrets masked (``***``) before the model sees it or it is stored. It is not a sandbox
(the command itself can reach anything the user can).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

READ_LIMIT = 512 * 1024
OUTPUT_LIMIT = 32_000
COMMAND_TIMEOUT = 60.0
STREAM_LIMIT = 1 << 20  # characters of a command's stdout and of its stderr kept (the tail)
TOOL_NAMES = ("read_file", "write_file", "run_command")

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": (
                "Read a UTF-8 text file (at most 512 KiB). A relative path is resolved against "
                "the working directory."
            ),
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "File to read."}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": (
                "Write a text file, replacing it if it exists and creating missing parent "
                "directories. A relative path is resolved against the working directory."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write."},
                    "content": {"type": "string", "description": "The whole new content."},
                },
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": (
                "Run a shell command and return its exit code, stdout and stderr (truncated to "
                "32000 characters). It is killed after a timeout."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command line."},
                    "cwd": {
                        "type": "string",
                        "description": "Directory to run in (default: the working directory).",
                    },
                },
                "required": ["command"],
            },
        },
    },
]


class ToolError(Exception):
    """A tool problem reported back to the model (never fatal)."""


def resolve_path(path: str, cwd: Path, allow_outside: bool = False) -> Path:
    """``path`` against ``cwd``, symlinks resolved; outside ``cwd`` only with allow_outside."""
    if not isinstance(path, str) or not path:
        raise ToolError("the path must be a non-empty string")
    if "\0" in path:
        raise ToolError("the path contains a NUL character")
    target = (cwd / Path(path).expanduser()).resolve()
    base = cwd.resolve()
    if not allow_outside and target != base and base not in target.parents:
        raise ToolError(
            f"{path} is outside the working directory {base}; "
            "uwf-builtin refuses it unless started with --allow-outside"
        )
    return target


def _clip(text: str, limit: int = OUTPUT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n[… {omitted} characters omitted …]\n{text[-half:]}"


class Tools:
    """The three tools, bound to a working directory, a policy and a command environment."""

    def __init__(
        self,
        cwd: Path,
        *,
        allow_outside: bool = False,
        command_timeout: float = COMMAND_TIMEOUT,
        env: dict[str, str] | None = None,
    ) -> None:
        self.cwd = cwd.resolve()
        self.allow_outside = allow_outside
        self.command_timeout = command_timeout
        self.env = dict(os.environ) if env is None else env

    def __call__(self, name: str, raw_args: Any) -> str:
        """Run one tool call; any problem becomes an ``Error: …`` string for the model."""
        from uwf.util.secrets import redact

        return redact(self._call(name, raw_args))

    def _call(self, name: str, raw_args: Any) -> str:
        try:
            args = self._arguments(name, raw_args)
            if name == "read_file":
                return self.read_file(_string(args, "path", name))
            if name == "write_file":
                return self.write_file(_string(args, "path", name), _string(args, "content", name))
            cwd = args.get("cwd")
            if cwd is not None and not isinstance(cwd, str):
                raise ToolError('run_command: "cwd" must be a string')
            return self.run_command(_string(args, "command", name), cwd or None)
        except ToolError as exc:
            return f"Error: {exc}"
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            return f"Error: {name}: {exc.strerror or exc}{where}"
        except Exception as exc:  # a tool must never crash the agent; the model gets the text
            return f"Error: {name}: {type(exc).__name__}: {exc}"

    @staticmethod
    def _arguments(name: str, raw: Any) -> dict[str, Any]:
        if name not in TOOL_NAMES:
            shown = name or "(no name)"
            raise ToolError(f'unknown tool "{shown}"; the tools are {", ".join(TOOL_NAMES)}')
        if isinstance(raw, dict):
            return raw
        text = raw if isinstance(raw, str) else ""
        if not text.strip():
            return {}
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ToolError(f"{name}: the arguments are not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise ToolError(f"{name}: the arguments must be a JSON object")
        return value

    def read_file(self, path: str) -> str:
        target = resolve_path(path, self.cwd, self.allow_outside)
        if not target.exists():
            raise ToolError(f"read_file: no such file: {path}")
        if not target.is_file():
            raise ToolError(f"read_file: not a regular file: {path}")
        size = target.stat().st_size
        if size > READ_LIMIT:
            raise ToolError(
                f"read_file: {path} is {size} bytes, over the {READ_LIMIT // 1024} KiB limit; "
                "read parts of it with run_command (head, tail, grep)"
            )
        return target.read_bytes().decode("utf-8", "replace")

    def write_file(self, path: str, content: str) -> str:
        target = resolve_path(path, self.cwd, self.allow_outside)
        if target.is_dir():
            raise ToolError(f"write_file: {path} is a directory")
        data = content.encode("utf-8")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return f"Wrote {len(data)} bytes to {path}"

    def run_command(self, command: str, cwd: str | None = None) -> str:
        where = resolve_path(cwd, self.cwd, self.allow_outside) if cwd else self.cwd
        if not where.is_dir():
            raise ToolError(f"run_command: not a directory: {cwd}")
        from uwf.adapters import process

        ran = process.run(
            ["/bin/sh", "-c", command],
            self.env,
            cwd=where,
            timeout=self.command_timeout,
            stdout_limit=STREAM_LIMIT,
            stderr_keep=STREAM_LIMIT,
            what="run_command: /bin/sh",
        )
        head = f"exit_code: {ran.code}"
        if ran.timed_out:
            head = (
                f"Error: the command timed out after {self.command_timeout:g}s and was killed "
                "(uwf-builtin --command-timeout sets the limit)"
            )
        return _clip(f"{head}\n--- stdout ---\n{ran.stdout}\n--- stderr ---\n{ran.stderr_tail}")


def _string(args: dict[str, Any], key: str, tool: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f'{tool} needs a string "{key}" argument')
    return value


def command_env(config: Any, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for run_command (``uwf.config.secrets.command_env``): the agent's
    (``env``: in uwf's process, the one uwf built for the step; else ours) minus store
    credentials, every provider's API-key variable, the ``.env`` entries and the variables
    config.yaml lists under ``secrets:``, so a command like ``env`` cannot put a secret into
    the model's context or the stored turns."""
    from uwf.config.secrets import command_env as without_secrets

    return without_secrets(os.environ if env is None else env, config)
