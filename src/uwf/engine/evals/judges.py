"""The judges of an eval run (docs/evals.md, "Judges"): three built in, read from the thread's
nodes, and commands of the task's own.

Every judge gives ``{"name","weight","score","data"}`` (plus ``builtin`` or ``command``, and
``error`` when it failed). A judge never fails the eval: a command that exits non-zero, times
out or prints no ``{"score": 0..1, "data": …}`` line scores 0 with its error recorded.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uwf.backend.base import Backend
from uwf.cas.store import Store
from uwf.engine.evals.task import Judge, Task, program_file
from uwf.model import chain, cost, turns
from uwf.util.base32 import is_hash
from uwf.util.errors import UwfError
from uwf.util.frontmatter import load_mapping, split

ERROR_LIMIT = 1000  # characters of a judge's error kept in the EvalRun
DATA_LIMIT = 64 * 1024  # bytes of a command judge's JSON line
MAX_DEPTH = 64  # levels of a command judge's data, as YAML files are bounded (yamlio)


@dataclass(frozen=True)
class Ran:
    """What the judges look at: the run's thread, how it ended, and where it worked."""

    thread: str
    head: chain.Start | chain.Step
    outcome: str
    error: str | None
    workdir: Path
    duration_ms: int


def judge_all(backend: Backend, task: Task, ran: Ran) -> list[dict[str, Any]]:
    """Each judge of ``task`` on ``ran``, in the task's order."""
    steps = chain.steps_oldest_first(backend.nodes, ran.head)
    out = []
    for judge in task.judges:
        if judge.builtin is not None:
            score, data, error = _builtin(backend.nodes, judge, ran, steps)
        elif judge.entry is not None:
            score, data, error = _entry(backend, task, judge, ran)
        else:
            score, data, error = _command(backend, task, judge, ran)
        result: dict[str, Any] = {"name": judge.name, "weight": judge.weight, **judge.what()}
        result.update(score=score, data=data)
        if error is not None:
            result["error"] = error[:ERROR_LIMIT]
        out.append(result)
    return out


def weighted(judged: list[dict[str, Any]]) -> float:
    """The run's score: the judges' scores weighted (0 when every weight is 0)."""
    weights = float(sum(j["weight"] for j in judged))
    if weights <= 0:
        return 0.0
    return round(float(sum(j["weight"] * j["score"] for j in judged)) / weights, 6)


# -- built in ----------------------------------------------------------------------------------


def _builtin(
    store: Store, judge: Judge, ran: Ran, steps: list[chain.Step]
) -> tuple[float, Any, str | None]:
    if judge.builtin == "outcome":
        data: dict[str, Any] = {"outcome": ran.outcome, "steps": len(steps)}
        if ran.error is not None:
            data["error"] = ran.error
        return (1.0 if ran.outcome == "completed" else 0.0), data, None
    if judge.builtin == "cost":
        return _cost(store, judge, ran, steps)
    return _compliance(store, steps)


def _cost(
    store: Store, judge: Judge, ran: Ran, steps: list[chain.Step]
) -> tuple[float, Any, str | None]:
    """Tokens, calls and durations the steps' details record (docs/format.md, "Cost"), the
    steps, and the run's wall-clock time. Score: 1 within every ``budget`` entry, else the
    mean over the entries of budget / spent (1 without a budget: a record only)."""
    spent = cost.Cost()
    for step in steps:
        spent = spent + cost.step_cost(store, step)[1]
    data = {
        "steps": len(steps),
        "calls": spent.calls,
        "promptTokens": spent.prompt_tokens,
        "completionTokens": spent.completion_tokens,
        "tokens": spent.total_tokens,
        "durationMs": spent.duration_ms,
        "wallMs": ran.duration_ms,
    }
    if not judge.budget:
        return 1.0, data, None
    ratios = [
        min(1.0, limit / data[key]) if data[key] > 0 else 1.0 for key, limit in judge.budget.items()
    ]
    return round(sum(ratios) / len(ratios), 6), data, None


def classify(store: Store, step: chain.Step, output: Any) -> tuple[str, int]:
    """How a step's output came to be, read from its detail: ``person`` (written by a
    person), ``fastPath`` (the agent's first answer's frontmatter was the output),
    ``corrected`` (after correction prompts, which the detail records as turns) or
    ``extracted`` (the output is not its last answer's frontmatter: the LLM extract, or an
    agent that writes its output itself); and the number of correction prompts."""
    payload = _payload(store, step.payload.get("detail"))
    if step.payload.get("agent") == "uwf-human" or (isinstance(payload, dict) and "via" in payload):
        return "person", 0
    ref = step.payload.get("detail")
    said = turns.turns(store, ref) if isinstance(ref, str) and is_hash(ref) else []
    corrections = sum(1 for turn in said if turns.is_correction(turn))
    answers = [
        t["content"]
        for t in said
        if t.get("role") == "assistant" and isinstance(t.get("content"), str)
    ]
    if not answers or not _agrees(answers[-1], output):
        return "extracted", corrections
    return ("corrected" if corrections else "fastPath"), corrections


def _payload(store: Store, ref: Any) -> Any:
    """The payload a step's reference names; None when it names no stored node."""
    node = store.get(ref) if isinstance(ref, str) and is_hash(ref) else None
    return node.payload if node is not None else None


