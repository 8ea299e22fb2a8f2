"""Start-up is paid on every step: the quick commands must not import heavy modules."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

HEAVY = ("jsonschema", "httpx", "pydantic", "rich", "chevron", "uwf.agent_kit", "uwf.agents")

PROBE = """
import json, sys
from uwf.cli.main import run
code = run(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def loaded_modules(*args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, proc.stderr
    return list(report["modules"])


def heavy_in(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize("args", [["--help"], ["thread", "--help"], ["--version"]])
def test_help_imports_nothing_heavy(args: list[str]) -> None:
    assert heavy_in(loaded_modules(*args)) == []


def test_thread_show_imports_nothing_heavy(new_thread: Any) -> None:
    thread = new_thread()
    modules = loaded_modules("thread", "show", thread)
    assert "uwf.engine.threads" in modules  # the probe really ran the command
    assert heavy_in(modules) == []
