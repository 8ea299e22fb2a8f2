"""The schemas uwf registers, and their hashes (derived from them, never looked up).

Because a hash is content-derived, the engine and every agent know the same type hashes
without reading anything; the schema nodes are written only by commands that write nodes.
The hashes are written out below rather than computed in every process (~0.3 ms of CBOR and
xxh64 at each start-up); ``tests/test_cas_hash.py`` computes them from the schemas, so they
cannot drift (a changed schema is a new protocol type, and that test says so).

Extensions never change an existing type (docs/format.md, "Extended types"): a StepNode that
carries a compaction summary is typed by ``STEP_NODE_COMPACT``, the StepNode schema plus a
required ``compact``, and a Workflow with ``compactAfter`` by ``WORKFLOW_COMPACT``. Nodes
without the new field keep their old type and hash, so stores written before stay readable
and steppable, and agents that write plain StepNodes keep working. Readers accept both types
of each kind (``SchemaHashes.steps``, ``SchemaHashes.workflows``).
"""

from __future__ import annotations

import re
from typing import Any

from uwf.cas.store import Store
from uwf.protocol.parts import CAS_REF, extended
from uwf.util.base32 import is_hash
from uwf.util.tuples import NamedTuple

# Role names are plain identifiers, so nothing from a workflow can become a flag, a path or a
# shell word where uwf passes a role to an agent (as an argument).
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_-]{0,63}"  # compiled on first use (test_startup.py)


def is_name(text: object) -> bool:
    """True for a plain identifier usable as a role name."""
    return isinstance(text, str) and re.fullmatch(NAME_PATTERN, text) is not None


# Workflow names are file stems (a workflow file's stem is its name) and never reach an
# agent's argv: letters, digits, _, - and ., but never a flag or a hidden file (the first
# character), a path (no separator), a hash or a file name (``thread start`` would read those
# as a hash or a path before a name).
WORKFLOW_NAME_RULE = (
    "letters, digits, _, - and ., starting with a letter, a digit or _, at most 64 characters"
)


def workflow_name_problem(text: str) -> str | None:
    """Why ``text`` cannot be a workflow name, as the end of a sentence about it; None when
    it can."""
    if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", text) is None:
        return f"is not a valid workflow name ({WORKFLOW_NAME_RULE})"
    if is_hash(text):
        return "would be ambiguous with a hash (a valid 13-character hash is never a name)"
    if text.endswith((".yaml", ".yml")):
        return "would be read as a file path (a name never ends in .yaml or .yml)"
    return None


def is_workflow_name(text: object) -> bool:
    """True for a name a workflow may have (``workflow_name_problem`` says why not)."""
    return isinstance(text, str) and workflow_name_problem(text) is None


START_NODE: dict[str, Any] = {
    "title": "StartNode",
    "type": "object",
    "additionalProperties": False,
    "required": ["workflow", "prompt"],
    "properties": {
        "workflow": CAS_REF,
        "prompt": {"type": "string"},
        "maxRounds": {"type": "integer", "minimum": 1},
    },
}

STEP_NODE: dict[str, Any] = {
    "title": "StepNode",
    "type": "object",
    "additionalProperties": False,
    "required": ["start", "prev", "role", "output", "detail", "agent"],
    "properties": {
        "start": CAS_REF,
        "prev": {"anyOf": [CAS_REF, {"type": "null"}]},
        "role": {"type": "string"},
        "output": CAS_REF,
        "detail": CAS_REF,
        "agent": {"type": "string"},
        "edgePrompt": {"type": "string"},
        # uwf extension (docs/architecture.md): the 1-based position of this step in its
        # chain, so that counting steps, numbering them and maxRounds cost O(1), not O(n).
        "depth": {"type": "integer", "minimum": 1},
    },
}

TEXT: dict[str, Any] = {"title": "Text", "type": "string"}


#: A StepNode whose ``compact`` is a Text node summarising every step before it
#: (docs/format.md, "Compaction").
STEP_NODE_COMPACT = extended(STEP_NODE, "StepNode (compact)", "compact", CAS_REF)

