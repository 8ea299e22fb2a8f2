"""`uwf thread read` (docs/format.md, "Markdown views"), head resolution, and the
last-assistant-content helper.

Threads are run for real with ``uwf-mock``: the mock stores one assistant turn holding the raw
output, and its frontmatter holds only ``status``, so the fenced **Output:** block (the
structured output as frontmatter, then the content) is the raw output verbatim and its length
is set by padding the body. Chains the mock cannot produce (details without turns, tool turns,
missing nodes) are written with the store API.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from rootfiles import RootFiles, open_store, put_unchecked
from uwf.agent_kit.runner import TURN_SCHEMA, detail_schema
from uwf.cas.store import Store
from uwf.model.turns import last_assistant_content
from uwf.protocol import schemas
from uwf.util.ulid import new_thread_id

SEPARATOR = "\n\n---\n\n"
# v0.5.0 counts 6 for the 7-character separator (docs/format.md, "Markdown views")
SEPARATOR_COST = 6
HUGE = "1000000"
TASK = 'Write the <report> & "summary" — see *notes*'
QUOTA_ERROR = "error: invalid --quota: must be a positive integer\n"


def goal(role: str) -> str:
    return f"You are the {role}; do the {role} part well."


def prompt_part(role: str) -> str:
    return f"\n\n<prompt>\n{goal(role)}\n</prompt>"


def edge_part(edge: str) -> str:
    return f"\n\n**Edge prompt:**\n\n```text\n{edge}\n```"


def output_part(answer: str) -> str:
    """The fenced answer of a step (its output as frontmatter, then its content)."""
    return f"\n\n**Output:**\n\n```markdown\n{answer.strip(chr(10))}\n```"


def put_workflow(cli: Any, tmp_path: Path, name: str, roles: list[str]) -> str:
    """Register a workflow where every role can hand over to any role, or finish on `done`."""
    statuses = [*roles, "done"]
    doc = {
        "name": name,
        "description": "a test workflow for thread read",
        "roles": {
            r: {
                "description": f"the {r}",
                "goal": goal(r),
                "capabilities": ["writing"],
                "procedure": "do it",
                "output": "the result",
                "meta": {
                    "type": "object",
                    "properties": {"status": {"type": "string", "enum": statuses}},
                    "required": ["status"],
                },
            }
            for r in roles
        },
        "graph": {
            "$START": {"_": {"role": roles[0], "prompt": "Begin."}},
            **{
                r: {
                    **{t: {"role": t, "prompt": f"Over to {t}."} for t in roles},
                    "done": {"role": "$END", "prompt": "Finished."},
                }
                for r in roles
            },
        },
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = cli("workflow", "put", str(path))
    assert r.code == 0, r.err
    return str(r.json()["hash"])


def raw_output(status: str, body: str, size: int | None = None) -> str:
    """A mock agent's raw output: frontmatter with the status, then the body (padded)."""
    text = f"---\nstatus: {status}\n---\n{body}"
    if size is not None:
        assert len(text) <= size
        text += "x" * (size - len(text))
    return text


@dataclass
class Run:
    thread: str
    heads: list[str]  # the step hashes, oldest first
    outputs: list[str]  # the raw output of each step


def run_thread(
    cli: Any,
    scenario: Any,
    workflow: str,
    sequence: list[str],
    *,
    sizes: list[int] | None = None,
    bodies: list[str] | None = None,
    finish: bool = False,
) -> Run:
    """Start a thread and step it through ``sequence`` with uwf-mock (archived if finish)."""
    entries: dict[str, list[str]] = {}
    outputs = []
    for i, role in enumerate(sequence):
        nxt = sequence[i + 1] if i + 1 < len(sequence) else ("done" if finish else sequence[0])
        body = bodies[i] if bodies else f"Body {i + 1} by {role}."
        out = raw_output(nxt, body, sizes[i] if sizes else None)
        entries.setdefault(role, []).append(out)
        outputs.append(out)
    started = cli("thread", "start", workflow, "-p", TASK)
    assert started.code == 0, started.err
    thread = str(started.json()["thread"])
    r = cli("thread", "step", thread, "--agent", scenario(entries), "-c", str(len(sequence)))
    assert r.code == 0, r.err
    results = r.jsonl()
    assert [x["role"] for x in results] == sequence
    assert results[-1]["done"] is finish
    return Run(thread, [x["head"] for x in results], outputs)


