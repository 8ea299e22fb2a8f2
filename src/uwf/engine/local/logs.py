"""Reading and pruning the process debug log ``<root>/logs/YYYY-MM-DD.jsonl``
(docs/format.md, "The debug log").

These functions never touch the CAS. A log line that does not parse as a JSON object (a
line cut short by a crash, a hand edit) is skipped on its own; the rest of its file is still
shown. (v0.5.0 dropped the whole file; losing a day of logs to one torn line helps
nobody.)
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

from uwf.util.errors import InvalidInput, UwfError, oneline

if TYPE_CHECKING:
    from uwf.util.outputs import LogEntry, LogFile, LogsCleaned

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
SUFFIX = ".jsonl"


def logs_dir(root: Path) -> Path:
    return root / "logs"


def check_date(text: str) -> str:
    """``YYYY-MM-DD`` naming a real calendar day, else ``invalid date: …``."""
    if _DATE.match(text):
        try:
            _dt.date.fromisoformat(text)
            return text
        except ValueError:
            pass
    raise InvalidInput(f"invalid date: {oneline(text)} (expected YYYY-MM-DD)")


def _files(root: Path) -> list[Path]:
    directory = logs_dir(root)
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UwfError(f"cannot read {directory}: {exc.strerror or exc}") from None
    return [p for p in entries if p.name.endswith(SUFFIX) and p.is_file()]


def list_logs(root: Path) -> list[LogFile]:
    """``[{"name","size","date"}]`` for every log file, newest date first."""
    out: list[LogFile] = []
    for path in _files(root):
        try:
            size = path.stat().st_size
        except FileNotFoundError:  # cleaned meanwhile
            continue
        out.append({"name": path.name, "size": size, "date": path.name[: -len(SUFFIX)]})
    out.sort(key=lambda e: (e["date"], e["name"]), reverse=True)
    return out


class LogReader:
    """Reads log entries from where it stopped: files only grow, and a new day adds a file.

    Each ``read`` returns the complete lines written since the last one (a line still being
    written waits for its newline), files in name order. ``date`` limits it to that day's file.
    """

    def __init__(self, root: Path, date: str | None = None) -> None:
        self.root = root
        self.date = check_date(date) if date is not None else None
        self.offsets: dict[Path, int] = {}

    def _paths(self) -> list[Path]:
        if self.date is not None:
            return [logs_dir(self.root) / f"{self.date}{SUFFIX}"]
        return sorted(_files(self.root))

    def read(self) -> list[LogEntry]:
        entries: list[LogEntry] = []
        for path in self._paths():
            entries += self._read_from(path, self.offsets.get(path, 0))
        return entries

    def _read_from(self, path: Path, offset: int) -> list[LogEntry]:
        try:
            with open(path, "rb") as fh:
                if fh.seek(0, 2) < offset:  # rewritten by hand: read it again
                    offset = 0
                fh.seek(offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise UwfError(f"cannot read {path}: {exc.strerror or exc}") from None
        complete = data[: data.rfind(b"\n") + 1]
        self.offsets[path] = offset + len(complete)
        entries = []
        for line in complete.decode("utf-8", "replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # blank, or cut short by a crash
            if isinstance(entry, dict):  # a line uwf.util.log wrote: a LogEntry
                entries.append(cast("LogEntry", entry))
        return entries


def _wanted(entry: LogEntry, thread: str | None, process: str | None) -> bool:
    return (thread is None or entry.get("thread") == thread) and (
        process is None or entry.get("pid") == process
    )


def show_logs(
    root: Path,
    *,
    thread: str | None = None,
    process: str | None = None,
    date: str | None = None,
    take: int | None = None,
    reader: LogReader | None = None,
) -> list[LogEntry]:
    """The raw log entries, filtered by exact ``thread`` / ``pid`` / file date, oldest first;
    with ``take``, only the last ``take`` of them."""
    reader = reader or LogReader(root, date)
    entries = [e for e in reader.read() if _wanted(e, thread, process)]
    entries.sort(key=lambda e: str(e.get("ts", "")))
    return entries[-take:] if take is not None else entries


def follow_logs(
    root: Path,
    *,
    thread: str | None = None,
    process: str | None = None,
    date: str | None = None,
    take: int | None = None,
    interval: float = 0.25,
) -> Iterator[LogEntry]:
    """``show_logs``, then every new entry as it is written (polled every ``interval``
    seconds, across midnight's new file), without end."""
    reader = LogReader(root, date)
    yield from show_logs(root, thread=thread, process=process, take=take, reader=reader)
    while True:
        time.sleep(interval)
        yield from (e for e in reader.read() if _wanted(e, thread, process))


def clean_logs(root: Path, *, before: str) -> LogsCleaned:
    """Delete the log files whose date (file stem) is earlier than ``before``."""
    check_date(before)
    deleted = 0
    for path in _files(root):
        if path.name[: -len(SUFFIX)] < before:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise UwfError(f"cannot delete {path}: {exc.strerror or exc}") from None
            deleted += 1
    return {"deleted": deleted}
