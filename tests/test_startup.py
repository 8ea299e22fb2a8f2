"""Start-up is paid on every step: a command imports only what it uses.

Each check runs the real CLI in a fresh interpreter and looks at ``sys.modules`` (never at the
clock: timing is measured in ``benchmarks/``). ``uwf --help`` must load the root alone, a
command its own group alone (cli/lazy.py), and none of them the heavy libraries.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from uwf.cli.main import COMMANDS

HEAVY = (
    "jsonschema",
    "httpx",
    "pydantic",
    "rich",
    "chevron",
    "psycopg",  # only for a postgresql:// store
    "uwf.agent_kit",
    "uwf.agents",
)
GROUPS = sorted({target.partition(":")[0] for target, _help in COMMANDS.values()})

# What `uwf --help` may load of uwf: the root of the tree and the options it shows. A module
# added here costs every command its import; prefer importing it where it is used.
HELP_MODULES = {
    "uwf",
    "uwf.cli",
    "uwf.cli.main",
    "uwf.cli.lazy",
    "uwf.cli.options",
    "uwf.util",
    "uwf.util.errors",
    "uwf.util.root",
    "uwf.util.signals",
}

# Records sys.modules after the command, or at the first spawn when UWF_PROBE_SPAWN is set
# (what `thread step` loaded before it started its agent).
PROBE = """
import os, subprocess, sys
seen = []
if os.environ.get("UWF_PROBE_SPAWN"):
    real = subprocess.Popen.__init__
    def spy(self, *args, **kwargs):
        seen.append(sorted(sys.modules))
        real(self, *args, **kwargs)
    subprocess.Popen.__init__ = spy
from uwf.cli.main import main
try:
    main()  # what the `uwf` script runs
except SystemExit as exc:
    code = exc.code
modules = seen[0] if seen else sorted(sys.modules)
import json
print(json.dumps({"code": code, "modules": modules}), file=sys.stderr)
"""


def loaded_modules(*args: str, spawn: bool = False) -> list[str]:
    env = {**os.environ, "UWF_PROBE_SPAWN": "1" if spawn else ""}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60, env=env
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, proc.stderr
    return list(report["modules"])


def among(modules: list[str], names: tuple[str, ...] | list[str]) -> list[str]:
    """The modules that are one of ``names`` or inside one of them."""
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_help_loads_the_root_alone(args: list[str]) -> None:
    modules = loaded_modules(*args)
    assert {m for m in modules if m.split(".")[0] == "uwf"} <= HELP_MODULES
    assert among(modules, [*HEAVY, "json", "yaml", "cbor2", "xxhash"]) == []


def test_group_help_loads_its_group_alone() -> None:
    modules = loaded_modules("thread", "--help")
    assert "uwf.cli.thread" in modules
    others = [g for g in GROUPS if g != "uwf.cli.thread"]
    assert among(modules, [*HEAVY, *others, "uwf.engine", "yaml"]) == []


def test_thread_show_loads_only_what_it_reads(new_thread: Any) -> None:
    thread = new_thread()
    modules = loaded_modules("thread", "show", thread)
    assert "uwf.engine.threads.lifecycle" in modules  # the probe really ran the command
    others = [g for g in GROUPS if g != "uwf.cli.thread"]
    unused = [
        "yaml",  # threads.yaml is read on its fast path
        "ulid",  # only new thread ids need python-ulid
        "socket",  # the lock record's host is os.uname().nodename
        "tempfile",
        "json",  # jsonfmt parses and prints through _json: no regexes compiled
        "uwf.util.log",  # show writes no log line
        "uwf.backend.fs.packwrite",
        "uwf.config",
        "uwf.moderator",
        "uwf.engine.workflows.stored",
        "uwf.engine.step",
        "uwf.engine.views.read",
        "uwf.cas.fastschema",
        "uwf.cli.complete",  # shell completion: only when a shell asks
    ]
    assert among(modules, [*HEAVY, *others, *unused]) == []


def test_thread_step_loads_only_what_it_needs_before_spawning(
    new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    modules = loaded_modules("thread", "step", thread, "--agent", scenario(), spawn=True)
    assert "uwf.adapters.process" in modules  # the probe saw the spawn
    others = [g for g in GROUPS if g != "uwf.cli.thread"]
    heavy = [h for h in HEAVY if h != "chevron"]  # chevron renders the edge prompt
    unused = ["yaml", "uwf.engine.workflows.stored", "uwf.engine.views.read", "uwf.cas.fastschema"]
    unused += ["uwf.cli.complete", "uwf.cli.background", "uwf.engine.step.background"]
    unused += ["json", "socket", "uwf.engine.step.relay", "uwf.backend.relay"]  # not on a disk
    assert among(modules, [*heavy, *others, *unused]) == []