def read(cli: Any, thread: str, *args: str) -> str:
    r = cli("thread", "read", thread, *args)
    assert r.code == 0, r.err
    assert r.err == ""
    return str(r.out)


def utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def start_section(thread: str, name: str, wf: str, task: str = TASK) -> str:
    return f"# Thread `{thread}`\n\n**Workflow:** {name} (`{wf}`)\n\n## Task\n\n{task}"


def hint(n: int, thread: str, first_shown: str) -> str:
    noun = "step" if n == 1 else "steps"
    return f"*({n} earlier {noun}, load with `uwf thread read {thread} --before {first_shown}`)*"


def step_numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"^## Step (\d+): ", text, flags=re.M)]


# -- the rendering ---------------------------------------------------------------------------


def test_full_rendering_of_one_step(cli: Any, root: Path, tmp_path: Path, scenario: Any) -> None:
    wf = put_workflow(cli, tmp_path, "report", ["worker"])
    body = "# Heading\n\n## Sub *heading*\n\n- a < b && c > d\n`code` &amp; <tag>\n"
    run = run_thread(cli, scenario, "report", ["worker"], bodies=[body])
    (step,) = run.heads
    node = open_store(root).get(step)
    assert node is not None
    expected = (
        start_section(run.thread, "report", wf)
        + SEPARATOR
        + f"## Step 1: worker `{step}`\n**Agent:** uwf-mock | **Time:** {utc(node.timestamp)}"
        + prompt_part("worker")
        + edge_part("Begin.")  # the prompt of the edge it took
        + output_part(run.outputs[0])
        + "\n"  # one final newline is added to the markdown
    )
    assert read(cli, run.thread) == expected
    # the raw output (markdown headings, <, >, &) appears verbatim, never escaped
    assert "&lt;" not in expected and "# Heading\n\n## Sub *heading*" in expected


def test_each_step_shows_the_edge_prompt_it_was_given(
    cli: Any, tmp_path: Path, scenario: Any
) -> None:
    """The edge prompt (the rendered prompt of the graph edge that chose the role) of every
    step, before its output; a step without one (an agent that did not record it) shows none."""
    put_workflow(cli, tmp_path, "trio", ["planner", "coder", "tester"])
    run = run_thread(cli, scenario, "trio", ["planner", "coder", "tester", "coder"])
    blocks = read(cli, run.thread, "--quota", HUGE).rstrip("\n").split(SEPARATOR)[1:]
    given = [
        re.findall(r"Edge prompt:\*\*\n\n```text\n(.*?)\n```\n\n\*\*Output", b) for b in blocks
    ]
    assert given == [["Begin."], ["Over to coder."], ["Over to tester."], ["Over to coder."]]


def test_no_heading_style_sections(cli: Any, tmp_path: Path, scenario: Any) -> None:
    put_workflow(cli, tmp_path, "report", ["worker"])
    text = read(cli, run_thread(cli, scenario, "report", ["worker", "worker"]).thread)
    assert "### Content" not in text and "### Prompt" not in text
    assert text.count("**Output:**\n\n```markdown\n") == 2
    assert text.count("<prompt>\n") == text.count("\n</prompt>") == 1


