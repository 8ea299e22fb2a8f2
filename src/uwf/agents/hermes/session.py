"""A Hermes session (as ``hermes sessions export`` prints it) to the step's turns and answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from uwf.model.cost import Cost


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _text(content: Any) -> str:
    """Message content as text: a string as is, text parts joined, anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        if all(isinstance(p, str) for p in parts) and parts:
            return "".join(str(p) for p in parts)
    return json.dumps(content, ensure_ascii=False)


def _tool_calls(value: Any) -> list[dict[str, str]] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, list):
        return None
    calls = []
    for call in value:
        if not isinstance(call, dict):
            continue
        inner = call.get("function")
        fn: dict[str, Any] = inner if isinstance(inner, dict) else call
        name = fn.get("name")
        args = fn.get("arguments", fn.get("args", ""))
        calls.append(
            {
                "name": name if isinstance(name, str) else "",
                "args": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
            }
        )
    return calls or None


def _reasoning(message: dict[str, Any]) -> str | None:
    for key in ("reasoning", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def to_turn(message: dict[str, Any]) -> dict[str, Any] | None:
    """An ``AgentTurn`` payload (without index) for an assistant or tool message, else None."""
    role = message.get("role")
    if role == "assistant":
        return {
            "role": "assistant",
            "content": _text(message.get("content")),
            "toolCalls": _tool_calls(message.get("tool_calls")),
            "reasoning": _reasoning(message),
        }
    if role == "tool":
        return {
            "role": "tool",
            "content": _text(message.get("content")),
            "toolCalls": None,
            "reasoning": None,
        }
    return None


@dataclass
class Run:
    """What one ``hermes chat`` run added to its session."""

    session: str
    model: str
    output: str  # the last non-blank assistant content of the run
    turns: list[dict[str, Any]]
    start: float  # unix seconds
    end: float
    usage: Cost | None = None  # the session's token counters at the end of the run


def session_usage(session: dict[str, Any]) -> Cost | None:
    """The token counters of an exported session (cumulative over its runs), when it has them."""
    counts = [session.get(key) for key in ("input_tokens", "output_tokens", "api_call_count")]
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        return None
    prompt, completion, calls = (int(c) for c in counts)  # type: ignore[arg-type]
    return Cost(0, prompt, completion, prompt + completion, calls)


def run_of(session: dict[str, Any], launched: float, resumed: bool) -> Run:
    """The part of an exported session written by the run launched at ``launched``.

    A new session is all this run's; a resumed one also holds earlier runs, so only messages
    stamped at or after the launch count (Hermes stamps each message when it writes it).
    """
    messages = [m for m in session["messages"] if isinstance(m, dict)]
    if resumed:
        messages = [m for m in messages if (_number(m.get("timestamp")) or 0.0) >= launched]
    turns = [t for t in (to_turn(m) for m in messages) if t is not None]
    output = next(
        (
            t["content"]
            for t in reversed(turns)
            if t["role"] == "assistant" and t["content"].strip()
        ),
        "",
    )
    stamps = [s for s in (_number(m.get("timestamp")) for m in messages) if s is not None]
    started = _number(session.get("started_at"))
    start = stamps[0] if resumed and stamps else started if started is not None else launched
    end = max([start, *stamps, _number(session.get("ended_at")) or start])
    model = session.get("model")
    return Run(
        session=str(session["id"]),
        model=model if isinstance(model, str) else "",
        output=output,
        turns=turns,
        start=start,
        end=end,
        usage=session_usage(session),
    )
