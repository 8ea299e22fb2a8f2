"""Step views: `thread steps` (`step list`), `thread step-details` (`step show`), `step read`,
`thread fork` (`step fork`), and the hidden v0.5.0 aliases `thread exec` / `thread cancel`
(docs/format.md, "Markdown views"; docs/errors.md, "step").

Real steps come from uwf-mock (one assistant turn holding the raw output). Steps the mock
cannot write (custom detail shapes, null or missing details, tool turns, missing turn nodes)
are written with the store API.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from rootfiles import RootFiles, open_store, put_unchecked
from support import APPROVE, DEV, EXAMPLES, PLAN, REJECT
from uwf.agent_kit.runner import TURN_SCHEMA, detail_schema
from uwf.cas.store import Store
from uwf.protocol import schemas
from uwf.util.ulid import new_thread_id

CAS_REF = {"type": "string", "format": "cas_ref"}
MISSING = "0000000000000"  # a well-formed hash that names no node
QUOTA_ERROR = "error: invalid --quota: must be a positive integer\n"
OMITTED = "_[Earlier turns omitted due to quota. Use --quota to increase.]_"
BAD_HASH = 'invalid hash: "nope" (expected 13 upper-case Crockford Base32 characters)'


@dataclass
class Ran:
    workflow: str
    thread: str
    start: str
    heads: list[str]  # step hashes, oldest first
    scenario_path: str


def run(cli: Any, root: Path, scenario: Any, roles: dict[str, list[str]], count: int) -> Ran:
    """A solve-issue thread stepped ``count`` times by uwf-mock."""
    put = cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    assert put.code == 0, put.err
    started = cli("thread", "start", "solve-issue", "-p", "Fix the <login> bug & more")
    assert started.code == 0, started.err
    thread = started.json()["thread"]
    start = RootFiles(root).head(thread)
    assert start is not None
    agent = scenario(roles)
    r = cli("thread", "step", thread, "--agent", agent, "-c", str(count))
    assert r.code == 0, r.err
    results = r.jsonl()
    assert len(results) == count
    return Ran(put.json()["hash"], thread, start, [x["head"] for x in results], agent.split()[-1])


@pytest.fixture
def active(cli: Any, root: Path, scenario: Any) -> Ran:
    """planner -> developer -> reviewer (rejected): still active."""
    return run(
        cli, root, scenario, {"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT]}, 3
    )


@pytest.fixture
def completed(cli: Any, root: Path, scenario: Any) -> Ran:
    """planner -> developer -> reviewer (approved): archived as completed."""
    return run(
        cli, root, scenario, {"planner": [PLAN], "developer": [DEV], "reviewer": [APPROVE]}, 3
    )


def ok(cli: Any, *args: str) -> Any:
    r = cli(*args)
    assert r.code == 0, r.err
    return r


def fails(cli: Any, args: list[str], message: str) -> None:
    r = cli(*args)
    assert (r.code, r.out, r.err) == (1, "", f"error: {message}\n")


def cas_node(cli: Any, h: str) -> dict[str, Any]:
    node: dict[str, Any] = ok(cli, "cas", "get", h, "--timestamp").json()
    return node


# -- writing steps by hand -------------------------------------------------------------------


def put_turn(store: Store, index: int, role: str, content: str) -> str:
    return store.put(
        store.put_schema(TURN_SCHEMA), {"index": index, "role": role, "content": content}
    )


def put_detail(store: Store, turns: list[str]) -> str:
    return store.put(store.put_schema(detail_schema("TestDetail", {})), {"turns": turns})


def put_step(
    store: Store, detail: Any, role: str = "worker", output: str | None = None
) -> tuple[str, str]:
    """A StartNode and one StepNode on it; returns (start, step). A None detail is stored
    unchecked: readers tolerate it (docs/format.md, "uwf's schemas"), the StepNode schema does
    not."""
    h = schemas.ensure(store)
    start = store.put(h.start, {"workflow": MISSING, "prompt": "by hand"})
    payload = {
        "start": start,
        "prev": None,
        "role": role,
        "output": output or store.put(h.text, "out"),
        "detail": detail,
        "agent": "hand-written",
    }
    if detail is None:
        return start, put_unchecked(store, h.step, payload)
    return start, store.put(h.step, payload)


@pytest.fixture
def store(root: Path) -> Store:
    s = open_store(root)
    schemas.ensure(s)
    return s


# -- thread steps / step list ----------------------------------------------------------------


def test_steps_lists_start_then_steps_oldest_first(cli: Any, active: Ran) -> None:
    out = ok(cli, "thread", "steps", active.thread).json()
    assert list(out) == ["thread", "workflow", "steps", "cost"]
    assert (out["thread"], out["workflow"]) == (active.thread, active.workflow)
    steps = out["steps"]
    assert steps[0] == {
        "hash": active.start,
        "workflow": active.workflow,
        "prompt": "Fix the <login> bug & more",
        "timestamp": cas_node(cli, active.start)["timestamp"],
    }
    assert list(steps[0]) == ["hash", "workflow", "prompt", "timestamp"]
    outputs = [
        {"status": "_", "plan": "do it", "steps": ["one", "two"]},
        {"status": "_", "filesChanged": ["a.py"], "summary": "did it"},
        {"status": "rejected", "comments": "add tests"},
    ]
    for entry, h, role, output in zip(
        steps[1:], active.heads, ["planner", "developer", "reviewer"], outputs, strict=True
    ):
        node = cas_node(cli, h)
        assert entry == {
            "hash": h,
            "role": role,
            "output": output,  # expanded
            "detail": node["payload"]["detail"],  # a hash, not expanded
            "agent": "uwf-mock",
            "timestamp": node["timestamp"],
            "durationMs": None,  # uwf-mock records no duration and no model call
            "usage": None,
        }
    assert steps[1]["role"] == "planner"


def test_step_list_is_the_same_command(cli: Any, active: Ran) -> None:
    assert (
        ok(cli, "step", "list", active.thread).out == ok(cli, "thread", "steps", active.thread).out
    )
    y = ok(cli, "--format", "yaml", "step", "list", active.thread).out
    assert yaml.safe_load(y) == ok(cli, "thread", "steps", active.thread).json()


def test_steps_of_a_completed_thread_come_from_history(cli: Any, completed: Ran) -> None:
    assert ok(cli, "thread", "show", completed.thread).json()["done"] is True
    steps = ok(cli, "step", "list", completed.thread).json()["steps"]
    assert [s["hash"] for s in steps] == [completed.start, *completed.heads]
    assert steps[3]["output"] == {"status": "approved", "comments": "looks good"}


def test_steps_with_missing_output_and_null_detail(cli: Any, root: Path, store: Store) -> None:
    start, step = put_step(store, None, output=MISSING)
    thread = new_thread_id()
    with RootFiles(root).edit_threads() as threads:
        threads[thread] = step
    steps = ok(cli, "thread", "steps", thread).json()["steps"]
    assert [s["hash"] for s in steps] == [start, step]
    assert (steps[1]["output"], steps[1]["detail"]) == ({}, None)


def test_steps_of_a_thread_without_steps(cli: Any, new_thread: Any, solve_issue: str) -> None:
    thread = new_thread("only the task")
    steps = ok(cli, "thread", "steps", thread).json()["steps"]
    assert len(steps) == 1 and steps[0]["prompt"] == "only the task"
    assert steps[0]["workflow"] == solve_issue


# -- thread step-details / step show ---------------------------------------------------------


def mock_detail(ran: Ran, visit: int, content: str) -> dict[str, Any]:
    return {
        "scenario": ran.scenario_path,
        "visit": visit,
        # uwf-mock records no cost of its own; it carries the chain's total on (all zero here)
        "total": {
            "durationMs": 0,
            "promptTokens": 0,
            "completionTokens": 0,
            "totalTokens": 0,
            "calls": 0,
        },
        "turns": [{"index": 0, "role": "assistant", "content": content}],
    }


@pytest.mark.parametrize("command", [["thread", "step-details"], ["step", "show"]])
def test_step_details_expand_turns(cli: Any, active: Ran, command: list[str]) -> None:
    for h, raw in zip(active.heads, [PLAN, DEV, REJECT], strict=True):
        got = ok(cli, *command, h, "--format", "json").json()
        assert got == mock_detail(active, 1, raw)
        # the global option works as well
        assert ok(cli, "--format", "json", *command, h).json() == got
        assert yaml.safe_load(ok(cli, "--format", "yaml", *command, h).out) == got


def test_step_details_of_a_completed_thread(cli: Any, completed: Ran) -> None:
    got = ok(cli, "step", "show", completed.heads[2], "--format", "json").json()
    assert got == mock_detail(completed, 1, APPROVE)


def test_step_details_default_to_yaml(cli: Any, active: Ran) -> None:
    out = ok(cli, "thread", "step-details", active.heads[0]).out
    assert not out.startswith("{")
    assert yaml.safe_load(out) == mock_detail(active, 1, PLAN)


def test_step_details_errors(cli: Any, root: Path, store: Store, active: Ran) -> None:
    for command in (["thread", "step-details"], ["step", "show"]):
        fails(cli, [*command, MISSING], f"CAS node not found: {MISSING}")
        fails(cli, [*command, active.start], f"node {active.start} is not a StepNode")
        fails(cli, [*command, active.workflow], f"node {active.workflow} is not a StepNode")
        fails(cli, [*command, "nope"], BAD_HASH)
    _, no_detail = put_step(store, None)
    fails(cli, ["step", "show", no_detail], f"step {no_detail} has no detail")
    _, gone = put_step(store, "0000000000001")
    fails(cli, ["step", "show", gone], "detail node not found: 0000000000001")


def test_step_details_deep_expansion(cli: Any, store: Store) -> None:
    h = schemas.hashes()
    t0 = put_turn(store, 0, "assistant", "hello")
    t1 = put_turn(store, 1, "tool", "tool out")
    text = [store.put(h.text, f"text {i}") for i in range(4)]
    untyped = put_unchecked(store, "0000000000009", {"no": "schema node"})
    deep: dict[str, Any] = {
        "title": "DeepDetail",
        "type": "object",
        "properties": {
            "turns": {"type": "array", "items": CAS_REF},
            "extra": {"anyOf": [CAS_REF, {"type": "null"}]},
            "nested": {"type": "object", "properties": {"ref": CAS_REF, "n": {"type": "integer"}}},
            "loose": {"type": "object", "additionalProperties": CAS_REF},
            "ghost": CAS_REF,
            "raw": CAS_REF,
            "sub": CAS_REF,
            "none": {"anyOf": [CAS_REF, {"type": "null"}]},
        },
    }
    deep_type = store.put_schema(deep)
    sub = store.put(deep_type, {"turns": [t1], "nested": {"ref": text[3], "n": 2}})
    detail = store.put(
        deep_type,
        {
            "turns": [t0, t1],
            "extra": text[0],
            "nested": {"ref": text[1], "n": 1},
            "loose": {"k": text[2]},
            "ghost": MISSING,
            "raw": untyped,
            "sub": sub,
            "none": None,
            "other": text[0],  # no schema for this key: copied as is
        },
    )
    _, step = put_step(store, detail)
    turn0 = {"index": 0, "role": "assistant", "content": "hello"}
    turn1 = {"index": 1, "role": "tool", "content": "tool out"}
    assert ok(cli, "step", "show", step, "--format", "json").json() == {
        "turns": [turn0, turn1],
        "extra": "text 0",
        "nested": {"ref": "text 1", "n": 1},
        "loose": {"k": text[2]},  # additionalProperties is not followed
        "ghost": MISSING,  # a missing node keeps its hash
        "raw": {"no": "schema node"},  # a node whose type has no schema: its raw payload
        "sub": {"turns": [turn1], "nested": {"ref": "text 3", "n": 2}},  # recursively
        "none": None,
        "other": text[0],
    }


# -- thread show --full ---------------------------------------------------------------------


@pytest.mark.parametrize("which", ["active", "completed"])
def test_thread_show_full_lists_the_chain(
    cli: Any, cli_proc: Any, request: Any, which: str
) -> None:
    """``thread show --full`` (seed 004's "the whole history"): what ``thread show`` says,
    plus the chain as ``thread steps`` lists it; without --full, nothing more."""
    ran: Ran = request.getfixturevalue(which)
    brief = ok(cli, "thread", "show", ran.thread).json()
    full = ok(cli_proc, "thread", "show", ran.thread, "--full").json()
    chain = ok(cli, "thread", "steps", ran.thread).json()["steps"]
    assert full == {**brief, "chain": chain}
    assert [n["hash"] for n in chain] == [ran.start, *ran.heads]
    assert [n.get("role") for n in chain] == [None, "planner", "developer", "reviewer"]
    assert chain[3]["output"]["status"] == ("approved" if which == "completed" else "rejected")
    yaml_out = ok(cli, "--format", "yaml", "thread", "show", ran.thread, "--full").out
    assert yaml.safe_load(yaml_out) == full


# -- step read -------------------------------------------------------------------------------


def header(
    step: str, role: str = "worker", agent: str = "hand-written", output: str = '"out"'
) -> str:
    """What `step read` starts with: the step, its role and agent, its output in YAML."""
    return (
        f"# Step {step}\n\n**Role:** {role}\n**Agent:** {agent}"
        f"\n\n**Output:**\n\n```yaml\n{output}\n```"
    )


def turn_part(n: int, who: str, text: str) -> str:
    """A turn as `step read` shows it: its text fenced (agent text cannot forge a turn)."""
    longest = max((len(r) for r in re.findall("`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"\n\n## Turn {n}: {who}\n\n{ticks}markdown\n{text}{chr(10) if text else ''}{ticks}"


def step_read(cli: Any, step: str, *args: str) -> str:
    return str(ok(cli, "step", "read", step, *args).out)


def test_step_read_of_a_mock_step(cli: Any, active: Ran) -> None:
    output = "status: rejected\ncomments: add tests"
    assert step_read(cli, active.heads[2]) == (
        header(active.heads[2], "reviewer", "uwf-mock", output)
        + turn_part(1, "assistant", REJECT)
        + "\n"
    )


def test_step_read_shows_every_turn_verbatim(cli: Any, store: Store) -> None:
    contents = [
        "Hello **world** <b>&amp;</b>",
        "# tool <output> & `stuff`\n| a | b |",
        "",  # empty content is kept
        "* last *",
    ]
    roles = ["assistant", "tool", "assistant", "user"]
    turns = [put_turn(store, i, r, c) for i, (r, c) in enumerate(zip(roles, contents, strict=True))]
    _, step = put_step(store, put_detail(store, turns))
    expected = header(step)
    for i, (r, c) in enumerate(zip(roles, contents, strict=True)):
        expected += turn_part(i + 1, r, c)  # labelled with who spoke
    assert step_read(cli, step) == expected + "\n"


def test_step_read_shows_tool_calls(cli: Any, store: Store) -> None:
    """A turn that only calls tools is no longer an empty turn: each call is shown with its
    arguments, and every turn says who spoke."""
    turn_type = store.put_schema(TURN_SCHEMA)
    calls = [
        {"name": "read_file", "args": '{"path": "notes/plan.md"}'},
        {"name": "run_command", "args": '{"command": "pytest -q"}'},
    ]
    turns = [
        store.put(turn_type, {"index": 0, "role": "assistant", "content": "", "toolCalls": calls}),
        put_turn(store, 1, "tool", "the plan"),
        store.put(
            turn_type,
            {"index": 2, "role": "assistant", "content": "Done.", "toolCalls": None},
        ),
    ]
    _, step = put_step(store, put_detail(store, turns))
    assert step_read(cli, step) == header(step) + (
        "\n\n## Turn 1: assistant"
        '\n\n**Tool call:** `read_file`\n\n```\n{"path": "notes/plan.md"}\n```'
        '\n\n**Tool call:** `run_command`\n\n```\n{"command": "pytest -q"}\n```'
        + turn_part(2, "tool", "the plan")
        + turn_part(3, "assistant", "Done.")
        + "\n"
    )


def test_step_read_numbers_turns_by_index_or_position(cli: Any, store: Store) -> None:
    loose_type = store.put_schema(
        {"type": "object", "properties": {"role": {"type": "string"}, "content": {}}}
    )
    by_index = [put_turn(store, 5, "assistant", "five"), put_turn(store, 7, "tool", "seven")]
    _, step = put_step(store, put_detail(store, [*by_index, MISSING]))
    assert (
        step_read(cli, step)
        == header(step) + turn_part(6, "assistant", "five") + turn_part(8, "tool", "seven") + "\n"
    )

    no_index = [
        store.put(loose_type, {"role": "assistant", "content": "first"}),
        store.put(loose_type, {"role": "assistant", "content": None}),  # not text: skipped
        MISSING,  # missing turn node: skipped
        store.put(loose_type, {"role": "tool", "content": "second"}),
    ]
    _, step = put_step(store, put_detail(store, no_index))
    assert (
        step_read(cli, step)
        == header(step) + turn_part(1, "assistant", "first") + turn_part(2, "tool", "second") + "\n"
    )


def test_step_read_header_only_without_turns(cli: Any, store: Store) -> None:
    h = schemas.hashes()
    details: list[Any] = [
        None,
        store.put(store.put_schema({"type": "object"}), {"note": "no turns"}),
        put_detail(store, []),
        store.put(h.text, "a text detail"),
        put_detail(store, [MISSING]),
    ]
    for detail in details:
        _, step = put_step(store, detail)
        assert step_read(cli, step) == header(step) + "\n", detail


def test_step_read_errors(cli: Any, store: Store, active: Ran) -> None:
    fails(cli, ["step", "read", MISSING], f"CAS node not found: {MISSING}")
    fails(cli, ["step", "read", active.start], f"node {active.start} is not a StepNode")
    fails(cli, ["step", "read", "nope"], BAD_HASH)
    _, gone = put_step(store, "0000000000001")
    fails(cli, ["step", "read", gone], "detail node not found: 0000000000001")
    for quota in ("0", "-1", "x", ""):
        r = cli("step", "read", active.heads[0], "--quota", quota)
        assert (r.code, r.out, r.err) == (1, "", QUOTA_ERROR)


@pytest.fixture
def long_step(store: Store) -> tuple[str, list[str]]:
    """A step with six 200-character turns."""
    contents = [f"turn {i} " + "y" * (200 - len(f"turn {i} ")) for i in range(6)]
    turns = [put_turn(store, i, "assistant", c) for i, c in enumerate(contents)]
    _, step = put_step(store, put_detail(store, turns))
    return step, contents


def test_step_read_small_quota_keeps_the_newest_turns(
    cli: Any, long_step: tuple[str, list[str]]
) -> None:
    step, contents = long_step
    text = step_read(cli, step, "--quota", "700")
    assert len(text) <= 700 + 200
    assert text.startswith(header(step) + "\n\n" + OMITTED + "\n\n## Turn ")
    assert text.endswith(turn_part(6, "assistant", contents[5]) + "\n")
    assert "## Turn 1:" not in text


def test_step_read_quota_1_still_shows_one_turn(cli: Any, long_step: tuple[str, list[str]]) -> None:
    step, contents = long_step
    assert step_read(cli, step, "--quota", "1") == (
        header(step) + f"\n\n{OMITTED}" + turn_part(6, "assistant", contents[5]) + "\n"
    )


def test_step_read_quota_boundary(cli: Any, long_step: tuple[str, list[str]]) -> None:
    """available = quota - header - 200; a turn costs its section (+2 after the first)."""
    step, contents = long_step

    def cost(n: int) -> int:
        return len(turn_part(n, "assistant", contents[n - 1])) - 2

    two = len(header(step)) + 200 + cost(6) + cost(5) + 2
    assert "## Turn 5:" in step_read(cli, step, "--quota", str(two))
    assert "## Turn 4:" not in step_read(cli, step, "--quota", str(two))
    assert "## Turn 5:" not in step_read(cli, step, "--quota", str(two - 1))
    everything = len(header(step)) + 200 + sum(cost(n) for n in range(1, 7)) + 2 * 5
    assert OMITTED not in step_read(cli, step, "--quota", str(everything))
    assert OMITTED in step_read(cli, step, "--quota", str(everything - 1))


# -- fork ------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["thread", "fork"], ["step", "fork"]])
def test_fork_of_a_completed_thread_step(
    cli: Any, root: Path, snapshot: Any, completed: Ran, command: list[str]
) -> None:
    cas_before = snapshot(root / "cas")
    history_before = (root / "history.jsonl").read_bytes()
    out = ok(cli, *command, completed.heads[1]).json()
    assert list(out) == ["thread", "forkedFrom"]
    assert out["forkedFrom"] == {"step": completed.heads[1]}
    forked = out["thread"]
    assert forked != completed.thread
    assert snapshot(root / "cas") == cas_before  # a fork writes no node
    assert (root / "history.jsonl").read_bytes() == history_before
    show = ok(cli, "thread", "show", forked).json()
    assert (show["head"], show["done"], show["steps"]) == (completed.heads[1], False, 2)
    steps = ok(cli, "step", "list", forked).json()["steps"]
    assert [s["hash"] for s in steps] == [completed.start, *completed.heads[:2]]
    assert ok(cli, "thread", "show", completed.thread).json()["done"] is True


def test_fork_of_a_start_node_and_errors(cli: Any, active: Ran) -> None:
    forked = ok(cli, "step", "fork", active.start).json()["thread"]
    assert ok(cli, "thread", "show", forked).json()["steps"] == 0
    fails(cli, ["step", "fork", MISSING], f"CAS node not found: {MISSING}")
    fails(
        cli,
        ["step", "fork", active.workflow],
        f"node {active.workflow} is not a StartNode or StepNode",
    )


# -- hidden v0.5.0 aliases -------------------------------------------------------------------


def test_exec_and_cancel_are_hidden_aliases(cli: Any, new_thread: Any, scenario: Any) -> None:
    thread = new_thread()
    r = ok(cli, "thread", "exec", thread, "--agent", scenario())
    out = r.json()
    assert list(out) == ["workflow", "thread", "head", "role", "done", "status"]
    assert (out["thread"], out["role"], out["done"]) == (thread, "planner", False)
    assert ok(cli, "thread", "show", thread).json()["head"] == out["head"]

    assert ok(cli, "thread", "cancel", thread).json() == {"thread": thread, "killed": True}
    assert ok(cli, "thread", "show", thread).json()["status"] == "killed"
    fails(cli, ["thread", "cancel", thread], f"thread not active: {thread} (status: killed)")

    group_help = ok(cli, "thread", "--help").out
    commands = [
        line.split()[0] for line in group_help.split("Commands:")[1].splitlines() if line.strip()
    ]
    assert "step" in commands and "kill" in commands
    assert "exec" not in commands and "cancel" not in commands


@pytest.mark.parametrize(
    ("name", "current"),
    [
        ("thread exec", "thread step"),
        ("thread cancel", "thread kill"),
        ("workflow add", "workflow put"),
        ("step list", "thread steps"),
        ("step show", "thread step-details"),
        ("step fork", "thread fork"),
    ],
)
def test_an_alias_shows_its_commands_full_help_and_the_current_name(
    cli_proc: Any, name: str, current: str
) -> None:
    alias = " ".join(ok(cli_proc, *name.split(), "--help").out.split())
    command = " ".join(ok(cli_proc, *current.split(), "--help").out.split())
    line = f"Alias of `uwf {current}`, the current name (`uwf {name}` is its v0.5.0 name)."
    assert line in alias
    same = alias.replace(f" {line}", "", 1).replace(f"Usage: uwf {name} ", f"Usage: uwf {current} ")
    assert same == command


def test_step_group_lists_its_commands(cli: Any) -> None:
    out = ok(cli, "step", "--help").out
    commands = [line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.strip()]
    assert commands == ["list", "show", "fork", "read", "artifacts", "turns"]


def test_history_is_untouched_by_views(cli: Any, root: Path, snapshot: Any, completed: Ran) -> None:
    """Reading views of an archived thread changes no state file."""
    before = {k: v for k, v in snapshot(root).items() if not k.startswith("cas/")}
    ok(cli, "step", "list", completed.thread)
    ok(cli, "step", "show", completed.heads[0])
    ok(cli, "step", "read", completed.heads[0])
    ok(cli, "thread", "read", completed.thread)
    after = {k: v for k, v in snapshot(root).items() if not k.startswith("cas/")}
    assert after == before
    assert (
        json.loads((root / "history.jsonl").read_text().splitlines()[-1])["status"] == "completed"
    )
