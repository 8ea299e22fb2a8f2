"""The bad-input catalogue: every command refuses bad input with one clear line and no damage.

Each case runs the real ``uwf`` in a subprocess after a setup, and checks the exit code, the
exact first line uwf prints on stderr (an agent's passed-through lines carry its name), that
no traceback is printed and that the storage root is byte for byte what it was (debug logs
aside; an empty ``*.lock`` file may appear, locks are not state). ``docs/errors.md``
documents every message; the last tests check that the document lists every message the
source can raise.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rootfiles import RootFiles, open_store, without_failures
from support import BIN, EXAMPLES, REPO, Result, take_snapshot
from uwf.cas import codec
from uwf.protocol import schemas
from uwf.util.yamlio import MAX_BYTES

GHOST = "01ARZ3NDEKTSV4RRFFQ69G5FAV"  # a well-formed ULID that names no thread
MISSING = "0123456789ABC"  # a well-formed hash that names no node
NAME_RULE = "letters, digits, _ and -, starting with a letter or _, at most 64 characters"
WORKFLOW_RULE = (
    "letters, digits, _, - and ., starting with a letter, a digit or _, at most 64 characters"
)
HASH_RULE = "expected 13 upper-case Crockford Base32 characters"
NOT_ULID = "expected a 26-character ULID"
NOT_MAPPING = "expected a mapping with name, description, roles and graph"
PARTIAL = "Non-interactive setup requires all of: --provider, --base-url, --api-key, --model"
NO_AGENT = "no agent configured: pass --agent or set defaultAgent in config.yaml"
MB = 1 << 20

# -- input files -------------------------------------------------------------------------------


def _bomb() -> str:
    """A "billion laughs" document: 10 aliases per level, 8 levels: 10^8 nodes once expanded."""
    lines = ["a0: &a0 [" + ", ".join(["x"] * 10) + "]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def _workflow(**changes: Any) -> str:
    import yaml

    doc = yaml.safe_load((EXAMPLES / "solve-issue.yaml").read_text(encoding="utf-8"))
    doc.update(changes)
    return yaml.safe_dump(doc, sort_keys=False)


FILES: dict[str, Callable[[], str | bytes]] = {
    "bad.yaml": lambda: "name: [\n",
    "bomb.yaml": _bomb,
    "deep.yaml": lambda: "a: " + "[" * 100 + "]" * 100 + "\n",
    "abyss.yaml": lambda: "a: " + "[" * 300_000 + "]" * 300_000 + "\n",
    "huge.yaml": lambda: "description: " + "x" * MAX_BYTES + "\n",
    "latin1.yaml": lambda: "name: caf\xe9\n".encode("latin-1"),
    "list.yaml": lambda: "- name\n- roles\n",
    "evil.yaml": lambda: "name: !!python/object/apply:os.system ['echo pwned']\n",
    "other-name.yaml": lambda: _workflow(),
    "legacy.yaml": lambda: _workflow(name="legacy", graph=[{"from": "$START", "to": "planner"}]),
    "flag-role.yaml": lambda: _workflow(name="flag-role", roles={"--rm": {}, "../x": {}}, graph={}),
    "unhashable/solve-issue.yaml": lambda: (
        (EXAMPLES / "solve-issue.yaml")
        .read_text(encoding="utf-8")
        .replace("status: { type: string, enum: [_] }", "status: { type: string, enum: [[]] }", 1)
    ),
    "not-json.txt": lambda: "{not json",
    "latin1.json": lambda: '"caf\xe9"'.encode("latin-1"),
}

# -- agents (scripts run with this interpreter) ------------------------------------------------

AGENTS: dict[str, str] = {
    "exit3.py": "import sys\nprint('working', file=sys.stderr)\nprint('disk on fire', "
    "file=sys.stderr)\nsys.exit(3)\n",
    "silent.py": "",
    "words.py": "print('hello world')\n",
    "missing.py": f"print('{MISSING}')\n",
    "start.py": "print('{start}')\n",
    "sleep.py": "import time\ntime.sleep(30)\n",
    "flood.py": "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(100):\n"
    "    sys.stdout.buffer.write(chunk)\nsys.stdout.buffer.write(b'\\nnot-a-hash\\n')\n",
}


# An agent's stderr is passed through live, each line prefixed with the agent's name; the
# first line uwf itself prints is the first line without such a prefix.
PASSTHROUGH = tuple(f"{name}: " for name in [*AGENTS, "uwf-mock"])

# -- setups --------------------------------------------------------------------------------------


@dataclass
class Ctx:
    root: Path
    tmp: Path
    cli: Any
    values: dict[str, str] = field(default_factory=dict)
    hold: list[Callable[[], contextlib.AbstractContextManager[Any]]] = field(default_factory=list)

    def ok(self, *args: str) -> Any:
        r: Result = self.cli(*args)
        assert r.code == 0, (args, r.err)
        return r.json()


def _workflow_setup(ctx: Ctx) -> None:
    ctx.values["wf"] = ctx.ok("workflow", "put", str(EXAMPLES / "solve-issue.yaml"))["hash"]


def _thread_setup(ctx: Ctx) -> None:
    _workflow_setup(ctx)
    thread = ctx.ok("thread", "start", "solve-issue", "-p", "Fix the login bug")["thread"]
    ctx.values["thread"] = thread
    ctx.values["start"] = ctx.ok("thread", "show", thread)["head"]


def _stepped_setup(ctx: Ctx) -> None:
    _thread_setup(ctx)
    scenario = EXAMPLES / "solve-issue.mock.yaml"
    agent = f"uwf-mock --scenario {scenario}"
    ctx.values["step"] = ctx.ok("thread", "step", ctx.values["thread"], "--agent", agent)["head"]


def _config(text: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        _thread_setup(ctx)
        (ctx.root / "config.yaml").write_text(text, encoding="utf-8")

    return setup


def _killed(ctx: Ctx) -> None:
    _thread_setup(ctx)
    ctx.ok("thread", "kill", ctx.values["thread"])


def _busy(ctx: Ctx) -> None:
    _thread_setup(ctx)
    ctx.hold.append(lambda: RootFiles(ctx.root).hold_step(ctx.values["thread"]))


def _tampered(ctx: Ctx) -> None:
    _thread_setup(ctx)
    path = open_store(ctx.root).path(ctx.values["start"])
    path.chmod(0o644)
    path.write_text(path.read_text().replace("Fix the login bug", "Fix nothing"))
    path.chmod(0o444)
    record = json.loads(path.read_text())  # what the damaged content hashes to now
    ctx.values["tampered"] = codec.node_hash(record["type"], record["payload"])


def _text_node(ctx: Ctx) -> None:
    _workflow_setup(ctx)
    ctx.values["note"] = ctx.ok("cas", "put-text", "a note")["hash"]


def _state(name: str, text: str) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        _thread_setup(ctx)
        (ctx.root / name).write_text(text, encoding="utf-8")

    return setup


def _dotenv(ctx: Ctx) -> None:
    _thread_setup(ctx)
    (ctx.root / ".env").write_bytes(b"KEY=caf\xe9\n")


SETUPS: dict[str, Callable[[Ctx], None]] = {
    "empty": lambda ctx: None,
    "workflow": _workflow_setup,
    "thread": _thread_setup,
    "stepped": _stepped_setup,
    "killed": _killed,
    "busy": _busy,
    "tampered": _tampered,
    "note": _text_node,
    "config-ghost": _config("agents:\n  mock: {command: uwf-mock}\ndefaultAgent: ghost\n"),
    "config-list": _config("agents: [not, a, mapping]\n"),
    "config-bomb": _config(_bomb()),
    "config-abyss": _config("a: " + "[" * 300_000 + "]" * 300_000 + "\n"),
    "threads-damaged": _state("threads.yaml", "threads: [unclosed\n"),
    "registry-bomb": _state("registry.yaml", _bomb()),
    "dotenv-latin1": _dotenv,
}


# -- the cases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    setup: str
    argv: tuple[str, ...]
    code: int
    first_line: str  # exact; "" when nothing at all may be printed on stderr
    stdin: str | None = None
    stdout: str | None = None  # exact stdout, when a failing command prints a result
    bug: str | None = None  # a known bug: xfail(strict=True) with this reason


def case(id: str, setup: str, argv: str | list[str], code: int, first_line: str, **kw: Any) -> Case:
    args = tuple(argv.split()) if isinstance(argv, str) else tuple(argv)
    return Case(id, setup, args, code, first_line, **kw)


BAD_HASHES = [
    ("slash", "ABC/DEF/GHJKM"),
    ("dotdot", "../../etc/pas"),
    ("lower-case", "0123456789abc"),
    ("12-chars", "0123456789AB"),
    ("14-chars", "0123456789ABCD"),
    ("letter-u", "0123456789ABU"),
    ("over-64-bits", "G123456789ABC"),
]
BAD_THREADS = [
    ("lower-case", GHOST.lower()),
    ("25-chars", GHOST[:-1]),
    ("path", "../../../etc/passwd"),
    ("hash", MISSING),
    ("over-48-bits", "8" + GHOST[1:]),
]

CASES: list[Case] = [
    # -- global: usage errors exit 2 -------------------------------------------------------
    case("unknown-command", "empty", "bogus", 2, "error: No such command 'bogus'."),
    case(
        "bad-format",
        "empty",
        "--format xml workflow list",
        2,
        "error: Invalid value for '--format': 'xml' is not one of 'json', 'yaml'.",
    ),
    case("unknown-option", "empty", "thread list --bogus", 2, "error: No such option: --bogus"),
    case(
        "group-without-command",
        "empty",
        "thread",
        2,
        "Usage: uwf thread [OPTIONS] COMMAND [ARGS]...",
    ),
    case(
        "extra-argument",
        "empty",
        "skill cli extra",
        2,
        "error: Got unexpected extra argument(s) (extra)",
    ),
    # -- workflow ----------------------------------------------------------------------------
    case("put-no-file", "empty", "workflow put", 2, "error: Missing argument 'FILE'."),
    case(
        "put-missing",
        "empty",
        "workflow put {tmp}/nope.yaml",
        1,
        "error: file not found: {tmp}/nope.yaml",
    ),
    case("put-directory", "empty", "workflow put {tmp}", 1, "error: file not found: {tmp}"),
    case(
        "put-bad-yaml",
        "empty",
        "workflow put {tmp}/bad.yaml",
        1,
        "error: invalid YAML in {tmp}/bad.yaml: while parsing a flow node did not find "
        "expected node content, line 2, column 1",
    ),
    case(
        "put-alias-bomb",
        "empty",
        "workflow put {tmp}/bomb.yaml",
        1,
        "error: invalid YAML in {tmp}/bomb.yaml: more than 100000 nodes (alias expansion?)",
    ),
    case(
        "put-deep-nesting",
        "empty",
        "workflow put {tmp}/deep.yaml",
        1,
        "error: invalid YAML in {tmp}/deep.yaml: nested deeper than 64 levels",
    ),
    case(
        "put-abyss-nesting",
        "empty",
        "workflow put {tmp}/abyss.yaml",
        1,
        "error: invalid YAML in {tmp}/abyss.yaml: nested deeper than 64 levels",
    ),
    case(
        "put-too-large",
        "empty",
        "workflow put {tmp}/huge.yaml",
        1,
        f"error: workflow file {{tmp}}/huge.yaml is too large: {MAX_BYTES + 14} bytes "
        f"(limit {MAX_BYTES})",
    ),
    case(
        "put-not-utf8",
        "empty",
        "workflow put {tmp}/latin1.yaml",
        1,
        "error: invalid workflow file {tmp}/latin1.yaml: not UTF-8 text (byte 0xe9 at offset 9)",
    ),
    case(
        "put-not-a-mapping",
        "empty",
        "workflow put {tmp}/list.yaml",
        1,
        f"error: invalid workflow YAML in {{tmp}}/list.yaml: {NOT_MAPPING}",
    ),
    case(
        "put-python-tag",
        "empty",
        "workflow put {tmp}/evil.yaml",
        1,
        "error: invalid YAML in {tmp}/evil.yaml: could not determine a constructor for the tag "
        "'tag:yaml.org,2002:python/object/apply:os.system', line 1, column 7",
    ),
    case(
        "put-unhashable-status",
        "empty",
        "workflow put {tmp}/unhashable/solve-issue.yaml",
        1,
        "error: invalid workflow {tmp}/unhashable/solve-issue.yaml: 1 problem",
    ),
    case(
        "put-name-mismatch",
        "empty",
        "workflow put {tmp}/other-name.yaml",
        1,
        "error: invalid workflow {tmp}/other-name.yaml: 1 problem",
    ),
    case(
        "put-legacy-graph",
        "empty",
        "workflow put {tmp}/legacy.yaml",
        1,
        "error: invalid workflow {tmp}/legacy.yaml: 1 problem",
    ),
    case(
        "put-flag-and-path-role-names",
        "empty",
        "workflow put {tmp}/flag-role.yaml",
        1,
        "error: invalid workflow {tmp}/flag-role.yaml: 17 problems",
    ),
    case(
        "show-empty", "workflow", ["workflow", "show", " "], 1, "error: workflow ID cannot be empty"
    ),
    case("show-unknown", "workflow", "workflow show nope", 1, "error: workflow not found: nope"),
    case(
        "show-missing-hash",
        "workflow",
        f"workflow show {MISSING}",
        1,
        f"error: CAS node not found: {MISSING}",
    ),
    case(
        "show-not-a-workflow",
        "thread",
        "workflow show {start}",
        1,
        "error: node {start} is not a Workflow (type {start_type})",
    ),
    case(
        "history-unknown", "workflow", "workflow history nope", 1, "error: workflow not found: nope"
    ),
    case(
        "history-empty",
        "workflow",
        ["workflow", "history", ""],
        1,
        "error: workflow ID cannot be empty",
    ),
    case(
        "rollback-bad-name",
        "workflow",
        f"workflow rollback a/b {MISSING}",
        1,
        f'error: "a/b" is not a valid workflow name ({WORKFLOW_RULE})',
    ),
    case(
        "rollback-bad-hash",
        "workflow",
        "workflow rollback solve-issue ../../etc/pas",
        1,
        f'error: invalid hash: "../../etc/pas" ({HASH_RULE})',
    ),
    case(
        "rollback-other-workflow",
        "workflow",
        "workflow rollback other {wf}",
        1,
        'error: workflow {wf} is named "solve-issue", not "other"',
    ),
    # -- thread start ------------------------------------------------------------------------
    case(
        "start-no-prompt",
        "workflow",
        "thread start solve-issue",
        2,
        "error: Missing option '--prompt' / '-p'.",
    ),
    case(
        "start-unknown", "workflow", "thread start nope -p x", 1, "error: workflow not found: nope"
    ),
    *[
        case(
            f"start-empty-task-{n}",
            "workflow",
            ["thread", "start", "solve-issue", "-p", task],
            1,
            "error: the task is empty: give it with -p TEXT, or -p - to read it from stdin",
        )
        for n, task in enumerate(["", "  \n\t "])
    ],
    case(
        "start-empty-id",
        "workflow",
        ["thread", "start", "", "-p", "x"],
        1,
        "error: workflow ID cannot be empty",
    ),
    case(
        "start-missing-file",
        "workflow",
        "thread start ./nope.yaml -p x",
        1,
        "error: file not found: {cwd}/nope.yaml",
    ),
    case(
        "start-missing-hash",
        "workflow",
        f"thread start {MISSING} -p x",
        1,
        f"error: CAS node not found: {MISSING}",
    ),
    case(
        "start-50mb-prompt",
        "workflow",
        "thread start solve-issue -p -",
        1,
        f"error: prompt is too large: {50 * MB} bytes (limit {MB})",
        stdin="x" * (50 * MB),
    ),
    case(
        "start-max-rounds-zero",
        "workflow",
        "thread start solve-issue -p x --max-rounds 0",
        1,
        "error: --max-rounds must be a positive integer, got: 0",
    ),
    case(
        "start-max-rounds-word",
        "workflow",
        "thread start solve-issue -p x --max-rounds x",
        2,
        "error: Invalid value for '--max-rounds': 'x' is not a valid int.",
    ),
    # -- thread ids ------------------------------------------------------------------------------
    *[
        case(
            f"thread-id-{name}",
            "thread",
            ["thread", command, value],
            1,
            f"error: invalid thread id: {json.dumps(value)} ({NOT_ULID})",
        )
        for (name, value), command in zip(
            BAD_THREADS, ["show", "step", "read", "kill", "steps"], strict=True
        )
    ],
    *[
        case(
            f"thread-{command}-ghost",
            "thread",
            ["thread", command, GHOST],
            1,
            f"error: thread not found: {GHOST}",
        )
        for command in ("show", "step", "read", "kill", "steps")
    ],
    # -- bulk actions: refused before any thread is touched ----------------------------------
    *[
        case(
            f"bulk-{command}-no-target",
            "thread",
            ["thread", command],
            2,
            f"error: thread {command} needs thread ids or a filter (--status, --workflow, "
            "--after, --before, --parent); --status active selects every active thread",
        )
        for command in ("kill", "stop", "retry", "rerun")
    ],
    case(
        "bulk-kill-bad-id",
        "thread",
        "thread kill {thread} not-a-thread --status active",
        1,
        'error: invalid thread id: "not-a-thread" (expected a 26-character ULID)',
    ),
    case(
        "bulk-retry-bad-status",
        "thread",
        "thread retry {thread} --status stuck",
        2,
        "error: Invalid status: stuck. Must be one of: idle, running, waiting, failing, failed, "
        "completed, killed, max_rounds, active",
    ),
    case(
        "bulk-rerun-step-hash",
        "thread",
        "thread rerun 0123456789ABC {thread}",
        2,
        "error: a bulk thread rerun takes thread ids, not step hashes: re-run one step "
        "alone (uwf thread rerun STEP)",
    ),
    # -- thread step --------------------------------------------------------------------------
    case(
        "step-count-zero",
        "thread",
        "thread step {thread} -c 0",
        2,
        "error: --count must be a positive integer, got: 0",
    ),
    case(
        "step-timeout-zero",
        "thread",
        "thread step {thread} --timeout 0",
        2,
        "error: --timeout must be a positive number of seconds, got: 0.0",
    ),
    case(
        "step-timeout-nan",
        "thread",
        "thread step {thread} --timeout nan --agent {agents}/silent.py",
        2,
        "error: --timeout must be a positive number of seconds, got: nan",
    ),
    case(
        "step-empty-agent",
        "thread",
        ["thread", "step", "{thread}", "--agent", " "],
        1,
        "error: agent override must not be empty",
    ),
    case(
        "step-unbalanced-quote",
        "thread",
        ["thread", "step", "{thread}", "--agent", "'x"],
        1,
        "error: invalid agent command line: No closing quotation: 'x",
    ),
    case("step-no-agent", "thread", "thread step {thread}", 1, f"error: {NO_AGENT}"),
    case(
        "step-unknown-alias",
        "config-ghost",
        "thread step {thread}",
        1,
        "error: unknown agent alias in config: ghost",
    ),
    case(
        "step-config-shape",
        "config-list",
        "thread step {thread}",
        1,
        "error: invalid config.yaml: agents: expected a mapping of agent alias -> "
        "{command, args} or {python, args}, got a list",
    ),
    case(
        "step-config-alias-bomb",
        "config-bomb",
        "thread step {thread}",
        1,
        "error: invalid config.yaml: invalid YAML: more than 100000 nodes (alias expansion?)",
    ),
    case(
        "step-config-abyss",
        "config-abyss",
        "thread step {thread}",
        1,
        "error: invalid config.yaml: invalid YAML: nested deeper than 64 levels",
    ),
    case(
        "step-dotenv-not-utf8",
        "dotenv-latin1",
        "thread step {thread} --agent {agents}/silent.py",
        1,
        "error: cannot read {root}/.env: 'utf-8' codec can't decode byte 0xe9 in position 7: "
        "invalid continuation byte",
    ),
    case(
        "step-agent-not-found",
        "thread",
        ["thread", "step", "{thread}", "--agent", "no-such-agent-xyz --flag"],
        1,
        "error: agent command not found: no-such-agent-xyz (is it installed and on PATH?)",
    ),
    case(
        "step-agent-not-executable",
        "thread",
        "thread step {thread} --agent {tmp}/not-json.txt",
        1,
        "error: agent command is not executable: {tmp}/not-json.txt",
    ),
    case(
        "step-agent-exit-code",
        "thread",
        "thread step {thread} --agent {agents}/exit3.py",
        5,
        "error: agent command failed ({agents}/exit3.py) with exit code 3: working disk on fire",
    ),
    case(
        "step-agent-silent",
        "thread",
        "thread step {thread} --agent {agents}/silent.py",
        5,
        "error: agent stdout is not a valid CAS hash: (empty)",
    ),
    case(
        "step-agent-words",
        "thread",
        "thread step {thread} --agent {agents}/words.py",
        5,
        "error: agent stdout is not a valid CAS hash: hello world",
    ),
    case(
        "step-agent-prints-100mb",
        "thread",
        "thread step {thread} --agent {agents}/flood.py",
        5,
        "error: agent stdout is not a valid CAS hash: not-a-hash",
    ),
    case(
        "step-agent-missing-node",
        "thread",
        "thread step {thread} --agent {agents}/missing.py",
        5,
        f"error: agent returned a hash that is not in the store: {MISSING}",
    ),
    case(
        "step-agent-not-a-step",
        "thread",
        "thread step {thread} --agent {agents}/start.py",
        5,
        "error: agent returned hash that is not a StepNode: {start}",
    ),
    case(
        "step-agent-timeout",
        "thread",
        "thread step {thread} --timeout 0.5 --agent {agents}/sleep.py",
        5,
        "error: agent timed out after 0.5s ({agents}/sleep.py); its process group was killed",
    ),
    case(
        "step-busy",
        "busy",
        "thread step {thread} --agent {agents}/silent.py",
        4,
        "error: thread {thread} is busy",
    ),
    case(
        "step-killed",
        "killed",
        "thread step {thread} --agent {agents}/silent.py",
        3,
        "error: thread not active: {thread} (status: killed)",
    ),
    case(
        "kill-killed",
        "killed",
        "thread kill {thread}",
        1,
        "error: thread not active: {thread} (status: killed)",
    ),
    # -- thread views -------------------------------------------------------------------------
    case(
        "list-bad-status",
        "thread",
        "thread list --status bogus",
        2,
        "error: Invalid status: bogus. Must be one of: idle, running, waiting, failing, "
        "failed, completed, killed, max_rounds, active",
    ),
    case(
        "list-bad-after",
        "thread",
        "thread list --after yesterday",
        1,
        "error: invalid time format: yesterday (expected ISO date or relative like '7d')",
    ),
    case(
        "list-negative-skip",
        "thread",
        "thread list --skip -1",
        2,
        "error: --skip must be a non-negative integer",
    ),
    case(
        "list-zero-take",
        "thread",
        "thread list --take 0",
        2,
        "error: --take must be a positive integer",
    ),
    case(
        "list-damaged-threads-yaml",
        "threads-damaged",
        "thread list",
        1,
        "error: {root}/threads.yaml is damaged: invalid YAML: while parsing a flow sequence in "
        "\"threads.yaml\", line 1, column 10 did not find expected ',' or ']' in "
        '"threads.yaml", line 2, column 1; see docs/reliability.md, "Repairing damaged state"',
    ),
    case(
        "list-registry-bomb",
        "registry-bomb",
        "workflow list",
        1,
        "error: {root}/registry.yaml is damaged: invalid YAML: more than 100000 nodes (alias "
        'expansion?); see docs/reliability.md, "Repairing damaged state"',
    ),
    case(
        "read-zero-quota",
        "thread",
        "thread read {thread} --quota 0",
        1,
        "error: invalid --quota: must be a positive integer",
    ),
    case(
        "read-before-bad-hash",
        "thread",
        "thread read {thread} --before ../x",
        1,
        f'error: invalid hash: "../x" ({HASH_RULE})',
    ),
    case(
        "read-before-other-step",
        "thread",
        f"thread read {{thread}} --before {MISSING}",
        1,
        f"error: step {MISSING} not found in thread {{thread}}",
    ),
    case(
        "read-corrupt-start",
        "tampered",
        "thread read {thread}",
        1,
        "error: corrupt node {start}: content hashes to {tampered}",
    ),
    *[
        case(
            f"fork-hash-{name}",
            "thread",
            ["thread", "fork", value],
            1,
            f"error: invalid hash: {json.dumps(value)} ({HASH_RULE})",
        )
        for name, value in BAD_HASHES
    ],
    case(
        "fork-missing",
        "thread",
        f"thread fork {MISSING}",
        1,
        f"error: CAS node not found: {MISSING}",
    ),
    case(
        "fork-workflow",
        "thread",
        "thread fork {wf}",
        1,
        "error: node {wf} is not a StartNode or StepNode",
    ),
    case(
        "details-start-node",
        "thread",
        "thread step-details {start}",
        1,
        "error: node {start} is not a StepNode",
    ),
    case(
        "details-missing",
        "thread",
        f"thread step-details {MISSING}",
        1,
        f"error: CAS node not found: {MISSING}",
    ),
    # -- step --------------------------------------------------------------------------------
    case("step-show-no-hash", "empty", "step show", 2, "error: Missing argument 'step_hash'."),
    case(
        "step-read-bad-hash",
        "stepped",
        "step read ../x",
        1,
        f'error: invalid hash: "../x" ({HASH_RULE})',
    ),
    case(
        "step-read-quota",
        "stepped",
        "step read {step} --quota x",
        1,
        "error: invalid --quota: must be a positive integer",
    ),
    case(
        "step-read-start-node",
        "stepped",
        "step read {start}",
        1,
        "error: node {start} is not a StepNode",
    ),
    case("step-list-ghost", "thread", f"step list {GHOST}", 1, f"error: thread not found: {GHOST}"),
    # -- cas -----------------------------------------------------------------------------------
    *[
        case(
            f"cas-get-{name}",
            "note",
            ["cas", "get", value],
            1,
            f"error: invalid hash: {json.dumps(value)} ({HASH_RULE})",
        )
        for name, value in BAD_HASHES
    ],
    case("cas-get-missing", "note", f"cas get {MISSING}", 1, f"error: Node not found: {MISSING}"),
    case(
        "cas-get-corrupt",
        "tampered",
        "cas get {start}",
        1,
        "error: corrupt node {start}: content hashes to {tampered}",
    ),
    case(
        "cas-put-unknown-type",
        "note",
        f"cas put {MISSING} {{}}",
        1,
        f"error: unknown type: {MISSING} (no schema node with that hash)",
    ),
    case(
        "cas-put-not-a-schema",
        "note",
        ["cas", "put", "{note}", "{}"],
        1,
        "error: type {note} is not a schema (its type is {text})",
    ),
    case(
        "cas-put-not-json",
        "note",
        ["cas", "put", "{text}", "not json"],
        1,
        'error: Cannot parse JSON from "not json": Expecting value: line 1 column 1 (char 0) '
        "(and no such file)",
    ),
    case(
        "cas-put-bad-file",
        "note",
        "cas put {text} {tmp}/not-json.txt",
        1,
        'error: Cannot parse JSON from "{tmp}/not-json.txt": Expecting property name enclosed in '
        "double quotes: line 1 column 2 (char 1)",
    ),
    case(
        "cas-put-file-not-utf8",
        "note",
        "cas put {text} {tmp}/latin1.json",
        1,
        "error: Cannot parse JSON from \"{tmp}/latin1.json\": 'utf-8' codec can't decode byte "
        "0xe9 in position 4: invalid continuation byte",
    ),
    case(
        "cas-put-nan",
        "note",
        "cas put {text} NaN",
        1,
        'error: Cannot parse JSON from "NaN": NaN is not a valid JSON value (and no such file)',
    ),
    case(
        "cas-put-schema-violation",
        "note",
        "cas put {text} 42",
        1,
        "error: payload does not match schema {text}: expected a string, got an integer",
    ),
    case(
        "cas-put-bad-schema",
        "note",
        ["cas", "put", "{meta}", '{"type": 5}'],
        1,
        "error: invalid JSON Schema: 5 is not valid under any of the given schemas",
    ),
    case(
        "cas-put-text-not-utf8",
        "note",
        ["cas", "put-text", "caf\udce9"],
        1,
        "error: text is not valid UTF-8",
    ),
    case(
        "cas-put-json-surrogate",
        "note",
        ["cas", "put", "{text}", '"\\ud800"'],
        1,
        "error: text is not valid UTF-8",
    ),
    case("cas-has-garbage", "note", "cas has ../../x", 1, "", stdout='{"exists":false}\n'),
    case("cas-refs-missing", "note", f"cas refs {MISSING}", 1, f"error: Node not found: {MISSING}"),
    case(
        "cas-walk-bad-hash",
        "note",
        "cas walk ../x",
        1,
        f'error: invalid hash: "../x" ({HASH_RULE})',
    ),
    case(
        "cas-schema-get-missing",
        "note",
        f"cas schema get {MISSING}",
        1,
        f"error: Schema not found: {MISSING}",
    ),
    case(
        "cas-schema-get-not-a-schema",
        "note",
        "cas schema get {note}",
        1,
        "error: node {note} is not a schema (its type is {text})",
    ),
    case("cas-verify-damage", "tampered", "cas verify", 1, "", stdout=None),
    case(
        "cas-gc-bad-grace",
        "note",
        "cas gc --grace 1w",
        1,
        "error: invalid --grace: 1w (expected a duration like 30s, 10m, 1h, 2d)",
    ),
    case(
        "cas-gc-corrupt-root",
        "tampered",
        "cas gc --grace 0",
        1,
        "error: cas gc stopped, nothing was deleted: corrupt node {start}: content hashes to "
        "{tampered} (it is reachable, so what it refers to is unknown; see uwf cas verify)",
    ),
    # -- log ------------------------------------------------------------------------------------
    case(
        "log-show-bad-date",
        "empty",
        "log show --date 2026-13-45",
        1,
        "error: invalid date: 2026-13-45 (expected YYYY-MM-DD)",
    ),
    case(
        "log-show-path-date",
        "empty",
        "log show --date ../../etc",
        1,
        "error: invalid date: ../../etc (expected YYYY-MM-DD)",
    ),
    case("log-clean-no-before", "empty", "log clean", 2, "error: Missing option '--before'."),
    case(
        "log-clean-bad-date",
        "empty",
        "log clean --before yesterday",
        1,
        "error: invalid date: yesterday (expected YYYY-MM-DD)",
    ),
    # -- config ---------------------------------------------------------------------------------
    case(
        "config-bad-key",
        "empty",
        "config get agents..mock",
        2,
        'error: invalid config key "agents..mock": expected names joined by dots, e.g. '
        'agents.mock.command (quote a name holding a dot: models."gpt-4.1".name)',
    ),
    case(
        "config-unknown-key",
        "config-ghost",
        "config set agents.mock.comand uwf-mock",
        1,
        'error: agents.mock.comand: unknown key "comand" '
        "(known keys: args, command, provider, python)",
    ),
    case(
        "config-below-a-value",
        "config-ghost",
        "config set defaultAgent.name mock",
        1,
        "error: defaultAgent.name: defaultAgent is an alias (a non-empty string), not a mapping "
        "of settings",
    ),
    case(
        "config-bad-value",
        "config-ghost",
        "config set maxRounds 0",
        1,
        "error: cannot set maxRounds: maxRounds: expected a positive integer, got 0 "
        "(config.yaml unchanged)",
    ),
    case(
        "config-inside-a-list",
        "config-list",
        "config set agents.mock.command uwf-mock",
        1,
        "error: agents.mock.command: agents is a list in config.yaml, not a mapping (uwf config "
        "set agents '{}' replaces it)",
    ),
    case(
        "config-bomb",
        "config-bomb",
        "config list",
        1,
        "error: invalid config.yaml: invalid YAML: more than 100000 nodes (alias expansion?) "
        "(fix or remove {root}/config.yaml)",
    ),
    # -- setup ----------------------------------------------------------------------------------
    case("setup-partial", "empty", "setup --provider openai", 1, f"error: {PARTIAL}"),
    case(
        "setup-empty-provider",
        "empty",
        ["setup", "--provider", " ", "--base-url", "http://x", "--api-key", "k", "--model", "m"],
        1,
        "error: Provider name required",
    ),
    case(
        "setup-bad-url",
        "empty",
        "setup --provider p --base-url ftp://x --api-key k --model m",
        1,
        "error: invalid base URL: ftp://x (expected http:// or https://…)",
    ),
    case(
        "setup-multiline-key",
        "empty",
        ["setup", "--provider", "p", "--base-url", "http://x", "--api-key", "a\nb", "--model", "m"],
        1,
        "error: API key must be a single line",
    ),
    case(
        "setup-agent-with-arguments",
        "empty",
        [
            "setup",
            "--provider",
            "p",
            "--base-url",
            "http://x",
            "--api-key",
            "k",
            "--model",
            "m",
            "--agent",
            "a b",
        ],
        1,
        "error: invalid default agent: a b (expected an agent alias or a command name; put "
        "arguments under agents in config.yaml)",
    ),
    case(
        "setup-no-terminal",
        "empty",
        "setup",
        1,
        "error: uwf setup asks its questions on a terminal, and stdin is not one: pass "
        "--provider, --base-url, --api-key and --model (or --default-agent NAME alone); see "
        "uwf setup --help",
    ),
    case(
        "setup-invalid-config",
        "config-list",
        "setup --provider p --base-url http://x --api-key k --model m",
        1,
        "error: invalid config.yaml: agents: expected a mapping of agent alias -> "
        "{command, args} or {python, args}, got a list (fix or remove {root}/config.yaml)",
    ),
    case(
        "setup-key-not-utf8",
        "empty",
        [
            "setup",
            "--provider",
            "p",
            "--base-url",
            "http://x",
            "--api-key",
            "k\udce9",
            "--model",
            "m",
        ],
        1,
        "error: API key must be UTF-8 text",
    ),
    case(
        "start-prompt-not-utf8",
        "workflow",
        ["thread", "start", "solve-issue", "-p", "caf\udce9"],
        1,
        "error: prompt is not UTF-8 text",
    ),
]


# -- running ------------------------------------------------------------------------------------


def _write_inputs(tmp: Path) -> None:
    for name, make in FILES.items():
        data = make()
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def _write_agents(ctx: Ctx, agents: Path) -> None:
    agents.mkdir()
    for name, body in AGENTS.items():
        path = agents / name
        path.write_text(
            f"#!{sys.executable}\n" + body.replace("{start}", ctx.values.get("start", ""))
        )
        path.chmod(0o755)


def _values(ctx: Ctx, cwd: Path) -> dict[str, str]:
    h = schemas.hashes()
    values = {
        "tmp": str(ctx.tmp),
        "root": str(ctx.root),
        "cwd": str(cwd),
        "agents": str(ctx.tmp / "agents"),
        "meta": h.meta,
        "text": h.text,
        "start_type": h.start,
        **ctx.values,
    }
    return values


def _fill(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), text)


def _state(root: Path) -> dict[str, bytes]:
    return take_snapshot(root)


def _same_state(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """What changed, ignoring new empty lock files (coordination, not state) and the last
    failure a failed step records in threads.yaml."""
    changed = [
        k
        for k in before
        if after.get(k) != before[k]
        and not (
            k.endswith("threads.yaml")
            and without_failures(after.get(k)) == without_failures(before[k])
        )
    ]
    added = [k for k in after if k not in before and not (k.endswith(".lock") and after[k] == b"")]
    return changed + added


MEASURE = """
import json, resource, subprocess, sys
run = subprocess.run(sys.argv[1:], capture_output=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"code": run.returncode, "err": run.stderr.decode(), "rss": peak}))
"""


def _run_measured(argv: list[str]) -> tuple[Result, int]:
    """Run uwf from a fresh wrapper process; return its result and the peak RSS (KiB) of uwf
    and its agent (the wrapper's children only, not this test process's)."""
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(BIN / "uwf"), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(proc.stdout)
    return Result(report["code"], "", report["err"]), int(report["rss"])


@contextlib.contextmanager
def _held(ctx: Ctx) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for make in ctx.hold:
            stack.enter_context(make())
        yield


def _params() -> list[Any]:
    out = []
    for c in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=f"bug: {c.bug}")] if c.bug else []
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


@pytest.mark.parametrize("c", _params())
def test_bad_input(c: Case, cli: Any, cli_proc: Any, root: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    _write_inputs(inputs)
    ctx = Ctx(root=root, tmp=inputs, cli=cli)
    SETUPS[c.setup](ctx)
    _write_agents(ctx, inputs / "agents")
    values = _values(ctx, Path.cwd())
    argv = [_fill(a, values) for a in c.argv]
    expected = _fill(c.first_line, values)
    before = _state(root)
    with _held(ctx):
        r = cli_proc(*argv, input=c.stdin, timeout=120)
    assert "Traceback" not in r.err, r.err
    own = [line for line in r.err.splitlines() if not line.startswith(PASSTHROUGH)]
    assert (own[0] if own else "") == expected, r.err
    assert r.code == c.code, (r.code, r.err)
    if c.stdout is not None:
        assert r.out == c.stdout
    if expected.startswith("error: "):  # one error line: anything else on stderr is the agent's
        assert [x for x in r.err.splitlines() if x.startswith("error: ")] == [expected]
    assert _same_state(before, _state(root)) == []


def test_agent_output_capture_is_bounded(cli: Any, root: Path, tmp_path: Path) -> None:
    """An agent printing 100 MB: uwf keeps only the tail, its memory does not follow."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    ctx = Ctx(root=root, tmp=inputs, cli=cli)
    _thread_setup(ctx)
    _write_agents(ctx, inputs / "agents")
    before = _state(root)
    r, rss_kib = _run_measured(
        ["thread", "step", ctx.values["thread"], "--agent", str(inputs / "agents" / "flood.py")]
    )
    assert r.code == 5
    assert r.err_line == "error: agent stdout is not a valid CAS hash: not-a-hash"
    assert 0 < rss_kib < 80 * 1024, f"peak RSS {rss_kib} KiB"  # 100 MB went through
    assert _same_state(before, _state(root)) == []


