"""``uwf cas gc``: delete the nodes that nothing can reach any more (docs/architecture.md,
"Garbage collection").

**Roots.** Every hash in ``registry.yaml``; every Workflow node whose ``name`` has a registry
entry (the versions ``workflow history`` lists and ``workflow rollback`` can return to);
every active head (``threads.yaml``) and every archived head (``history.jsonl``); the
meta-schema and uwf's own schemas; the pending ``thread compact`` requests; every EvalRun
node (``uwf eval``'s results, which name their thread's start and head). Workflow versions
and EvalRuns are found through the type indexes and, so that a lost index line cannot cost
one, also among the unreachable nodes the sweep reads.

**Doubt.** A root in doubt stops gc before anything is deleted: a state file uwf cannot
read as its own (emptied, cut, a head that is not a hash: an error naming the file), a head
or registry entry whose node is missing or of another kind, a pack that lost its index
(``engine/store/roots.py``, ``Store.storage_doubts``). What such a root reaches is unknown.

**Mark.** From the roots, follow every ``cas_ref`` (``uwf.cas.refs``), each reached node's
type and the type's type (the meta-schema). A reachable node that cannot be read (corrupt)
stops gc before anything is deleted: its references are unknown. So does a reachable node
that refers to a missing one — a chain broken in the middle (a disk fault, a partial
restore): what lies behind the gap is unmarked, but it is no garbage: restoring the lost node
from a backup makes it reachable again, and gc must not have deleted it by then.

**Sweep.** An unmarked node is collected when its last put — the later of its timestamp and
its file's mtime, which a put of an existing node refreshes — is older than the cutoff
(now minus ``--grace``, default one hour). Unmarked nodes younger than that are kept, and so
is everything they reach: what gc keeps is closed under references and types, so
``cas verify`` passes after any gc. Corrupt unreachable nodes are kept for ``cas verify`` to
report. Collected hashes leave the type index.

**Leftovers.** Then the step locks of archived threads (``Locks.sweep``: never one a process
holds; a thread in the history never becomes active again) and the temp files that writers
killed mid-write left, last written before the cutoff (``Backend.sweep_temp_files``: each
deleted under its writer's lock, so a write in flight keeps its temp file).

**Running beside other commands.**

* Two gcs never run at once (``Locks.gc``; the second fails at once).
* A step in flight: its agent writes nodes that become reachable only when the head moves.
  gc asks the backend which threads' step locks are held (``Locks.running``, passive: it
  never takes a lock) and moves the cutoff back to the time that thread's current head was
  written, so every node the agent puts is protected even with ``--grace 0``.
* A summary recorded by ``thread compact`` waits for the thread's next step in a
  CompactRequest node: the requests whose thread is still at the head they name are roots.
* The order of reads closes the remaining gaps: step locks, then ``threads.yaml``, then
  ``history.jsonl`` (archiving writes history before it drops the active entry), then the
  registry. A step that finished before the lock check has moved its head before
  ``threads.yaml`` is read; a step that starts after the lock check writes only nodes
  younger than the cutoff.
* A put of a node that is already stored (content addressing makes it a no-op) refreshes
  its last-put time and its type's, and every write holds a shared lock that the sweep holds
  exclusively (``Store.sweeping``): a node is never deleted between a writer finding it and
  the writer linking to it.
* Only the grace period protects the nodes that ``thread start`` and ``workflow put`` write
  in the milliseconds before they record them, and a ``thread fork`` of a node that is
  itself garbage. Keep a grace of a few seconds or more when those may run.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from uwf.backend.base import Backend, HistoryEntry
from uwf.cas.refs import collect
from uwf.cas.store import Store
from uwf.model import compact
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash, is_hash
from uwf.util.errors import CorruptNode, Damaged, InvalidInput, UwfError
from uwf.util.tuples import NamedTuple
from uwf.util.ulid import ThreadId, now_ms

if TYPE_CHECKING:
    from uwf.util.outputs import Collected

DEFAULT_GRACE = "1h"
BATCH = 256  # nodes deleted per hold of the sweep lock, so writers are never held up long
_DURATION = re.compile(r"^(\d{1,12})([smhd]?)$")
_UNIT_MS = {"": 1000, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_grace(text: str) -> int:
    """A duration (``0``, ``30s``, ``10m``, ``1h``, ``2d``; bare digits are seconds) in ms."""
    m = _DURATION.match(text.strip())
    if m is None:
        shown = text if text.isprintable() else repr(text)
        raise InvalidInput(f"invalid --grace: {shown} (expected a duration like 30s, 10m, 1h, 2d)")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


class _Swept(NamedTuple):
    """What the node sweep found and did."""

    scanned: int = 0
    reachable: int = 0
    collected: int = 0
    freed: int = 0  # bytes
    packed: int = 0


def gc(backend: Backend, *, grace: str = DEFAULT_GRACE, dry_run: bool = False) -> Collected:
    """Collect unreachable nodes, pack what survives, then sweep the step locks of archived
    threads and old temp files; ``{"scanned","reachable","collected","bytes","locks",
    "tempFiles","packed"}`` (``packed``: nodes moved from loose files into the pack).

    With ``dry_run`` nothing is deleted or packed; the counts say what would be collected
    (and ``"dryRun"`` replaces ``"packed"``).
    """
    grace_ms = parse_grace(grace)
    swept, locks, temp_files = _Swept(), 0, 0
    store = backend.nodes
    if next(iter(store.iter_hashes()), None) is not None or store.storage_doubts():
        # (nothing stored and nothing in doubt: create nothing)
        with backend.locks.gc():
            cutoff = now_ms() - grace_ms
            in_flight = backend.locks.running()  # before the heads: see the module doc
            active = {record.thread: record.head for record in backend.threads.active()}
            history = backend.threads.history()
            swept = _gc(backend, cutoff, in_flight, active, history, dry_run)
            locks = backend.locks.sweep(_archived_only(active, history), dry_run=dry_run)
            temp_files = backend.sweep_temp_files(cutoff, dry_run=dry_run)
    out: Collected = {
        "scanned": swept.scanned,
        "reachable": swept.reachable,
        "collected": swept.collected,
        "bytes": swept.freed,
        "locks": locks,
        "tempFiles": temp_files,
    }
    if dry_run:
        out["dryRun"] = True
    else:
        out["packed"] = swept.packed
    return out


def _archived_only(active: dict[ThreadId, NodeHash], history: list[HistoryEntry]) -> set[ThreadId]:
    """The threads in the history and not active: their step locks are never needed again
    (a thread in the history never becomes active again; one in both files after a hand edit
    stays active, so its lock is kept)."""
    return {entry.thread for entry in history} - set(active)


def _gc(
    backend: Backend,
    cutoff: int,
    in_flight: set[ThreadId],
    active: dict[ThreadId, NodeHash],
    history: list[HistoryEntry],
    dry_run: bool,
) -> _Swept:
    """Mark from the roots, then collect (or count, ``dry_run``) what is older than
    ``cutoff``, moved back to the first put of any head a step is running on."""
    store = backend.nodes
    for thread in in_flight:
        head = active.get(thread)
        if head is not None:
            cutoff = min(cutoff, _first_put(store, head))
    archived = [entry.head for entry in history]
    registry = backend.registry.read()
    _refuse_doubt(store, active, history, registry)

    h = schemas.hashes()
    roots = [*h.every, *registry.values(), *active.values(), *archived]
    roots += compact.pending_requests(store, active)
    roots += store.index(h.eval_run)  # eval results are kept (docs/evals.md)
    names = set(registry)
    for type_hash in h.workflows:
        for version in store.index(type_hash):
            if _registered_workflow(store, version, type_hash, names):
                roots.append(version)
    marked: set[str] = set()
    broken: list[tuple[str, str]] = []
    _mark(store, roots, marked, broken)
    if broken:
        raise _broken_chains(store, broken, active, history)

    scanned = list(store.iter_hashes())
    old: list[str] = []
    keep: list[str] = []  # unmarked but kept: everything they reach is kept too
    sizes: dict[str, int] = {}
    for node in scanned:
        if node in marked:
            continue
        try:
            info = store.info(node)
        except CorruptNode:
            continue  # never delete what cannot be read; `cas verify` reports it
        if info is None:
            continue
        if (
            info.last_put >= cutoff
            or info.type == h.eval_run  # an EvalRun whose index line was lost
            or _registered_workflow(store, node, info.type, names)
        ):
            keep.append(node)
        else:
            old.append(node)
            sizes[node] = info.size
    reachable = sum(1 for node in scanned if node in marked)
    _mark(store, keep, marked)
    old = [node for node in old if node not in marked]

    collected, freed, packed = 0, 0, 0
    if dry_run:
        collected, freed = len(old), sum(sizes[node] for node in old)
    else:
        collected, freed, packed = _sweep(store, old, cutoff)
    return _Swept(len(scanned), reachable, collected, freed, packed)


def _refuse_doubt(
    store: Store,
    active: dict[ThreadId, NodeHash],
    history: list[HistoryEntry],
    registry: dict[str, NodeHash],
) -> None:
    """Stop before anything is deleted while a root is in doubt — a head or registry entry
    whose node is missing or of another kind, or nodes the store cannot list (a pack that
    lost its index): what such a root reaches is unknown, and would be collected. (A state
    file uwf cannot read as its own already stopped gc when it was read.)"""
    from uwf.engine.store import roots

    doubts = [d["problem"] for d in store.storage_doubts()]
    doubts += [
        f"{d.get('thread') or d.get('workflow')}: {d['problem']}"
        for d in roots.problems(store, active, history, registry, corrupt=False)
    ]
    if doubts:
        more = f" (and {len(doubts) - 3} more)" if len(doubts) > 3 else ""
        raise Damaged(
            f"cas gc stopped, nothing was deleted: a root is in doubt: {'; '.join(doubts[:3])}"
            f'{more}; see uwf cas verify and docs/reliability.md, "Repairing damaged state"'
        )


def _sweep(store: Store, old: list[str], cutoff: int) -> tuple[int, int, int]:
    """Delete the nodes still older than ``cutoff`` (re-checked under the sweep lock), then
    pack what survives (which also leaves out the collected nodes' packed copies); returns
    (collected, bytes freed, nodes moved from loose files into the pack)."""
    collected, freed = 0, 0
    gone: dict[str, list[str]] = {}
    for start in range(0, len(old), BATCH):
        with store.sweeping():
            for node in old[start : start + BATCH]:
                try:
                    info = store.info(node)
                except CorruptNode:
                    continue
                if info is None or info.last_put >= cutoff:  # put again meanwhile
                    continue
                freed += store.delete(node)
                collected += 1
                gone.setdefault(info.type, []).append(node)
    packed = store.pack(everything=True)["packed"]
    if gone:
        with store.sweeping():
            for type_hash, nodes in gone.items():
                absent = {node for node in nodes if not store.has(node)}  # not stored again
                store.set_index(type_hash, [x for x in store.index(type_hash) if x not in absent])
    return collected, freed, packed


def _mark(
    store: Store,
    roots: Iterable[str],
    marked: set[str],
    broken: list[tuple[str, str]] | None = None,
) -> None:
    """Add to ``marked`` every stored node reachable from ``roots`` (refs, types, meta).

    A missing root is skipped (``roots.problems`` judged the heads and the registry; the
    other roots are index lines and uwf's schemas, which may be absent). A missing node that
    a reached node refers to is added to ``broken`` as ``(missing, referrer)``, when given."""
    queue: deque[tuple[str, str | None]] = deque((root, None) for root in roots)
    schema_of: dict[str, Any] = {}
    while queue:
        h, referrer = queue.popleft()
        if h in marked or not is_hash(h):
            continue
        node = _read(store, h)
        if node is None:
            if referrer is not None and broken is not None:
                broken.append((h, referrer))
            continue
        marked.add(h)
        if node.type == h:  # the self-typed meta-schema
            continue
        queue.append((node.type, h))
        if node.type not in schema_of:
            schema_node = _read(store, node.type)
            schema_of[node.type] = schema_node.payload if schema_node is not None else None
        queue.extend((ref, h) for ref in collect(schema_of[node.type], node.payload))


def _broken_chains(
    store: Store,
    broken: list[tuple[str, str]],
    active: dict[ThreadId, NodeHash],
    history: list[HistoryEntry],
) -> Damaged:
    """The refusal of a gc that found reachable nodes referring to missing ones: each gap
    (at most three) with the thread whose chain it breaks, when a thread's does."""
    gaps = sorted(set(broken))[:3]
    heads = [*active.items(), *((entry.thread, entry.head) for entry in history)]
    owners = _owners(store, {referrer for _, referrer in gaps}, heads)
    shown = []
    for missing, referrer in gaps:
        where = f"thread {owners[referrer]}: " if referrer in owners else ""
        shown.append(f"{where}node {missing} is missing (node {referrer} refers to it)")
    more = f" (and {len(set(broken)) - 3} more)" if len(set(broken)) > 3 else ""
    return Damaged(
        f"cas gc stopped, nothing was deleted: a chain is broken: {'; '.join(shown)}{more}; "
        "the nodes behind a gap would be collected and the chain could never be repaired: "
        "restore the missing nodes from a backup and run cas gc again (uwf cas verify lists "
        'them; docs/reliability.md, "Repairing damaged state")'
    )


def _owners(
    store: Store, wanted: set[str], heads: list[tuple[ThreadId, NodeHash]]
) -> dict[str, ThreadId]:
    """For each node of ``wanted``, the first thread whose chain (or what it refers to)
    holds it: one walk from every head at once (an error path only)."""
    found: dict[str, ThreadId] = {}
    seen: set[str] = set()
    queue = deque(heads)
    while queue and len(found) < len(wanted):
        thread, h = queue.popleft()
        if h in seen:
            continue
        seen.add(h)
        if h in wanted:
            found.setdefault(h, thread)
        node = _read(store, h)
        if node is None or node.type == h:
            continue
        schema = _read(store, node.type)
        refs = collect(schema.payload if schema is not None else None, node.payload)
        queue.extend((thread, ref) for ref in refs)
    return found


def _read(store: Store, h: str) -> Any:
    try:
        return store.stored(h)
    except CorruptNode as exc:
        raise UwfError(
            f"cas gc stopped, nothing was deleted: {exc} (it is reachable, so what it refers "
            "to is unknown; see uwf cas verify)"
        ) from None


def _registered_workflow(store: Store, h: str, type_hash: str, names: set[str]) -> bool:
    """True for a Workflow node whose name has a registry entry (a rollback target)."""
    if type_hash not in schemas.hashes().workflows:
        return False
    try:
        node = store.stored(h)
    except CorruptNode:
        return False
    return node is not None and isinstance(node.payload, dict) and node.payload.get("name") in names


def _first_put(store: Store, h: str) -> int:
    """When a head node was first written (0 when unreadable: then nothing is collected)."""
    try:
        node = store.stored(h)
    except CorruptNode:
        return 0
    return node.timestamp if node is not None else 0
