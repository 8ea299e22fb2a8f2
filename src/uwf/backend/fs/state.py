"""The filesystem backend's mutable state: ``threads.yaml``, ``registry.yaml``, ``history.jsonl``.

Every write happens under an exclusive ``flock`` (``<file>.lock``) as read-modify-write,
through a temp file, fsync and ``os.replace`` (append + fsync for the ``.jsonl``), so a reader
never sees a half-written file and two writers never lose each other's update.

uwf writes the YAML files as one line per entry with every string quoted
(docs/format.md, "The filesystem backend"): ``"<name>": "<hash>"`` in the registry, and in
``threads.yaml`` either ``"<thread>": "<head>"`` or ``"<thread>": {"head": …, "workflow": …,
"task": …, "cwd": …, "priority": …, "descendants": …, "waiting": {…}, "failure": {…}}`` (a
JSON object, which is also YAML). Reading takes a fast path over exactly that shape and falls
back to the safe YAML loader for hand-edited files (``mapping``: the files read and written
whole; this module: what their entries and the history's lines mean).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

from uwf.backend.base import (
    ActiveThread,
    Failure,
    HistoryEntry,
    Registry,
    ThreadInfo,
    Waiting,
)
from uwf.backend.fs.damage import HISTORY_LIMIT, damaged, read_state
from uwf.backend.fs.mapping import KEYS_HEADER, REGISTRY_HEADER, THREADS_HEADER, MappingFile
from uwf.backend.records import RecordThreads
from uwf.cas.store import Store
from uwf.util import fsio, jsonfmt
from uwf.util.base32 import NodeHash, describe, is_hash
from uwf.util.errors import Conflict
from uwf.util.storable import storable
from uwf.util.ulid import ThreadId, is_thread_id

# compiled on first use (test_startup.py)
_THREAD_FIELD = rb'^\{"thread":\s*"([0-9A-HJKMNP-TV-Z]{1,26})(?:"|$)'


def _decode_hash(_key: str, raw: Any) -> NodeHash | None:
    return raw if is_hash(raw) else None


def _decode_thread_id(_key: str, raw: Any) -> ThreadId | None:
    return ThreadId(raw) if is_thread_id(raw) else None


def _decode_waiting(raw: Any, head: NodeHash) -> Waiting | None:
    """A waiting mark, only when it is for the current head (any head move ends a wait)."""
    if not isinstance(raw, dict) or raw.get("head") != head:
        return None
    role, since, reason = raw.get("role"), raw.get("since"), raw.get("reason")
    if not isinstance(role, str) or not isinstance(since, int) or isinstance(since, bool):
        return None
    children = raw.get("children")
    if children is not None:
        if not isinstance(children, list) or not all(is_thread_id(c) for c in children):
            return None
        children = tuple(ThreadId(c) for c in children)
    reason = storable(reason) if isinstance(reason, str) else None
    return Waiting(role, since, head, reason, children)


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _decode_failure(raw: Any, head: NodeHash) -> Failure | None:
    """A failure mark, only when it is for the current head (a landed step ends it)."""
    if not isinstance(raw, dict) or raw.get("head") != head:
        return None
    error, code, at = raw.get("error"), raw.get("code"), raw.get("at")
    attempts = raw.get("attempts")
    if not isinstance(error, str) or not (_int(code) and _int(at) and _int(attempts)):
        return None
    since, limit, retry_at = raw.get("since"), raw.get("limit"), raw.get("retryAt")
    return Failure(
        head,
        error,
        code,
        at,
        attempts,
        since if _int(since) else None,
        _text(raw.get("role")),
        _text(raw.get("agent")),
        _text(raw.get("host")),
        limit if _int(limit) else None,
        retry_at if _int(retry_at) else None,
        raw.get("exhausted") is True,
    )


def _decode_thread(key: str, raw: Any) -> ActiveThread | None:
    """A threads.yaml value: a head hash, or ``{head, workflow?, task?, cwd?, parent?,
    priority?, descendants?, waiting?, failure?}``.

    Run once per active thread by every listing (10,000 threads: 10,000 calls), so it
    checks each field once and builds the records positionally."""
    if not isinstance(raw, dict):
        return ActiveThread(ThreadId(key), raw) if is_hash(raw) else None
    head: Any = raw.get("head")
    if not is_hash(head):
        return None
    workflow: Any = raw.get("workflow")
    task, waiting = raw.get("task"), raw.get("waiting")
    cwd, parent = raw.get("cwd"), raw.get("parent")
    priority, descendants = raw.get("priority"), raw.get("descendants")
    info = ThreadInfo(
        workflow if is_hash(workflow) else None,
        storable(task) if isinstance(task, str) else None,
        cwd if isinstance(cwd, str) else None,
        ThreadId(parent) if parent is not None and is_thread_id(parent) else None,
        priority if _int(priority) else 0,
        descendants if _int(descendants) and descendants > 0 else 0,
    )
    if waiting is not None:
        waiting = _decode_waiting(waiting, head)
    failure = raw.get("failure")
    if failure is not None:
        failure = _decode_failure(failure, head)
    return ActiveThread(ThreadId(key), head, info, waiting, failure)


def encode_thread(record: ActiveThread) -> Any:
    """The threads.yaml value of a record: the bare head when there is nothing else."""
    extra: dict[str, Any] = dict(record.info.as_json())
    if isinstance(extra.get("task"), str):
        extra["task"] = storable(extra["task"])
    if record.waiting is not None:
        extra["waiting"] = record.waiting.as_json()
        if isinstance(extra["waiting"].get("reason"), str):
            extra["waiting"]["reason"] = storable(extra["waiting"]["reason"])
    if record.failure is not None:
        extra["failure"] = record.failure.as_json()
        extra["failure"]["error"] = storable(extra["failure"]["error"])
    return {"head": record.head, **extra} if extra else record.head


def _names_one_of(fragment: bytes, threads: set[str]) -> bool:
    """Whether a history line cut short names (as far as it goes) one of ``threads``."""
    found = re.search(_THREAD_FIELD, fragment)
    if found is None:
        return False
    prefix = found.group(1).decode()
    return any(thread.startswith(prefix) for thread in threads)


def _decode_history(line: bytes | str) -> HistoryEntry | None:
    try:
        entry = jsonfmt.loads(line if isinstance(line, str) else line.decode("utf-8"))
    except ValueError:
        return None  # a torn line from a crash, or a cut-off first line
    if (
        not isinstance(entry, dict)
        or not is_thread_id(entry.get("thread"))
        or not is_hash(entry.get("head"))
        or not isinstance(entry.get("workflow"), str)
    ):
        return None
    completed, task = entry.get("completedAt"), entry.get("task")
    cwd, parent = entry.get("cwd"), entry.get("parent")
    return HistoryEntry(
        thread=ThreadId(entry["thread"]),
        workflow=NodeHash(entry["workflow"]),
        head=NodeHash(entry["head"]),
        completed_at=completed if isinstance(completed, int) else 0,
        status=str(entry.get("status", "completed")),
        task=storable(task) if isinstance(task, str) else None,
        cwd=cwd if isinstance(cwd, str) else None,
        parent=ThreadId(str(parent)) if is_thread_id(parent) else None,
    )


class FsThreads(RecordThreads):
    """``threads.yaml`` (active heads) and ``history.jsonl`` (the archive).

    Archiving appends the history line, then rewrites threads.yaml, both under the
    threads.yaml lock. A crash in between leaves the thread in both files. History lines are
    only ever appended under that lock and a thread id never becomes active again once
    archived, so only the LAST history line can be such a leftover: readers treat a thread
    named there as archived, and the next writer removes it from threads.yaml (O(1) either
    way: only the tail of history.jsonl is read).
    """

    def __init__(self, root: Path, nodes: Store) -> None:
        super().__init__(nodes)
        self.file = MappingFile(
            root / "threads.yaml",
            THREADS_HEADER,
            is_thread_id,
            _decode_thread,
            ("thread id", "head"),
        )
        self.history_path = root / "history.jsonl"
        self.keys_file = MappingFile(
            root / "start-keys.yaml",
            KEYS_HEADER,
            bool,
            _decode_thread_id,
            ("start key", "thread id"),
        )

    # -- reading ----------------------------------------------------------------------
    def _last_archived(self) -> str | None:
        """The thread of the last history line (read from the file's tail only)."""
        try:
            with open(self.history_path, "rb") as fh:
                size = fh.seek(0, 2)
                fh.seek(max(0, size - 4096))
                tail = fh.read()
        except FileNotFoundError:
            return None
        for line in reversed(tail.splitlines()):
            entry = _decode_history(line)
            if entry is not None:
                return entry.thread
        return None

    def _read(self) -> dict[str, ActiveThread]:
        records: dict[str, ActiveThread] = self.file.read()
        records.pop(self._last_archived() or "", None)
        return records

    def head(self, thread: ThreadId) -> NodeHash | None:
        record = self.get(thread)
        return record.head if record is not None else None

    def get(self, thread: ThreadId) -> ActiveThread | None:
        record: ActiveThread | None = self.file.read().get(thread)
        if record is None or self._last_archived() == thread:
            return None
        return record

    def active(self) -> list[ActiveThread]:
        return list(self._read().values())

    def history(self) -> list[HistoryEntry]:
        """Every archived thread, in order. A line that is not a whole entry is damage (an
        error naming the file), unless it is the fragment of an archive that failed (a
        crash or a full disk mid-append) of a thread that is still active or was archived
        again since: a thread lost from the history would read as never archived, and
        ``cas gc`` would collect it."""
        data = read_state(self.history_path, HISTORY_LIMIT)
        if not data:
            return []
        entries, torn = [], []
        for number, line in enumerate(data.splitlines(), 1):
            entry = _decode_history(line)
            if entry is not None:
                entries.append(entry)
            elif line.strip():
                torn.append((number, line))
        if torn:
            known = {e.thread for e in entries} | set(self.file.read())
            for number, line in torn:
                if not _names_one_of(line, known):
                    shown = describe(line[:60].decode("utf-8", "replace"), 60)
                    raise damaged(self.history_path, f"line {number} is not a whole entry: {shown}")
        return entries

    def history_entry(self, thread: ThreadId) -> HistoryEntry | None:
        found = None
        for entry in self.history():
            if entry.thread == thread:
                found = entry
        return found

    # -- writing ----------------------------------------------------------------------
    @contextlib.contextmanager
    def _edit(self) -> Iterator[dict[str, ActiveThread]]:
        """The active threads under the lock, written back if changed.

        A leftover of a crashed archive is removed and written back at once, before the
        caller can append a history line: otherwise an archive that failed after its append
        would make a new line the last one, and the leftover would read as active again.
        """
        with self.file.locked():
            records: dict[str, ActiveThread] = self.file.read()
            leftover = self._last_archived()
            if leftover is not None and leftover in records:
                del records[leftover]
                self.file.write(records, encode_thread)
            before = dict(records)
            yield records
            if records != before:
                self.file.write(records, encode_thread)

    def create(self, thread: ThreadId, head: NodeHash, info: ThreadInfo) -> None:
        self.create_many([ActiveThread(thread, head, info)])

    def create_many(self, threads: list[ActiveThread]) -> None:
        """Record many new active threads in one write (benchmarks, imports)."""
        with self._edit() as records:
            for record in threads:
                if record.thread in records:
                    raise Conflict(f"thread {record.thread} already exists")
                records[record.thread] = record

    def _append(self, entry: HistoryEntry) -> None:
        fsio.append_line(self.history_path, jsonfmt.dumps(entry.as_json()))

    @contextlib.contextmanager
    def _keys(self) -> Iterator[dict[str, ThreadId]]:
        with self.keys_file.locked():
            yield self.keys_file.read()

    def _save_keys(self, keys: dict[str, ThreadId]) -> None:
        self.keys_file.write(keys, str)


class FsRegistry(Registry):
    """``registry.yaml``: one ``"<name>": "<hash>"`` line per workflow."""

    def __init__(self, root: Path) -> None:
        self.file = MappingFile(
            root / "registry.yaml", REGISTRY_HEADER, bool, _decode_hash, ("name", "hash")
        )

    def read(self) -> dict[str, NodeHash]:
        return self.file.read()

    def set(self, name: str, h: NodeHash) -> NodeHash | None:
        with self.file.locked():
            mapping = self.file.read()
            previous = mapping.get(name)
            if previous != h:
                mapping[name] = h
                self.file.write(mapping, str)
        return previous
