"""Live turns (docs/format.md, "Live turns"): `uwf step turns --live` prints the turns of a
step in flight as its agent writes them — uwf-builtin, scripted by the local LLM server, held
between two model calls while the test reads — and the reader keeps to what a turn may hold.
Both backends: the step lock and the head are the store's; the file is this machine's."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from llm_server import LLMServer, RecordedRequest, llm_fixture, write_config  # noqa: F401
from support import spawn_uwf
from uwf.backend import open_backend
from uwf.engine.views.live import TurnFollower
from uwf.model import live
from uwf.util.ulid import ThreadId

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL

PLAN_FM = "---\nstatus: _\nplan: read, then plan\nsteps: [one]\n---\nThe plan."
READ = {"name": "read_file", "arguments": {"path": "notes.txt"}}


def read_lines(proc: subprocess.Popen[str], into: list[dict[str, Any]]) -> threading.Thread:
    """Collect the JSON lines ``proc`` prints, as it prints them, in a thread."""

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            into.append(json.loads(line))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    return reader


def wait_for(predicate: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_step_turns_live_prints_each_turn_while_the_step_runs(
    cli: Any, root: Path, new_thread: Any, llm: LLMServer
) -> None:
    write_config(root, llm.base_url, {"builtin": {"command": "uwf-builtin", "args": []}})
    (Path.cwd() / "notes.txt").write_text("the notes")
    gate = threading.Event()

    def held(_request: RecordedRequest) -> str:
        assert gate.wait(60), "the test never opened the gate"
        return PLAN_FM

    llm.reply({"content": "Reading the notes first.", "tool_calls": [READ]}, held)
    thread = new_thread()
    stepping = spawn_uwf("thread", "step", thread)
    follower = spawn_uwf("step", "turns", thread, "--live", "--interval", "0.05")
    seen: list[dict[str, Any]] = []
    pump = read_lines(follower, seen)
    try:
        wait_for(lambda: len(seen) >= 2)  # both written while the agent waits on the model
        assert not gate.is_set() and stepping.poll() is None
        assert [(s["step"], s["role"], s["running"]) for s in seen] == [
            (1, "planner", True),
            (1, "planner", True),
        ]
        assert seen[0]["turn"] == {
            "index": 0,
            "role": "assistant",
            "content": "Reading the notes first.",
            "toolCalls": [{"name": "read_file", "args": '{"path": "notes.txt"}'}],
        }
        assert (seen[1]["turn"]["index"], seen[1]["turn"]["role"]) == (1, "tool")
        assert "the notes" in seen[1]["turn"]["content"]
        now = cli("step", "turns", thread)  # without --live: what is written so far
        assert [json.loads(x)["turn"]["index"] for x in now.out.splitlines()] == [0, 1]
        gate.set()
        assert stepping.wait(timeout=60) == 0, stepping.stderr.read() if stepping.stderr else ""
        assert follower.wait(timeout=30) == 0  # the step ended: so does --live
        pump.join(timeout=10)
    finally:
        gate.set()
        for proc in (stepping, follower):
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
    assert [s["turn"]["index"] for s in seen] == [0, 1, 2]
    assert seen[2]["turn"]["content"] == PLAN_FM
    head = cli("thread", "show", thread).json()["head"]
    detail = cli("step", "show", head, "--format", "json").json()
    assert [t["content"] for t in detail["turns"]] == [s["turn"]["content"] for s in seen]
    after = [json.loads(x) for x in cli("step", "turns", thread).out.splitlines()]
    assert [(a["step"], a["running"], a["turn"]["index"]) for a in after] == [
        (1, False, 0),
        (1, False, 1),
        (1, False, 2),
    ]
    assert not live.path_of(root, thread).exists()  # removed with the run


def test_a_step_too_short_to_catch_shows_its_landed_turns(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    """A step that starts and ends between two polls: its turns come from its detail
    (uwf-mock writes its one turn as its run ends), and so do those of a thread's last step,
    archived at $END."""
    thread = ThreadId(new_thread())
    with open_backend() as backend:
        follower = TurnFollower(backend, thread)
        assert follower.poll() == [] and follower.ended == 0  # nothing runs yet
        assert cli("thread", "step", thread, "--agent", scenario()).code == 0
        [line] = follower.poll()
        assert (line["step"], line["role"], line["running"]) == (1, "planner", False)
        assert line["turn"]["index"] == 0 and line["turn"]["content"].startswith("---\nstatus: _")
        assert follower.ended == 1 and not follower.gone
        assert cli("thread", "step", thread, "-c", "4", "--agent", scenario()).code == 0
        ended = follower.poll()  # four steps meanwhile: the last one's turns, then the end
        assert [(x["step"], x["role"]) for x in ended] == [(5, "reviewer")]
        assert follower.gone
        follower.close()
        killed = ThreadId(new_thread("Killed"))
        assert cli("thread", "step", killed, "--agent", scenario()).code == 0
        watching = TurnFollower(backend, killed)
        assert watching.poll() == []
        assert cli("thread", "kill", killed).code == 0
        assert watching.poll() == [] and watching.gone  # no step, nothing shown again
        watching.close()


def test_the_reader_keeps_to_what_a_turn_may_hold(root: Path, new_thread: Any) -> None:
    """What an agent writes in its live file is checked line by line: a line that is not the
    next turn, or too long, is skipped; text is bounded."""
    thread = ThreadId(new_thread())
    with open_backend() as backend:
        head = backend.threads.head(thread)
        assert head is not None
        path = live.path_of(root, thread)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [
            {"head": head, "role": "planner", "step": 1},
            {"index": 0, "role": "assistant", "content": "first"},
            {"index": 5, "role": "assistant", "content": "out of order"},
            "not a mapping",
            {"index": 1, "role": "assistant"},
            {"index": 1, "role": "assistant", "content": "x" * (live.MAX_TEXT + 10)},
        ]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{broken\n" + "a" * 50)
        follower = TurnFollower(backend, thread)
        with backend.locks.step(thread, wait=True):  # a step in flight, as far as readers see
            found = follower.poll()
        assert [(f["turn"]["index"], f["running"]) for f in found] == [(0, True), (1, True)]
        assert found[0]["turn"] == {"index": 0, "role": "assistant", "content": "first"}
        assert len(found[1]["turn"]["content"]) == live.MAX_TEXT
        assert found[1]["turn"]["truncated"] is True
        assert follower.poll() == [] and follower.ended == 1  # the lock is gone: it ended
        other = TurnFollower(backend, thread)
        path.write_text(json.dumps({"head": "0" * 13, "role": "planner", "step": 1}) + "\n")
        with backend.locks.step(thread, wait=True):  # another step's file: not read
            assert other.poll() == [] and other.file is None
        follower.close()
        other.close()
