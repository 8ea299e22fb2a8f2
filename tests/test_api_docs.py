"""docs/api.md's examples run as written (docs/api.md): each ```python block, from the
repository root, with ``UNCAGED_WORKFLOW_STORAGE_ROOT`` set to a fresh directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO

DOC = REPO / "docs" / "api.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.M | re.S)


def test_the_page_has_its_examples() -> None:
    """A thread to $END with a scripted agent, a function as an agent, a fan-out, reading a
    thread, an alias of config.yaml, the clock: each is a block below."""
    assert len(BLOCKS) >= 6
    for needle in ("ScriptedAgent(", "@uwf.agent", "drain(", "store.read(", "python: uwf-mock"):
        assert any(needle in block for block in BLOCKS), needle


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_an_example_runs_as_written(number: int, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UWF_")}
    env["UNCAGED_WORKFLOW_STORAGE_ROOT"] = str(tmp_path / "root")
    ran = subprocess.run(
        [sys.executable, "-c", BLOCKS[number]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, f"example {number + 1}:\n{BLOCKS[number]}\n{ran.stderr}"
