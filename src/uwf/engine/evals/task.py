"""Eval tasks: a folder holding ``task.yaml`` and an optional ``fixture/`` (docs/evals.md,
"task.yaml").

``TASK`` is the JSON Schema of ``task.yaml``, the one source of what the file may hold; a
file it refuses is reported as every schema problem is (``uwf.cas.wording``:
``invalid task.yaml <file>: judges[0].weight: expected a number ≥ 0, got -1``), every
problem at once. What the schema does not say is checked after it, worded for a reader:
judge names that repeat, and a judge with both or neither of ``builtin`` and ``command``.
"""

from __future__ import annotations

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
        return path if path.is_dir() else None

    def workflow_ident(self) -> str:
        """``workflow`` as ``thread start`` takes it: a file path is the task folder's."""
        text = self.workflow
        if ("/" in text or "\\" in text or text.endswith((".yaml", ".yml"))) and not Path(
            text
        ).is_absolute():
            return str(self.folder / text)
        return text


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
    return _task(where.resolve(), raw, text)


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
