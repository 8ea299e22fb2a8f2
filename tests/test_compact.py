"""Compaction summaries (docs/format.md, "Compaction"): long threads stay within the context
budget, with the newest summary and the recent steps in every request to the model.

The long thread runs ``uwf-builtin`` in-process (``uwf.testing.InProcessRunner``) on both backends
against the scripted model server; the shorter ones drive the real CLI and agent processes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import uwf
from llm_server import (
    TEST_KEY,
    TEST_KEY_ENV,
    LLMServer,
    RecordedRequest,
    llm_fixture,  # noqa: F401
    write_config,
)
from uwf.agent_kit.thread_prompt import SUMMARY_HEADING
from uwf.agents.builtin.agent import BuiltinAgent
from uwf.backend.base import Backend
from uwf.backend.fs import FsBackend
from uwf.backend.memory import MemoryBackend
from uwf.engine import step
from uwf.engine.threads import lifecycle as threads
from uwf.engine.workflows import stored as workflows
from uwf.model import chain
from uwf.protocol import schemas
from uwf.testing import InProcessRunner
from uwf.util.ulid import ThreadId

LOOP_YAML = """\
name: loop
description: A writer and a reviewer that never agree.
{extra}
roles:
  writer:
    description: Writes.
    goal: Write the next draft.
    capabilities: []
    procedure: Write it.
    output: The draft.
    meta: {{type: object, properties: {{status: {{type: string, enum: [_]}}}}, required: [status]}}
  reviewer:
    description: Reviews.
    goal: Review the draft.
    capabilities: []
    procedure: Read it.
    output: The review.
    meta:
      type: object
      properties: {{status: {{type: string, enum: [rejected, approved]}}}}
      required: [status]
graph:
  $START: {{_: {{role: writer, prompt: Write the first draft.}}}}
  writer: {{_: {{role: reviewer, prompt: Review the draft.}}}}
  reviewer:
    rejected: {{role: writer, prompt: Rework the draft.}}
    approved: {{role: $END, prompt: Done.}}
"""

SUMMARY_SYSTEM = "You keep the running summary of a long thread"
BUDGET = 3000


def loop_file(directory: Path, extra: str = "") -> Path:
    path = directory / "loop.yaml"
    path.write_text(LOOP_YAML.format(extra=extra), encoding="utf-8")
    return path


class Model:
    """The scripted model: summaries when asked for one, else each role's deliverable."""

    def __init__(self) -> None:
        self.summaries: list[str] = []
        self.summary_requests: list[RecordedRequest] = []
        self.agent_requests: list[tuple[RecordedRequest, str | None]] = []  # + summary in force

    def __call__(self, request: RecordedRequest) -> str:
        system = request.message("system")["content"]
        if system.startswith(SUMMARY_SYSTEM):
            self.summary_requests.append(request)
            self.summaries.append(f"SUMMARY-{len(self.summaries) + 1}: drafts and reviews so far")
            return self.summaries[-1]
        self.agent_requests.append((request, self.summaries[-1] if self.summaries else None))
        n = len(self.agent_requests)
        if "Write the next draft" in system:
            return f"---\nstatus: _\n---\nDraft {n}: " + "more text " * 10
        return f"---\nstatus: rejected\n---\nReview {n}: " + "not yet " * 10


def serve(llm: LLMServer, model: Model, count: int) -> None:
    llm.reply(*([model] * count))


