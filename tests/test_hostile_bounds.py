"""Hostile inputs, round two (docs/reliability.md, "Hostile agents", rows 13–16), each driven
through the real CLI in subprocesses: a Liquid prompt that builds gigabytes in uwf's own
process, a join of big children and a big field that made prompts no agent could take.

Templates are bounded in memory and time whatever they do (refused at ``workflow put`` where
the text shows it, failing the step with one ``error:`` line where it does not), and every
part of a prompt — the edge prompt, the history, the children's section — fits the context
budget, with a marker where something was cut, so that one answer never stops a role.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from support import BIN

BOUNDED = "(a prompt template is bounded: docs/format.md, Edge prompts)"


def ok(cli_proc: Any, *args: str) -> Any:
    r = cli_proc(*args)
    assert r.code == 0, (args, r.out, r.err)
    return r.json() if r.out.startswith(("{", "[")) else r.out


def version1(tmp_path: Path, prompt: str) -> Path:
    """A version-1 workflow whose $START.new prompt is ``prompt``."""
    path = tmp_path / "wf" / "blow.yaml"
    path.parent.mkdir(exist_ok=True)
    frontmatter = {
        "type": "object",
        "properties": {"$status": {"const": "done"}},
        "required": ["$status"],
    }
    document = {
        "version": 1,
        "roles": {"a": {"frontmatter": frontmatter}},
        "graph": {
            "$START": {"new": {"role": "a", "prompt": prompt}},
            "a": {"done": {"role": "$END"}},
        },
    }
    path.write_text(yaml.safe_dump(document))
    return path


def peak_of(tmp_path: Path, *args: str) -> tuple[int, float, str]:
    """Run ``uwf <args>`` under a launcher that caps its address space at 3 GiB (so that a
    uwf without the bound fails with MemoryError rather than take the machine) and reports
    its peak RSS: (exit code, peak MB, stderr)."""
    launcher = (
        "import resource, subprocess, sys\n"
        "cap = 3 << 30\n"
        "limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap))\n"
        "code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, preexec_fn=limit)\n"
        "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    with (tmp_path / "err").open("wb") as stderr:
        ran = subprocess.run(
            [sys.executable, "-c", launcher, str(BIN / "uwf"), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            text=True,
            check=True,
            timeout=300,
        )
    code, peak_kb = (int(word) for word in ran.stdout.split())
    return code, peak_kb / 1024, (tmp_path / "err").read_text()


def test_a_liquid_prompt_that_doubles_a_string_fails_in_bounded_memory(
    cli_proc: Any, tmp_path: Path
) -> None:
    """The audit's prompt: 27 doublings held 1.6 GB and the step exited 0; 40 were ended by
    the OOM killer at 23.8 GB. `workflow put` cannot see it in the text; the step that
    renders it fails with one line, in a few MB, and the head stays."""
    prompt = (
        "{% assign s = 'xxxxxxxx' %}{% for i in (1..40) %}{% assign s = s | append: s %}"
        "{% endfor %}{{ s | size }}"
    )
    ok(cli_proc, "workflow", "put", str(version1(tmp_path, prompt)))
    thread = ok(cli_proc, "thread", "start", "blow", "-p", "go")["thread"]
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({"roles": {"a": ["---\n$status: done\n---\nok"]}}))
    agent = f"uwf-mock --scenario {scenario}"
    code, peak_mb, err = peak_of(tmp_path, "thread", "step", thread, "--agent", agent)
    assert (code, err) == (
        1,
        "error: moderator evaluate failed: prompt template error: append: a value that prints "
        f"as 4,194,304 characters, over the limit of 2,097,152 {BOUNDED}\n",
    )
    assert peak_mb < 150, f"peak RSS {peak_mb:.0f} MB"
    shown = ok(cli_proc, "thread", "show", thread)
    assert (shown["steps"], shown["status"]) == (0, "failing")  # the head stayed


def test_a_liquid_range_too_long_to_use_is_refused_at_workflow_put(
    cli_proc: Any, tmp_path: Path
) -> None:
    """`{{ (1..20000000) | join: ',' | size }}` made a 1.6 GB string in the step; its text
    says so, so `workflow check` and `put` refuse it. With a bound from a value the step
    fails instead, before the items are made."""
    path = version1(tmp_path, "{{ (1..20000000) | join: ',' | size }}")
    problem = (
        "graph.$START.new.prompt: prompt template does not parse: the range (1..20000000) has "
        f"20,000,000 items, over the limit of 100,000 {BOUNDED}"
    )
    checked = cli_proc("workflow", "check", str(path))
    assert checked.code == 1 and checked.json()[0]["problems"] == [problem]
    put = cli_proc("workflow", "put", str(path))
    assert put.code == 1 and f"  - {problem}" in put.err
    assert cli_proc("workflow", "list").json() == []
    dynamic = "{% assign n = 20000000 %}{{ (1..n) | join: ',' | size }}"
    ok(cli_proc, "workflow", "put", str(version1(tmp_path, dynamic)))
    thread = ok(cli_proc, "thread", "start", "blow", "-p", "go")["thread"]
    code, peak_mb, err = peak_of(tmp_path, "thread", "step", thread, "--agent", "uwf-mock")
    assert (code, err) == (
        1,
        "error: moderator evaluate failed: prompt template error: a range of 20,000,000 items, "
        f"over the limit of 100,000 {BOUNDED}\n",
    )
    assert peak_mb < 150, f"peak RSS {peak_mb:.0f} MB"


def test_mustache_sections_over_an_answers_list_fail_in_bounded_time(
    cli_proc: Any, tmp_path: Path
) -> None:
    """uwf 0.5's Mustache has no filters, but five sections over one list of 100 items an
    agent wrote would print 10^10 times: the step that routes through it fails with one line
    (exit 5, head not moved) instead of running for hours."""
    document = {
        "name": "nest",
        "description": "Nested sections.",
        "roles": {
            "writer": {
                "description": "w",
                "goal": "g",
                "capabilities": [],
                "procedure": "p",
                "output": "o",
                "meta": {
                    "type": "object",
                    "properties": {
                        "status": {"type": "string", "enum": ["_"]},
                        "items": {"type": "array"},
                    },
                    "required": ["status"],
                },
            }
        },
        "graph": {
            "$START": {"_": {"role": "writer", "prompt": "Write."}},
            "writer": {
                "_": {
                    "role": "$END",
                    "prompt": "{{#items}}{{#items}}{{#items}}{{#items}}{{#items}}x"
                    "{{/items}}{{/items}}{{/items}}{{/items}}{{/items}}",
                }
            },
        },
    }
    path = tmp_path / "nest.yaml"
    path.write_text(yaml.safe_dump(document))
    ok(cli_proc, "workflow", "put", str(path))
    thread = ok(cli_proc, "thread", "start", "nest", "-p", "go")["thread"]
    items = json.dumps(list(range(1, 101)))
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        yaml.safe_dump({"roles": {"writer": [f"---\nstatus: _\nitems: {items}\n---\n"]}})
    )
    r = cli_proc("thread", "step", thread, "--agent", f"uwf-mock --scenario {scenario}")
    assert (r.code, r.err) == (
        5,
        "error: post-step moderator evaluate failed: prompt template error: more than 10,000 "
        f"loop iterations {BOUNDED} (head not moved)\n",
    )
    assert ok(cli_proc, "thread", "show", thread)["steps"] == 0


# -- every part of a prompt inside the context budget -------------------------------------

BUDGET = 32_000  # contextBudget's default
CUT = "cut by uwf: over the context budget"


def role(fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": "r",
        "goal": "g",
        "capabilities": [],
        "procedure": "p",
        "output": "o",
        "meta": {"type": "object", "properties": fields, "required": ["status"]},
    }


def recorder(tmp_path: Path, argument: bool) -> tuple[str, Path]:
    """A uwf-cmd agent line whose command records the prompt it got (its ``{prompt}``
    argument, else its stdin) and answers ``status: done``."""
    seen = tmp_path / "prompt.txt"
    script = tmp_path / "record.py"
    script.write_text(
        "import sys\n"
        f"prompt = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()\n"
        f"open({str(seen)!r}, 'w').write(prompt)\n"
        "print('---\\nstatus: done\\n---\\nDone.')\n"
    )
    tail = " {prompt}" if argument else ""
    return f"uwf-cmd -- {sys.executable} {script}{tail}", seen


def test_one_big_field_never_stops_a_prompt_argument_role(cli_proc: Any, tmp_path: Path) -> None:
    """A 200 KB field made the next edge prompt 257 KB: with `claude -p "{prompt}"` (the
    README's example) every retry exited 5 and the thread stayed failing. The edge prompt and
    the history now share the budget, each cut with a marker: the role runs."""
    document = {
        "name": "loop",
        "description": "Write, then review.",
        "roles": {
            "writer": role({"status": {"type": "string", "enum": ["_"]}, "notes": {}}),
            "reviewer": role({"status": {"type": "string", "enum": ["done"]}}),
        },
        "graph": {
            "$START": {"_": {"role": "writer", "prompt": "Write."}},
            "writer": {"_": {"role": "reviewer", "prompt": "Review these notes: {{notes}}"}},
            "reviewer": {"done": {"role": "$END", "prompt": "Done."}},
        },
    }
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump(document))
    ok(cli_proc, "workflow", "put", str(path))
    thread = ok(cli_proc, "thread", "start", "loop", "-p", "the task")["thread"]
    scenario = tmp_path / "scenario.yaml"
    answer = f"---\nstatus: _\nnotes: {'n' * 200_000}\n---\nWritten."
    scenario.write_text(yaml.safe_dump({"roles": {"writer": [answer]}}))
    head = ok(cli_proc, "thread", "step", thread, "--agent", f"uwf-mock --scenario {scenario}")
    agent, seen = recorder(tmp_path, argument=True)
    done = cli_proc("thread", "step", thread, "--agent", agent)
    assert done.code == 0, done.err
    prompt = seen.read_text()
    assert len(prompt.encode()) < 100_000  # 257,743 bytes before; an argument holds 131,071
    instruction = prompt.split("## Moderator Instruction\n\n", 1)[1]
    assert instruction.startswith("Review these notes: nnnn")
    marker = f"characters {CUT}; `uwf step read {head['head']}` shows them]"
    assert instruction.endswith(marker)
    assert prompt.count(CUT) == 2  # the edge prompt, and the newest step's output
    assert len(instruction) < BUDGET


def test_a_join_of_twenty_big_children_fits_the_context_budget(
    cli: Any, cli_proc: Any, tmp_path: Path
) -> None:
    """20 children with 300 KB outputs gave the joining role a 12 MB prompt (the edge prompt
    printing them, 6 MB, and the children's section, 6 MB, both outside the budget). Both
    now fit it: each child keeps its block, its output cut to an equal share with a marker
    naming the step that shows it whole."""
    child = {
        "name": "child",
        "description": "One task.",
        "roles": {"worker": role({"status": {"type": "string", "enum": ["_"]}, "text": {}})},
        "graph": {
            "$START": {"_": {"role": "worker", "prompt": "Work."}},
            "worker": {"_": {"role": "$END", "prompt": "x"}},
        },
    }
    fan = {"field": "subtasks", "workflow": "child", "max": 20}
    parent = {
        "name": "join",
        "description": "Plan, then review the children.",
        "roles": {
            "planner": role({"status": {"type": "string", "enum": ["_"]}, "subtasks": {}}),
            "reviewer": role({"status": {"type": "string", "enum": ["done"]}}),
        },
        "graph": {
            "$START": {"_": {"role": "planner", "prompt": "Plan."}},
            "planner": {
                "_": {
                    "role": "reviewer",
                    "prompt": "Review: {{#children}}{{task}}: {{output.text}}; {{/children}}",
                    "fanOut": fan,
                }
            },
            "reviewer": {"done": {"role": "$END", "prompt": "x"}},
        },
    }
    for document in (child, parent):
        path = tmp_path / f"{document['name']}.yaml"
        path.write_text(yaml.safe_dump(document))
        assert cli("workflow", "put", str(path)).code == 0
    thread = cli("thread", "start", "join", "-p", "go").json()["thread"]
    items = json.dumps([f"task {i}" for i in range(20)])
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        yaml.safe_dump({"roles": {"planner": [f"---\nstatus: _\nsubtasks: {items}\n---\n"]}})
    )
    kids = cli("thread", "step", thread, "--agent", f"uwf-mock --scenario {scenario}").json()
    answer = tmp_path / "answer.md"
    answer.write_text(f"---\nstatus: _\ntext: {'w' * 300_000}\n---\nDone.")
    heads = []
    for kid in kids["children"]:
        r = cli("thread", "answer", kid, "--file", str(answer))
        assert r.code == 0, r.err
        heads.append(r.json()["head"])
    agent, seen = recorder(tmp_path, argument=False)
    joined = cli_proc("thread", "step", thread, "--agent", agent)
    assert joined.code == 0, joined.err
    prompt = seen.read_text()
    assert len(prompt) < BUDGET + 30_000  # 12,028,073 before; the rest is the role's own text
    section = prompt.split("\n## Children\n", 1)[1]
    assert len(section) < BUDGET
    for number, head in enumerate(heads, 1):
        assert f"### Child {number} (last role worker, head {head})" in section
        assert f"{CUT}; `uwf step read {head}` shows them]" in section
    assert prompt.split("## Moderator Instruction\n\n", 1)[1].startswith("Review: task 0: www")
