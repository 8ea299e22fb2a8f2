"""The engine's only mutable state: ``threads.yaml``, ``registry.yaml`` and ``history.jsonl``.

Every write happens under an exclusive ``flock`` (``<file>.lock``) as read-modify-write,
through a temp file, fsync and ``os.replace`` (append + fsync for the ``.jsonl``), so a reader
never sees a half-written file and two writers never lose each other's update.

The YAML files are written by uwf as one ``"key": "value"`` line per entry (keys and hashes
always quoted, so no YAML reader can turn a hash into a number). Reading takes a fast path
over exactly that shape and falls back to the safe YAML loader for hand-edited files.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from uwf.util import fsio, jsonfmt, yamlio
from uwf.util.base32 import is_hash
from uwf.util.errors import Conflict, InvalidInput
from uwf.util.ulid import is_thread_id

_LINE = re.compile(r'^("(?:[^"\\]|\\.)*"): ("(?:[^"\\]|\\.)*")$')
HISTORY_STATUSES = ("completed", "killed", "max_rounds")


def _parse_mapping(data: bytes, name: str) -> dict[str, str]:
    text = data.decode("utf-8", "replace")
    out: dict[str, str] = {}
    fast = True
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            fast = False
            break
        out[json.loads(m.group(1))] = json.loads(m.group(2))
    if fast:
        return out
    try:
        loaded = yamlio.load(data, source=name, max_bytes=64 << 20)
    except InvalidInput as exc:
        raise InvalidInput(f"{name} is damaged: {exc}") from None
    if not isinstance(loaded, dict):
        return {}
    return {str(k): v for k, v in loaded.items() if isinstance(v, str)}


def _render_mapping(mapping: dict[str, str], header: str) -> bytes:
    lines = [header] + [f"{jsonfmt.dumps(k)}: {jsonfmt.dumps(v)}" for k, v in mapping.items()]
    return ("\n".join(lines) + "\n").encode()


class MappingFile:
    """A YAML mapping of string to hash, with locked read-modify-write."""

    def __init__(self, path: Path, header: str, key_ok: Callable[[str], bool]) -> None:
        self.path = path
        self.header = header
        self.key_ok = key_ok

    def read(self) -> dict[str, str]:
        data = fsio.read_bytes(self.path)
        if data is None:
            return {}
        raw = _parse_mapping(data, self.path.name)
        return {k: v for k, v in raw.items() if self.key_ok(k) and is_hash(v)}

    def get(self, key: str) -> str | None:
        return self.read().get(key)

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict[str, str]]:
        """Yield the current mapping under the lock; write it back if it was changed."""
        with fsio.locked(self.path):
            mapping = self.read()
            before = dict(mapping)
            yield mapping
            if mapping != before:
                fsio.atomic_write(self.path, _render_mapping(mapping, self.header))


def _is_name(key: str) -> bool:
    return bool(key)


class State:
    """The mutable files of one storage root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._threads = MappingFile(
            root / "threads.yaml", "# uwf active threads: thread id -> head hash", is_thread_id
        )
        self.registry = MappingFile(
            root / "registry.yaml", "# uwf workflow registry: name -> workflow hash", _is_name
        )
        self.history_path = root / "history.jsonl"

    # -- threads ----------------------------------------------------------------------
    #
    # Archiving appends the history line, then rewrites threads.yaml, both under the
    # threads.yaml lock. A crash in between leaves the thread in both files. History lines are
    # only ever appended under that lock and a thread id never becomes active again once
    # archived, so only the LAST history line can be such a leftover: readers treat a thread
    # named there as archived, and the next writer removes it from threads.yaml (O(1) either
    # way: only the tail of history.jsonl is read).

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
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a torn line from a crash, or a cut-off first line
            if isinstance(entry, dict) and is_thread_id(entry.get("thread")):
                return str(entry["thread"])
        return None

    def active(self) -> dict[str, str]:
        """Active thread id -> head hash."""
        threads = self._threads.read()
        threads.pop(self._last_archived() or "", None)
        return threads

    def head(self, thread: str) -> str | None:
        """The head of an active thread, or None."""
        head = self._threads.read().get(thread)
        if head is not None and self._last_archived() == thread:
            return None
        return head

    @contextlib.contextmanager
    def edit_threads(self) -> Iterator[dict[str, str]]:
        """The active threads under the lock, with any leftover of a crashed archive removed.

        The removal is written back at once, before the caller can append a history line:
        otherwise an archive that failed after its append would make a new line the last
        one, and the leftover would read as active again (and could be archived twice).
        """
        with self._threads.edit() as threads:
            leftover = self._last_archived()
            if leftover is not None and leftover in threads:
                del threads[leftover]
                fsio.atomic_write(
                    self._threads.path, _render_mapping(threads, self._threads.header)
                )
            yield threads

    # -- history ----------------------------------------------------------------------
    def history(self) -> list[dict[str, Any]]:
        """Every well-formed history line, in file order (torn or foreign lines skipped)."""
        data = fsio.read_bytes(self.history_path)
        if not data:
            return []
        out = []
        for line in data.decode("utf-8", "replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(entry, dict)
                and is_thread_id(entry.get("thread"))
                and is_hash(entry.get("head"))
                and isinstance(entry.get("workflow"), str)
            ):
                entry.setdefault("status", "completed")
                out.append(entry)
        return out

    def history_entry(self, thread: str) -> dict[str, Any] | None:
        """The LAST history line of a thread, if it was archived."""
        found = None
        for entry in self.history():
            if entry["thread"] == thread:
                found = entry
        return found

    def append_history(
        self, thread: str, workflow: str, head: str, status: str, at_ms: int
    ) -> None:
        """Append one history line. The caller holds the threads.yaml lock."""
        if status not in HISTORY_STATUSES:
            raise ValueError(f"unknown history status: {status}")
        line = {
            "thread": thread,
            "workflow": workflow,
            "head": head,
            "completedAt": at_ms,
            "status": status,
        }
        fsio.append_line(self.history_path, jsonfmt.dumps(line))

    def archive(
        self, thread: str, workflow: str, status: str, at_ms: int, expected_head: str | None = None
    ) -> str:
        """Move an active thread to history.jsonl; return the head it had.

        The history line is written (and fsynced) before the threads.yaml entry goes, so a
        crash in between can leave a thread in both files but never in neither.
        """
        with self.edit_threads() as threads:
            head = threads.get(thread)
            if head is None:
                raise InvalidInput(f"thread not active: {thread}")
            if expected_head is not None and head != expected_head:
                raise Conflict(f"thread {thread} moved to {head} while archiving")
            self.append_history(thread, workflow, head, status, at_ms)
            del threads[thread]
        return head
