"""`uwf workflow graph` and `uwf thread graph`: Mermaid and DOT text of the routing graph.

The text structure is checked here (nodes, one edge per status, the thread's marks, escaping);
DOT is drawn for real with Graphviz's `dot`, and the browser tests render the Mermaid text with
the real Mermaid (tests/test_browser.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import EXAMPLES
from uwf.engine.views import graph
from uwf.web.svg import to_svg

EDGE = re.compile(r'^  (n\d+) (-->|-\.->|==>)\|"([^"]*)"\| (n\d+)$')


def mermaid_parts(text: str) -> tuple[dict[str, str], list[tuple[str, str, str, str]], list[str]]:
    """(id -> label, [(source, arrow, label, target)], other lines) of a Mermaid flowchart."""
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    nodes: dict[str, str] = {}
    edges = []
    rest = []
    for line in lines[1:]:
        node = re.match(r'^  (n\d+)(?:\["(.*)"\]|\(\["(.*)"\]\))$', line)
        edge = EDGE.match(line)
        if node:
            nodes[node.group(1)] = node.group(2) or node.group(3)
        elif edge:
            edges.append((edge.group(1), edge.group(2), edge.group(3), edge.group(4)))
        else:
            rest.append(line.strip())
    return nodes, edges, rest


def named(text: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """Edges as (source label, edge label, target label), and the style lines."""
    nodes, edges, rest = mermaid_parts(text)
    return [(nodes[s], label, nodes[t]) for s, _, label, t in edges], rest


SOLVE_ISSUE_EDGES = [
    ("$START", "_", "planner"),
    ("planner", "_", "developer"),
    ("developer", "_", "reviewer"),
    ("reviewer", "rejected", "developer"),
    ("reviewer", "approved", "$END"),
]


def test_workflow_graph_is_mermaid_with_one_edge_per_status(cli: Any, solve_issue: str) -> None:
    for ident in ("solve-issue", solve_issue, str(EXAMPLES / "solve-issue.yaml")):
        result = cli("workflow", "graph", ident)
        assert result.code == 0, result.err
        nodes, _, rest = mermaid_parts(result.out)
        assert list(nodes.values()) == ["$START", "planner", "developer", "reviewer", "$END"]
        edges, _ = named(result.out)
        assert edges == SOLVE_ISSUE_EDGES
        assert rest == []  # no thread: no marks


def test_workflow_graph_as_dot(cli: Any, solve_issue: str) -> None:
    result = cli("workflow", "graph", "solve-issue", "--format", "dot")
    assert result.code == 0, result.err
    assert result.out.startswith('digraph "solve-issue" {\n') and result.out.endswith("}\n")
    labels = dict(re.findall(r'^  (n\d+) \[label="([^"]*)"', result.out, flags=re.MULTILINE))
    edges = re.findall(r'^  (n\d+) -> (n\d+) \[label="([^"]*)"', result.out, flags=re.MULTILINE)
    assert [(labels[s], label, labels[t]) for s, t, label in edges] == SOLVE_ISSUE_EDGES


def test_a_fan_out_edge_is_drawn_bold_and_names_the_childrens_workflow(cli: Any) -> None:
    """docs/format.md, "Fan-out and join": the edge that starts children is not a plain
    routing edge; both formats say so, and Graphviz draws it."""
    path = str(EXAMPLES / "plan-parallel.yaml")
    nodes, edges, _ = mermaid_parts(cli("workflow", "graph", path).out)
    fan = [(nodes[s], arrow, label, nodes[t]) for s, arrow, label, t in edges if arrow == "==>"]
    assert fan == [("planner", "==>", "_ ⇉ fan-out: dev-task", "reviewer")]
    assert len(edges) > 1  # the others stay plain
    dot = cli("workflow", "graph", path, "--format", "dot").out
    assert '[label="_ ⇉ fan-out: dev-task", style=bold];' in dot
    assert (
        "<svg"
        in subprocess.run(
            ["dot", "-Tsvg"], input=dot, capture_output=True, text=True, check=True
        ).stdout
    )


def test_dot_is_drawn_by_graphviz(cli: Any, new_thread: Any, scenario: Any) -> None:
    dot = shutil.which("dot")
    assert dot, "Graphviz `dot` is missing: scripts/test.sh installs it (apt-get install graphviz)"
    thread = new_thread()
    assert cli("thread", "step", thread, "-c", "3", "--agent", scenario()).code == 0
    text = cli("thread", "graph", thread, "--format", "dot").out
    svg = subprocess.run([dot, "-Tsvg"], input=text, capture_output=True, text=True, check=True)
    assert svg.stdout.count('class="node"') == 5
    assert svg.stdout.count('class="edge"') == 5
    assert "rejected" in svg.stdout and "_ ×1" in svg.stdout


def test_thread_graph_marks_the_path_and_the_current_role(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    assert cli("thread", "step", thread, "-c", "3", "--agent", scenario()).code == 0
    result = cli("thread", "graph", thread)
    assert result.code == 0, result.err
    nodes, edges, rest = mermaid_parts(result.out)
    ids = {label: node for node, label in nodes.items()}
    labelled = [(nodes[s], arrow, label, nodes[t]) for s, arrow, label, t in edges]
    assert labelled == [
        ("$START", "-->", "_ ×1", "planner"),
        ("planner", "-->", "_ ×1", "developer"),
        ("developer", "-->", "_ ×1", "reviewer"),
        ("reviewer", "-.->", "rejected", "developer"),  # the edge it takes next
        ("reviewer", "-->", "approved", "$END"),
    ]
    assert f"class {ids['developer']} current" in rest
    assert f"class {ids['$START']},{ids['planner']},{ids['reviewer']} visited" in rest
    assert any(line.startswith("linkStyle 0,1,2 ") for line in rest)
    assert rest[0] == "%% status idle, current developer, 3 transitions taken"

    # Through the loop to $END: the rejected edge and the developer -> reviewer edge twice.
    assert cli("thread", "step", thread, "-c", "5", "--agent", scenario()).code == 0
    edges_done, rest = named(cli("thread", "graph", thread).out)
    assert edges_done == [
        ("$START", "_ ×1", "planner"),
        ("planner", "_ ×1", "developer"),
        ("developer", "_ ×2", "reviewer"),
        ("reviewer", "rejected ×1", "developer"),
        ("reviewer", "approved ×1", "$END"),
    ]
    assert "class n4 current" in rest  # $END
    assert any(line.startswith("linkStyle 0,1,2,3,4 ") for line in rest)


def test_killed_thread_stays_at_its_last_role(cli: Any, new_thread: Any, scenario: Any) -> None:
    thread = new_thread()
    assert cli("thread", "step", thread, "--agent", scenario()).code == 0
    assert cli("thread", "kill", thread).code == 0
    text = cli("thread", "graph", thread, "--format", "dot").out
    assert "// status killed, current planner, 1 transitions taken" in text
    assert 'n1 [label="planner", fillcolor="#fde68a"' in text


def test_labels_are_escaped(cli: Any, tmp_path: Path) -> None:
    """A status with quotes, markup, # and a pipe stays one label, shown as text."""
    doc = yaml.safe_load((EXAMPLES / "solve-issue.yaml").read_text(encoding="utf-8"))
    odd = '<b>"ok"</b> #1 | {x} \\'
    doc["name"] = "odd"
    doc["roles"]["reviewer"]["meta"]["properties"]["status"]["enum"] = [odd, "rejected"]
    doc["graph"]["reviewer"] = {
        odd: {"role": "$END", "prompt": "done"},
        "rejected": {"role": "developer", "prompt": "again"},
    }
    path = tmp_path / "odd.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    text = cli("workflow", "graph", str(path)).out
    edges, _ = named(text)
    assert (
        "reviewer",
        "#60;b#62;#34;ok#34;#60;/b#62; #35;1 #124; #123;x#125; #92;",
        "$END",
    ) in edges
    dot = cli("workflow", "graph", str(path), "--format", "dot").out
    assert 'label="<b>\\"ok\\"</b> #1 | {x} \\\\"' in dot
    svg = to_svg(graph.of_workflow(doc))
    assert "&lt;b&gt;&quot;ok&quot;&lt;/b&gt; #1 | {x} \\" in svg and "<b>" not in svg


