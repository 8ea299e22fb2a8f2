"""The frontmatter fast path: structured output read straight from the agent's answer.

An agent answers with a ``---``-delimited YAML block followed by its markdown work
(docs/agents.md, "What to write"). When that block already satisfies the role's output
schema, the output is stored with no LLM call at all. Everything here is total: any text an
agent can print gives either a result or ``None`` (never an exception), because a malformed
answer is an expected event that the caller answers with a correction prompt.

Differences from uwf v0.5.0, on purpose:

- the candidate is built from the role schema's own fields, and the standard checks
  (``confidence`` in [0, 1], ``next`` a single word, non-blank ``artifacts``, ``scope``) apply
  to the standard fields the candidate takes — a reviewer whose schema is ``{approved}`` is not
  failed for a stray ``confidence: 85`` line it was not asked for;
- the YAML is parsed once, with the safe loader; a value JSON cannot hold (``.nan``, binary,
  sets) makes the block unusable instead of being stored half-converted;
- an invalid candidate is never stored (``Store.put`` validates before writing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uwf.moderator import emits
from uwf.util.errors import InvalidInput, SchemaViolation
from uwf.util.frontmatter import load_mapping as _mapping
from uwf.util.frontmatter import split
from uwf.util.jsonfmt import dumps
from uwf.util.tuples import NamedTuple

if TYPE_CHECKING:
    from uwf.cas.store import Store

__all__ = ["candidate", "offer", "parse", "parse_standard", "split", "validate_standard"]

STATUSES = ("done", "needs_input", "in_progress", "failed")
SCOPES = ("role", "thread")
STANDARD_FIELDS = ("status", "next", "confidence", "artifacts", "scope")


# -- the standard record ------------------------------------------------------------------------


def _status(value: Any) -> str | None:
    if isinstance(value, str) and value.strip().lower() in STATUSES:
        return value.strip().lower()
    return None


def _next(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) else None


def _confidence(value: Any) -> int | float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return dumps(value)
    return None


def _artifacts(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    texts = (_scalar_text(item) for item in items)
    return [text for text in texts if text]


def _scope(value: Any) -> str:
    if isinstance(value, str) and value.strip() in SCOPES:
        return value.strip()
    return "role"


def _standard(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": _status(data.get("status")),
        "next": _next(data.get("next")),
        "confidence": _confidence(data.get("confidence")),
        "artifacts": _artifacts(data.get("artifacts")),
        "scope": _scope(data.get("scope")),
    }


def parse_standard(block: str) -> dict[str, Any]:
    """The five standard fields of a frontmatter block, coerced; defaults for anything unusable.

    ``status`` is one of done/needs_input/in_progress/failed (case-insensitive) or None;
    ``next`` a trimmed string or None; ``confidence`` a number or None; ``artifacts`` a list of
    non-empty strings (a scalar becomes a one-element list); ``scope`` role or thread (default
    role). Unknown keys are ignored. A block that is not a YAML mapping gives the defaults.
    """
    return _standard(_mapping(block) or {})


def parse(raw: str) -> tuple[dict[str, Any] | None, str]:
    """The standard record and the body of an agent answer; ``(None, raw)`` without frontmatter."""
    block, body = split(raw)
    if block is None:
        return None, body
    return parse_standard(block), body


def validate_standard(record: dict[str, Any]) -> list[str]:
    """Every problem of a standard record, one line each (empty when it is valid)."""
    errors: list[str] = []
    status = record.get("status")
    if status is not None and status not in STATUSES:
        errors.append(f"status must be one of {', '.join(STATUSES)}")
    confidence = record.get("confidence")
    if confidence is not None and (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or not 0 <= confidence <= 1
    ):
        errors.append("confidence must be a number between 0 and 1")
    nxt = record.get("next")
    if nxt is not None and (not isinstance(nxt, str) or not nxt.strip() or _has_space(nxt)):
        errors.append("next must be a role name without whitespace")
    artifacts = record.get("artifacts", [])
    if not isinstance(artifacts, list):
        errors.append("artifacts must be a list")
    else:
        for i, item in enumerate(artifacts):
            if not isinstance(item, str) or not item.strip():
                errors.append(f"artifacts[{i}] must not be blank")
    if record.get("scope", "role") not in SCOPES:
        errors.append("scope must be role or thread")
    return errors


def _has_space(text: str) -> bool:
    return any(c.isspace() for c in text)


# -- candidate and fast path --------------------------------------------------------------------


NOT_A_MAPPING = "the frontmatter block is not a YAML mapping of fields"


def _offer_of(block: str, schema: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """The candidate of ``candidate`` and, when there is none, why (one line each)."""
    try:
        data = _mapping(block)
        if data is None:
            return None, [NOT_A_MAPPING]
        std = _standard(data)
        names = [f.name for f in emits.fields(schema)] or list(STANDARD_FIELDS)
    except Exception:
        return None, [NOT_A_MAPPING]
    taken = {name: std[name] for name in names if name in std}
    problems = validate_standard(taken)
    if problems:
        return None, problems
    out: dict[str, Any] = {}
    for name in names:
        if name in ("artifacts", "scope"):
            out[name] = std[name]
        elif name in ("status", "next", "confidence"):
            out[name] = std[name] if std[name] is not None else data.get(name)
        elif name in data:
            out[name] = data[name]
    return out, []


#: How long a suspension's reason may be (it is one line of the thread's state).
REASON_LIMIT = 300


def suspension(raw: str, key: str) -> str | None:
    """The reason of an answer that suspends its step — its frontmatter's ``key`` (``status``
    or ``$status``) is ``$SUSPEND`` — else None. The reason is the block's ``reason``, else the
    first line of the text after it, on one line."""
    from uwf.moderator.evaluate import SUSPEND

    block, body = split(raw)
    if block is None:
        return None
    try:
        data = _mapping(block)
    except Exception:
        return None
    if not isinstance(data, dict) or data.get(key) != SUSPEND:
        return None
    reason = data.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        reason = next((line for line in body.splitlines() if line.strip()), "")
    text = " ".join(reason.split()) or "no reason given"
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def candidate(block: str, schema: Any) -> dict[str, Any] | None:
    """The output object the block offers for a role schema; None if the block is unusable.

    One key per schema field (``uwf.moderator.emits``): a standard name gets its coerced
    value (``status: Done`` -> ``"done"``), falling back to the raw value when coercion gives
    nothing (a custom status like ``approved`` passes through) and to null when absent;
    ``artifacts`` and ``scope`` are always present. Other fields are copied from the block
    when present. A schema without fields gets the five standard fields. The standard checks
    apply to the standard fields taken; a failed check makes the whole block unusable.
    """
    return _offer_of(block, schema)[0]


class Offer(NamedTuple):
    """What the fast path made of an answer: the stored output, or why there is none.

    ``problems`` is empty when the answer has no frontmatter block at all (or the schema
    node is missing); otherwise one line per problem, a rejected field named with the
    schema's problem (``notes: expected a string, got a boolean``).
    """

    hash: str | None
    body: str
    problems: tuple[str, ...] = ()


def offer(raw: str, schema_hash: str, store: Store) -> Offer:
    """Store the output the frontmatter offers if it satisfies the role schema; else say why.

    Nothing is stored unless the candidate validates. A damaged store or a bad
    ``schema_hash`` is not the agent's fault and still raises.
    """
    from uwf.cas.schema import field_problems

    block, body = split(raw)
    if block is None:
        return Offer(None, body)
    node = store.get(schema_hash)
    if node is None:
        return Offer(None, body)
    found, problems = _offer_of(block, node.payload)
    if found is None:
        return Offer(None, body, tuple(problems))
    try:
        return Offer(store.put(schema_hash, found), body)
    except (SchemaViolation, InvalidInput) as exc:
        return Offer(None, body, tuple(field_problems(node.payload, found) or [exc.message]))
