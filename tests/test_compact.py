"""Compaction summaries (docs/format.md, "Compaction"): long threads stay within the context
budget, with the newest summary and the recent steps in every request to the model.

The long thread runs ``uwf-builtin`` in-process (``kitrunner.KitRunner``) on both backends
against the scripted model server; the shorter ones drive the real CLI and agent processes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kitrunner import KitRunner, open_backend
from llm_server import TEST_KEY, TEST_KEY_ENV, LLMServer, RecordedRequest, write_config
from llm_server import llm_fixture  # noqa: F401
from uwf.agent_kit.prompts import SUMMARY_HEADING
from uwf.agents.builtin.agent import BuiltinAgent
from uwf.backend.base import Backend
from uwf.engine import step, threads, workflows
from uwf.model import chain
from uwf.protocol import schemas
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
    backend = open_backend(kind, tmp_path / kind)
    write_budget(backend.root, llm)
    thread = start_loop(backend, tmp_path)
    model = Model()
    serve(llm, model, 400)
    run = KitRunner(backend, BuiltinAgent)
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
            assert f"{SUMMARY_HEADING}\n\n{summary}" in text, n
        if n > 1:  # and the step just before, as the last thing that happened
            before = "writer" if n % 2 == 0 else "reviewer"
            assert f"### Step {n - 1}: {before}" in request.body["messages"][-1]["content"], n
    assert len(model.summaries) >= 10  # ~one per 15 steps: compaction kept happening

    # Each summary request folds the previous summary and the steps since it (one request
    # each: they exceed the budget by one step, and a request may carry twice the budget).
    assert len(model.summary_requests) == len(model.summaries)
    for k, request in enumerate(model.summary_requests[1:], start=1):
        user = request.message("user")["content"]
        assert f"## Previous Summary (steps 1–" in user and model.summaries[k - 1] in user
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
