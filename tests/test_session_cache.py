"""The agent session cache (docs/agents.md, "`uwf-hermes`").

``<root>/cache/<agent>-sessions.json`` maps ``"<thread>:<role>"`` to a session id. Reads are
forgiving (a damaged file is an empty cache); writes are read-modify-write through a temp
file, so other agents' and other threads' entries survive.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from uwf.agent_kit import session_cache

THREAD = "01KSQ8ZK4F8V3W2Y7N5B1R9T6C"
OTHER_THREAD = "01KSQ8ZK4F8V3W2Y7N5B1R9T6D"


def cache_file(root: Path, agent: str) -> Path:
    return root / "cache" / f"{agent}-sessions.json"


def test_put_creates_the_cache_dir_and_a_per_agent_file(root: Path) -> None:
    assert not root.exists()
    session_cache.put(root, "hermes", THREAD, "planner", "sess-1")
    path = cache_file(root, "hermes")
    assert path.is_file()
    # pretty JSON (2-space indent) with a final newline, keyed "<thread>:<role>"
    assert path.read_text() == json.dumps({f"{THREAD}:planner": "sess-1"}, indent=2) + "\n"
    assert session_cache.get(root, "hermes", THREAD, "planner") == "sess-1"


def test_no_temp_files_remain_after_writes(root: Path) -> None:
    for i in range(5):
        session_cache.put(root, "hermes", THREAD, f"role{i}", f"s{i}")
    names = {p.name for p in (root / "cache").iterdir()}
    assert "hermes-sessions.json" in names
    assert not [n for n in names if "tmp" in n], names
    assert not [n for n in names if n.endswith(".json") and n != "hermes-sessions.json"]


def test_missing_cache_reads_as_none(root: Path) -> None:
    assert session_cache.get(root, "hermes", THREAD, "planner") is None
    assert not root.exists()  # reading creates nothing
    session_cache.put(root, "hermes", THREAD, "planner", "s1")
    assert session_cache.get(root, "hermes", THREAD, "reviewer") is None
    assert session_cache.get(root, "hermes", OTHER_THREAD, "planner") is None


@pytest.mark.parametrize(
    ("one", "two"), [("hermes", "claude-code"), ("my-agent", "my_agent"), ("agent", "agent2")]
)
def test_agents_have_distinct_files_and_isolated_sessions(root: Path, one: str, two: str) -> None:
    session_cache.put(root, one, THREAD, "planner", "first")
    assert session_cache.get(root, two, THREAD, "planner") is None
    session_cache.put(root, two, THREAD, "planner", "second")
    assert cache_file(root, one) != cache_file(root, two)
    assert cache_file(root, one).is_file() and cache_file(root, two).is_file()
    assert session_cache.get(root, one, THREAD, "planner") == "first"
    assert session_cache.get(root, two, THREAD, "planner") == "second"


def test_update_keeps_other_entries_and_other_agents(root: Path) -> None:
    session_cache.put(root, "hermes", THREAD, "planner", "p1")
    session_cache.put(root, "hermes", THREAD, "reviewer", "r1")
    session_cache.put(root, "hermes", OTHER_THREAD, "planner", "q1")
    session_cache.put(root, "claude-code", THREAD, "planner", "c1")
    other_before = cache_file(root, "claude-code").read_bytes()

    session_cache.put(root, "hermes", THREAD, "planner", "p2")  # overwrite one entry

    assert json.loads(cache_file(root, "hermes").read_text()) == {
        f"{THREAD}:planner": "p2",
        f"{THREAD}:reviewer": "r1",
        f"{OTHER_THREAD}:planner": "q1",
    }
    assert cache_file(root, "claude-code").read_bytes() == other_before


def test_empty_session_id_reads_back_as_none(root: Path) -> None:
    session_cache.put(root, "hermes", THREAD, "planner", "")
    assert session_cache.get(root, "hermes", THREAD, "planner") is None


def test_legacy_shared_file_is_ignored(root: Path) -> None:
    (root / "cache").mkdir(parents=True)
    (root / "cache" / "agent-sessions.json").write_text(json.dumps({f"{THREAD}:planner": "legacy"}))
    assert session_cache.get(root, "hermes", THREAD, "planner") is None
    session_cache.put(root, "hermes", THREAD, "planner", "new")
    assert session_cache.get(root, "hermes", THREAD, "planner") == "new"
    # the legacy file is neither read nor rewritten
    assert json.loads((root / "cache" / "agent-sessions.json").read_text()) == {
        f"{THREAD}:planner": "legacy"
    }


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", f'["{THREAD}:planner"]', '"a string"', "42", "null", ""],
)
def test_damaged_or_non_object_file_reads_as_empty(root: Path, content: str) -> None:
    path = cache_file(root, "hermes")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert session_cache.get(root, "hermes", THREAD, "planner") is None
    # a write replaces the damaged content with a valid cache holding the new entry
    session_cache.put(root, "hermes", THREAD, "planner", "s1")
    assert json.loads(path.read_text()) == {f"{THREAD}:planner": "s1"}


def test_non_string_null_and_empty_values_are_ignored(root: Path) -> None:
    path = cache_file(root, "hermes")
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                f"{THREAD}:a": 42,
                f"{THREAD}:b": None,
                f"{THREAD}:c": "",
                f"{THREAD}:d": ["x"],
                f"{THREAD}:e": {"id": "x"},
                f"{THREAD}:f": "good",
            }
        )
    )
    for role in "abcde":
        assert session_cache.get(root, "hermes", THREAD, role) is None, role
    assert session_cache.get(root, "hermes", THREAD, "f") == "good"


def test_concurrent_writers_lose_no_entry(root: Path) -> None:
    """Read-modify-write happens under a lock: parallel puts all survive."""
    roles = [f"role{i}" for i in range(24)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda r: session_cache.put(root, "hermes", THREAD, r, f"s-{r}"), roles))
    for r in roles:
        assert session_cache.get(root, "hermes", THREAD, r) == f"s-{r}"