# -- the catalogue document ------------------------------------------------------------------

DOC = REPO / "docs" / "errors.md"
GROUPS = ("workflow", "thread", "step", "cas", "log", "setup", "skill", "config")


def test_at_least_60_cases_across_every_command_group() -> None:
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)
    firsts = {c.argv[0] if c.argv[0] != "--format" else "global" for c in CASES}
    assert set(GROUPS) <= firsts


def _trees() -> dict[Path, ast.Module]:
    return {
        path: ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted((REPO / "src" / "uwf").rglob("*.py"))
    }


def _error_classes(trees: dict[Path, ast.Module]) -> set[str]:
    """``UwfError`` and every class of src/uwf derived from it (what ``error:`` lines print)."""
    bases: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {b.id for b in node.bases if isinstance(b, ast.Name)}
    found = {"UwfError"}
    while True:
        more = {name for name, parents in bases.items() if parents & found} - found
        if not more:
            return found
        found |= more


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level ``NAME = <string expression>`` assignments (messages kept in constants)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                out[target.id] = node.value
    return out


def _literal_parts(node: ast.expr, constants: dict[str, ast.expr]) -> list[str]:
    """The literal text pieces of a message expression (f-string, concatenation, constant)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal_parts(node.left, constants) + _literal_parts(node.right, constants)
    if isinstance(node, ast.Name) and node.id in constants:
        return _literal_parts(constants[node.id], {})
    return []


def _is_message_call(node: ast.Call) -> bool:
    """``args.fail(parser, message)`` (``fail(p, message)``) or ``p.add(where, message)``."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id == "fail"
    if not isinstance(func, ast.Attribute):
        return False
    return func.attr == "fail" or (
        func.attr == "add" and isinstance(func.value, ast.Name) and func.value.id == "p"
    )