def test_thread_without_steps_shows_the_start_section_only(
    cli: Any, tmp_path: Path, scenario: Any
) -> None:
    wf = put_workflow(cli, tmp_path, "report", ["worker"])
    thread = cli("thread", "start", "report", "-p", TASK).json()["thread"]
    assert read(cli, thread) == start_section(thread, "report", wf) + "\n"
    assert (
        read(cli, thread, "--start", "--quota", "1") == start_section(thread, "report", wf) + "\n"
    )


@pytest.mark.parametrize(
    ("sequence", "prompts"),
    [
        (["writer", "writer"], 1),
        (["planner", "coder"], 2),
        (["A", "B", "A"], 2),
        (["A", "B", "A", "B", "A"], 2),
    ],
)
def test_prompt_is_shown_once_per_role(
    cli: Any, tmp_path: Path, scenario: Any, sequence: list[str], prompts: int
) -> None:
    roles = list(dict.fromkeys(sequence))
    put_workflow(cli, tmp_path, "dedup", roles)
    text = read(cli, run_thread(cli, scenario, "dedup", sequence).thread)
    assert step_numbers(text) == list(range(1, len(sequence) + 1))
    assert text.count("<prompt>") == prompts
    for role in roles:
        assert text.count(goal(role)) == 1
    # the prompt belongs to the first step of each role shown
    blocks = text.split(SEPARATOR)[1:]
    for i, role in enumerate(sequence):
        assert (prompt_part(role) in blocks[i]) is (sequence.index(role) == i)


# -- --start and --before --------------------------------------------------------------------


@pytest.fixture
def three(cli: Any, tmp_path: Path, scenario: Any) -> tuple[str, Run]:
    wf = put_workflow(cli, tmp_path, "report", ["worker"])
    return wf, run_thread(cli, scenario, "report", ["worker"] * 3)


def test_start_flag_without_before_changes_nothing(cli: Any, three: tuple[str, Run]) -> None:
    _, run = three
    full = read(cli, run.thread)
    assert full.startswith("# Thread `")
    assert "## Task\n\n" + TASK in full
    assert read(cli, run.thread, "--start") == full


def test_before_shows_only_earlier_steps(cli: Any, three: tuple[str, Run]) -> None:
    wf, run = three
    full = read(cli, run.thread)
    blocks = full.rstrip("\n").split(SEPARATOR)
    before = read(cli, run.thread, "--before", run.heads[2])
    assert before == SEPARATOR.join(blocks[1:3]) + "\n"  # no start section, steps 1 and 2
    assert step_numbers(before) == [1, 2]
    with_start = read(cli, run.thread, "--before", run.heads[2], "--start")
    assert with_start == SEPARATOR.join(blocks[:3]) + "\n"
    assert with_start.startswith(start_section(run.thread, "report", wf))
    # numbering stays absolute
    assert step_numbers(read(cli, run.thread, "--before", run.heads[1])) == [1]


def test_before_the_first_step(cli: Any, three: tuple[str, Run]) -> None:
    wf, run = three
    assert read(cli, run.thread, "--before", run.heads[0]) == "\n"  # nothing: a lone newline
    only_start = read(cli, run.thread, "--before", run.heads[0], "--start")
    assert only_start == start_section(run.thread, "report", wf) + "\n"


def test_unknown_before_hash_fails(
    cli: Any, root: Path, snapshot: Any, three: tuple[str, Run]
) -> None:
    wf, run = three
    start_hash = cli("thread", "steps", run.thread).json()["steps"][0]["hash"]
    before = snapshot(root)
    for h in (wf, start_hash, "0123456789ABC"):
        r = cli("thread", "read", run.thread, "--before", h)
        assert (r.code, r.out, r.err) == (
            1,
            "",
            f"error: step {h} not found in thread {run.thread}\n",
        )
    r = cli("thread", "read", run.thread, "--before", "abc")
    assert r.code == 1
    assert (
        r.err == 'error: invalid hash: "abc" (expected 13 upper-case Crockford Base32 characters)\n'
    )
    assert snapshot(root) == before


