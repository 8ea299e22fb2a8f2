"""``uwf store copy FROM TO``: every node, head, archived thread and registry entry of one
store into another (a directory or a PostgreSQL URL each; docs/scale-out.md, "Moving a store").

Idempotent: what TO already holds is not copied again, so a second run copies nothing and a
run cut short by a crash is finished by running it again. Nodes keep their timestamps; each
type index keeps FROM's order. Afterwards everything is checked in TO (``verified``). Copy
into a store that nothing else writes to meanwhile: a thread that differs in TO (another
head, archived on one side only with other heads) is reported, never overwritten; so is a
registry entry that names another version in TO, unless ``--overwrite`` asks to set it to
FROM's. A thread's last failure (docs/format.md, "Thread state") is not copied: the next
attempt in TO records its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from uwf.backend.base import ActiveThread, Backend, HistoryEntry, ThreadInfo
from uwf.cas.schema import meta_hash
from uwf.cas.store import Store
from uwf.util.errors import UwfError
from uwf.util.ulid import ThreadId

if TYPE_CHECKING:
    from uwf.util.outputs import CopyCounts, StoreCopied

BATCH = 500


def _copy_nodes(src: Store, dst: Store, progress: Callable[[str], None]) -> CopyCounts:
    hashes = list(src.iter_hashes())
    copied = 0
    for start in range(0, len(hashes), BATCH):
        batch = hashes[start : start + BATCH]
        wanted = sorted(dst.missing(batch))
        found = src.get_many(wanted)  # a node collected by a gc of FROM meanwhile is skipped
        copied += dst.import_nodes([(h, found[h]) for h in wanted if h in found])
        progress(f"nodes: {min(start + BATCH, len(hashes))}/{len(hashes)}")
    _copy_index(src, dst)
    return {"copied": copied, "present": len(hashes) - copied}


def _copy_index(src: Store, dst: Store) -> None:
    """Each type's index in FROM's order, then what only TO had (a re-run changes nothing)."""
    meta = meta_hash()
    for type_hash in dict.fromkeys([meta, *src.index(meta)]):
        ours = src.index(type_hash)
        absent = dst.missing(ours) if ours else set()
        theirs = dst.index(type_hash)
        known = set(ours)
        merged = [h for h in ours if h not in absent] + [h for h in theirs if h not in known]
        if merged != theirs:
            dst.set_index(type_hash, merged)


def _latest(entries: list[HistoryEntry]) -> dict[ThreadId, HistoryEntry]:
    out: dict[ThreadId, HistoryEntry] = {}
    for entry in entries:
        out[entry.thread] = entry
    return out


def _copy_history(src: Backend, dst: Backend, differ: list[str]) -> CopyCounts:
    copied = present = 0
    theirs = _latest(dst.threads.history())
    for thread, entry in _latest(src.threads.history()).items():
        if thread in theirs:
            present += 1
            if theirs[thread].head != entry.head:
                differ.append(f"{thread} is archived in TO at another head")
            continue
        active = dst.threads.get(thread)
        if active is None:  # never copied; or copied as active, then archived in FROM
            info = ThreadInfo(entry.workflow, entry.task, entry.cwd, entry.parent)
            dst.threads.create(thread, entry.head, info)
        elif active.head != entry.head:
            differ.append(f"{thread} is active in TO at another head")
            continue
        dst.threads.archive(
            thread, entry.workflow, entry.status, entry.completed_at, expected=entry.head
        )
        copied += 1
    return {"copied": copied, "present": present}


def _copy_active(src: Backend, dst: Backend, differ: list[str]) -> CopyCounts:
    copied = present = 0
    for record in src.threads.active():
        theirs = dst.threads.get(record.thread)
        if theirs is None:
            if dst.threads.history_entry(record.thread) is not None:
                differ.append(f"{record.thread} is archived in TO but active in FROM")
                continue
            dst.threads.create(record.thread, record.head, record.info)
            copied += 1
        elif theirs.head != record.head:
            differ.append(f"{record.thread} is active in TO at another head")
            continue
        else:
            present += 1
        if record.waiting is not None and (theirs is None or theirs.waiting != record.waiting):
            dst.threads.wait(record.thread, record.waiting)
    return {"copied": copied, "present": present}


def _copy_registry(src: Backend, dst: Backend, differ: list[str], overwrite: bool) -> CopyCounts:
    """Registry entries TO lacks are copied; one that names another version in TO is a
    conflict, left as it is unless ``overwrite`` (then TO's entry is set to FROM's)."""
    copied = present = 0
    theirs = dst.registry.read()
    for name, h in src.registry.read().items():
        there = theirs.get(name)
        if there == h:
            present += 1
            continue
        if there is not None and not overwrite:
            differ.append(f"registry entry {name} is {there} in TO, {h} in FROM")
            continue
        dst.registry.set(name, h)
        copied += 1
    return {"copied": copied, "present": present}


def verify_copy(src: Backend, dst: Backend) -> list[str]:
    """What of FROM is not in TO as it is in FROM (empty: the copy is complete)."""
    problems: list[str] = []
    hashes = list(src.nodes.iter_hashes())
    for start in range(0, len(hashes), BATCH):
        for h in sorted(dst.nodes.missing(hashes[start : start + BATCH])):
            if src.nodes.has(h):
                problems.append(f"node {h} is missing in TO")
    theirs: dict[ThreadId, ActiveThread] = {r.thread: r for r in dst.threads.active()}
    for record in src.threads.active():
        other = theirs.get(record.thread)
        if other is None or other.head != record.head or other.waiting != record.waiting:
            problems.append(f"thread {record.thread} differs in TO")
    archived = _latest(dst.threads.history())
    for thread, entry in _latest(src.threads.history()).items():
        if archived.get(thread) != entry:
            problems.append(f"archived thread {thread} differs in TO")
    registry = dst.registry.read()
    for name, h in src.registry.read().items():
        if registry.get(name) != h:
            problems.append(f"registry entry {name} differs in TO")
    return problems


def copy_store(
    src: Backend,
    dst: Backend,
    progress: Callable[[str], None] = lambda _: None,
    *,
    overwrite: bool = False,
) -> StoreCopied:
    """Copy FROM into TO, then verify; the counts, or UwfError naming what differs (a
    registry entry that differs is set to FROM's with ``overwrite``; a thread never is)."""
    if src.name == dst.name:
        raise UwfError(f"store copy: FROM and TO are the same store: {src.name}")
    dst.init()
    differ: list[str] = []
    out: StoreCopied = {
        "from": src.name,
        "to": dst.name,
        "nodes": _copy_nodes(src.nodes, dst.nodes, progress),
        "registry": _copy_registry(src, dst, differ, overwrite),
        "history": _copy_history(src, dst, differ),
        "threads": _copy_active(src, dst, differ),
        "verified": False,
    }
    if differ:
        shown = "; ".join(differ[:5]) + (
            f" (and {len(differ) - 5} more)" if len(differ) > 5 else ""
        )
        raise UwfError(f"store copy: TO differs from FROM, left as it is: {shown}")
    problems = verify_copy(src, dst)
    if problems:
        shown = "; ".join(problems[:5])
        raise UwfError(f"store copy: verification failed ({len(problems)} problems): {shown}")
    out["verified"] = True
    return out
