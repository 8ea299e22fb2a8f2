"""Compaction summaries (docs/format.md, "Compaction"): asking the model for one, and the
summaries ``uwf thread compact`` records for a thread's next step.

A summary replaces the previous summary plus the steps since it. The model is asked for it
with a prompt that keeps every decision, every open question and each role's last structured
output. The steps are sent in chunks of at most twice the budget (a summary is due once
they exceed the budget, so usually there is one chunk), each folded into the summary so far:
no request grows with the thread, even for the first summary of a thread that ran long
without one. The model is the one
``config.yaml`` names for ``compact`` (``modelOverrides.compact`` > ``models.compact`` >
``defaultModel``).

A summary recorded by hand waits for the thread's next step in a ``CompactRequest`` node
``{thread, head, summary}``, found through the type index: it applies while the thread's head
is still ``head`` (any step moves the head, so a request is used once), and ``cas gc`` keeps
it as long as it applies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwf.cas.store import Store
from uwf.model.window import step_cost
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.errors import UwfError
from uwf.util.jsonfmt import canonical, dumps

if TYPE_CHECKING:
    from uwf.adapters.llm import Client

CUT_MARK = "\n\n[summary cut to fit the context budget]"

SYSTEM = (
    "You keep the running summary of a long thread of a multi-agent workflow. The agents of "
    "the thread will read your summary instead of the steps it covers, so it must hold what "
    "they cannot do without.\n"
    "Write one summary that replaces the previous summary and the steps below. Keep:\n"
    "- every decision taken, and why;\n"
    "- every open question, problem or request that is not resolved yet;\n"
    "- for each role, its last structured output, verbatim as JSON (from the list below, "
    "else from the previous summary).\n"
    "Leave out what no later step needs. Write plain markdown, at most {limit} characters. "
    "Reply with the summary only."
)


class CompactError(UwfError):
    """A summary could not be written."""


def summary_limit(budget: int) -> int:
    """The characters a summary may take: a quarter of the budget is asked of the model, and
    a reply longer than half of it is cut (the rest of the budget is for recent steps)."""
    return max(1, budget // 4)


def fit(text: str, budget: int) -> str:
    """``text`` cut to half the budget (with a mark saying so) when it is longer."""
    limit = max(1, budget // 2)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(CUT_MARK))] + CUT_MARK


def _json(value: Any) -> str:
    return dumps(canonical(value))


def _block(step: Mapping[str, Any], number: int, cap: int) -> str:
    lines = [f"### Step {number}: {step.get('role')}", f"Output: {_json(step.get('output', {}))}"]
    content = step.get("content")
    if isinstance(content, str) and content.strip():
        shown = content if len(content) <= cap else content[:cap] + " […]"
        lines += ["", shown]
    return "\n".join(lines)


def last_outputs(steps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Each role's newest structured output among ``steps``."""
    out: dict[str, Any] = {}
    for step in steps:
        out[str(step.get("role"))] = step.get("output", {})
    return out


def summary_messages(
    task: str,
    previous: str | None,
    steps: Sequence[Mapping[str, Any]],
    offset: int,
    budget: int,
) -> list[dict[str, str]]:
    """The request for one summary: the previous summary (of steps 1..offset) and ``steps``."""
    first, last = offset + 1, offset + len(steps)
    before = (
        f"## Previous Summary (steps 1–{offset})\n\n{previous}"
        if previous
        else "## Previous Summary\n\n(none)"
    )
    blocks = "\n\n".join(_block(s, offset + 1 + i, budget) for i, s in enumerate(steps))
    outputs = "\n".join(f"- {role}: {_json(out)}" for role, out in last_outputs(steps).items())
    user = (
        f"## Task\n\n{task}\n\n{before}\n\n## Steps {first}–{last}\n\n{blocks}\n\n"
        f"## Last Structured Output of Each Role\n\n{outputs}"
    )
    system = SYSTEM.format(limit=summary_limit(budget))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def chunks(steps: Sequence[Mapping[str, Any]], budget: int) -> list[list[Mapping[str, Any]]]:
    """``steps`` cut into runs that each cost at most ``budget`` (at least one step each)."""
    out: list[list[Mapping[str, Any]]] = []
    total = 0
    for step in steps:
        cost = step_cost(step)
        if not out or total + cost > budget:
            out.append([])
            total = 0
        out[-1].append(step)
        total += cost
    return out


def summarize(
    client: Client,
    task: str,
    previous: str | None,
    steps: Sequence[Mapping[str, Any]],
    offset: int,
    budget: int,
    on_reply: Callable[[Any], None] | None = None,
) -> str:
    """The new summary of ``previous`` (steps 1..offset) plus ``steps``, one request per chunk;
    ``on_reply`` sees every reply (the step's cost meter counts them).

    Raises CompactError (or the adapter's LLMError) when the model gives no summary.
    """
    summary = previous
    done = offset
    for part in chunks(steps, 2 * budget):
        reply = client.chat(summary_messages(task, summary, part, done, budget))
        if on_reply is not None:
            on_reply(reply)
        text = reply.text.strip()
        if not text:
            raise CompactError("the summary model answered without text")
        summary = fit(text, budget)
        done += len(part)
    if summary is None:
        raise CompactError("there is nothing to summarise: the thread has no steps yet")
    return summary


def model_client(root: Path) -> Client | None:
    """A client for the summary model of ``config.yaml``; None when none is configured."""
    from uwf.adapters import llm
    from uwf.config.config import load_config, model_alias, resolve_model

    config = load_config(root)
    alias = model_alias(config, "compact")
    if alias is None:
        return None
    spec = resolve_model(config, alias)
    timeout = llm.resolve_timeout(llm.COMPACT_TIMEOUT)
    return llm.Client(spec.base_url, spec.api_key, spec.model, timeout=timeout)


# -- summaries recorded by hand ----------------------------------------------------------------


def request(store: Store, thread: str, head: NodeHash, text: str) -> tuple[NodeHash, NodeHash]:
    """Record ``text`` as the summary for the step after ``head``: (summary, request) hashes."""
    h = schemas.ensure(store)
    summary = store.put(h.text, text)
    payload = {"thread": thread, "head": head, "summary": summary}
    return summary, store.put(h.compact_request, payload)


def _requests(store: Store) -> list[tuple[NodeHash, dict[str, Any]]]:
    out = []
    for h in store.index(schemas.hashes().compact_request):
        node = store.get(h)
        if node is not None and isinstance(node.payload, dict):
            out.append((h, node.payload))
    return out


def pending(store: Store, thread: str, head: NodeHash) -> NodeHash | None:
    """The summary recorded by hand for the step after ``head`` of ``thread`` (the newest)."""
    found = None
    for _, payload in _requests(store):
        if payload.get("thread") == thread and payload.get("head") == head:
            found = NodeHash(str(payload["summary"]))
    return found


def pending_requests(store: Store, active: Mapping[Any, Any]) -> list[str]:
    """The request nodes that still apply (their thread is active at their head): gc roots."""
    return [h for h, p in _requests(store) if active.get(str(p.get("thread"))) == p.get("head")]
