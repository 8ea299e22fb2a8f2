"""Start-up in instructions: what the start-up rows cost, counted by valgrind's callgrind.

A count of instructions is the same whatever else the machine is doing, so it settles what
wall times on a busy machine cannot: ``uwf thread show`` against the frozen Typer import, and
which of uwf's modules (each imported in the order ``thread show`` imports them) costs what
above that baseline. Rows in millions of instructions; skipped when valgrind is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import uwf_bench
from bench import Bench
from harness import Fig

BASELINE = "import typer, gc; gc.freeze()"


def count(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Millions of instructions ``argv`` runs, its children not followed."""
    out = cwd / "callgrind.out"
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    out.unlink(missing_ok=True)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind failed on {argv}: {proc.stderr[-500:]}")
    return int(found.group(1)) / 1e6


def imported(argv: list[str], env: dict[str, str], cwd: Path) -> list[str]:
    """The top-level modules of uwf (and the JSON, hashing and YAML libraries) ``argv``
    imports, in order (``python -X importtime``)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    names = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name.startswith(("uwf", "json", "cbor2", "xxhash", "yaml")) and name not in names:
                names.append(name)
    return names


def rows(b: Bench) -> None:
    if shutil.which("valgrind") is None:
        b.say("instruction counts skipped: valgrind is not installed")
        return
    b.section = "instr"
    env = dict(os.environ)
    thread = b.tr.threads["small"]
    show = [str(uwf_bench.BIN / "uwf"), "thread", "show", thread]
    uwf_env = uwf_bench.cli_env(b.tr.root)
    base = count([sys.executable, "-c", BASELINE], env, b.cwd)
    figures = {
        "instr-typer-frozen": (f'python -c "{BASELINE}"', base),
        "instr-help": ("uwf --help", count(uwf_bench.uwf("--help"), uwf_env, b.cwd)),
        "instr-show": ("uwf thread show, 10-step thread", count(show, uwf_env, b.cwd)),
    }
    for key, (label, value) in figures.items():
        b.static(key, f"instructions (millions): {label}", {"uwf": Fig(value, "M instr")})
    b.static(
        "instr-show-ratio",
        "instructions: uwf thread show over the frozen Typer import",
        {"uwf": Fig(figures["instr-show"][1] / base, "×")},
    )
    # what each module thread show imports costs above the baseline, in import order
    modules = imported([str(uwf_bench.BIN / "uwf"), "thread", "show", thread], uwf_env, b.cwd)
    done: list[str] = []
    before = base
    for module in modules:
        done.append(module)
        script = f"import typer, gc; import {', '.join(done)}; gc.freeze()"
        after = count([sys.executable, "-c", script], uwf_env, b.cwd)
        b.static(
            f"instr-import-{module}",
            f"instructions: importing {module} (after the modules above)",
            {"uwf": Fig(after - before, "M instr")},
        )
        before = after
    b.static(
        "instr-import-run",
        "instructions: thread show's own work (building the command, the reads, the output)",
        {"uwf": Fig(figures["instr-show"][1] - before, "M instr")},
    )
