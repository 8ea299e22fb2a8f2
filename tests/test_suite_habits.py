"""The suite's own habits (README.md, "Tests"): what tests share comes from ``support``, never
from ``conftest``; no test waits a fixed second or more (it polls for what it waits for, or
moves uwf's clock)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from support import REPO

TESTS = sorted((REPO / "tests").glob("*.py"))


@functools.cache
def _trees() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in TESTS]


def test_nothing_is_imported_from_conftest() -> None:
    found = [
        f"{path.name}:{node.lineno}"
        for path, tree in _trees()
        for node in ast.walk(tree)
        if (isinstance(node, ast.ImportFrom) and node.module == "conftest")
        or (isinstance(node, ast.Import) and any(a.name == "conftest" for a in node.names))
    ]
    assert found == [], "import these from support.py instead"


def test_no_test_sleeps_a_second_or_more() -> None:
    """``time.sleep(n)`` with a literal n ≥ 1 in test code (an agent's script is a string, and
    sleeps as long as it likes)."""
    found = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            called = node.func
            if not (
                called.attr == "sleep"
                and isinstance(called.value, ast.Name)
                and called.value.id == "time"
            ):
                continue
            if node.args and isinstance(node.args[0], ast.Constant):
                seconds = node.args[0].value
                if isinstance(seconds, (int, float)) and seconds >= 1:
                    found.append(f"{path.name}:{node.lineno} sleeps {seconds} s")
    assert found == [], "poll for the condition with a deadline, or move uwf.testing.Clock"
