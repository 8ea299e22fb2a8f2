"""`uwf log list/show/clean` (docs/format.md, "The debug log") and the log tag registry."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from uwf.util.log import TAG_PATTERN, TAGS, ProcessLog

SRC = Path(__file__).resolve().parent.parent / "src" / "uwf"
CROCKFORD8 = re.compile(r"^[0-9A-HJKMNP-TV-Z]{8}$")


def entry(ts: str, pid: str, tag: str = "7HNQ4B2X", **extra: str) -> dict[str, str]:
    return {"ts": ts, "pid": pid, "tag": tag, "msg": f"m {ts}", **extra}


def write_log(root: Path, date: str, *entries: dict[str, str]) -> Path:
    path = root / "logs" / f"{date}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        for e in entries:
            fh.write(json.dumps(e) + "\n")
    return path


@pytest.fixture
def three_days(root: Path) -> None:
    write_log(
        root,
        "2026-05-20",
        entry("2026-05-20T10:00:00.000Z", "100-1", thread="T1"),
        entry("2026-05-20T09:00:00.000Z", "100-1", thread="T2"),
    )
    write_log(root, "2026-05-22", entry("2026-05-22T08:00:00.000Z", "300-3", thread="T1"))
    write_log(
        root,
        "2026-05-21",
        entry("2026-05-21T12:00:00.000Z", "200-2", thread="T1", workflow="W"),
        entry("2026-05-21T11:00:00.000Z", "200-2"),
    )


# -- list ------------------------------------------------------------------------------------------


def test_list_no_logs_dir(root: Path, cli: Any) -> None:
    result = cli("log", "list")
    assert (result.code, result.out) == (0, "[]\n")
    assert not root.exists()


def test_list_empty_dir(root: Path, cli: Any) -> None:
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "notes.txt").write_text("not a log")
    assert cli("log", "list").json() == []


def test_list_sorted_newest_first(root: Path, cli: Any, three_days: None) -> None:
    listed = cli("log", "list").json()
    assert [e["date"] for e in listed] == ["2026-05-22", "2026-05-21", "2026-05-20"]
    for e in listed:
        path = root / "logs" / e["name"]
        assert set(e) == {"name", "size", "date"}
        assert e["name"] == f"{e['date']}.jsonl"
        assert e["size"] == path.stat().st_size > 0


# -- show ------------------------------------------------------------------------------------------


def test_show_all_sorted_by_ts(cli: Any, three_days: None) -> None:
    shown = cli("log", "show").json()
    assert [e["ts"] for e in shown] == sorted(e["ts"] for e in shown)
    assert len(shown) == 5
    assert shown[0] == entry("2026-05-20T09:00:00.000Z", "100-1", thread="T2")  # raw objects


def test_show_filters(cli: Any, three_days: None) -> None:
    by_thread = cli("log", "show", "--thread", "T1").json()
    assert [e["ts"][:10] for e in by_thread] == ["2026-05-20", "2026-05-21", "2026-05-22"]
    by_pid = cli("log", "show", "--process", "200-2").json()
    assert [e["ts"] for e in by_pid] == ["2026-05-21T11:00:00.000Z", "2026-05-21T12:00:00.000Z"]
    by_date = cli("log", "show", "--date", "2026-05-20").json()
    assert {e["pid"] for e in by_date} == {"100-1"} and len(by_date) == 2
    both = cli("log", "show", "--thread", "T1", "--date", "2026-05-21").json()
    assert both == [entry("2026-05-21T12:00:00.000Z", "200-2", thread="T1", workflow="W")]


def test_show_exact_match_only(cli: Any, three_days: None) -> None:
    assert cli("log", "show", "--thread", "T").json() == []
    assert cli("log", "show", "--process", "100").json() == []
    assert cli("log", "show", "--date", "2026-05-19").json() == []
    assert cli("log", "show", "--thread", "T2", "--date", "2026-05-21").json() == []


def test_show_no_logs(cli: Any) -> None:
    assert cli("log", "show").json() == []


def test_show_skips_unparsable_lines(root: Path, cli: Any) -> None:
    path = write_log(root, "2026-05-20", entry("2026-05-20T01:00:00.000Z", "1-1"))
    with open(path, "a") as fh:
        fh.write('{"ts": "2026-05-20T02:00:00.000Z", "pid": "1-\n[1, 2]\n\n')
    write_log(root, "2026-05-20", entry("2026-05-20T03:00:00.000Z", "1-1"))
    shown = cli("log", "show").json()
    assert [e["ts"] for e in shown] == ["2026-05-20T01:00:00.000Z", "2026-05-20T03:00:00.000Z"]


def test_show_real_process_log(root: Path, cli: Any) -> None:
    log = ProcessLog(root, thread="01JTHREAD", workflow="WFHASH")
    log.write("7HNQ4B2X", "thread created", extra=3)
    shown = cli("log", "show", "--process", log.pid).json()
    assert [e["tag"] for e in shown] == ["W9F3RK2M", "7HNQ4B2X"]
    assert shown[1]["thread"] == "01JTHREAD" and shown[1]["extra"] == "3"
    assert cli("log", "list").json()[0]["name"] == log.path.name


def test_show_take_keeps_the_last_entries_after_the_filters(cli: Any, three_days: None) -> None:
    newest = cli("log", "show", "--take", "2").json()
    assert [e["ts"] for e in newest] == ["2026-05-21T12:00:00.000Z", "2026-05-22T08:00:00.000Z"]
    assert [e["ts"] for e in cli("log", "show", "--thread", "T2", "--take", "5").json()] == [
        "2026-05-20T09:00:00.000Z"
    ]
    assert cli("log", "show", "--thread", "T1", "--take", "1").json() == [
        entry("2026-05-22T08:00:00.000Z", "300-3", thread="T1")
    ]
    for bad in ("0", "x", "-1"):
        r = cli("log", "show", "--take", bad)
        assert (r.code, r.err) == (1, f"error: --take must be a positive integer, got: {bad}\n")


def test_show_follow_prints_new_entries_as_they_are_written(root: Path, three_days: None) -> None:
    """``log show --follow`` through the real CLI: the last entries, then each new one (a new
    day's file too; a line still being written waits for its newline) as one JSON line, until
    Ctrl-C, which ends it with exit 0."""
    import os
    import select
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "uwf"),
            "log",
            "show",
            "-f",
            "--thread",
            "T1",
            "--take",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None

    def next_line() -> Any:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "no line within 30 s"
        return json.loads(proc.stdout.readline())  # type: ignore[union-attr]

    try:
        assert next_line() == entry("2026-05-22T08:00:00.000Z", "300-3", thread="T1")
        write_log(root, "2026-05-22", entry("2026-05-22T09:00:00.000Z", "9-9", thread="T2"))
        write_log(root, "2026-05-22", entry("2026-05-22T09:30:00.000Z", "9-9", thread="T1"))
        assert next_line()["ts"] == "2026-05-22T09:30:00.000Z"  # T2's entry was filtered out
        later = entry("2026-05-23T00:00:01.000Z", "9-9", thread="T1")
        path = root / "logs" / "2026-05-23.jsonl"  # midnight: a new file
        text = json.dumps(later) + "\n"
        path.write_text(text[:20])
        with open(path, "a") as fh:
            fh.write(text[20:])
        assert next_line() == later
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (0, "", "")


def test_a_failed_step_is_logged_with_its_reason(cli: Any, new_thread: Any, scenario: Any) -> None:
    thread = new_thread()
    agent = scenario(
        {"planner": [{"output": "", "exit": 4, "stderr": "simulated crash"}]}, inprocess=False
    )
    assert cli("thread", "step", thread, "--agent", agent).code == 5
    failed = cli("log", "show", "--thread", thread, "--take", "2").json()
    assert [(e["tag"], e["msg"]) for e in failed] == [
        (
            "B8T5N1V6",
            "step failed: agent command failed (uwf-mock) with exit code 4: simulated crash",
        ),
        ("F8K3M6T2", "failure recorded attempts=1 code=5"),  # in the thread state too
    ]


# -- clean -----------------------------------------------------------------------------------------


def test_clean_before(root: Path, cli: Any, three_days: None) -> None:
    assert cli("log", "clean", "--before", "2026-05-22").json() == {"deleted": 2}
    assert [e["date"] for e in cli("log", "list").json()] == ["2026-05-22"]


def test_clean_nothing_older(root: Path, cli: Any, three_days: None) -> None:
    assert cli("log", "clean", "--before", "2026-05-20").json() == {"deleted": 0}
    assert len(cli("log", "list").json()) == 3


def test_clean_missing_dir(root: Path, cli: Any) -> None:
    assert cli("log", "clean", "--before", "2026-05-20").json() == {"deleted": 0}
    assert not root.exists()


def test_clean_requires_before(cli: Any) -> None:
    result = cli("log", "clean")
    assert result.code == 2
    assert result.err_line == "error: Missing option '--before'."


@pytest.mark.parametrize(
    "bad", ["2026-5-20", "20260520", "2026-13-01", "2026-02-30", "yesterday", "7d"]
)
def test_dates_are_strict(root: Path, cli: Any, three_days: None, snapshot: Any, bad: str) -> None:
    before = snapshot(root)
    for args in (["show", "--date", bad], ["clean", "--before", bad]):
        result = cli("log", *args)
        assert (result.code, result.err) == (
            1,
            f"error: invalid date: {bad} (expected YYYY-MM-DD)\n",
        )
        assert result.out == ""
    assert snapshot(root) == before
    assert len(list((root / "logs").iterdir())) == 3


def test_yaml_format(cli: Any, three_days: None) -> None:
    result = cli("--format", "yaml", "log", "clean", "--before", "2000-01-01")
    assert result.out == "deleted: 0\n"


# -- tags ------------------------------------------------------------------------------------------


def test_tags_are_valid_and_distinct() -> None:
    for tag in TAGS:
        assert CROCKFORD8.match(tag), tag
        assert re.fullmatch(TAG_PATTERN, tag)
    # A repeated key in the TAGS dict literal would vanish silently: read the literal itself.
    tree = ast.parse((SRC / "util" / "log.py").read_text(encoding="utf-8"))
    literal = next(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == "TAGS"
    )
    assert isinstance(literal, ast.Dict)
    keys = [k.value for k in literal.keys if isinstance(k, ast.Constant)]
    assert len(keys) == len(literal.keys) == len(TAGS)
    assert len(set(keys)) == len(keys), [k for k, n in Counter(keys).items() if n > 1]
    assert len(set(TAGS.values())) == len(TAGS)  # and no two tags mark the same event


def test_invalid_tag_is_refused(root: Path) -> None:
    log = ProcessLog(root)
    for bad in ("ILOU1234", "abcdefgh", "ABC", "ABCDEFGHJ"):
        with pytest.raises(ValueError, match=f"invalid log tag: {bad}"):
            log.write(bad, "x")


def test_every_tag_in_the_source_is_registered_and_used_once() -> None:
    pattern = re.compile(r"""\.write\(\s*["']([0-9A-Z]{8})["']""")
    uses: Counter[str] = Counter()
    where: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in pattern.finditer(text):
            tag = match.group(1)
            uses[tag] += 1
            line = text.count("\n", 0, match.start()) + 1
            where.setdefault(tag, []).append(f"{path.relative_to(SRC.parent)}:{line}")
    assert uses, "no log tags found in the source: the pattern is wrong"
    unknown = {t: where[t] for t in uses if t not in TAGS}
    assert not unknown, f"tags used but not listed in uwf.util.log.TAGS: {unknown}"
    repeated = {t: where[t] for t, n in uses.items() if n > 1}
    assert not repeated, f"each tag marks one call site; repeated: {repeated}"
