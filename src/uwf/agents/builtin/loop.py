"""The tool loop of ``uwf-builtin``: call the model until it answers with its deliverable.

At most ``max_turns`` model calls, whatever they answer: the cap is a cap (docs/agents.md,
"uwf-builtin", counts every call of a step). Tool calls run in order and each result goes
back as a ``tool`` message. A text reply that does not start with ``---`` gets a nudge about
the frontmatter (unless tools are off or it was the last call); the call that answers a
nudge counts like any other. When 1-3 calls remain, the model gets one warning to finish. The
loop ends at a text reply that needs no nudge, or when the calls run out (the output is then
the last non-blank assistant text). Every assistant reply, tool result and message sent is
also a turn (the step's detail).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from uwf.adapters.llm import Reply, ToolCall
from uwf.agent_kit.live import Turns

MAX_TURNS = 30
CORRECTION_TURNS = 1  # a correction runs without tools: one call answers it
DEADLINE_WINDOW = 3  # the warning comes when this many calls (or fewer) remain

NUDGE = (
    "Your reply did not call a tool and does not start with the YAML frontmatter (`---`). "
    "If your work is done, reply now with your deliverable: the frontmatter described in "
    "## Deliverable Format, starting with `---` at the very first character, followed by your "
    "markdown work. Otherwise, continue working with the tools."
)


def needs_nudge(text: str, tools_on: bool, last_turn: bool) -> bool:
    """A text reply that is not the deliverable yet, while the model can still act on it."""
    return tools_on and not last_turn and not text.lstrip().startswith("---")


def deadline_due(remaining: int, warned: bool, tools_on: bool) -> bool:
    """The one-time "finish now" warning: tools on, 1-3 calls left, not warned before."""
    return tools_on and not warned and 1 <= remaining <= DEADLINE_WINDOW


def deadline_message(remaining: int) -> str:
    calls = "call" if remaining == 1 else "calls"
    return (
        f"Only {remaining} model {calls} left for this step. Finish now: reply with your "
        "deliverable, starting with the YAML frontmatter (`---`), and say in it what is not "
        "done."
    )


def last_assistant_text(messages: Sequence[dict[str, Any]]) -> str:
    """The newest assistant message with non-blank text content; "" if there is none."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and content.strip():
            return content
    return ""


def final_output(text: str) -> str:
    """The deliverable as the extract wants it: frontmatter at position 0, preamble dropped."""
    stripped = text.lstrip()
    if stripped.startswith("---"):
        return stripped
    at = text.find("\n---\n")
    return text[at + 1 :] if at >= 0 else text


ToolRunner = Callable[[str, Any], str]
Chat = Callable[[list[dict[str, Any]], bool], Reply]


def process_tool_calls(
    calls: Sequence[ToolCall],
    messages: list[dict[str, Any]],
    turns: list[dict[str, Any]],
    run_tool: ToolRunner,
) -> int:
    """Run each call in order; append one ``tool`` message (and turn) per call; the count."""
    for call in calls:
        result = run_tool(call.name, call.arguments)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        turns.append({"role": "tool", "content": result, "toolCalls": None, "reasoning": None})
    return len(calls)


@dataclass
class LoopResult:
    text: str
    messages: list[dict[str, Any]]
    turns: list[dict[str, Any]] = field(default_factory=list)


def _assistant(reply: Reply, calls: Sequence[ToolCall]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(message to send back next time, turn to record) for one model reply."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    turn = {
        "role": "assistant",
        "content": reply.text,
        "toolCalls": [{"name": c.name, "args": c.arguments} for c in calls] or None,
        "reasoning": reply.reasoning,
    }
    return message, turn


def run_loop(
    chat: Chat,
    messages: Sequence[dict[str, Any]],
    *,
    tools_on: bool,
    max_turns: int,
    run_tool: ToolRunner,
) -> LoopResult:
    """Call the model until it answers with its deliverable or ``max_turns`` calls are used.

    ``chat(messages, tools_on)`` returns the reply of one completion. The
    caller's list is not changed: the result holds the continued conversation.
    """
    convo = [dict(m) for m in messages]
    turns: list[dict[str, Any]] = Turns()  # each turn published as it is made (live turns)
    remaining = max_turns
    warned = False
    while remaining > 0:
        if deadline_due(remaining, warned, tools_on):
            warned = True
            say(convo, turns, deadline_message(remaining))
        reply = chat(convo, tools_on)
        remaining -= 1
        calls = reply.tool_calls if tools_on else ()
        message, turn = _assistant(reply, calls)
        convo.append(message)
        turns.append(turn)
        if calls:
            process_tool_calls(calls, convo, turns, run_tool)
            continue
        text = str(turn["content"])
        if needs_nudge(text, tools_on, last_turn=remaining == 0):
            say(convo, turns, NUDGE)
            continue
        return LoopResult(text, convo, turns)
    return LoopResult(last_assistant_text(convo), convo, turns)


def say(convo: list[dict[str, Any]], turns: list[dict[str, Any]], text: str) -> None:
    convo.append({"role": "user", "content": text})
    turns.append({"role": "user", "content": text, "toolCalls": None, "reasoning": None})
