"""The process debug log: ``<root>/logs/YYYY-MM-DD.jsonl`` (docs/format.md,
"The debug log").

Every line is a flat JSON object ``{ts, pid, tag, msg[, thread][, workflow], …}``. Tags are
8 upper-case Crockford characters, unique per call site (a test checks both). Logging never
fails a command: an unwritable log directory is ignored. Every known secret is replaced by
``***`` (``uwf.util.secrets``), and the files are private to the user: the directory 0700,
each file 0600 (docs/format.md, "The debug log").
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from uwf.util import jsonfmt
from uwf.util.secrets import redact

TAG_PATTERN = r"[0-9A-HJKMNP-TV-Z]{8}"  # compiled on first use (test_startup.py)


# Every tag used anywhere in uwf, with what it marks. tests/test_log.py checks that each is
# valid, that none repeats, and that every tag used in the source is listed here.
TAGS: dict[str, str] = {
    "W9F3RK2M": "process start",
    "7HNQ4B2X": "thread created",
    "R5J2W8N4": "moderator decision and agent spawn",
    "C6P9E3H7": "agent returned",
    "F4D8Q2K5": "thread archived",
    "T7M2K9Q4": "thread archived with the step's landing (one commit)",
    "B8T5N1V6": "step error",
    "K4F7N2Q8": "fan-out not started (the next step starts it)",
    "P6W3H9T2": "fan-out started",
    "F9C2T5J8": "fan-out started by the step after it (a fork, a crash)",
    "H2V7N5C9": "step interrupted by a signal",
    "W3K8N5Q2": "worker registry not pruned",
    "W7D2F6J9": "worker heartbeat not written",
    "W5T8H3M6": "worker's first heartbeat not written (the store is away: the loop retries)",
    "W5M8R3T6": "worker not marked stopped",
    "W2H6P9K4": "worker draining on SIGTERM",
    "K2V7N4D9": "thread forked",
    "R8M2Q6T4": "ended thread resumed as a new thread",
    "Q8M3T6W1": "thread killed",
    "H5R9C2X7": "workflow registered",
    "T3G8B5N2": "workflow rolled back",
    "N6J4S8P3": "agent timeout",
    "P4W7H2M9": "moderator failed",
    "D7W2K9M4": "agent deferred: thread waits",
    "S4W8P2N6": "agent suspended ($SUSPEND): thread waits",
    "E3N8V5Q1": "step written by hand (thread answer)",
    "W4F7K2Q9": "thread forked onto another workflow version",
    "X7Q4W9M2": "background run spawned",
    "V3N8K5R2": "background run ended",
    "D6W3P8T5": "background run stopped",
    "F8K3M6T2": "step failure recorded in the thread state",
    "G5Q9W2R7": "step failure not recorded",
    "J6R3X8M5": "thread retried: its failure ended (thread retry)",
    "A7P3K9W2": "automatic packing started (the filesystem store)",
}


# This process as the log names it, and the day files it wrote its first line into: a process
# that steps in a loop (a worker, a program on uwf.api) makes a ProcessLog per step, and is
# still one process with one "process start" line per file (docs/format.md, "The debug log").
_process: tuple[int, str] | None = None  # (os pid, "<unix ms>-<os pid>")
_started: set[Path] = set()
_tags: set[str] = set()  # tags checked already
_private_dirs: set[Path] = set()  # log directories made private by this process
_KEPT = 1024  # paths each set holds at most


def process_id() -> str:
    """``<unix ms of this process's first log>-<os pid>``: the same for every line of this
    process (a forked child is another process)."""
    global _process
    pid = os.getpid()
    if _process is None or _process[0] != pid:
        _process = (pid, f"{time.time_ns() // 1_000_000}-{pid}")
        _started.clear()
    return _process[1]


class ProcessLog:
    """Appends debug lines for one process; context (thread, workflow) added to each line."""

    def __init__(self, root: Path, **context: str) -> None:
        now = _dt.datetime.now(_dt.UTC)
        self.path = root / "logs" / f"{now:%Y-%m-%d}.jsonl"
        self.pid = process_id()
        self.context = {k: v for k, v in context.items() if v}
        if self.path not in _started:
            if len(_started) >= _KEPT:  # a process of months: start lines again, not memory
                _started.clear()
            _started.add(self.path)
            argv = redact(jsonfmt.dumps(sys.argv))
            # the context (thread, workflow) is in the line's own fields: not repeated here
            self.write("W9F3RK2M", f"process start argv={argv} python={sys.version.split()[0]}")

    def bind(self, **context: str) -> None:
        self.context.update({k: v for k, v in context.items() if v})

    def write(self, tag: str, msg: str, **extra: Any) -> None:
        if tag not in _tags:
            if not re.fullmatch(TAG_PATTERN, tag):
                raise ValueError(f"invalid log tag: {tag}")
            _tags.add(tag)
        ts = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        entry: dict[str, Any] = {"ts": ts, "pid": self.pid, "tag": tag, "msg": msg}
        entry.update(self.context)
        entry.update({k: str(v) for k, v in extra.items()})
        entry = {k: redact(v) if isinstance(v, str) else v for k, v in entry.items()}
        append_private(self.path, jsonfmt.dumps(entry) + "\n")


def append_private(path: Path, text: str) -> None:
    """Append ``text`` to ``path``, a file private to the user (0600, in a 0700 directory:
    both tightened when an older uwf made them readable by others). Never fails."""
    try:
        directory = path.parent
        if directory not in _private_dirs:  # once per process (and again should it go)
            _private_dir(directory)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except FileNotFoundError:
            _private_dir(directory)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:  # the descriptor itself, not a file object: a line is one write (O_APPEND)
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, 0o600)
            data = memoryview(text.encode("utf-8", "replace"))
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
    except OSError:
        pass


def _private_dir(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if directory.stat().st_mode & 0o077:
        directory.chmod(0o700)
    if len(_private_dirs) >= _KEPT:
        _private_dirs.clear()
    _private_dirs.add(directory)
