"""``uwf eval diff A B``: two sets of runs compared task by task and judge by judge
(docs/evals.md, "Comparing").

A side is one EvalRun (its hash) or every run of one ``eval run`` (its ``batch``). For each
task both sides ran: the mean and spread (sample standard deviation) of the score and of
each judge's score on each side, the delta (B's mean less A's) and whether the difference
is **clear**: larger than the two spreads together (``|delta| > stdev(A) + stdev(B)``), so
that a difference within the noise of repeated runs (``--count``) is never called a win.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uwf.backend.base import Backend
from uwf.engine.evals.results import runs, stats
from uwf.protocol import schemas
from uwf.util.base32 import is_hash
from uwf.util.errors import NotFound
from uwf.util.ulid import is_thread_id

if TYPE_CHECKING:
    from uwf.util.outputs import EvalCompared, EvalDiff, EvalStats, EvalTaskDiff


def side(backend: Backend, ident: str) -> list[dict[str, Any]]:
    """The runs ``ident`` names: an EvalRun hash, or a batch (the ULID ``eval list``
    shows)."""
    if is_hash(ident):
        node = backend.nodes.get(ident)
        if node is None or node.type != schemas.hashes().eval_run:
            raise NotFound(f"not an eval run: {ident}")
        return [node.payload]
    if is_thread_id(ident):
        found = [p for _, p in runs(backend) if p["batch"] == ident]
        if found:
            return found
    raise NotFound(
        f"no eval runs for {ident} (expected an EvalRun hash or a batch; see uwf eval list)"
    )


def diff(backend: Backend, a: str, b: str) -> EvalDiff:
    """``{a, b, tasks, onlyA, onlyB}``: each task both sides ran, compared."""
    left, right = _by_task(side(backend, a)), _by_task(side(backend, b))
    tasks: list[EvalTaskDiff] = []
    for task, mine in left.items():
        theirs = right.get(task)
        if theirs is None:
            continue
        names = list(dict.fromkeys(j["name"] for p in mine + theirs for j in p["judges"]))
        tasks.append(
            {
                "task": task,
                "score": compare([p["score"] for p in mine], [p["score"] for p in theirs]),
                "judges": {
                    name: compare(_scores(mine, name), _scores(theirs, name)) for name in names
                },
            }
        )
    return {
        "a": a,
        "b": b,
        "tasks": tasks,
        "onlyA": [t for t in left if t not in right],
        "onlyB": [t for t in right if t not in left],
    }


def compare(a: list[float], b: list[float]) -> EvalCompared:
    """Both sides' statistics, B's mean less A's, and whether that exceeds their spreads."""
    sa, sb = stats(a), stats(b)
    delta = round(sb["mean"] - sa["mean"], 6)
    return {"a": sa, "b": sb, "delta": delta, "clear": _clear(sa, sb, delta)}


def _clear(sa: EvalStats, sb: EvalStats, delta: float) -> bool:
    return sa["n"] > 0 and sb["n"] > 0 and abs(delta) > sa["stdev"] + sb["stdev"]


def _by_task(found: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for payload in found:
        out.setdefault(payload["task"], []).append(payload)
    return out


def _scores(found: list[dict[str, Any]], name: str) -> list[float]:
    return [j["score"] for p in found for j in p["judges"] if j["name"] == name]
