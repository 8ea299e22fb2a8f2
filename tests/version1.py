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
    "type": "object",
    "properties": {
        "$status": {"enum": ["approved", "rejected"]},
        "comments": {"type": "string"},
    },
    "required": ["$status", "comments"],
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