def test_before_a_step_of_another_thread_fails(
    cli: Any, tmp_path: Path, scenario: Any, three: tuple[str, Run]
) -> None:
    _, run = three
    other = run_thread(cli, scenario, "report", ["worker"], bodies=["another thread"])
    r = cli("thread", "read", run.thread, "--before", other.heads[0])
    assert r.code == 1
    assert r.err == f"error: step {other.heads[0]} not found in thread {run.thread}\n"


# -- quota -----------------------------------------------------------------------------------


@pytest.mark.parametrize("quota", ["0", "-5", "abc", "", "1.5"])
def test_invalid_quota(cli: Any, three: tuple[str, Run], quota: str) -> None:
    _, run = three
    r = cli("thread", "read", run.thread, "--quota", quota)
    assert (r.code, r.out, r.err) == (1, "", QUOTA_ERROR)


def test_quota_1_still_shows_the_newest_step(cli: Any, three: tuple[str, Run]) -> None:
    wf, run = three
    text = read(cli, run.thread, "--quota", "1")
    assert step_numbers(text) == [3]
    pieces = text.rstrip("\n").split(SEPARATOR)
    assert pieces[0] == start_section(run.thread, "report", wf)
    assert pieces[1] == hint(2, run.thread, run.heads[2])
    assert pieces[2].startswith(f"## Step 3: worker `{run.heads[2]}`")
    assert prompt_part("worker") in pieces[2]  # the only shown step of the role carries it


def test_singular_hint(cli: Any, tmp_path: Path, scenario: Any) -> None:
    put_workflow(cli, tmp_path, "report", ["worker"])
    run = run_thread(cli, scenario, "report", ["worker"] * 2)
    assert hint(1, run.thread, run.heads[1]) in read(cli, run.thread, "--quota", "1")


def test_quota_800_over_three_500_char_steps(cli: Any, tmp_path: Path, scenario: Any) -> None:
    put_workflow(cli, tmp_path, "report", ["worker"])
    run = run_thread(cli, scenario, "report", ["worker"] * 3, sizes=[500] * 3)
    text = read(cli, run.thread, "--quota", "800")
    assert len(text) <= 1000
    assert "earlier step" in text
    assert run.outputs[2] in text and f"## Step 3: worker `{run.heads[2]}`" in text
    assert step_numbers(text) == [3]


def test_quota_500_over_300_and_600_char_steps(cli: Any, tmp_path: Path, scenario: Any) -> None:
    put_workflow(cli, tmp_path, "report", ["worker"])
    run = run_thread(cli, scenario, "report", ["worker"] * 2, sizes=[300, 600])
    text = read(cli, run.thread, "--quota", "500")
    assert run.outputs[1] in text  # the newest step, though it alone exceeds the quota
    assert hint(1, run.thread, run.heads[1]) in text
    assert len(text) < 1200
    assert step_numbers(text) == [2]


def test_quota_600_with_start(cli: Any, tmp_path: Path, scenario: Any) -> None:
    wf = put_workflow(cli, tmp_path, "report", ["worker"])
    run = run_thread(cli, scenario, "report", ["worker"] * 3, sizes=[300] * 3)
    text = read(cli, run.thread, "--quota", "600", "--start")
    assert len(text) <= 810
    assert "# Thread" in text and f"**Workflow:** report (`{wf}`)" in text
    assert step_numbers(text) == [3] and "earlier steps" in text


def test_huge_quota_shows_everything(cli: Any, three: tuple[str, Run]) -> None:
    _, run = three
    text = read(cli, run.thread, "--quota", HUGE)
    assert step_numbers(text) == [1, 2, 3]
    assert "earlier step" not in text
    for out in run.outputs:
        assert output_part(out) in text
    assert read(cli, run.thread) == text  # the default quota (4000) is enough here


