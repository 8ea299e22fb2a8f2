"""The PostgreSQL thread table: ``uwf_threads`` and ``uwf_history`` (the registry of workflow
names is ``registry``).

A head moves by ``UPDATE … WHERE head = <expected>`` in one statement that also checks the
new head is a stored node; archiving deletes the active row and inserts the history row in
one transaction, so a thread is never both active and archived, nor neither. Waiting marks,
the last failure and what a thread was created with (workflow, task, working directory) are
columns of its row.
"""

from __future__ import annotations

from typing import Any

from uwf.backend import tree
from uwf.backend.base import (
    ActiveThread,
    Ending,
    Failure,
    HistoryEntry,
    RetryPolicy,
    ThreadInfo,
    ThreadTable,
    Waiting,
)
from uwf.backend.postgres.db import Db, require, run
from uwf.backend.postgres.nodes import PgStore, collision
from uwf.backend.postgres.schema import COLLISION, NO_TYPE
from uwf.backend.tree import FanOutLimits
from uwf.util.base32 import NodeHash, describe, is_hash
from uwf.util.errors import Conflict, Damaged, NotFound
from uwf.util.jsonfmt import dumps
from uwf.util.storable import storable
from uwf.util.ulid import ThreadId, is_thread_id, now_ms

# the columns of a thread's last failure (docs/format.md, "The PostgreSQL backend")
_FAIL = (
    "fail_head, fail_error, fail_code, fail_at, fail_attempts, fail_since, fail_role, "
    "fail_agent, fail_host, fail_limit, fail_retry_at, fail_exhausted"
)
COLUMNS = (
    "thread, head, workflow, task, wait_role, wait_since, wait_head, wait_reason, cwd, parent,"
    f" wait_children, {_FAIL}, priority, descendants"
)
_NO_FAILURE = ", ".join(
    f"{col} = {'false' if col == 'fail_exhausted' else 'NULL'}" for col in _FAIL.split(", ")
)
# a thread ``--next`` and workers may pick at a time (%s): not waiting — or a parent whose
# children have all ended (its join is due) —, not failed, not backing off
_RUNNABLE = (
    "(wait_role IS NULL OR wait_head IS DISTINCT FROM head"
    "   OR (wait_children IS NOT NULL AND wait_reason = 'children'"
    "       AND NOT EXISTS (SELECT 1 FROM uwf_threads c WHERE c.parent = t.thread)))"
    " AND (fail_head IS DISTINCT FROM head"
    " OR NOT fail_exhausted AND (fail_retry_at IS NULL OR fail_retry_at <= %s))"
)
_HISTORY = "thread, workflow, head, completed_at, status, task, cwd, parent"


def _failure(head: str, row: tuple[Any, ...]) -> Failure | None:
    fail_head, error, code, at, attempts, since, role, agent, host = row[:9]
    if fail_head != head or error is None or code is None or at is None or attempts is None:
        return None
    limit, retry_at, exhausted = row[9:12]
    return Failure(
        NodeHash(head),
        error,
        int(code),
        int(at),
        int(attempts),
        int(since) if since is not None else None,
        role,
        agent,
        host,
        int(limit) if limit is not None else None,
        int(retry_at) if retry_at is not None else None,
        bool(exhausted),
    )


REPAIR = 'see docs/reliability.md, "Repairing damaged state"'


def hash_of(value: Any, table: str, what: str) -> NodeHash:
    """A hash read from ``table``; one that is not a hash (a hand edit) is damage."""
    if not is_hash(value):
        raise Damaged(
            f"table {table} is damaged: {what} is not a hash: {describe(str(value), 60)}; {REPAIR}"
        )
    return NodeHash(value)


def record_of(row: tuple[Any, ...]) -> ActiveThread:
    thread, head, workflow, task, role, since, wait_head, reason, cwd, parent, children = row[:11]
    head = hash_of(head, "uwf_threads", f"the head of thread {thread}")
    waiting = None
    if role is not None and wait_head == head and since is not None:
        waiting = _waiting(role, int(since), head, reason, children)
    parent_id = ThreadId(parent) if is_thread_id(parent) else None
    info = ThreadInfo(workflow, task, cwd, parent_id, int(row[23]), int(row[24]))
    return ActiveThread(ThreadId(thread), NodeHash(head), info, waiting, _failure(head, row[11:23]))


