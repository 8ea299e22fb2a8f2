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

A ``task.yaml`` of uwf 0.8 loads as written (docs/evals.md, "Tasks of uwf 0.8"): a judge
``{name, builtin: true}`` is the built-in judge of that name (uwf 0.8's
``frontmatter-compliance`` is ``compliance``, its ``token-stats`` is ``cost``), and a judge
``{name, entry, schema?}`` runs ``node <entry> <working directory> <thread>``, its data
checked against the JSON Schema file ``schema``; without a ``weight`` both weigh 0, as in
uwf 0.8.
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
#: uwf 0.8's built-in judges (``builtin: true``, named by ``name``) and uwf's that do their work.
BUILTINS_08 = {"frontmatter-compliance": "compliance", "token-stats": "cost"}
#: uwf 0.8's built-in judges that it never implemented (they always scored 0).
STUBS_08 = ("upstream-consumption", "hallucination")
DEFAULT_MAX_STEPS = 100  # a run never loops for ever on a cyclic workflow
JUDGE_NAME = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
JUDGE_KIND = (
    "a judge has one of builtin (outcome, cost, compliance), command, or entry (uwf 0.8's "
    "node script)"
)
NODE = "node"  # what runs uwf 0.8's judges

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
    EXPECTED: "a judge: {name, weight?, builtin: outcome|cost|compliance}, {name, weight?, "
    "command} or {name, weight?, entry, schema?}",
    "required": ["name"],
    "properties": {
        "name": {
            "type": "string",
            "pattern": JUDGE_NAME,
            EXPECTED: "a judge name (letters, digits, _ and -, starting with a letter or _)",
        },
        "weight": {"type": "number", "minimum": 0, EXPECTED: "a number ≥ 0"},
        "builtin": {"enum": [*BUILTINS, True, False]},
        "command": _TEXT,
        "entry": _TEXT,
        "schema": _TEXT,
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
    entry: str | None = None  # uwf 0.8's node script, relative to the task folder
    schema: Any = None  # the JSON Schema its data must satisfy (uwf 0.8's ``schema`` file)
    schema_file: str | None = None

    def what(self) -> dict[str, Any]:
        """The judge as an EvalRun records it: its kind and what it runs."""
        if self.builtin:
            return {"builtin": self.builtin}
        if self.entry is not None:
            return {"command": f"{NODE} {self.entry}"}
        return {"command": self.command}


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
        """The file ``workflow`` names, or None for a name or a hash. A relative path is the
        task folder's, or, when the folder has no such file, its fixture's (uwf 0.8 started
        the thread in the copy of the fixture); both are inside the folder (``outside``)."""
        text = self.workflow
        if not ("/" in text or "\\" in text or text.endswith((".yaml", ".yml"))):
            return None
        if Path(text).is_absolute():
            return text
        path = self.folder / text
        fixture = self.fixture
        if not path.exists() and fixture is not None and (fixture / text).exists():
            return str(fixture / text)
        return str(path)

    def workflow_ident(self) -> str:
        """``workflow`` as ``thread start`` takes it: a file path is the task folder's (or
        its fixture's: ``workflow_file``)."""
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
    schemas: dict[int, Any] = {}
    if not found:
        found, schemas = _entry_problems(where, raw)
    if found:
        head = f"invalid {TASK_FILE} {oneline(str(path))}"
        if len(found) == 1:
            raise InvalidInput(f"{head}: {found[0]}")
        raise InvalidInput(
            "\n".join([f"{head}: {len(found)} problems", *(f"  - {p}" for p in found)])
        )
    task = _task(where.resolve(), raw, text, schemas)
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
    link of the folder), uwf 0.8's judge script (``entry``) and the schema of its data, a
    workflow file — that are under none of ``allowed``: one line each, ``judge <name> runs
    <file>`` / ``judge <name> reads <file>`` / ``workflow <file>`` (docs/evals.md). ``node``,
    which runs an entry script, is a program on PATH as a bare command name is."""
    roots = [os.path.realpath(task.folder), *(os.path.realpath(p) for p in allowed)]
    out = []
    for judge in task.judges:
        for verb, named in _files_of(task, judge):
            if not _under(os.path.realpath(named), roots):
                out.append(f"its judge {judge.name} {verb} {oneline(named)}")
    file = task.workflow_file()
    if file is not None and not _under(os.path.realpath(file), roots):
        out.append(f"its workflow is the file {oneline(file)}")
    return out


def _files_of(task: Task, judge: Judge) -> list[tuple[str, str]]:
    """The files a judge runs or reads, each ("runs" | "reads", path)."""
    import shlex

    if judge.entry is not None:
        found = [("runs", str(task.folder / judge.entry))]
        if judge.schema_file is not None:
            found.append(("reads", str(task.folder / judge.schema_file)))
        return found
    if judge.command is None:
        return []
    try:
        argv = shlex.split(judge.command)
    except ValueError:
        return []  # the judge's own error, when it runs
    named = program_file(task, argv[0]) if argv else None
    return [("runs", named)] if named is not None else []


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
    if listed == []:
        out.append(
            "judges: the list is empty, so nothing would judge the runs (uwf 0.8 refused it "
            "too): list at least one judge, or leave judges out for the outcome judge"
        )
    seen: set[str] = set()
    for i, judge in enumerate(listed if isinstance(listed, list) else []):
        if not isinstance(judge, dict):
            continue
        kinds = [key for key in ("builtin", "command", "entry") if judge.get(key) is not None]
        if len([key for key in kinds if judge[key] is not False]) != 1:
            out.append(f"judges[{i}]: {JUDGE_KIND}")
        name = judge.get("name")
        if isinstance(name, str) and name in seen:
            out.append(f'judges[{i}].name: "{name}" names an earlier judge too')
        seen.add(str(name))
        if "budget" in judge and builtin_of(judge) != "cost":
            out.append(f"judges[{i}].budget: only the cost judge has a budget")
        if judge.get("builtin") is True and isinstance(name, str):
            out.extend(f"judges[{i}].name: {p}" for p in _builtin_08(name))
        if "schema" in judge and "entry" not in judge:
            out.append(f"judges[{i}].schema: only an entry judge (uwf 0.8's) has a schema")
    return out


def builtin_of(judge: dict[str, Any]) -> str | None:
    """The built-in judge a judge of ``task.yaml`` runs: its ``builtin``, or with uwf 0.8's
    ``builtin: true`` the one its name says."""
    builtin = judge.get("builtin")
    if builtin is True:
        name = judge.get("name")
        return BUILTINS_08.get(name, name) if isinstance(name, str) else None
    return builtin if isinstance(builtin, str) else None


def _builtin_08(name: str) -> list[str]:
    """Why ``{name, builtin: true}`` names no built-in judge (none: it does)."""
    if name in BUILTINS or name in BUILTINS_08:
        return []
    if name in STUBS_08:
        return [
            f'"{name}" is a built-in judge of uwf 0.8 that it never implemented (it scored 0 '
            "whatever the run did): drop it, or judge with a command"
        ]
    known = ", ".join([*BUILTINS, *BUILTINS_08])
    return [f'no built-in judge is called "{name}" (builtin: true takes one of {known})']


def _entry_problems(folder: Path, raw: dict[str, Any]) -> tuple[list[str], dict[int, Any]]:
    """What is wrong with the entry judges (uwf 0.8's) of a task, and the schemas of their
    data, read from their ``schema`` files (by judge index)."""
    import shutil

    from uwf.cas.schema import check_schema

    out: list[str] = []
    schemas: dict[int, Any] = {}
    for i, judge in enumerate(raw.get("judges") or []):
        entry = judge.get("entry")
        if entry is None:
            continue
        if not (folder / entry).is_file():
            out.append(f"judges[{i}].entry: no file {oneline(entry)} in the task folder")
        if shutil.which(NODE) is None:
            out.append(
                f"judges[{i}].entry: runs as {NODE} <entry> <working directory> <thread> "
                f"(uwf 0.8's judges are Node.js scripts) and {NODE} is not on PATH: install "
                "Node.js, or write the judge as command: <program>"
            )
        if "schema" not in judge:
            continue
        try:
            schemas[i] = _read_schema(folder / judge["schema"])
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            if isinstance(exc, RecursionError):
                why = "it nests too deep"
            out.append(f"judges[{i}].schema: cannot read {oneline(judge['schema'])}: {why}")
            continue
        try:
            check_schema(schemas[i])
        except InvalidInput as exc:
            out.append(f"judges[{i}].schema: {oneline(judge['schema'])}: {exc.message}")
    return out, schemas


def _read_schema(path: Path) -> Any:
    """A judge's data schema file, read as every file a task folder hands uwf is: a regular
    file (a named pipe or a device would block or never end), of at most
    ``yamlio.MAX_BYTES``, JSON without NaN or Infinity (docs/evals.md, "Tasks of uwf 0.8")."""
    import json
    import stat

    from uwf.util import fsio
    from uwf.util.yamlio import MAX_BYTES

    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError("not a regular file")
    data = fsio.read_bytes(path, MAX_BYTES)
    if data is None:  # removed since
        raise FileNotFoundError(2, "No such file or directory")
    if len(data) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES} bytes")
    return json.loads(data.decode("utf-8"), parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _task(folder: Path, raw: dict[str, Any], text: str, schemas: dict[int, Any]) -> Task:
    limits = raw.get("limits") or {}
    judges = tuple(
        Judge(
            name=j["name"],
            # a judge written as uwf 0.8's (builtin: true, entry) weighs 0 unless told
            weight=float(j.get("weight", 0 if j.get("builtin") is True or "entry" in j else 1)),
            builtin=builtin_of(j),
            command=j.get("command"),
            timeout=float(j.get("timeoutSeconds", 600)),
            budget={k: float(v) for k, v in j["budget"].items()} if "budget" in j else None,
            entry=j.get("entry"),
            schema=schemas.get(i),
            schema_file=j.get("schema"),
        )
        for i, j in enumerate(raw.get("judges") or [])
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