def test_before_with_quota_500(cli: Any, tmp_path: Path, scenario: Any) -> None:
    put_workflow(cli, tmp_path, "report", ["worker"])
    run = run_thread(cli, scenario, "report", ["worker"] * 4, sizes=[300] * 4)
    text = read(cli, run.thread, "--before", run.heads[3], "--quota", "500")
    assert len(text) <= 700
    assert step_numbers(text) == [3]  # no later step, the newest earlier one
    assert run.outputs[3] not in text and run.outputs[2] in text
    assert "# Thread" not in text
    assert text.startswith(hint(2, run.thread, run.heads[2]) + SEPARATOR)


def test_quota_boundary_counts_separators_as_6(cli: Any, tmp_path: Path, scenario: Any) -> None:
    """Quota selection, exactly (docs/format.md, "Markdown views"): start section + (block + 6)
    per step."""
    put_workflow(cli, tmp_path, "trio", ["planner", "coder", "tester"])
    run = run_thread(cli, scenario, "trio", ["planner", "coder", "tester"], sizes=[200, 250, 300])
    full = read(cli, run.thread, "--quota", HUGE).rstrip("\n")
    start, b1, b2, b3 = full.split(SEPARATOR)
    fits_two = len(start) + (len(b3) + SEPARATOR_COST) + (len(b2) + SEPARATOR_COST)
    assert step_numbers(read(cli, run.thread, "--quota", str(fits_two))) == [2, 3]
    assert step_numbers(read(cli, run.thread, "--quota", str(fits_two - 1))) == [3]
    fits_all = fits_two + len(b1) + SEPARATOR_COST
    assert read(cli, run.thread, "--quota", str(fits_all)).rstrip("\n") == full
    cut = read(cli, run.thread, "--quota", str(fits_all - 1))
    assert step_numbers(cut) == [2, 3] and hint(1, run.thread, run.heads[1]) in cut
    # without the start section (--before), the first block is counted without a separator
    b_start, c1, c2 = (
        read(cli, run.thread, "--before", run.heads[2], "--start").rstrip("\n").split(SEPARATOR)
    )
    assert b_start == start
    two_only = len(c2) + len(c1) + SEPARATOR_COST
    assert step_numbers(
        read(cli, run.thread, "--before", run.heads[2], "--quota", str(two_only))
    ) == [1, 2]
    assert step_numbers(
        read(cli, run.thread, "--before", run.heads[2], "--quota", str(two_only - 1))
    ) == [2]


def test_quota_counts_the_prompt_of_every_step(cli: Any, tmp_path: Path, scenario: Any) -> None:
    """A deduplicated `<prompt>` still costs its length (docs/format.md, "Markdown views")."""
    put_workflow(cli, tmp_path, "solo", ["writer"])
    run = run_thread(cli, scenario, "solo", ["writer", "writer"], sizes=[200, 200])
    start, b1, b2 = read(cli, run.thread, "--quota", HUGE).rstrip("\n").split(SEPARATOR)
    assert prompt_part("writer") in b1 and prompt_part("writer") not in b2
    cost2 = len(b2) + len(prompt_part("writer"))
    both = len(start) + (cost2 + SEPARATOR_COST) + (len(b1) + SEPARATOR_COST)
    assert step_numbers(read(cli, run.thread, "--quota", str(both))) == [1, 2]
    assert step_numbers(read(cli, run.thread, "--quota", str(both - 1))) == [2]


# -- archived threads ------------------------------------------------------------------------


def test_completed_thread_is_read_through_history(
    cli: Any, root: Path, tmp_path: Path, scenario: Any
) -> None:
    wf = put_workflow(cli, tmp_path, "report", ["worker"])
    run = run_thread(cli, scenario, "report", ["worker"] * 3, finish=True)
    assert run.thread not in RootFiles(root).active()
    text = read(cli, run.thread)
    assert text.startswith(start_section(run.thread, "report", wf))
    assert step_numbers(text) == [1, 2, 3]
    before = read(cli, run.thread, "--before", run.heads[2])
    assert step_numbers(before) == [1, 2] and "# Thread" not in before
    small = read(cli, run.thread, "--before", run.heads[2], "--quota", "1", "--start")
    assert step_numbers(small) == [2] and hint(1, run.thread, run.heads[1]) in small