def _message_calls(tree: ast.Module, errors: set[str]) -> Iterator[tuple[int, ast.expr]]:
    """(line, message) of every ``raise <Error>(message)``, every workflow-file problem
    ``p.add(where, message)`` and every agent usage error ``args.fail(parser, message)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in errors:
                yield node.lineno, node.exc.args[0]
        elif isinstance(node, ast.Call) and len(node.args) == 2 and _is_message_call(node):
            yield node.lineno, node.args[1]


def _source_messages() -> list[tuple[str, str]]:
    """(where, literal piece) for every message the source can raise."""
    trees = _trees()
    errors = _error_classes(trees)
    out = []
    for path, tree in trees.items():
        constants = _constants(tree)
        for line, message in _message_calls(tree, errors):
            for piece in _literal_parts(message, constants):
                for part in re.split(r"\s{2,}|\n", piece):
                    part = part.strip(" :;,.()-")
                    if len(re.sub(r"\W", "", part)) >= 4:
                        out.append((f"{path.relative_to(REPO)}:{line}", part))
    return out


def test_the_source_scan_finds_messages() -> None:
    """The completeness check below is only as good as this scan: it must see them all."""
    found = {part for _, part in _source_messages()}
    for known in (
        "expected 13 upper-case Crockford Base32 characters",  # util/base32.py, an f-string
        "Non-interactive setup requires all of: --provider, --base-url, --api-key, --model",
        "invalid config.yaml",  # a constant prefix
        "$END ends a thread and cannot have edges",  # a workflow-file problem
        "command failed",  # uwf-cmd, an agent
        "expected <thread-id> <role>",  # every agent's usage error (args.fail)
    ):
        assert any(known in part for part in found), known


def test_every_message_in_the_source_is_in_the_catalogue() -> None:
    doc = DOC.read_text(encoding="utf-8").replace("\\|", "|")
    flat = " ".join(doc.split())
    missing = [
        f"{where}: {part!r}"
        for where, part in _source_messages()
        if " ".join(part.split()) not in flat
    ]
    assert missing == [], "docs/errors.md lacks:\n" + "\n".join(missing)


def test_every_case_is_in_the_catalogue() -> None:
    """Each tested first line matches a documented message (placeholders as wildcards)."""
    doc = DOC.read_text(encoding="utf-8").replace("\\|", "|")
    documented = re.findall(r"^\|\s*`([^`]+)`", doc, flags=re.MULTILINE)
    patterns = [
        re.compile("^" + ".+".join(re.escape(p) for p in re.split(r"<[^<>]+>", m)) + "$")
        for m in documented
    ]
    for c in CASES:
        line = c.first_line
        if not line.startswith("error: ") or c.bug:
            continue
        text = line[len("error: ") :]
        assert any(p.match(text) for p in patterns), f"{c.id}: {text}"