def non_system(request: RecordedRequest) -> str:
    return "\n".join(
        m["content"] for m in request.body["messages"] if m["role"] != "system" and m["content"]
    )


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key the agent kit puts into os.environ from .env, undone after the test."""
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)


def write_budget(root: Path, llm: LLMServer, **extra: Any) -> None:
    import yaml

    path = write_config(root, llm.base_url)
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    config.update(contextBudget=BUDGET, **extra)
    path.write_text(yaml.safe_dump(config), encoding="utf-8")


def start_loop(backend: Backend, directory: Path, extra: str = "") -> ThreadId:
    workflows.put_workflow(backend, loop_file(directory, extra))
    return ThreadId(threads.start(backend, "loop", "Write a poem about long threads.")["thread"])


@pytest.mark.parametrize("kind", ["memory", "fs"])
def test_a_300_step_thread_stays_within_the_budget(
    kind: str, tmp_path: Path, llm: LLMServer, keyed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Durability is not what this measures: ~2,000 fsyncs would only make it slow.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    root = tmp_path / kind
    backend: Backend = MemoryBackend(root) if kind == "memory" else FsBackend(root)
    write_budget(backend.root, llm)
    thread = start_loop(backend, tmp_path)
    model = Model()
    serve(llm, model, 400)
    run = InProcessRunner(backend, uwf.kit_agent(BuiltinAgent))
    results = step.step_many(
        backend, thread, 300, on_result=lambda r: None, agent="uwf-builtin", runner=run
    )
    assert len(results) == 300 and not results[-1].done
    assert llm.pending == 400 - len(llm.chat_requests())  # every request was answered

    requests = model.agent_requests
    assert len(requests) == 300
    sizes = [len(non_system(r)) for r, _ in requests]
    # The history is at most the budget; the rest is the task, headings and the instruction
    # of each replayed visit (a window of ~15 steps has ~8 visits of a role).
    assert max(sizes) <= BUDGET + 1500, max(sizes)
    assert max(sizes[200:]) <= max(sizes[100:200])  # no growth with the thread's length
    for n, (request, summary) in enumerate(requests, start=1):
        text = non_system(request)
        if summary is not None:  # the summary in force is in the request, in its section
            assert f"{SUMMARY_HEADING}\n\n```markdown\n{summary}\n```" in text, n
        if n > 1:  # and the step just before, as the last thing that happened
            before = "writer" if n % 2 == 0 else "reviewer"
            assert f"### Step {n - 1}: {before}" in request.body["messages"][-1]["content"], n
    assert len(model.summaries) >= 10  # ~one per 15 steps: compaction kept happening

    # Each summary request folds the previous summary and the steps since it (one request
    # each: they exceed the budget by one step, and a request may carry twice the budget).
    assert len(model.summary_requests) == len(model.summaries)
    for k, request in enumerate(model.summary_requests[1:], start=1):
        user = request.message("user")["content"]
        assert "## Previous Summary (steps 1–" in user and model.summaries[k - 1] in user
        assert "- writer: " in user and "- reviewer: " in user  # each role's last output
        assert len(user) <= 2 * BUDGET

    # The chain records each summary on the step it was written for.
    store = backend.nodes
    head = chain.load_head(store, results[-1].head)
    carried = [s for s in chain.iter_steps(store, head) if s.compact is not None]
    assert len(carried) == len(model.summaries)
    texts = [store.require(s.compact).payload for s in reversed(carried)]
    assert texts == model.summaries
    assert all(store.require(s.hash).type == schemas.hashes().step_compact for s in carried)


# -- through the CLI: compactAfter, thread read, no model ------------------------------------


def builtin_config(root: Path, llm: LLMServer, **extra: Any) -> None:
    import yaml

    path = write_config(root, llm.base_url, {"builtin": {"command": "uwf-builtin"}})
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    config.update(extra)
    path.write_text(yaml.safe_dump(config), encoding="utf-8")


def steps_of(root: Path, thread: str) -> list[chain.Step]:
    from uwf.model.threads import locate

    backend = FsBackend(root)
    head = chain.load_head(backend.nodes, locate(backend, thread).head)
    return list(reversed(list(chain.iter_steps(backend.nodes, head))))


def test_compact_after_in_the_workflow(
    cli: Any, cli_proc: Any, root: Path, tmp_path: Path, llm: LLMServer
) -> None:
    builtin_config(root, llm)
    put = cli("workflow", "put", loop_file(tmp_path, "compactAfter: 3"))
    assert put.code == 0, put.err
    assert (
        FsBackend(root).nodes.require(put.json()["hash"]).type == schemas.hashes().workflow_compact
    )
    thread = cli("thread", "start", "loop", "-p", "Write a poem.").json()["thread"]
    model = Model()
    serve(llm, model, 20)
    r = cli_proc("thread", "step", thread, "-c", "7")
    assert r.code == 0, r.err
    assert len(r.jsonl()) == 7 and len(model.summaries) == 2
    # A summary every 3 steps: step 4 carries the one of steps 1-3, step 7 that of 1-6.
    steps = steps_of(root, thread)
    carried = [n for n, s in enumerate(steps, start=1) if s.compact is not None]
    assert carried == [4, 7]
    assert "## Steps 4–6" in model.summary_requests[1].message("user")["content"]
    assert "## Previous Summary (steps 1–3)" in model.summary_requests[1].message("user")["content"]
    request, summary = model.agent_requests[-1]  # step 7: summary of 1-6 and the recent steps
    assert summary == model.summaries[1] and summary in non_system(request)
    # the summary's model call counts in the cost of the step that wrote it
    calls = [
        cli("thread", "step-details", s.hash, "--format", "json").json()["usage"]["calls"]
        for s in steps
    ]
    assert calls == [1, 1, 1, 2, 1, 1, 2]

    read = cli("thread", "read", thread)
    assert read.code == 0, read.err
    summary = f"```markdown\n{model.summaries[1]}\n```"  # fenced: a model wrote it
    assert f"## Summary of steps 1–6 `{steps[6].compact}`\n\n{summary}" in read.out
    assert "## Step 7: writer" in read.out and "## Step 6:" not in read.out
    assert f"--full --before {steps[6].hash}" in read.out
    full = cli("thread", "read", thread, "--full", "--quota", "100000")
    assert "## Summary of" not in full.out
    assert all(f"## Step {n}:" in full.out for n in range(1, 8))
    assert full.out.count("**Summary:**") == 2 and f"**Summary:** `{steps[3].compact}`" in full.out


def test_compact_after_must_be_a_positive_integer(cli: Any, tmp_path: Path) -> None:
    r = cli("workflow", "put", loop_file(tmp_path, "compactAfter: 0"))
    assert r.code == 1
    assert "  - compactAfter: expected a positive integer, got 0" in r.err


def test_plain_workflows_keep_their_hashes() -> None:
    """Stores written before: plain StepNodes and Workflows keep the types they had."""
    h = schemas.hashes()
    assert (h.step, h.workflow, h.start, h.text) == (
        "C81ATBJW36ZSB",
        "F10A124M1A914",
        "41ZBT64VX5FRH",
        "DNCF1BA0Z9WWX",
    )


CMD_AGENT = """\
import os, sys
prompt = sys.stdin.read()
with open(os.environ["PROMPTS"], "a", encoding="utf-8") as f:
    f.write(prompt.replace("\\n", " ") + "\\n")