# -- steps the mock cannot write: details without usable assistant content ------------------


def turn(store: Store, index: int, role: str, content: str) -> str:
    return store.put(
        store.put_schema(TURN_SCHEMA), {"index": index, "role": role, "content": content}
    )


def detail(store: Store, turns: list[str]) -> str:
    return store.put(store.put_schema(detail_schema("TestDetail", {})), {"turns": turns})


def manual_thread(root: Path, wf: str, steps: list[tuple[str, Any]]) -> tuple[str, list[str]]:
    """A thread whose steps (role, detail) are written directly; returns (id, step hashes)."""
    store = open_store(root)
    h = schemas.ensure(store)
    start = store.put(h.start, {"workflow": wf, "prompt": TASK})
    output = store.put(h.text, "structured output")
    prev = None
    hashes = []
    for role, det in steps:
        payload = {
            "start": start,
            "prev": prev,
            "role": role,
            "output": output,
            "detail": det,
            "agent": "hand-written",
        }
        # readers tolerate a null detail (docs/format.md, "uwf's schemas"); the StepNode schema
        # does not
        prev = put_unchecked(store, h.step, payload) if det is None else store.put(h.step, payload)
        hashes.append(prev)
    thread = new_thread_id()
    with RootFiles(root).edit_threads() as threads:
        threads[thread] = prev or start
    return thread, hashes


def test_steps_without_assistant_content_show_only_their_output(
    cli: Any, root: Path, tmp_path: Path
) -> None:
    wf = put_workflow(cli, tmp_path, "manual", ["worker"])
    store = open_store(root)
    h = schemas.ensure(store)
    text_node = store.put(h.text, "a detail that is not a turn list")
    no_turns = store.put(store.put_schema({"type": "object"}), {"note": "no turns here"})
    cases: list[tuple[str, Any, str | None]] = [
        ("worker", text_node, None),
        ("worker", no_turns, None),
        ("worker", "0000000000000", None),  # detail node missing
        ("worker", None, None),  # no detail at all
        ("worker", detail(store, []), None),
        ("worker", detail(store, [turn(store, 0, "tool", "tool says hi")]), None),
        ("worker", detail(store, [turn(store, 0, "assistant", " \n\t ")]), None),
        ("worker", detail(store, [turn(store, 0, "user", "a user turn")]), None),
        (
            "worker",
            detail(
                store,
                [
                    turn(store, 0, "assistant", "kept <answer>\n"),
                    turn(store, 1, "tool", "tool result"),
                    turn(store, 2, "assistant", "   "),
                    "0000000000001",  # a turn node that is missing is skipped
                ],
            ),
            "kept <answer>\n",
        ),
        ("ghost", detail(store, [turn(store, 0, "assistant", "from a ghost")]), "from a ghost"),
    ]
    thread, hashes = manual_thread(root, wf, [(role, det) for role, det, _ in cases])
    blocks = read(cli, thread, "--quota", HUGE).rstrip("\n").split(SEPARATOR)[1:]
    assert len(blocks) == len(cases)
    for i, ((role, _, content), block, step) in enumerate(zip(cases, blocks, hashes, strict=True)):
        assert block.startswith(f"## Step {i + 1}: {role} `{step}`\n**Agent:** hand-written | ")
        answer = '---\n"structured output"\n---'  # a Text output: its JSON in the block
        if content is None:
            assert block.endswith(output_part(answer)), i
        else:
            assert block.endswith(output_part(f"{answer}\n{content}")), i
    # the role's prompt is shown once (first block); a role the workflow lacks has none
    assert prompt_part("worker") in blocks[0]
    assert "<prompt>" not in "".join(blocks[1:])