#: A StepNode that ends a fan-out (docs/format.md, "Fan-out and join"): ``children`` are the
#: final heads of the child threads, in item order; it may carry ``compact`` too.
STEP_NODE_JOIN: dict[str, Any] = {
    **STEP_NODE,
    "title": "StepNode (join)",
    "required": [*STEP_NODE["required"], "children"],
    "properties": {
        **STEP_NODE["properties"],
        "compact": CAS_REF,
        "children": {"type": "array", "items": CAS_REF},
    },
}

#: Bytes that are not UTF-8 text (an artifact): standard base64 with padding, no line breaks.
BLOB: dict[str, Any] = {
    "title": "Blob",
    "description": "Bytes, in standard base64 (RFC 4648, with padding, no line breaks).",
    "type": "string",
    "pattern": "^[A-Za-z0-9+/]*={0,2}$",
}

#: The StartNode of a thread that resumes an ended one (``thread resume``, docs/format.md
#: "Resuming an ended thread"): ``resumes`` is the ended thread's head, whose steps the chain
#: continues, and ``resumeText`` what the person resuming it wrote.
START_NODE_RESUME = extended(
    extended(START_NODE, "StartNode (resume)", "resumes", CAS_REF),
    "StartNode (resume)",
    "resumeText",
    {"type": "string"},
)

#: ``uwf thread compact``: a summary to record on the step that follows ``head`` in
#: ``thread`` (found through the type index; stale once the head has moved).
COMPACT_REQUEST: dict[str, Any] = {
    "title": "CompactRequest",
    "type": "object",
    "additionalProperties": False,
    "required": ["thread", "head", "summary"],
    "properties": {"thread": {"type": "string"}, "head": CAS_REF, "summary": CAS_REF},
}


#: What ``uwf eval run`` records of one run of an eval task (docs/evals.md, "The EvalRun
#: node"): the task (its name and its ``task.yaml`` as a Text node), the thread and what it
#: ran (workflow, agents, models), how it ended, and each judge's score and data. ``start``
#: and ``head`` are references, so the run keeps its thread's chain alive by itself; every
#: EvalRun node is a root of ``cas gc`` (docs/architecture.md, "Garbage collection").
EVAL_JUDGED: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "weight", "score", "data"],
    "properties": {
        "name": {"type": "string"},
        "weight": {"type": "number", "minimum": 0},
        "builtin": {"type": "string"},
        "command": {"type": "string"},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "data": True,
        "error": {"type": "string"},
    },
}

EVAL_RUN: dict[str, Any] = {
    "title": "EvalRun",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "task",
        "taskFile",
        "batch",
        "workflow",
        "workflowName",
        "thread",
        "start",
        "head",
        "agent",
        "agents",
        "models",
        "outcome",
        "judges",
        "score",
        "startedAt",
        "durationMs",
    ],
    "properties": {
        "task": {"type": "string"},
        "taskFile": CAS_REF,  # the task.yaml as written (a Text node)
        "batch": {"type": "string"},  # the `uwf eval run` that made it (a ULID)
        "workflow": CAS_REF,
        "workflowName": {"type": "string"},
        "thread": {"type": "string"},
        "start": CAS_REF,
        "head": CAS_REF,
        "agent": {"type": ["string", "null"]},  # --agent, null: config.yaml's
        "agents": {"type": "array", "items": {"type": "string"}},  # the steps' labels
        "models": {"type": "array", "items": {"type": "string"}},  # the details' models
        "outcome": {"enum": ["completed", "max_rounds", "timeout", "failed", "waiting"]},
        "error": {"type": "string"},
        "judges": {"type": "array", "items": EVAL_JUDGED},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "startedAt": {"type": "integer", "minimum": 0},
        "durationMs": {"type": "integer", "minimum": 0},
    },
}