status = "_" if os.environ["UWF_ROLE"] == "writer" else "rejected"
print(f"---\\nstatus: {status}\\n---\\n" + "words " * 40)
"""


def test_without_a_model_a_summary_is_skipped_with_a_warning(
    cli: Any, cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    import sys

    script = tmp_path / "agent.py"
    script.write_text(CMD_AGENT, encoding="utf-8")
    (root / "config.yaml").parent.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(
        "agents:\n  cmd:\n    command: uwf-cmd\n"
        f"    args: ['--', '{sys.executable}', '{script}']\n"
        "defaultAgent: cmd\ncontextBudget: 600\n",
        encoding="utf-8",
    )
    assert cli("workflow", "put", loop_file(tmp_path)).code == 0
    thread = cli("thread", "start", "loop", "-p", "Write.").json()["thread"]
    prompts = tmp_path / "prompts.txt"
    r = cli_proc("thread", "step", thread, "-c", "6", env={"PROMPTS": str(prompts)})
    assert r.code == 0, r.err
    warning = (
        "warning: no summary written: no model is configured for summaries (set "
        "models.compact or defaultModel in config.yaml)"
    )
    assert warning in r.err
    assert all(s.compact is None for s in steps_of(root, thread))
    last = prompts.read_text(encoding="utf-8").splitlines()[-1]
    assert "### Step 5: writer" in last and "### Step 1:" not in last  # the budget's worth


# -- summaries recorded by hand ---------------------------------------------------------------


def test_thread_compact_by_hand(
    cli: Any, root: Path, tmp_path: Path, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    agent = scenario()
    assert cli("thread", "step", thread, "-c", "3", "--agent", agent).code == 0
    text = tmp_path / "summary.md"
    text.write_text("Planned, built, rejected for missing tests.\n", encoding="utf-8")
    head = cli("thread", "show", thread).json()["head"]
    r = cli("thread", "compact", thread, "--text", text)
    assert r.code == 0, r.err
    out = r.json()
    assert (out["thread"], out["head"], out["characters"]) == (thread, head, 44)
    # gc keeps a summary that waits for its step
    assert cli("cas", "gc", "--grace", "0").code == 0
    assert cli("cas", "get", out["summary"]).json()["payload"] == text.read_text()

    assert cli("thread", "step", thread, "--agent", agent).code == 0  # uwf-mock, on the kit
    steps = steps_of(root, thread)
    assert [s.compact for s in steps] == [None, None, None, out["summary"]]
    store = FsBackend(root).nodes
    h = schemas.hashes()
    assert [store.require(s.hash).type for s in steps] == [h.step] * 3 + [h.step_compact]
    assert len(cli("thread", "steps", thread).json()["steps"]) == 5  # the start and 4 steps
    read = cli("thread", "read", thread).out
    assert "## Summary of steps 1–3" in read and "Planned, built, rejected" in read
    assert "## Step 4: developer" in read and "## Step 3:" not in read

    # used once: the request no longer applies and gc collects it; the summary stays
    assert cli("thread", "step", thread, "--agent", agent).json()["status"] == "completed"
    assert steps_of(root, thread)[-1].compact is None
    assert store.index(h.compact_request) != []
    assert cli("cas", "gc", "--grace", "0").code == 0
    assert store.index(h.compact_request) == []
    assert cli("cas", "has", out["summary"]).json() == {"exists": True}
    assert cli("cas", "verify").code == 0


def test_an_agent_that_writes_no_summary_keeps_working(
    cli: Any, cli_proc: Any, root: Path, new_thread: Any, scenario: Any, agent_script: Any
) -> None:
    thread = new_thread()
    assert cli("thread", "step", thread, "--agent", scenario()).code == 0
    compacted = cli_proc("thread", "compact", thread, "--text", "-", input="A plan exists.")
    assert compacted.code == 0, compacted.err
    assert compacted.json()["characters"] == 14
    plain = agent_script(
        "from uwf.backend import open_backend\n"
        "from uwf.model import chain\n"
        "from uwf.protocol import schemas\n"
        "b = open_backend(); s = b.nodes; h = schemas.ensure(s)\n"
        "thread, role = sys.argv[1], sys.argv[2]\n"
        "head = chain.load_head(s, b.threads.head(thread))\n"
        "wf = chain.load_workflow(s, chain.start_of(s, head).workflow)\n"
        "out = s.put(wf.roles[role]['meta'], "
        "{'status': '_', 'filesChanged': [], 'summary': 'x'})\n"
        "print(s.put(h.step, {'start': head.start, 'prev': head.hash, 'role': role, "
        "'output': out, 'detail': s.put(h.text, 'd'), 'agent': 'plain'}))\n"
    )
    r = cli("thread", "step", thread, "--agent", plain)
    assert r.code == 0, r.err
    assert all(s.compact is None for s in steps_of(root, thread))


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (0, [], "has no steps yet: there is nothing to summarise"),
        (
            1,
            [],
            "no model is configured for summaries (set models.compact or defaultModel in "
            "config.yaml): write the summary yourself and pass it with --text FILE",
        ),
        (1, ["--text", "EMPTY"], "the summary is empty"),
        (
            1,
            ["--text", "LONG"],
            "the summary has 20000 characters; the context budget "
            "(contextBudget: 32000) leaves room for 16000",
        ),
    ],
)
def test_thread_compact_refusals(
    cli: Any,
    root: Path,
    tmp_path: Path,
    new_thread: Any,
    scenario: Any,
    setup: int,
    args: list[str],
    message: str,
) -> None:
    thread = new_thread()
    if setup:
        assert cli("thread", "step", thread, "--agent", scenario()).code == 0
    (tmp_path / "EMPTY").write_text(" \n", encoding="utf-8")
    (tmp_path / "LONG").write_text("x" * 20000, encoding="utf-8")
    files = {"EMPTY": tmp_path / "EMPTY", "LONG": tmp_path / "LONG"}
    r = cli("thread", "compact", thread, *[str(files.get(a, a)) for a in args])
    assert r.code == 1
    assert message in r.err_line


def test_thread_compact_asks_the_model(
    cli: Any, root: Path, new_thread: Any, scenario: Any, llm: LLMServer
) -> None:
    write_config(root, llm.base_url)
    thread = new_thread()
    assert cli("thread", "step", thread, "-c", "2", "--agent", scenario()).code == 0
    llm.reply("The plan is done and implemented.")
    r = cli("thread", "compact", thread)
    assert r.code == 0, r.err
    assert cli("cas", "get", r.json()["summary"]).json()["payload"] == (
        "The plan is done and implemented."
    )
    (request,) = llm.chat_requests()
    user = request.message("user")["content"]
    assert "## Task\n\nFix the login bug" in user and "## Steps 1–2" in user
    assert "- planner: " in user and "- developer: " in user


def test_format_md_lists_the_schema_hashes() -> None:
    """docs/format.md's table of uwf's schemas is what the code computes."""
    import re

    from support import REPO

    text = (REPO / "docs" / "format.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| ([A-Za-z0-9 (),]+?) \| `([0-9A-Z]{13})` \|$", text, re.MULTILINE))
    h = schemas.hashes()
    assert table == {
        "Workflow": h.workflow,
        "StartNode": h.start,
        "StepNode": h.step,
        "Text": h.text,
        "StepNode (compact)": h.step_compact,
        "Workflow (compactAfter)": h.workflow_compact,
        "Blob": h.blob,
        "CompactRequest": h.compact_request,
        "Workflow (version 1)": h.workflow_v1,
        "StartNode (resume)": h.start_resume,
        "StepNode (join)": h.step_join,
        "Workflow (fanOut)": h.workflow_fan_out,
        "Workflow (retry)": h.workflow_retry,
        "Workflow (version 1, retry)": h.workflow_v1_retry,
        "EvalRun": h.eval_run,
    }