def _agrees(answer: str, output: Any) -> bool:
    """True when the answer's frontmatter holds the output: every field both name has the
    same value (a string compared without case and surrounding blanks, as the fast path
    coerces ``status: Done``)."""
    block, _ = split(answer)
    if block is None or not isinstance(output, dict):
        return False
    try:
        found = load_mapping(block)
    except Exception:  # a block the fast path could not read either
        return False
    if not isinstance(found, dict):
        return False
    shared = [key for key in output if key in found]
    return bool(shared) and all(_same(found[key], output[key]) for key in shared)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    return bool(a == b)


def _compliance(store: Store, steps: list[chain.Step]) -> tuple[float, Any, str | None]:
    """The share of the agents' steps whose output passed the frontmatter fast path."""
    counts = {"fastPath": 0, "corrected": 0, "extracted": 0, "person": 0}
    corrections = 0
    for step in steps:
        kind, n = classify(store, step, _payload(store, step.payload.get("output")))
        counts[kind] += 1
        corrections += n
    by_agents = len(steps) - counts["person"]
    score = counts["fastPath"] / by_agents if by_agents else 0.0  # no step: nothing complied
    data = {"steps": len(steps), **counts, "corrections": corrections}
    return round(score, 6), data, None


# -- commands ----------------------------------------------------------------------------------


def program(task: Task, word: str) -> str:
    """A judge's program: a relative path is the task folder's (a bare name only when the
    folder holds a file of that name; else it is looked up on PATH). ``eval run`` checked
    that a file it names is the folder's (``task.outside``)."""
    named = program_file(task, word)
    return named if named is not None else shutil.which(word) or word


def _command(backend: Backend, task: Task, judge: Judge, ran: Ran) -> tuple[float, Any, str | None]:
    """Run the judge's command in the working directory: ``<command…> <thread>``, with
    ``UWF_THREAD`` (and the store's variables) set; its last stdout line is the verdict."""
    assert judge.command is not None
    try:
        argv = shlex.split(judge.command)
    except ValueError as exc:
        return 0.0, None, f"invalid command line: {exc}"
    if not argv:
        return 0.0, None, "empty command line"
    return _run(backend, task, judge, ran, [program(task, argv[0]), *argv[1:], ran.thread])


def _entry(backend: Backend, task: Task, judge: Judge, ran: Ran) -> tuple[float, Any, str | None]:
    """A judge of uwf 0.8: ``node <entry> <working directory> <thread>``, run as a command
    judge is; its data must satisfy its ``schema`` file when it has one."""
    from uwf.engine.evals.task import NODE

    assert judge.entry is not None
    node = shutil.which(NODE)
    if node is None:  # checked when the task was read; gone since
        return 0.0, None, f"judge command not found: {NODE} (is it installed and on PATH?)"
    argv = [node, str(task.folder / judge.entry), str(ran.workdir), ran.thread]
    score, data, error = _run(backend, task, judge, ran, argv)
    if error is None and judge.schema is not None:
        from uwf.cas.schema import field_problems

        found = field_problems(judge.schema, data)
        if found:
            return 0.0, data, f"its data does not satisfy {judge.schema_file}: {found[0]}"
    return score, data, error


def _run(
    backend: Backend, task: Task, judge: Judge, ran: Ran, argv: list[str]
) -> tuple[float, Any, str | None]:
    """Run a judge's ``argv`` in the working directory with ``UWF_THREAD`` (and the store's
    variables) set; its last stdout line is the verdict.

    Its environment holds no credential (docs/evals.md, "Commands"): no store password, no
    provider key, no ``.env`` entry, no ``secrets:`` variable, nor any variable holding one
    of their values — as a model's command gets (``command_env``). A judge is the task
    author's code (a command, or uwf 0.8's node script), and needs none of them to judge a
    run."""
    from uwf.adapters import process
    from uwf.config.secrets import command_env, model_config

    env = {
        **os.environ,
        **backend.env(),
        "UWF_THREAD": ran.thread,
        "UWF_EVAL_TASK": str(task.folder),
        "PWD": str(ran.workdir),
    }
    env = command_env(env, model_config(backend.root))
    try:
        finished = process.run(
            argv,
            env,
            timeout=judge.timeout,
            what="judge command",
            cwd=ran.workdir,
            stdout_limit=DATA_LIMIT,
        )
    except UwfError as exc:
        return 0.0, None, exc.message
    if finished.timed_out:
        return 0.0, None, f"timed out after {judge.timeout:g} s"
    if finished.code != 0:
        tail = " ".join(finished.stderr_tail.split())[-300:]
        return 0.0, None, f"exited {finished.code}" + (f": {tail}" if tail else "")
    return verdict(finished.stdout)


def verdict(stdout: str) -> tuple[float, Any, str | None]:
    """The score and data of a command judge's stdout: its last non-empty line, a JSON
    object ``{"score": <0..1>, "data": <anything>}``."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return 0.0, None, 'printed nothing (expected a last line {"score": 0..1, "data": …})'
    last = lines[-1].strip()
    try:
        found = json.loads(last, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return 0.0, None, f"its last line is not JSON: {last[:200]}"
    if _depth(found) > MAX_DEPTH:
        return 0.0, None, f"its data is nested deeper than {MAX_DEPTH} levels"
    score = found.get("score") if isinstance(found, dict) else None
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
        return 0.0, None, f'expected {{"score": 0..1, "data": …}}, got: {last[:200]}'
    return float(score), found.get("data"), None


def _depth(value: Any, level: int = 0) -> int:
    """How deep ``value`` nests (stops counting past ``MAX_DEPTH``)."""
    if level > MAX_DEPTH or not isinstance(value, (dict, list)):
        return level
    items = value.values() if isinstance(value, dict) else value
    return max((_depth(item, level + 1) for item in items), default=level + 1)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