def test_role_names_that_are_mermaid_keywords(tmp_path: Path) -> None:
    payload = {
        "name": "kw",
        "roles": {"end": {}, "class": {}},
        "graph": {
            "$START": {"_": {"role": "end", "prompt": "p"}},
            "end": {"_": {"role": "class", "prompt": "p"}},
            "class": {
                "_": {"role": "class", "prompt": "p"},
                "done": {"role": "$END", "prompt": "p"},
            },
        },
    }
    edges, _ = named(graph.to_mermaid(graph.of_workflow(payload)))
    assert edges == [
        ("$START", "_", "end"),
        ("end", "_", "class"),
        ("class", "_", "class"),
        ("class", "done", "$END"),
    ]
    svg = to_svg(graph.of_workflow(payload))  # a self-loop is drawn too
    assert svg.count('class="edge"') == 4 and svg.count('<g class="node') == 4


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["workflow", "graph", "nope"], "error: workflow not found: nope"),
        (
            ["workflow", "graph", "solve-issue", "--format", "png"],
            "error: Invalid value for '--format'",
        ),
        (
            ["thread", "graph", "01ARZ3NDEKTSV4RRFFQ69G5FAV"],
            "error: thread not found: 01ARZ3NDEKTSV4RRFFQ69G5FAV",
        ),
        (["workflow", "graph", "missing.yaml"], "error: file not found: missing.yaml"),
    ],
)
def test_graph_errors(cli: Any, solve_issue: str, args: list[str], line: str) -> None:
    result = cli(*args)
    assert result.code != 0
    assert result.err_line.startswith(line)
