"""The roots of a store, checked: what `cas verify` reports and what stops `cas gc`.

The roots are what the mutable state names: every active head, every archived head and every
registry entry (docs/architecture.md, "Garbage collection"). Each must resolve to a node of
the right type — a StartNode or StepNode for a head, a Workflow for a registry entry. A root
that is missing (a node deleted by hand, a pack that lost its index) or of another type is
damage: its chain cannot be read, and a gc that marked from it would miss what it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from uwf.backend.base import Backend, HistoryEntry
from uwf.cas.store import Store
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.errors import CorruptNode, UwfError
from uwf.util.ulid import ThreadId

if TYPE_CHECKING:
    from uwf.util.outputs import RootDamage


def problems(
    store: Store,
    active: Mapping[ThreadId, NodeHash],
    history: list[HistoryEntry],
    registry: Mapping[str, NodeHash],
    *,
    corrupt: bool = True,
) -> list[RootDamage]:
    """Every root that does not resolve to a node of its kind: ``{"thread"|"workflow",
    "problem"}``, in the order of the state (active, archived, registry). ``corrupt=False``
    leaves out a root that cannot be read (``cas gc`` reports those as it marks)."""
    h = schemas.hashes()
    heads = {h.start, *h.steps}
    step_kind = "a StartNode or StepNode"
    checks: list[tuple[NodeHash, set[str], str, str, RootDamage]] = []
    for thread, head in active.items():
        checks.append((head, heads, "its head", step_kind, {"thread": thread}))
    for entry in history:
        checks.append((entry.head, heads, "its archived head", step_kind, {"thread": entry.thread}))
    for name, wf in registry.items():
        checks.append(
            (wf, set(h.workflows), "its registry entry", "a Workflow", {"workflow": name})
        )
    out: list[RootDamage] = []
    for root, types, what, kind, where in checks:
        problem = _problem(store, root, types, what, kind, corrupt)
        if problem is not None:
            out.append({**where, "problem": problem})
    return out


def _problem(
    store: Store, h: NodeHash, types: set[str], what: str, kind: str, corrupt: bool
) -> str | None:
    try:
        node = store.stored(h)  # the storage's, whatever this process keeps
    except CorruptNode as exc:
        return f"{what} {h} is corrupt ({exc})" if corrupt else None
    if node is None:
        return f"{what} {h} is missing{store.missing_hint(h)}"
    if node.type not in types:
        return f"{what} {h} is not {kind} (its type is {node.type})"
    return None


def state_problems(backend: Backend) -> tuple[list[RootDamage], dict[str, Any]]:
    """The damage of the state itself (a part uwf cannot read as its own: ``{"state"}`` with
    the error — ``active``, ``history``, ``registry``, and the backend's other parts:
    ``startKeys``, ``workers``, ``limits``) and what could be read of it: ``{"active",
    "history", "registry"}``."""
    found: list[RootDamage] = []
    state: dict[str, Any] = {"active": {}, "history": [], "registry": {}}
    readers = {
        "active": lambda: {r.thread: r.head for r in backend.threads.active()},
        "history": backend.threads.history,
        "registry": backend.registry.read,
    }
    for key, read in readers.items():
        try:
            state[key] = read()
        except UwfError as exc:
            found.append({"state": key, "problem": exc.message})
    found += [{"state": part, "problem": problem} for part, problem in backend.state_damage()]
    return found, state
