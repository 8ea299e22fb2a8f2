"""Shared pieces of the benchmark: timing cold processes, disk sizes, and tables.

Everything timed is a whole process started fresh (``subprocess.run``), so a figure is what a
user or a cron job pays: interpreter start, imports, the work, exit — except the rows that
say "warm", timed inside one process. A measure is run once unmeasured first (its output is
checked, and it warms the page cache like a second call would), then ``repeat`` times,
interleaved with the other tools of its row; the figure is the median, flagged ``noisy``
when the slowest run took more than 1.5 times the fastest.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NOISY_SPREAD = 1.5


@dataclass
class Fig:
    """One figure: a median, its unit and the spread (max/min) of the samples behind it."""

    value: float
    unit: str  # "ms", "B", "nodes/s", "steps/s", "statements", "count", "×"
    spread: float = 1.0
    samples: list[float] = field(default_factory=list)

    @property
    def noisy(self) -> bool:
        return self.spread > NOISY_SPREAD

    def text(self) -> str:
        return fmt_value(self.value, self.unit) + (" (noisy)" if self.noisy else "")

    def as_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "unit": self.unit,
            "spread": self.spread,
            "samples": self.samples,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fig:
        return cls(data["value"], data["unit"], data.get("spread", 1.0), data.get("samples", []))


def fmt_value(value: float, unit: str) -> str:
    if unit == "ms":
        if value >= 1000:
            return f"{value:,.0f} ms"
        return f"{value:.1f} ms" if value >= 10 else f"{value:.2f} ms"
    if unit in ("B", "nodes/s"):
        return f"{value:,.0f} {unit}"
    if unit == "steps/s":
        return f"{value:,.1f} steps/s"
    if unit in ("statements", "count"):
        return f"{value:,.1f}"
    if unit == "M instr":
        return f"{value:,.1f} M"
    if unit == "×":
        return f"{value:.3f}×"
    return f"{value:,.3g} {unit}"


class CommandFailed(RuntimeError):
    """A measured command failed, or printed a wrong result: the benchmark stops, saying why."""


def run(argv: Sequence[str], env: dict[str, str], cwd: Path, capture: bool = True) -> str:
    """Run once, unmeasured; return stdout. Raise CommandFailed with the stderr tail."""
    proc = subprocess.run(
        list(argv),
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or "").strip().splitlines()[-3:])
        raise CommandFailed(f"{' '.join(argv)} exited {proc.returncode}: {tail}")
    return proc.stdout if capture else ""


def once_ms(argv: Sequence[str], env: dict[str, str], cwd: Path) -> float:
    """Wall time of one run in ms (stdout discarded, as a script piping it away would)."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        list(argv), env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    elapsed = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        tail = " ".join(proc.stderr.decode(errors="replace").strip().splitlines()[-3:])
        raise CommandFailed(f"{' '.join(argv)} exited {proc.returncode}: {tail}")
    return elapsed


def summarise(samples: list[float], unit: str = "ms") -> Fig:
    low = min(samples)
    spread = max(samples) / low if low > 0 else 1.0
    return Fig(statistics.median(samples), unit, spread, list(samples))


@dataclass
class Job:
    """One tool's command for one measure; ``before`` runs (unmeasured) ahead of each sample."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    before: Callable[[], None] | None = None


def measure(jobs: dict[str, Job], repeat: int) -> dict[str, Fig]:
    """Time each tool's job ``repeat`` times, interleaved (uwf, peer, peer, uwf, …), so a slow
    moment of the machine hits every tool alike instead of one tool's whole series."""
    samples: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(repeat):
        for name, job in jobs.items():
            if job.before is not None:
                job.before()
            samples[name].append(once_ms(job.argv, job.env, job.cwd))
    return {name: summarise(values) for name, values in samples.items()}


# -- disk ---------------------------------------------------------------------------------


@dataclass
class Usage:
    """Bytes of a set of files: apparent size and blocks actually allocated (st_blocks*512)."""

    apparent: int = 0
    blocks: int = 0
    files: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.apparent + other.apparent, self.blocks + other.blocks, self.files + other.files
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.apparent - other.apparent, self.blocks - other.blocks, self.files - other.files
        )

    def per(self, count: int) -> Usage:
        return Usage(round(self.apparent / count), round(self.blocks / count), 0)


def file_usage(path: Path) -> Usage:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Usage()
    return Usage(st.st_size, st.st_blocks * 512, 1)


def tree_usage(path: Path, skip: Callable[[str], bool] | None = None) -> Usage:
    """Usage of every regular file under ``path`` (``skip`` gets the path relative to it)."""
    total = Usage()
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(dirpath, name)
            if skip is not None and skip(os.path.relpath(full, path)):
                continue
            total = total + file_usage(Path(full))
    return total


def sqlite_usage(path: Path) -> Usage:
    """A SQLite database's durable size: its WAL folded in and truncated first, then the
    files' sizes summed with any -wal/-journal left."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    total = Usage()
    for suffix in ("", "-wal", "-journal"):
        total = total + file_usage(Path(f"{path}{suffix}"))
    return total


# -- tables -------------------------------------------------------------------------------


def aligned(header: list[str], rows: list[list[str]]) -> str:
    """A plain-text table with columns separated by `` | `` and a rule under the header."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        parts = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return " | ".join(parts).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def markdown(header: list[str], rows: list[list[str]]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|")

    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)
