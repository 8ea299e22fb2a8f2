"""Eval tasks: a folder holding ``task.yaml`` and an optional ``fixture/`` (docs/evals.md,
"task.yaml").

A task folder is code: its command judges run as the user, and its workflow file tells the
agents what to do. So it is confined to itself (docs/evals.md, "Someone else's task
folder"): a judge's program named by path, and a workflow named by file, must be files of the
folder once every link is resolved, unless the user allows a directory more (``eval run
--allow-outside DIR``; ``outside``); and its ``fixture/`` must be a directory, not a link
(a link would make uwf copy what it points at into the run's working directory).

``TASK`` is the JSON Schema of ``task.yaml``, the one source of what the file may hold; a
file it refuses is reported as every schema problem is (``uwf.cas.wording``:
``invalid task.yaml <file>: judges[0].weight: expected a number ≥ 0, got -1``), every
problem at once. What the schema does not say is checked after it, worded for a reader:
judge names that repeat, and a judge with both or neither of ``builtin`` and ``command``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uwf.cas.fastschema import EXPECTED
from uwf.util.errors import InvalidInput, oneline

TASK_FILE = "task.yaml"
FIXTURE_DIR = "fixture"
BUILTINS = ("outcome", "cost", "compliance")
DEFAULT_MAX_STEPS = 100  # a run never loops for ever on a cyclic workflow
JUDGE_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
JUDGE_KIND = "a judge has either builtin (outcome, cost, compliance) or command, not both"

_TEXT = {"type": "string", "pattern": r"\S", EXPECTED: "a non-empty string"}
_POSITIVE = {"type": "number", "exclusiveMinimum": 0, EXPECTED: "a positive number"}
_COUNT = {"type": "integer", "minimum": 1, EXPECTED: "a positive integer"}

#: ``budget`` of the ``cost`` judge: the most a run may spend and still score 1.
BUDGET: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    EXPECTED: "a mapping of tokens, calls, durationMs, steps -> a positive number",
    "properties": {key: _POSITIVE for key in ("tokens", "calls", "durationMs", "steps")},
}

JUDGE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    EXPECTED: "a judge: {name, weight?, builtin: outcome|cost|compliance} or {name, weight?, "
    "command}",
    "required": ["name"],
    "properties": {
        "name": {
            "type": "string",
            "pattern": JUDGE_NAME,
            EXPECTED: "a judge name (letters, digits, _ and -, starting with a letter or _)",
        },
        "weight": {"type": "number", "minimum": 0, EXPECTED: "a number ≥ 0"},
        "builtin": {"enum": list(BUILTINS)},
        "command": _TEXT,
        "timeoutSeconds": _POSITIVE,
        "budget": BUDGET,
    },
}

TASK: dict[str, Any] = {
    "title": TASK_FILE,
    "type": "object",
    EXPECTED: "a mapping with workflow and prompt",
    "additionalProperties": False,
    "required": ["workflow", "prompt"],
    "properties": {
        "name": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$",
            EXPECTED: "a task name (letters, digits, _, - and ., at most 64 characters)",
        },
        "description": {"type": "string"},
        "workflow": _TEXT,
        "prompt": _TEXT,
        "limits": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"maxSteps": _COUNT, "timeoutMinutes": _POSITIVE},
        },
        "judges": {"type": "array", "items": JUDGE, EXPECTED: "a list of judges"},
    },
}


@dataclass(frozen=True)
class Judge:
    name: str
    weight: float
    builtin: str | None = None
    command: str | None = None
    timeout: float = 600.0  # seconds, a command judge's
    budget: dict[str, float] | None = None  # the cost judge's

    def what(self) -> dict[str, Any]:
        """The judge as an EvalRun records it: its kind and what it runs."""
        return {"builtin": self.builtin} if self.builtin else {"command": self.command}


@dataclass(frozen=True)
class Task:
    """One task folder, checked."""

    folder: Path  # absolute
    name: str
    description: str
    workflow: str
    prompt: str
    max_steps: int
    timeout_minutes: float | None
    judges: tuple[Judge, ...]
    text: str  # task.yaml as written

    @property
    def fixture(self) -> Path | None:
        path = self.folder / FIXTURE_DIR
        return path if path.is_dir() and not path.is_symlink() else None

    def workflow_file(self) -> str | None:
        """The file ``workflow`` names (a relative path is the task folder's), or None for a
        name or a hash."""
        text = self.workflow
        if "/" in text or "\\" in text or text.endswith((".yaml", ".yml")):
            return text if Path(text).is_absolute() else str(self.folder / text)
        return None

    def workflow_ident(self) -> str:
        """``workflow`` as ``thread start`` takes it: a file path is the task folder's."""
        return self.workflow_file() or self.workflow


#: The judges of a task.yaml that names none.
DEFAULT_JUDGES = (Judge("outcome", 1.0, builtin="outcome"),)


def load_task(folder: str | Path) -> Task:
    """The task of a folder (its ``task.yaml``), every problem of the file in one error."""
    from uwf.util import yamlio

    where = Path(folder)
    path = where / TASK_FILE
    if not where.is_dir():
        why = "not a directory" if where.exists() else "no such directory"
        raise InvalidInput(f"not an eval task folder: {oneline(str(where))} ({why})")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(
            f"not an eval task folder: {oneline(str(where))} (it has no {TASK_FILE})"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {oneline(str(path))}: {exc}") from None
    raw = yamlio.load(text, source=str(path), path=path)
    found = problems(raw)
    if found:
        head = f"invalid {TASK_FILE} {oneline(str(path))}"
        if len(found) == 1:
            raise InvalidInput(f"{head}: {found[0]}")
        raise InvalidInput(
            "\n".join([f"{head}: {len(found)} problems", *(f"  - {p}" for p in found)])
        )
    task = _task(where.resolve(), raw, text)
    _check_fixture(task)
    return task


def _check_fixture(task: Task) -> None:
    """``fixture/`` is a directory of the folder, never a link, or absent."""
    path = task.folder / FIXTURE_DIR
    if path.is_symlink():
        raise InvalidInput(
            f"eval task {task.name}: its fixture {oneline(str(path))} is a symbolic link (to "
            f"{oneline(os.readlink(path))}): a fixture is copied into each run's working "
            "directory and never followed through a link; make it a directory"
        )
    if path.exists() and not path.is_dir():
        raise InvalidInput(
            f"eval task {task.name}: its fixture {oneline(str(path))} is not a directory"
        )


def outside(task: Task, allowed: list[Path]) -> list[str]:
    """The files of other folders ``task`` names — a judge's program named by path (or a
    link of the folder), a workflow file — that are under none of ``allowed``: one line
    each, ``judge <name> runs <file>`` / ``workflow <file>`` (docs/evals.md)."""
    import shlex

    roots = [os.path.realpath(task.folder), *(os.path.realpath(p) for p in allowed)]
    out = []
    for judge in task.judges:
        if judge.command is None:
            continue
        try:
            argv = shlex.split(judge.command)
        except ValueError:
            continue  # the judge's own error, when it runs
        named = program_file(task, argv[0]) if argv else None
        if named is not None and not _under(os.path.realpath(named), roots):
            out.append(f"its judge {judge.name} runs {oneline(named)}")
    file = task.workflow_file()
    if file is not None and not _under(os.path.realpath(file), roots):
        out.append(f"its workflow is the file {oneline(file)}")
    return out


def program_file(task: Task, word: str) -> str | None:
    """The file a judge's program names: a path (relative ones are the task folder's), or a
    bare name the folder holds a file of; None for a program looked up on PATH."""
    if os.path.isabs(word):
        return word
    local = task.folder / word
    if os.sep in word or (os.altsep and os.altsep in word) or local.is_file():
        return str(local)
    return None


def _under(path: str, roots: list[str]) -> bool:
    return any(os.path.commonpath([path, root]) == root for root in roots)


def problems(raw: Any) -> list[str]:
    """Every problem of a loaded ``task.yaml`` (none: valid), ``<where>: <what>``: the
    schema's, then what it does not say."""
    from uwf.cas import fastschema

    out: list[str] = []
    if fastschema.is_valid(TASK, raw) is not True:
        from uwf.cas.schema import field_problems

        out = field_problems(TASK, raw)  # jsonschema decides what the fast subset cannot
    listed = raw.get("judges") if isinstance(raw, dict) else None
    seen: set[str] = set()
    for i, judge in enumerate(listed if isinstance(listed, list) else []):
        if not isinstance(judge, dict):
            continue
        if len([key for key in ("builtin", "command") if key in judge]) != 1:
            out.append(f"judges[{i}]: {JUDGE_KIND}")
        name = judge.get("name")
        if isinstance(name, str) and name in seen:
            out.append(f'judges[{i}].name: "{name}" names an earlier judge too')
        seen.add(str(name))
        if "budget" in judge and judge.get("builtin") != "cost":
            out.append(f"judges[{i}].budget: only the cost judge has a budget")
    return out


def _task(folder: Path, raw: dict[str, Any], text: str) -> Task:
    limits = raw.get("limits") or {}
    judges = tuple(
        Judge(
            name=j["name"],
            weight=float(j.get("weight", 1)),
            builtin=j.get("builtin"),
            command=j.get("command"),
            timeout=float(j.get("timeoutSeconds", 600)),
            budget={k: float(v) for k, v in j["budget"].items()} if "budget" in j else None,
        )
        for j in raw.get("judges") or []
    )
    return Task(
        folder=folder,
        name=raw.get("name") or folder.name,
        description=raw.get("description", ""),
        workflow=raw["workflow"],
        prompt=raw["prompt"],
        max_steps=int(limits.get("maxSteps", DEFAULT_MAX_STEPS)),
        timeout_minutes=float(limits["timeoutMinutes"]) if "timeoutMinutes" in limits else None,
        judges=judges or DEFAULT_JUDGES,
        text=text,
    )
