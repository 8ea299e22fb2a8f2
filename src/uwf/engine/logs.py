"""Reading and pruning the process debug log ``<root>/logs/YYYY-MM-DD.jsonl`` (REFERENCE §1.16).

These functions never touch the CAS. A log line that does not parse as a JSON object (a
line cut short by a crash, a hand edit) is skipped on its own; the rest of its file is still
shown. (The reference dropped the whole file; losing a day of logs to one torn line helps
nobody.)
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path
from typing import Any

from uwf.util.errors import InvalidInput, UwfError, oneline

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


def list_logs(root: Path) -> list[dict[str, Any]]:
    """``[{"name","size","date"}]`` for every log file, newest date first."""
    out = []
    for path in _files(root):
        try:
            size = path.stat().st_size
        except FileNotFoundError:  # cleaned meanwhile
            continue
        out.append({"name": path.name, "size": size, "date": path.name[: -len(SUFFIX)]})
    out.sort(key=lambda e: (e["date"], e["name"]), reverse=True)
    return out


def _read_entries(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UwfError(f"cannot read {path}: {exc.strerror or exc}") from None
    entries = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def show_logs(
    root: Path,
    *,
    thread: str | None = None,
    process: str | None = None,
    date: str | None = None,
) -> list[dict[str, Any]]:
    """The raw log entries, filtered by exact ``thread`` / ``pid`` / file date, oldest first."""
    if date is not None:
        check_date(date)
        files = [logs_dir(root) / f"{date}{SUFFIX}"]
    else:
        files = sorted(_files(root))
    entries: list[dict[str, Any]] = []
    for path in files:
        for entry in _read_entries(path):
            if thread is not None and entry.get("thread") != thread:
                continue
            if process is not None and entry.get("pid") != process:
                continue
            entries.append(entry)
    entries.sort(key=lambda e: str(e.get("ts", "")))
    return entries


def clean_logs(root: Path, *, before: str) -> dict[str, int]:
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
