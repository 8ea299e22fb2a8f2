"""What the fleet-operation tests (retries, limits, start keys, failures) share: a
config.yaml written from keyword arguments, `thread show` through the CLI, and a second
workflow registered under another name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from support import EXAMPLES


def configure(root: Path, **config: Any) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def show(cli_proc: Any, thread: str) -> dict[str, Any]:
    r = cli_proc("thread", "show", thread)
    assert r.code == 0, r.err
    return dict(r.json())


def put_other_flow(cli_proc: Any, tmp_path: Path) -> None:
    """examples/solve-issue.yaml stored again as workflow "other-flow"."""
    other = tmp_path / "other-flow.yaml"
    other.write_text(
        (EXAMPLES / "solve-issue.yaml")
        .read_text(encoding="utf-8")
        .replace("name: solve-issue", "name: other-flow", 1),
        encoding="utf-8",
    )
    assert cli_proc("workflow", "put", str(other)).code == 0
