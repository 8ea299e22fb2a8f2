"""Version-1 workflow files (uwf 0.8's format) that the tests write for themselves, and the
answers their roles give (docs/format.md, "Version-1 workflow files").

``review`` is a folder workflow, ``.workflows/review/index.yaml``, split with ``!include``
(a YAML schema, a JSON schema, a markdown procedure): a planner whose ``frontmatter`` is
``oneOf`` branches keyed by a ``$status`` const (one of them ``$SUSPEND``), a builder that
works in ``location: work``, and a reviewer that sends the builder back. Its prompts use
Liquid filters, loops and ``_body``; ``$START`` has ``new`` and ``resume``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

INDEX = """\
version: 1
description: Plan a change, build it in the work directory, review it.
roles:
  planner:
    description: Splits the task into files.
    goal: Decide which files the change touches.
    frontmatter: !include schemas/planner.yaml
  builder:
    goal: Build what the plan asks for.
    procedure: !include build.md
    frontmatter:
      oneOf:
        - type: object
          properties:
            $status: {const: built}
            files: {type: array, items: {type: string}}
          required: [$status, files]
  reviewer:
    goal: Review the change.
    frontmatter: !include schemas/reviewer.json
graph:
  $START:
    new:
      role: planner
      prompt: "Plan this task: {{ _body }}"
    resume:
      role: planner
      prompt: "The thread was resumed: {{ _body | upcase }}"
  planner:
    planned:
      role: builder
      location: work
      prompt: |-
        Build {{ specFiles | size }} files: {{ specFiles | join: ", " }}.
        {% for f in specFiles %}- {{ f }}
        {% endfor %}Plan: {{ _body }}
  builder:
    built:
      role: reviewer
      prompt: "Review {{ files | first }}."
  reviewer:
    approved: {role: $END}
    rejected:
      role: builder
      location: work
      prompt: "Fix it: {{ comments }} ({{ _body }})"
"""

PLANNER_SCHEMA = """\
oneOf:
  - type: object
    properties:
      $status: {const: planned}
      specFiles: {type: array, items: {type: string}}
    required: [$status, specFiles]
  - type: object
    properties:
      $status: {const: $SUSPEND}
      reason: {type: string}
    required: [$status, reason]
"""

REVIEWER_SCHEMA = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"$status": {"const": status}, "comments": {"type": "string"}},
            "required": ["$status", "comments"],
        }
        for status in ("approved", "rejected")
    ]
}

BUILD = "Change only the files of the plan.\n"

SUSPEND = "---\n$status: $SUSPEND\nreason: which branch?\n---\n"
PLAN = "---\n$status: planned\nspecFiles: [a.py, b.py]\n---\nTouch a, then b."
BUILT = "---\n$status: built\nfiles: [a.py, b.py]\n---\nBuilt both."
REJECTED = "---\n$status: rejected\ncomments: add tests\n---\nNo tests yet."
APPROVED = "---\n$status: approved\ncomments: good\n---\nShip it."


def write_review(project: Path) -> Path:
    """Write the ``review`` folder workflow under ``project/.workflows``; its folder."""
    folder = project / ".workflows" / "review"
    (folder / "schemas").mkdir(parents=True)
    (folder / "index.yaml").write_text(INDEX)
    (folder / "schemas" / "planner.yaml").write_text(PLANNER_SCHEMA)
    (folder / "schemas" / "reviewer.json").write_text(json.dumps(REVIEWER_SCHEMA, indent=2))
    (folder / "build.md").write_text(BUILD)
    (project / "work").mkdir(exist_ok=True)
    return folder


# -- suspending through a real agent, and resuming (docs/format.md, "Suspending and resuming")

TASK = "Add a flag"
ANSWER = "main"
#: What ``thread resume -p main`` adds to the planner's edge prompt after ``SUSPEND``.
RESUMED = (
    "## Resumed\n\nYou suspended this step: which branch?\n"
    f"A person resumed it and wrote:\n\n{ANSWER}"
)


def waits_line(thread: str) -> str:
    """The last stderr line of a step whose planner answered ``SUSPEND`` (exit 6)."""
    return (
        f"error: thread {thread} waits for planner: the agent suspended the step (which "
        f"branch?); resume it with uwf thread resume {thread} -p <the answer>, or answer it "
        f"with uwf thread answer {thread}"
    )


def suspend_and_resume(cli_proc: Any, agent: str, timeout: float = 60) -> tuple[str, Any]:
    """Through the real ``uwf`` (a subprocess each): start a ``review`` thread (the project
    workflow of the working directory), step it with ``agent`` — whose planner answers
    ``SUSPEND`` — and check that it waits (exit 6, ``thread show``); then ``thread resume -p
    main`` with the same agent, whose planner now plans. The thread and the resumed step's
    StepNode payload."""
    started = cli_proc("thread", "start", "review", "-p", TASK)
    assert started.code == 0, started.err
    thread = json.loads(started.out)["thread"]
    head = json.loads(cli_proc("thread", "show", thread).out)["head"]

    waits = cli_proc("thread", "step", thread, "--agent", agent, timeout=timeout)
    assert waits.code == 6, waits.err
    assert waits.out == "" and waits.err.splitlines()[-1] == waits_line(thread)
    shown = json.loads(cli_proc("thread", "show", thread).out)
    assert (shown["status"], shown["steps"], shown["head"]) == ("waiting", 0, head)
    assert shown["waiting"]["role"] == "planner"
    assert shown["waiting"]["reason"] == "$SUSPEND: which branch?"
    table = cli_proc("thread", "show", thread, "--format", "table").out
    assert "$SUSPEND: which branch?" in table

    resumed = cli_proc("thread", "resume", thread, "-p", ANSWER, "--agent", agent, timeout=timeout)
    assert resumed.code == 0, resumed.err
    line = json.loads(resumed.out)
    assert (line["thread"], line["role"], line["status"]) == (thread, "planner", "active")
    assert "resumedFrom" not in line
    node = json.loads(cli_proc("cas", "get", line["head"]).out)["payload"]
    assert node["role"] == "planner" and node["prev"] is None
    assert node["edgePrompt"] == f"Plan this task: {TASK}\n\n{RESUMED}"
    output = json.loads(cli_proc("cas", "get", node["output"]).out)["payload"]
    assert output == {"$status": "planned", "specFiles": ["a.py", "b.py"]}
    return thread, node
