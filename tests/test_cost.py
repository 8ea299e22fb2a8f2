"""Cost at a glance, through the real CLI: the duration and tokens of each step and of the
whole thread (``thread steps``, ``thread show``), as uwf-builtin and the agent kit's LLM
extract record them from the model server's replies (docs/format.md, "Cost")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_server import LLMServer, llm_fixture, write_config  # noqa: F401

PLAN = "---\nstatus: _\nplan: say hello\nsteps: [write it]\n---\nThe plan."
DEV = "---\nstatus: _\nfilesChanged: [hello.py]\nsummary: wrote it\n---\nDone."


def reply(text: str, prompt: int, completion: int) -> dict[str, Any]:
    return {
        "content": text,
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def tokens(prompt: int, completion: int, calls: int) -> dict[str, int]:
    return {
        "promptTokens": prompt,
        "completionTokens": completion,
        "totalTokens": prompt + completion,
        "calls": calls,
    }


def test_builtin_steps_record_their_tokens_and_the_thread_sums_them(
    cli: Any, cli_proc: Any, root: Path, llm: LLMServer, new_thread: Any
) -> None:
    write_config(root, llm.base_url)
    thread = new_thread("Add a greeting module")
    # the planner answers at once; the developer needs two model calls (a nudge in between)
    llm.reply(reply(PLAN, 120, 30), reply("thinking…", 200, 5), reply(DEV, 260, 40))
    for _ in range(2):
        r = cli_proc("thread", "step", thread, "--agent", "uwf-builtin")
        assert r.code == 0, r.err
    listed = cli("thread", "steps", thread).json()
    planner, developer = listed["steps"][1:]
    assert planner["usage"] == tokens(120, 30, 1)
    assert developer["usage"] == tokens(460, 45, 2)
    for step in (planner, developer):
        assert isinstance(step["durationMs"], int) and step["durationMs"] >= 0
    total = {
        "durationMs": planner["durationMs"] + developer["durationMs"],
        **tokens(580, 75, 3),
    }
    assert {k: v for k, v in listed["cost"].items() if k != "elapsedMs"} == total
    shown = cli("thread", "show", thread).json()["cost"]
    assert {k: v for k, v in shown.items() if k != "elapsedMs"} == total
    assert shown["elapsedMs"] == listed["cost"]["elapsedMs"] >= developer["durationMs"]
    # the total is recorded with the head: show reads it from there, not from every step
    detail = cli("thread", "step-details", developer["hash"], "--format", "json").json()
    assert detail["total"] == total and detail["usage"] == tokens(460, 45, 2)


def test_the_extract_call_counts_in_the_step(
    cli: Any, cli_proc: Any, root: Path, llm: LLMServer, new_thread: Any, agent_script: Any
) -> None:
    """uwf-cmd wraps a command without frontmatter: two correction runs, then the LLM extract,
    whose tokens the kit adds to the step's detail."""
    write_config(root, llm.base_url)
    thread = new_thread()
    command = agent_script("sys.stdin.read(); print('I made a plan: say hello.')")
    llm.reply(reply('{"status": "_", "plan": "say hello", "steps": ["one"]}', 50, 7))
    r = cli_proc("thread", "step", thread, "--agent", f"uwf-cmd -- {command}")
    assert r.code == 0, r.err
    step = cli("thread", "steps", thread).json()["steps"][1]
    assert step["output"] == {"status": "_", "plan": "say hello", "steps": ["one"]}
    assert step["usage"] == tokens(50, 7, 1)
    assert cli("thread", "show", thread).json()["cost"]["totalTokens"] == 57


FOREIGN_AGENT = """
from uwf.backend import open_backend
from uwf.model import chain
from uwf.protocol import schemas

thread, role = sys.argv[-2:]
store = open_backend().nodes
head = chain.load_head(store, open_backend().threads.head(thread))
start = chain.start_of(store, head)
meta = chain.load_workflow(store, start.workflow).roles[role]["meta"]
output = store.put(meta, {"status": "_", "filesChanged": ["a.py"], "summary": "by hand"})
usage = {"promptTokens": 10, "completionTokens": 2, "totalTokens": 12, "calls": 1}
detail = store.put(store.put_schema({"type": "object"}), {"durationMs": 1500, "usage": usage})
step = {"start": start.hash, "prev": head.hash, "role": role, "output": output,
        "detail": detail, "agent": "foreign"}
print(store.put(schemas.ensure(store).step, step))
"""


def test_a_step_without_a_total_is_summed_on_the_way(
    cli: Any, new_thread: Any, scenario: Any, agent_script: Any
) -> None:
    """uwf-mock records no duration (its steps are reproducible) but carries the total on; an
    agent of another kind records its own cost without a total: the next step adds it in."""
    thread = new_thread()
    mock = scenario()
    assert cli("thread", "step", thread, "--agent", mock).code == 0
    assert cli("thread", "step", thread, "--agent", agent_script(FOREIGN_AGENT)).code == 0
    foreign = {"durationMs": 1500, **tokens(10, 2, 1)}
    assert {
        k: v for k, v in cli("thread", "show", thread).json()["cost"].items() if k != "elapsedMs"
    } == foreign  # walked back from a head without a total
    assert cli("thread", "step", thread, "--agent", mock).code == 0
    steps = cli("thread", "steps", thread).json()["steps"][1:]
    assert [(s["agent"], s["durationMs"]) for s in steps] == [
        ("uwf-mock", None),
        ("foreign", 1500),
        ("uwf-mock", None),
    ]
    reviewer = cli("thread", "step-details", steps[2]["hash"], "--format", "json").json()
    assert reviewer["total"] == foreign  # uwf-mock's detail carries the chain's total on
    shown = cli("thread", "show", thread).json()["cost"]
    assert {k: v for k, v in shown.items() if k != "elapsedMs"} == foreign