class SchemaHashes(NamedTuple):
    meta: str
    workflow: str
    start: str
    step: str
    text: str
    step_compact: str
    workflow_compact: str
    blob: str
    compact_request: str
    workflow_v1: str
    start_resume: str
    step_join: str
    workflow_fan_out: str
    workflow_retry: str
    workflow_v1_retry: str
    eval_run: str

    @property
    def steps(self) -> tuple[str, ...]:
        """Every StepNode type: plain, with a compaction summary, ending a fan-out."""
        return (self.step, self.step_compact, self.step_join)

    @property
    def workflows(self) -> tuple[str, ...]:
        """Every Workflow type: plain, with ``compactAfter``, read from a version-1 file, with
        ``fanOut`` edges, with a retry policy (uwf 0.5's, version 1's)."""
        return (
            self.workflow,
            self.workflow_compact,
            self.workflow_v1,
            self.workflow_fan_out,
            self.workflow_retry,
            self.workflow_v1_retry,
        )

    @property
    def starts(self) -> tuple[str, str]:
        """Both StartNode types: plain, and resuming an ended thread."""
        return (self.start, self.start_resume)

    @property
    def every(self) -> tuple[str, ...]:
        """The meta-schema and every uwf schema (gc never deletes them)."""
        return tuple(self)


HASHES = SchemaHashes(
    meta="3JBQDPMJ22J9Z",
    workflow="F10A124M1A914",
    start="41ZBT64VX5FRH",
    step="C81ATBJW36ZSB",
    text="DNCF1BA0Z9WWX",
    step_compact="E4YHKJMMYGR79",
    workflow_compact="D6P28VVTPTD2A",
    blob="2WPBX1H8S3QB9",
    compact_request="F2E78Y44BZF8Z",
    workflow_v1="3D65XQC8SHQR9",
    start_resume="8EMCBJCKVDG6H",
    step_join="6NC3P81VNXXDR",
    workflow_fan_out="EJ69MHX84HJEN",
    workflow_retry="FEWCDWE8RC6ZG",
    workflow_v1_retry="1HY8Q6X9RB4YP",
    eval_run="EX1A70TEHMAG9",
)


def hashes() -> SchemaHashes:
    return HASHES


def step_type(payload: dict[str, Any]) -> str:
    """The StepNode type a payload has (docs/format.md, "Extended types"): with ``children``
    StepNode (join), else with ``compact`` StepNode (compact), else StepNode."""
    if "children" in payload:
        return HASHES.step_join
    return HASHES.step_compact if "compact" in payload else HASHES.step


def _schemas() -> tuple[tuple[str, dict[str, Any]], ...]:
    """Each uwf schema under its name in ``SchemaHashes`` (the meta-schema aside). The
    Workflow family is imported here: only a process that writes schema nodes or checks the
    hashes builds it (a reader knows the hashes from ``HASHES``)."""
    from uwf.protocol.workflow_schemas import (
        WORKFLOW,
        WORKFLOW_COMPACT,
        WORKFLOW_FAN_OUT,
        WORKFLOW_RETRY,
        WORKFLOW_V1,
        WORKFLOW_V1_RETRY,
    )

    return (
        ("workflow", WORKFLOW),
        ("start", START_NODE),
        ("step", STEP_NODE),
        ("text", TEXT),
        ("step_compact", STEP_NODE_COMPACT),
        ("workflow_compact", WORKFLOW_COMPACT),
        ("blob", BLOB),
        ("compact_request", COMPACT_REQUEST),
        ("workflow_v1", WORKFLOW_V1),
        ("start_resume", START_NODE_RESUME),
        ("step_join", STEP_NODE_JOIN),
        ("workflow_fan_out", WORKFLOW_FAN_OUT),
        ("workflow_retry", WORKFLOW_RETRY),
        ("workflow_v1_retry", WORKFLOW_V1_RETRY),
        ("eval_run", EVAL_RUN),
    )


def computed_hashes() -> SchemaHashes:
    """The hashes of the schemas above, computed (what ``HASHES`` must equal)."""
    from uwf.cas import codec
    from uwf.cas.schema import meta_hash

    meta = meta_hash()
    return SchemaHashes(
        meta=meta, **{name: codec.node_hash(meta, schema) for name, schema in _schemas()}
    )


def ensure(store: Store) -> SchemaHashes:
    """Make sure the meta-schema and uwf's schemas are stored (idempotent: one question for
    all of them, ``Store.missing``, then the puts of those missing)."""
    h = hashes()
    wanted = {getattr(h, name): schema for name, schema in _schemas()}
    missing = store.missing([h.meta, *wanted])
    if h.meta in missing:
        store.ensure_meta()
    for expected, schema in wanted.items():
        if expected in missing:
            got = store.put_schema(schema)
            assert got == expected, (got, expected)
    return h