def _waiting(
    role: str, since: int, head: NodeHash, reason: str | None, children: str | None
) -> Waiting | None:
    """A waiting mark; one whose children are not thread ids (a hand edit) is none, as in
    threads.yaml."""
    if not children:
        return Waiting(role, since, head, reason)
    ids = children.split(",")
    if not all(is_thread_id(c) for c in ids):
        return None
    return Waiting(role, since, head, reason, tuple(ThreadId(c) for c in ids))


def _entry(row: tuple[Any, ...]) -> HistoryEntry:
    thread, workflow, head, at, status, task, cwd, parent = row
    head = hash_of(head, "uwf_history", f"the head of thread {thread}")
    return HistoryEntry(
        ThreadId(thread),
        NodeHash(workflow),
        NodeHash(head),
        int(at),
        status,
        task,
        cwd,
        ThreadId(parent) if is_thread_id(parent) else None,
    )


class _Refused(Exception):
    """``uwf_land`` refused a held node (``code``: COLLISION or NO_TYPE; ``what``: the hash)."""

    def __init__(self, code: str, what: str) -> None:
        super().__init__(what)
        self.code, self.what = code, what


class _Moved(Exception):
    """The thread's head moved before its fan-out was recorded: roll it back."""


class PgThreads(ThreadTable):
    def __init__(self, db: Db, nodes: PgStore | None = None) -> None:
        self.db = db
        self.nodes = nodes  # whose held puts a step's move writes (``PgStore.staging``)

    def head(self, thread: ThreadId) -> NodeHash | None:
        row = self.db.one("SELECT head FROM uwf_threads WHERE thread = %s", (thread,))
        return NodeHash(row[0]) if row is not None else None

    def get(self, thread: ThreadId) -> ActiveThread | None:
        row = self.db.one(f"SELECT {COLUMNS} FROM uwf_threads WHERE thread = %s", (thread,))
        return record_of(row) if row is not None else None

    def active(self) -> list[ActiveThread]:
        return [record_of(r) for r in self.db.all(f"SELECT {COLUMNS} FROM uwf_threads")]

    def runnable(self, now: int, also: str = "TRUE") -> list[ActiveThread]:
        """Threads runnable at ``now`` — parents waiting for children of which none is
        active among them (their join) —, oldest first; ``also``: a further SQL condition
        (constant)."""
        rows = self.db.all(
            f"SELECT {COLUMNS} FROM uwf_threads t WHERE {_RUNNABLE} AND {also} ORDER BY thread",
            (now,),
        )
        return [record_of(r) for r in rows]

    def create(self, thread: ThreadId, head: NodeHash, info: ThreadInfo) -> None:
        if not self._insert(thread, head, info):
            raise Conflict(f"thread {thread} already exists")

    def _insert(self, thread: ThreadId, head: NodeHash, info: ThreadInfo) -> bool:
        row = self.db.one(
            "INSERT INTO uwf_threads (thread, head, workflow, task, cwd, parent, moved, priority,"
            " descendants) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (thread) DO NOTHING RETURNING 1",
            (
                thread,
                head,
                info.workflow,
                storable(info.task),
                info.cwd,
                info.parent,
                now_ms(),
                info.priority,
                info.descendants,
            ),
        )
        return row is not None

    def _fan_out(
        self,
        thread: ThreadId,
        waiting: Waiting,
        children: list[ActiveThread],
        limits: FanOutLimits,
    ) -> tuple[bool, NodeHash | None]:
        ids = ",".join(child.thread for child in children)
        if self.head(thread) != waiting.head:
            return False, self.head(thread)
        try:
            with self.db.transaction():
                if children:  # the root's row first: every fan-out of a tree locks it first
                    self._count(thread, len(children), limits)
                row = self.db.one(
                    "UPDATE uwf_threads SET wait_role = %s, wait_since = %s, wait_head = %s,"
                    " wait_reason = %s, wait_children = %s WHERE thread = %s AND head = %s"
                    " RETURNING 1",
                    (
                        waiting.role,
                        waiting.since,
                        waiting.head,
                        storable(waiting.reason),
                        ids,
                        thread,
                        waiting.head,
                    ),
                )
                if row is None:
                    raise _Moved
                for child in children:
                    if not self._insert(child.thread, child.head, child.info):
                        raise Conflict(f"thread {child.thread} already exists")  # rolls back
        except _Moved:
            return False, self.head(thread)
        return True, waiting.head

    def _count(self, thread: ThreadId, count: int, limits: FanOutLimits) -> None:
        """Add ``count`` to the threads ``thread``'s tree has started, in one statement that
        checks the limit (concurrent fan-outs of the tree wait for the root's row); raise the
        refusal when its tree may not start them."""
        place = tree.locate(thread, self.get)
        refused = tree.refusal(thread, place, count, limits)
        if refused is None:
            row = self.db.one(
                "UPDATE uwf_threads SET descendants = descendants + %s WHERE thread = %s"
                " AND descendants + %s <= %s RETURNING descendants",
                (count, place.root, count, limits.threads),
            )
            if row is not None:
                return
            found = self.get(place.root)  # another fan-out of the tree came first
            started = found.info.descendants if found is not None else 0
            ended = None if found is not None else place.root
            place = place._replace(started=started, ended=ended)
            refused = tree.refusal(thread, place, count, limits)
        raise refused or Conflict(f"thread {place.root} changed while its tree grew")

    def keyed(self, scope: str, key: str) -> ThreadId | None:
        row = self.db.one(
            "SELECT thread FROM uwf_start_keys WHERE scope = %s AND key = %s", (scope, key)
        )
        return ThreadId(row[0]) if row is not None else None

    def create_keyed(
        self, scope: str, key: str, thread: ThreadId, head: NodeHash, info: ThreadInfo
    ) -> tuple[ThreadId, bool]:
        # One transaction: the key and the thread row commit together. A second insert of
        # the key waits for the first transaction, then finds the row (DO NOTHING).
        with self.db.transaction():
            row = self.db.one(
                "INSERT INTO uwf_start_keys (scope, key, thread, created)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (scope, key) DO NOTHING RETURNING thread",
                (scope, key, thread, now_ms()),
            )
            if row is not None:
                self.create(thread, head, info)
                return thread, True
        found = self.keyed(scope, key)
        if found is None:  # uwf never deletes a key row; someone did meanwhile: claim it anew
            return self.create_keyed(scope, key, thread, head, info)
        return found, False

    def _move(
        self, thread: ThreadId, expected: NodeHash, new: NodeHash
    ) -> tuple[bool, NodeHash | None]:
        done, head, _ = self._land(thread, expected, new, None)
        return done, head

    def _land(
        self, thread: ThreadId, expected: NodeHash, new: NodeHash, end: Ending | None
    ) -> tuple[bool, NodeHash | None, bool]:
        """The step's commit, one statement (``uwf_land``): the puts its nodes held
        (``PgStore.staging``), the head's compare-and-swap and, with ``end``, the archive, in
        one transaction; nothing is written when the swap is refused. A stored node whose
        row differs from a held one only in its JSON text (the same node: ``PgStore.same``)
        is passed on a second try; any other difference is a collision."""
        held = self.nodes.take_stage() if self.nodes is not None else []
        same: list[str] = []
        while True:
            try:
                row = self._land_once(thread, expected, new, end, held, same)
                break
            except _Refused as refused:
                if refused.code == NO_TYPE:
                    raise NotFound(
                        f"unknown type: {refused.what} (no schema node with that hash)"
                    ) from None
                stored = self.db.one(
                    "SELECT type, payload FROM uwf_nodes WHERE hash = %s", (refused.what,)
                )
                node = dict(held).get(refused.what)
                if (
                    stored is None
                    or node is None
                    or refused.what in same
                    or not self.nodes
                    or not self.nodes.same(refused.what, node, stored[0], stored[1])
                ):
                    raise collision(refused.what) from None
                same.append(refused.what)
        status, found = row
        if status == "refused":
            return False, NodeHash(found) if found is not None else None, False
        if self.nodes is not None:
            self.nodes.landed(held)
        return True, expected, status == "archived"

    def _land_once(
        self,
        thread: ThreadId,
        expected: NodeHash,
        new: NodeHash,
        end: Ending | None,
        held: list[tuple[str, Any]],
        same: list[str],
    ) -> tuple[str, str | None]:
        driver = require()
        params = (
            thread,
            expected,
            new,
            now_ms() if end is None else end.at_ms,
            [h for h, _ in held],
            [n.type for _, n in held],
            [dumps(n.payload) for _, n in held],
            [n.timestamp for _, n in held],
            same,
            end.workflow if end is not None else None,
            end.status if end is not None else None,
        )
        with self.db.errors():
            try:
                row = run(
                    self.db.conn(),
                    "SELECT status, found FROM uwf_land(%s, %s, %s, %s, %s::text[], %s::text[],"
                    " %s::text[], %s::bigint[], %s::text[], %s, %s)",
                    params,
                ).fetchone()
            except driver.Error as exc:
                code = getattr(exc, "pgcode", None)
                if code in (COLLISION, NO_TYPE):
                    diag = getattr(exc, "diag", None)
                    raise _Refused(code, str(getattr(diag, "message_primary", "") or "")) from None
                raise
        assert row is not None
        return str(row[0]), row[1]

    def _wait(self, thread: ThreadId, waiting: Waiting) -> tuple[bool, NodeHash | None]:
        row = self.db.one(
            "UPDATE uwf_threads SET wait_role = %s, wait_since = %s, wait_head = %s,"
            " wait_reason = %s, wait_children = %s WHERE thread = %s AND head = %s RETURNING 1",
            (
                waiting.role,
                waiting.since,
                waiting.head,
                storable(waiting.reason),
                None if waiting.children is None else ",".join(waiting.children),
                thread,
                waiting.head,
            ),
        )
        return (True, waiting.head) if row is not None else (False, self.head(thread))

    def _fail(
        self, thread: ThreadId, failure: Failure, policy: RetryPolicy
    ) -> tuple[Failure | None, NodeHash | None]:
        # the row locked (FOR UPDATE) from read to write: concurrent attempts are all counted
        with self.db.transaction():
            row = self.db.one(
                f"SELECT {COLUMNS} FROM uwf_threads WHERE thread = %s FOR UPDATE", (thread,)
            )
            if row is None or row[1] != failure.head:
                return None, NodeHash(row[1]) if row is not None else None
            stored = failure._replace(error=storable(failure.error))
            stored = stored.after(record_of(row).failure, policy)
            self.db.execute(
                "UPDATE uwf_threads SET fail_head = %s, fail_error = %s, fail_code = %s,"
                " fail_at = %s, fail_attempts = %s, fail_since = %s, fail_role = %s,"
                " fail_agent = %s, fail_host = %s, fail_limit = %s, fail_retry_at = %s,"
                " fail_exhausted = %s WHERE thread = %s",
                (*stored, thread),
            )
        return stored, failure.head

    def _prioritize(self, thread: ThreadId, priority: int) -> int | None:
        row = self.db.one(
            "UPDATE uwf_threads t SET priority = %s FROM uwf_threads old"
            " WHERE t.thread = %s AND old.thread = t.thread RETURNING old.priority",
            (priority, thread),
        )
        return int(row[0]) if row is not None else None

    def _retry(self, thread: ThreadId) -> tuple[Failure | None, NodeHash | None]:
        with self.db.transaction():
            row = self.db.one(
                f"SELECT {COLUMNS} FROM uwf_threads WHERE thread = %s FOR UPDATE", (thread,)
            )
            if row is None:
                return None, None
            self.db.execute(f"UPDATE uwf_threads SET {_NO_FAILURE} WHERE thread = %s", (thread,))
        return record_of(row).failure, NodeHash(row[1])

    def _archive(
        self,
        thread: ThreadId,
        expected: NodeHash | None,
        workflow: NodeHash,
        status: str,
        at_ms: int,
    ) -> tuple[bool, NodeHash | None]:
        with self.db.transaction():
            row = self.db.one(
                "DELETE FROM uwf_threads WHERE thread = %s AND (%s::text IS NULL OR head = %s)"
                " RETURNING head, task, cwd, parent",
                (thread, expected, expected),
            )
            if row is None:
                return False, self.head(thread)
            self.db.execute(
                f"INSERT INTO uwf_history ({_HISTORY}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (thread, workflow, row[0], at_ms, status, row[1], row[2], row[3]),
            )
        return True, NodeHash(row[0])

    def history(self) -> list[HistoryEntry]:
        rows = self.db.all(f"SELECT {_HISTORY} FROM uwf_history ORDER BY seq")
        return [_entry(r) for r in rows]

    def history_entry(self, thread: ThreadId) -> HistoryEntry | None:
        row = self.db.one(
            f"SELECT {_HISTORY} FROM uwf_history WHERE thread = %s ORDER BY seq DESC LIMIT 1",
            (thread,),
        )
        return _entry(row) if row is not None else None
