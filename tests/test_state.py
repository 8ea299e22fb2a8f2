"""The mutable state files: quoting, hand-edited files, and the crash-between-two-writes case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rootfiles import RootFiles


def test_threads_yaml_is_quoted_and_readable_as_yaml(cli: Any, root: Path, new_thread: Any) -> None:
    import yaml

    thread = new_thread()
    text = (root / "threads.yaml").read_text()
    head = RootFiles(root).head(thread)
    assert f'"{thread}": {{"head":"{head}",' in text  # one JSON object a line, always quoted
    assert yaml.safe_load(text)[thread]["head"] == head


def test_hand_edited_threads_yaml_is_read_with_the_yaml_loader(root: Path, new_thread: Any) -> None:
    thread = new_thread()
    head = RootFiles(root).head(thread)
    (root / "threads.yaml").write_text(f"# edited by hand\n{thread}:   '{head}'\n")
    assert RootFiles(root).active() == {thread: head}


def test_the_one_parse_fast_path_takes_only_uwfs_own_shape(
    cli: Any, root: Path, new_thread: Any
) -> None:
    """uwf's lines are read as one JSON object; a line that is not one ``"key": value`` pair
    goes to the YAML loader, which reads what YAML reads and refuses what it refuses."""
    threads = [new_thread(f"task {i}") for i in range(3)]
    heads = RootFiles(root).active()
    path = root / "threads.yaml"
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and all(line.startswith('"') for line in lines[1:])
    path.write_text("\n".join([lines[0], *[f"  {x}" for x in lines[1:]]]) + "\n")
    assert RootFiles(root).active() == heads  # indented alike: YAML reads the same mapping
    a, b = (f'"{t}": "{heads[t]}"' for t in threads[:2])
    path.write_text(f"{a}, {b}\n")  # two pairs on one line: not YAML
    r = cli("thread", "list")
    assert r.code == 1 and r.err.startswith(f"error: {path} is damaged: ")


def test_crash_between_history_append_and_threads_rewrite(
    cli: Any, root: Path, new_thread: Any, scenario: Any
) -> None:
    """Simulate a SIGKILL after archiving appended its history line but before threads.yaml
    lost the entry: the thread must read as archived, and the next write repairs the file."""
    thread = new_thread()
    other = new_thread("other")
    head = RootFiles(root).head(thread)
    line = {"thread": thread, "workflow": "W", "head": head, "completedAt": 1, "status": "killed"}
    with (root / "history.jsonl").open("a") as fh:
        fh.write(json.dumps(line) + "\n")
    assert thread in (root / "threads.yaml").read_text()  # the leftover is on disk

    assert RootFiles(root).head(thread) is None
    assert cli("thread", "show", thread).json()["status"] == "killed"
    assert [t["thread"] for t in cli("thread", "list").json()] == [other]
    r = cli("thread", "step", thread, "--agent", scenario())
    assert r.err == f"error: thread not active: {thread} (status: killed)\n"

    assert cli("thread", "step", other, "--agent", scenario()).code == 0  # any write repairs
    assert thread not in (root / "threads.yaml").read_text()
    assert other in (root / "threads.yaml").read_text()


def test_torn_history_line_is_skipped(cli: Any, root: Path, new_thread: Any) -> None:
    """The fragment of an archive that never completed (its thread is still active) is
    skipped, and the next archive starts a line of its own."""
    thread = new_thread()
    assert cli("thread", "kill", thread).code == 0
    second = new_thread("killed when the power went")
    with (root / "history.jsonl").open("a") as fh:
        fh.write(f'{{"thread": "{second[:18]}')  # an archive of `second`, cut mid-append
    assert cli("thread", "show", thread).json()["status"] == "killed"
    assert cli("thread", "show", second).json()["status"] == "idle"
    assert cli("thread", "kill", second).code == 0
    statuses = {t["thread"]: t["status"] for t in cli("thread", "list", "--all").json()}
    assert statuses == {thread: "killed", second: "killed"}


def test_a_long_lived_reader_parses_threads_yaml_again_only_when_it_changed(
    root: Path, new_thread: Any, monkeypatch: Any
) -> None:
    """A worker reads threads.yaml a few times a step: the same bytes are parsed once, each
    read gets a dict of its own, and a write by another process is read at once."""
    from uwf.backend.fs import FsBackend

    first = new_thread("first")
    reader = FsBackend(root).threads
    parsed: list[bytes] = []
    real = reader.file._decode_all

    def counted(data: bytes) -> Any:
        parsed.append(data)
        return real(data)

    monkeypatch.setattr(reader.file, "_decode_all", counted)
    one, two = reader.file.read(), reader.file.read()
    assert one == two and one is not two and list(one) == [first]
    one.clear()  # a caller's edit of its dict is its own
    assert list(reader.file.read()) == [first] and len(parsed) == 1
    second = new_thread("second")  # written by another process (the cli)
    assert set(reader.file.read()) == {first, second} and len(parsed) == 2
    (root / "threads.yaml").write_text("")  # damage is seen as soon as it is there
    with pytest.raises(Exception, match=r"threads\.yaml is damaged: it is empty"):
        reader.file.read()
