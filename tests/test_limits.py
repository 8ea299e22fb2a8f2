"""Fleet limits (docs/format.md, "Limits"): config.yaml caps the steps of an agent alias or a
provider that run at once and that start in a minute, for every `thread step`, `--next` and
`uwf worker` sharing the store; a step held back is busy (exit 4) with the reason, records no
failure, and `--next` moves on to a thread it may step.

Every test drives the real CLI in subprocesses, on the filesystem and on PostgreSQL.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

from fleetkit import configure, put_other_flow, show
from llm_server import LLMServer, llm_fixture, write_config  # noqa: F401
from support import given, reap, spawn_uwf, tiers
from uwf.testing import Clock


def script(tmp_path: Path, name: str, body: str) -> dict[str, Any]:
    """An agents entry running a Python script that fails after ``body``."""
    path = tmp_path / f"{name}.py"
    path.write_text(
        f"import sys, time\n{body}\nprint('error: {name} failed', file=sys.stderr)\nsys.exit(1)\n"
    )
    return {"command": sys.executable, "args": [str(path)]}


def test_concurrency_holds_a_second_step_back_on_every_path(
    any_store: str, root: Path, cli_proc: Any, new_thread: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"  # the slow agent runs until the test creates it
    wait = f"import os\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.02)"
    configure(
        root,
        agents={"slow": script(tmp_path, "slow", wait)},
        defaultAgent="slow",
        limits={"agents": {"slow": {"concurrency": 1}}},
        retry={"backoff": 0},
    )
    first, second = new_thread("One"), new_thread("Two")
    running = spawn_uwf("thread", "step", first)
    try:
        deadline = time.monotonic() + 30
        while show(cli_proc, first)["status"] != "running":
            assert time.monotonic() < deadline and running.poll() is None
            time.sleep(0.05)
        reason = (
            f"error: thread {second} is held back: agent slow is at its limit of 1 steps at "
            "once (limits.agents.slow.concurrency)"
        )
        named = cli_proc("thread", "step", second)
        assert (named.code, named.err_line) == (4, reason)
        picked = cli_proc("thread", "step", "--next")  # the first runs, the second is held
        assert (picked.code, picked.err_line) == (4, reason)
        idle = cli_proc("worker", "--idle-exit", "0.3")
        assert (idle.code, idle.out) == (0, ""), idle.err
        assert "failure" not in show(cli_proc, second)  # held back is not a failure
        go.touch()
        assert running.wait(timeout=60) == 5
    finally:
        reap(running)
    after = cli_proc("thread", "step", second)  # the slot is free again
    assert after.code == 5 and show(cli_proc, second)["failure"]["attempts"] == 1


def test_a_provider_rate_limit_counts_the_steps_of_all_its_agents(
    any_store: str, root: Path, cli_proc: Any, new_thread: Any, tmp_path: Path
) -> None:
    configure(
        root,
        agents={
            "a": {**script(tmp_path, "a", ""), "provider": "p"},
            "b": {**script(tmp_path, "b", ""), "provider": "p"},
        },
        limits={"providers": {"p": {"perMinute": 2}}},
    )
    thread = new_thread()
    assert cli_proc("thread", "step", thread, "--agent", "a").code == 5
    assert cli_proc("thread", "step", thread, "--agent", "b").code == 5
    third = cli_proc("thread", "step", thread, "--agent", "a")
    assert (third.code, third.err_line) == (
        4,
        f"error: thread {thread} is held back: provider p is at its limit of 2 steps a minute "
        "(limits.providers.p.perMinute)",
    )
    assert show(cli_proc, thread)["failure"]["attempts"] == 2
    command_line = f"{sys.executable} {tmp_path / 'a.py'}"  # the same agent, not by its alias
    unlimited = cli_proc("thread", "step", thread, "--agent", command_line)
    assert unlimited.code == 5  # a command line names no alias: no limit applies


def test_next_moves_on_to_a_thread_it_may_step(
    any_store: str, root: Path, cli_proc: Any, new_thread: Any, tmp_path: Path
) -> None:
    put_other_flow(cli_proc, tmp_path)
    configure(
        root,
        agents={"limited": script(tmp_path, "limited", ""), "free": script(tmp_path, "free", "")},
        defaultAgent="limited",
        agentOverrides={"other-flow": {"planner": "free"}},
        limits={"agents": {"limited": {"perMinute": 1}}},
        retry={"backoff": 0},
    )
    older = new_thread("Limited")
    newer = cli_proc("thread", "start", "other-flow", "-p", "Free").json()["thread"]
    assert cli_proc("thread", "step", older).code == 5  # the one start a minute of "limited"
    for attempt in (1, 2):
        moved = cli_proc("thread", "step", "--next")  # the older one is held back
        assert (moved.code, moved.err.splitlines()[-1]) == (
            5,
            f"error: agent command failed ({sys.executable}) with exit code 1: error: free failed",
        )
        assert show(cli_proc, newer)["failure"]["attempts"] == attempt
    assert show(cli_proc, older)["failure"]["attempts"] == 1


def test_a_429_backs_the_provider_off_fleet_wide(
    any_store: str, root: Path, cli: Any, cli_proc: Any, new_thread: Any, llm: LLMServer
) -> None:
    """uwf-builtin gets a 429 with Retry-After: its provider is paused in the store, so no
    step of an agent naming that provider starts (exit 4) until the pause ends — which the
    test reaches in-process on a clock it moves (uwf.testing.Clock), not by waiting."""
    write_config(root, llm.base_url, {"bot": {"command": "uwf-builtin", "provider": "local"}})
    first, second = new_thread("One"), new_thread("Two")
    llm.reply({"status": 429, "body": "slow down", "headers": {"Retry-After": "30"}})
    refused = cli_proc("thread", "step", first)
    assert refused.code == 5
    assert refused.err.splitlines()[-1].endswith(
        "LLM HTTP 429 (rate limited; uwf does not retry): slow down"
    )
    for args in ((second,), ("--next",)):
        held = cli_proc("thread", "step", *args)
        assert held.code == 4
        found = re.fullmatch(
            f"error: thread ({second}|{first}) is held back: provider local answered 429 "
            r"\(rate limited\); no step of it starts for (\d+) s",
            held.err_line,
        )
        assert found and 1 <= int(found.group(2)) <= 30, held.err
    assert len(llm.chat_requests()) == 1  # nothing more was sent into the rate limit
    llm.reply({"status": 500, "body": "down"})
    with Clock() as clock:
        assert cli("thread", "step", second).code == 4
        clock.advance(31)  # the pause is over: the agent runs again
        after = cli("thread", "step", second)
    assert after.code == 5 and after.err.splitlines()[-1].endswith("LLM HTTP 500: down")
    assert len(llm.chat_requests()) == 2


def test_retry_after_reads_seconds_and_http_dates() -> None:
    from uwf.adapters.llm import retry_after

    assert retry_after("120", 1000.0) == 120.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470.0) == 10.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412490.0) == 0.0  # past: now
    assert [retry_after(v, 0.0) for v in (None, "", "soon", "-5")] == [None] * 4


def test_a_fleet_of_workers_keeps_under_a_concurrency_limit(
    any_store: str, root: Path, cli_proc: Any, new_thread: Any, scenario: Any, tmp_path: Path
) -> None:
    """Four workers drain four threads (five steps each) through an agent capped at two steps
    at once: the agent's own log of when each run began and ended never shows three at once,
    and every thread completes. (The agent is a process that logs and runs uwf-mock's main.)"""
    import json

    from support import APPROVE, DEV, PLAN, REJECT

    slow = {"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT, APPROVE]}
    roles = {r: [{"output": o, "sleep": 0.2} for o in outs] for r, outs in slow.items()}
    mock_args = scenario(roles).split()[1:]  # ["--scenario", path]
    runs = tmp_path / "runs.jsonl"
    wrapper = tmp_path / "logged.py"
    wrapper.write_text(
        "import json, sys, time\n"
        f"log = open({str(runs)!r}, 'a')\n"
        "began = time.monotonic()\n"
        "from uwf.agents.mock import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "finally:\n"
        "    log.write(json.dumps([began, time.monotonic()]) + '\\n')\n"
    )
    configure(
        root,
        agents={"capped": {"command": sys.executable, "args": [str(wrapper), *mock_args]}},
        defaultAgent="capped",
        limits={"agents": {"capped": {"concurrency": 2}}},
    )
    threads = [new_thread(f"Task {n}") for n in range(4)]
    workers = [spawn_uwf("worker", *given(threads)) for _ in range(4)]
    try:
        for worker in workers:
            worker.wait(timeout=300)
            assert worker.returncode == 0, worker.stderr.read() if worker.stderr else ""
    finally:
        for worker in workers:
            reap(worker)
    spans = [json.loads(line) for line in runs.read_text(encoding="utf-8").splitlines()]
    assert len(spans) == 4 * 5  # every step ran its agent once: none was lost or doubled
    edges = sorted([(b, 1) for b, _ in spans] + [(e, -1) for _, e in spans])
    running, most = 0, 0
    for _, change in edges:
        running += change
        most = max(most, running)
    assert most <= 2
    listed = cli_proc("thread", "list", "--status", "completed").json()
    assert sorted(t["thread"] for t in listed) == sorted(threads)


# -- the fleet against a provider that answers 429 to bursts (issue 23's "Done when") --------

PING = """name: ping
description: One model call, then done.
roles:
  caller:
    description: Calls the model once.
    goal: Answer.
    capabilities: []
    procedure: Reply.
    output: Done.
    meta:
      type: object
      properties: {status: {const: done}}
      required: [status]
graph:
  $START:
    _: {role: caller, prompt: "Go."}
  caller:
    done: {role: $END, prompt: "Done."}
"""


class BurstyProvider:
    """A provider as a scripted reply of the test server: it takes ``latency`` seconds per
    answer, refuses its very first request (a cold start) and any request that arrives when
    ``most`` others arrived within the last ``window`` seconds with HTTP 429 and
    ``Retry-After: <retry_after>``, and logs every request: ``(arrived, answered, status)``
    on its own clock."""

    def __init__(self, latency: float, most: int, window: float, retry_after: int) -> None:
        import threading

        self.latency, self.most, self.window, self.retry_after = latency, most, window, retry_after
        self.log: list[tuple[float, float, int]] = []
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> Any:
        with self._lock:
            now = time.monotonic()
            recent = [t for t, _, _ in self.log if now - t < self.window]
            if not self.log or len(recent) >= self.most:
                self.log.append((now, now, 429))
                return {
                    "status": 429,
                    "body": "rate limited",
                    "headers": {"Retry-After": str(self.retry_after)},
                }
        time.sleep(self.latency)
        with self._lock:
            self.log.append((now, time.monotonic(), 200))
        return "---\nstatus: done\n---\nDone."


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals that overlap at one moment."""
    edges = sorted([(b, 1) for b, _ in spans] + [(e, -1) for _, e in spans])
    running = most = 0
    for _, change in edges:
        running += change
        most = max(most, running)
    return most


@tiers("threads_n", 10, 40)
def test_a_fleet_keeps_a_bursty_provider_under_its_limits(
    any_store: str,
    root: Path,
    cli: Any,
    cli_proc: Any,
    llm: LLMServer,
    tmp_path: Path,
    threads_n: int,
) -> None:
    """Four `uwf worker`s drain 40 threads (10 in the default run) whose agent is
    uwf-builtin, through a provider capped at two steps at once that answers 429 to bursts:
    the provider's own log never shows more than two requests at once, nor one starting
    while a 429's pause holds the fleet back (but for the steps already running), and every
    thread reaches $END."""
    import json

    import yaml

    concurrency, per_minute = 2, 300
    provider = BurstyProvider(latency=0.25, most=3, window=1.5, retry_after=1)
    llm.reply(*[provider] * (threads_n * 10))
    write_config(root, llm.base_url, {"bot": {"command": "uwf-builtin", "provider": "local"}})
    config = yaml.safe_load((root / "config.yaml").read_text(encoding="utf-8"))
    config["limits"] = {
        "providers": {"local": {"concurrency": concurrency, "perMinute": per_minute}}
    }
    config["retry"] = {"backoff": 0.2, "maxBackoff": 1}
    configure(root, **config)
    flow = tmp_path / "ping.yaml"
    flow.write_text(PING, encoding="utf-8")
    assert cli("workflow", "put", str(flow)).code == 0
    threads = []
    for n in range(threads_n):
        started = cli("thread", "start", "ping", "-p", f"Task {n}")
        assert started.code == 0, started.err
        threads.append(started.json()["thread"])
    workers = [spawn_uwf("worker", *given(threads)) for _ in range(4)]
    lines: list[Any] = []
    try:
        for worker in workers:
            out, err = worker.communicate(timeout=600)
            assert worker.returncode == 0, err
            lines += [json.loads(line) for line in out.splitlines()]
    finally:
        for worker in workers:
            reap(worker)
    failed = [line for line in lines if "error" in line]
    listed = cli_proc("thread", "list", "--status", "completed").json()
    assert sorted(t["thread"] for t in listed) == sorted(threads)  # every thread reached $END
    log = sorted(provider.log)
    answered = [(arrived, done) for arrived, done, status in log if status == 200]
    refused = [arrived for arrived, _, status in log if status == 429]
    # every answered call is a step that landed, or one a worker reported failed after it
    after_call = [line for line in failed if "LLM HTTP 429" not in line["error"]]
    assert len(answered) == threads_n + len(after_call), failed
    assert refused  # its first request at least: the 429 path ran
    assert most_at_once(answered) <= concurrency
    arrivals = [arrived for arrived, _, _ in log]
    for start in arrivals:  # perMinute: no 60 s holds more than the cap
        assert sum(start <= t < start + 60 for t in arrivals) <= per_minute
    for at in refused:  # a 429 pauses the provider: only steps already running may call
        during = [t for t in arrivals if at < t < at + provider.retry_after]
        assert len(during) <= concurrency, (at, during)