# -- head resolution -----------------------------------------------------------------------


def test_head_from_threads_yaml_else_history(
    cli: Any, root: Path, tmp_path: Path, scenario: Any
) -> None:
    wf = put_workflow(cli, tmp_path, "report", ["worker"])
    run = run_thread(cli, scenario, "report", ["worker"] * 2)
    state = RootFiles(root)
    other = new_thread_id()

    def views() -> tuple[str, list[int], int]:
        show = cli("thread", "show", run.thread).json()
        steps = cli("thread", "steps", run.thread).json()["steps"]
        return show["head"], step_numbers(read(cli, run.thread)), len(steps) - 1

    assert views() == (run.heads[1], [1, 2], 2)  # active

    # in both files (hand-edited history, not its last line): the active entry wins
    state.append_history(run.thread, wf, run.heads[0], "completed", 1)
    state.append_history(other, wf, run.heads[1], "completed", 2)
    assert views() == (run.heads[1], [1, 2], 2)
    assert cli("thread", "show", run.thread).json()["done"] is False

    # archived: the LAST line of this thread is used, whatever lines surround it
    with state.edit_threads() as threads:
        del threads[run.thread]
    assert views() == (run.heads[0], [1], 1)
    state.append_history(run.thread, wf, run.heads[1], "killed", 3)
    state.append_history(other, wf, run.heads[0], "killed", 4)
    assert views() == (run.heads[1], [1, 2], 2)
    show = cli("thread", "show", run.thread).json()
    assert (show["status"], show["done"], show["steps"]) == ("killed", True, 2)
    # a line that is not a whole entry is damage, never skipped (docs/reliability.md,
    # "Repairing damaged state"): every reader of the history says so
    history = root / "history.jsonl"
    number = len(history.read_text().splitlines()) + 1
    with history.open("a") as fh:
        fh.write("not json\n[]\n")
    for args in (["show", run.thread], ["steps", run.thread], ["read", run.thread]):
        r = cli("thread", *args)
        assert (r.code, r.out) == (1, ""), args
        assert r.err == (
            f'error: {history} is damaged: line {number} is not a whole entry: "not json"; '
            'see docs/reliability.md, "Repairing damaged state"\n'
        )


def test_crashed_archive_counts_as_archived(
    cli: Any, root: Path, tmp_path: Path, scenario: Any
) -> None:
    """A thread in threads.yaml whose id is on the LAST history line is a crash leftover of
    `archive` (history appended, threads.yaml not yet rewritten): it reads as archived."""
    wf = put_workflow(cli, tmp_path, "report", ["worker"])
    run = run_thread(cli, scenario, "report", ["worker"] * 2)
    RootFiles(root).append_history(run.thread, wf, run.heads[1], "completed", 1)
    assert run.thread in (root / "threads.yaml").read_text()
    show = cli("thread", "show", run.thread).json()
    assert (show["head"], show["done"], show["status"]) == (run.heads[1], True, "completed")
    assert step_numbers(read(cli, run.thread)) == [1, 2]
    # the next writer of threads.yaml drops the leftover entry
    assert cli("thread", "start", "report", "-p", "next").code == 0
    assert run.thread not in (root / "threads.yaml").read_text()


def test_unknown_thread_for_every_view(cli: Any, root: Path) -> None:
    ghost = new_thread_id()
    (root / "history.jsonl").parent.mkdir(parents=True)
    (root / "history.jsonl").write_text(
        json.dumps({"thread": new_thread_id(), "workflow": "X", "head": "0000000000000"}) + "\n"
    )
    for cmd in (["thread", "read"], ["thread", "show"], ["thread", "steps"], ["step", "list"]):
        r = cli(*cmd, ghost)
        assert (r.code, r.err) == (1, f"error: thread not found: {ghost}\n"), cmd


