"""The failed attempts a step came after (docs/format.md, "Previous attempts").

A failed attempt to step a thread writes no StepNode: the thread state keeps its last failure
(``Failure``: how many attempts failed at the head, the first and last time, the last error
line). When a step finally lands at that head, the step's detail keeps that record as
``previousAttempts``, so the chain itself says what it took to get there — uwf 0.8 kept
its failed StepNodes in ``previousAttempts``; here it is their summary.

``thread step`` hands the record to the agent in ``UWF_PREVIOUS_ATTEMPTS`` (JSON); the agent
kit stores it with the detail (``attach``), and so do the steps people write (``thread
answer``). A detail without failures keeps its type and hash: the record goes into an
extended schema of the agent's own (its title plus ``(previous attempts)``), made only
when there is one.
"""

from __future__ import annotations

import json
from typing import Any

from uwf.cas.store import Store
from uwf.util.base32 import NodeHash
from uwf.util.errors import InvalidInput
from uwf.util.fences import code_span, one_line

ENV = "UWF_PREVIOUS_ATTEMPTS"
FIELD = "previousAttempts"
MAX_BYTES = 8192  # the record's JSON in the environment (its error line is at most 1000)

#: ``previousAttempts`` of a detail: the thread state's failure record of the head the step
#: follows, as ``thread show`` prints it, without what only mattered until the step landed.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["attempts", "since", "at", "error", "code"],
    "properties": {
        "attempts": {"type": "integer", "minimum": 1},
        "since": {"type": "integer", "minimum": 0},  # unix ms of the first failed attempt
        "at": {"type": "integer", "minimum": 0},  # unix ms of the last
        "error": {"type": "string"},  # the last attempt's error line
        "code": {"type": "integer"},  # its exit code under the loop contract (1 or 5)
        "role": {"type": "string"},
        "agent": {"type": "string"},
        "host": {"type": "string"},
    },
}

KEYS = tuple(SCHEMA["properties"])


def record(failure: dict[str, Any]) -> dict[str, Any]:
    """The record a detail keeps of a failure as ``thread show`` prints it (``FailureShown``)."""
    return {key: failure[key] for key in KEYS if key in failure}


def from_env(raw: str | None) -> dict[str, Any] | None:
    """The record ``UWF_PREVIOUS_ATTEMPTS`` holds, checked; None when unset."""
    if raw is None or not raw.strip():
        return None
    problem = "not a JSON object of the failed attempts"
    try:
        value = json.loads(raw) if len(raw) <= MAX_BYTES else None
    except ValueError:
        value = None
    if isinstance(value, dict):
        from uwf.cas import fastschema

        valid = fastschema.is_valid(SCHEMA, value)
        if valid is None:  # a shape the fast validator leaves to jsonschema
            from uwf.cas.schema import field_problems

            valid = not field_problems(SCHEMA, value)
        if valid:
            return value
        problem = "not the record of failed attempts docs/format.md describes"
    raise InvalidInput(f"{ENV} is {problem}: {one_line(raw[:80])}")


def attach(store: Store, detail: str, attempts: dict[str, Any]) -> NodeHash:
    """The detail node again, with ``previousAttempts`` (its schema extended to hold it)."""
    node = store.require(detail, "detail node")
    schema_node = store.get(node.type)
    schema = schema_node.payload if schema_node is not None else None
    if not isinstance(node.payload, dict) or not isinstance(schema, dict):
        return NodeHash(detail)  # a detail uwf cannot extend (another tool's): left as it is
    properties = schema.get("properties")
    if isinstance(properties, dict) and FIELD not in properties:
        title = str(schema.get("title") or "Detail")
        schema = {
            **schema,
            "title": f"{title} (previous attempts)",
            "properties": {**properties, FIELD: SCHEMA},
        }
    extended = store.put_schema(schema)
    return NodeHash(store.put(extended, {**node.payload, FIELD: attempts}))


def of_detail(store: Store, detail: Any) -> dict[str, Any] | None:
    """A step detail's ``previousAttempts``, None when it has none."""
    node = store.get(detail) if isinstance(detail, str) and detail else None
    found = node.payload.get(FIELD) if node is not None and isinstance(node.payload, dict) else None
    return found if isinstance(found, dict) else None


def _time(ms: Any) -> str:
    import datetime as _dt

    if not isinstance(ms, int):
        return "?"
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def line(attempts: dict[str, Any]) -> str:
    """How ``thread read`` and ``step read`` show the record: ``**Previous attempts:** 2
    failed (…)``; the error line, an agent's words, in a code span."""
    n = attempts.get("attempts")
    where = f" on {one_line(str(attempts['host']))}" if attempts.get("host") else ""
    by = f" by {one_line(str(attempts['agent']))}" if attempts.get("agent") else ""
    when = (
        f"at {_time(attempts.get('at'))}"
        if attempts.get("since") == attempts.get("at")
        else f"from {_time(attempts.get('since'))} to {_time(attempts.get('at'))}"
    )
    last = code_span(f"exit {attempts.get('code')}: {attempts.get('error', '')}")
    return f"**Previous attempts:** {n} failed{by}{where}, {when}; the last: {last}"