# -- the last-assistant-content helper -------------------------------------------------------


@pytest.fixture
def store(root: Path) -> Store:
    s = open_store(root)
    schemas.ensure(s)
    return s


def test_last_assistant_content_skips_tool_and_blank_turns(store: Store) -> None:
    turns = [
        turn(store, 0, "assistant", "first answer"),
        turn(store, 1, "assistant", "  second answer \n"),
        turn(store, 2, "tool", "tool output"),
        turn(store, 3, "assistant", "\n \t"),
        turn(store, 4, "user", "thanks"),
    ]
    assert last_assistant_content(store, detail(store, turns)) == "  second answer \n"
    assert last_assistant_content(store, detail(store, turns[:1])) == "first answer"


def test_last_assistant_content_is_none_without_content(store: Store) -> None:
    blank = [turn(store, 0, "assistant", ""), turn(store, 1, "assistant", "   ")]
    tools = [turn(store, 0, "tool", "x"), turn(store, 1, "user", "y")]
    assert last_assistant_content(store, detail(store, blank)) is None
    assert last_assistant_content(store, detail(store, tools)) is None
    assert last_assistant_content(store, detail(store, [])) is None
    assert last_assistant_content(store, "0000000000000") is None  # missing detail node
    assert last_assistant_content(store, None) is None
    assert last_assistant_content(store, "") is None
    no_turns = store.put(store.put_schema({"type": "object"}), {"turns": "not a list"})
    assert last_assistant_content(store, no_turns) is None
    text = store.put(schemas.hashes().text, "plain text detail")
    assert last_assistant_content(store, text) is None


def test_last_assistant_content_skips_missing_turn_nodes(store: Store) -> None:
    turns = [turn(store, 0, "assistant", "survivor"), "0000000000000"]
    assert last_assistant_content(store, detail(store, turns)) == "survivor"


# -- structured outputs: steps without an agent's text -----------------------------------------


def test_steps_written_by_hand_show_their_fields(
    cli: Any, tmp_path: Path, new_thread: Any, scenario: Any
) -> None:
    """`thread answer` with no text, and `fork --output` of a JSON-only answer: `thread read`
    and `step read` show the fields, which used to be invisible."""
    thread = new_thread()
    plan = "---\nstatus: _\nplan: Do it.\nsteps: [one]\n---\nThe plan."
    assert cli("thread", "step", thread, "--agent", scenario({"planner": [plan]})).code == 0
    answered = cli(
        "thread", "answer", thread, "--status", "_", "--set", "summary=Done by hand.",
        "--set", 'filesChanged=["a.py"]',
    )  # fmt: skip
    assert answered.code == 0, answered.err
    text = read(cli, thread, "--quota", HUGE)
    fields = "---\nsummary: Done by hand.\nfilesChanged:\n- a.py\nstatus: _\n---"  # as stored
    assert output_part(fields) in text
    assert step_read_out(cli, answered.json()["head"]).startswith(
        f"# Step {answered.json()['head']}\n\n**Role:** developer\n**Agent:** uwf-human\n\n"
        "**Output:**\n\n```yaml\nsummary: Done by hand.\nfilesChanged:\n- a.py\nstatus: _\n```"
    )
    first = cli("thread", "steps", thread).json()["steps"][1]["hash"]
    answer = tmp_path / "answer.json"
    answer.write_text('{"status": "_", "plan": "Another plan.", "steps": ["a", "b"]}')
    forked = cli("thread", "fork", first, "--output", str(answer))
    assert forked.code == 0, forked.err
    text = read(cli, forked.json()["thread"])
    assert output_part("---\nstatus: _\nplan: Another plan.\nsteps:\n- a\n- b\n---") in text


def step_read_out(cli: Any, step: str) -> str:
    r = cli("step", "read", step)
    assert r.code == 0, r.err
    return str(r.out)
