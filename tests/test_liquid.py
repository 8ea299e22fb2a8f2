"""Liquid edge prompts (version-1 workflows, docs/format.md "Edge prompts"): filters, loops,
``_body``, how values print, what a template may not do, and the bounds on rendering."""

from __future__ import annotations

import pytest

from uwf.adapters import template
from uwf.adapters.template import LIQUID
from uwf.moderator.evaluate import V1, ModeratorError, evaluate
from uwf.protocol.workflow import Graph


def test_filters_loops_and_values() -> None:
    text = (
        "{{ files | join: ', ' }} ({{ files | size }}); {% for f in files %}[{{ f | upcase }}]"
        "{% endfor %} {{ ok }} {{ none }}{{ missing }} {{ n }} {{ meta }} {{ meta.k }}"
    )
    values = {"files": ["a.py", "b.py"], "ok": True, "none": None, "n": 0.5, "meta": {"k": [1]}}
    assert (
        template.render(text, values, LIQUID)
        == 'a.py, b.py (2); [A.PY][B.PY] true  0.5 {"k":[1]} 1'
    )


def test_names_are_the_top_level_fields_a_template_reads() -> None:
    text = "{% for f in files %}{{ f }}{{ forloop.index }}{% endfor %}{% assign x = 1 %}{{ x }}"
    assert template.names(text + "{{ _body }} {{ a.b }} {{ files }}", LIQUID) == [
        "files",
        "_body",
        "a",
    ]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{% for %}", "missing expression"),
        ("{{ a | nosuch }}", "unknown filter 'nosuch'"),
        ('{% include "x" %}', "the include tag is not supported (edge prompts read no files)"),
        ('{% render "x" %}', "the render tag is not supported (edge prompts read no files)"),
        ("{{ a", "expected '}}', found end of file"),
    ],
)
def test_what_does_not_parse_is_refused_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(template.TemplateError) as info:
        template.names(text, LIQUID)
    assert str(info.value) == reason


BOUNDED = "(a prompt template is bounded: docs/format.md, Edge prompts)"


def test_loops_are_bounded_all_together() -> None:
    with pytest.raises(template.TemplateError) as info:  # seen in the text: does not parse
        template.names("{% for i in (1..100000) %}x{% endfor %}", LIQUID)
    assert str(info.value) == (
        f"the loop over (1..100000) would run 100,000 times, over the limit of 10,000 loop "
        f"iterations {BOUNDED}"
    )
    # two loops of 6,000: each under the limit, together over it (bounds from a value)
    text = "{% for i in (1..n) %}{% endfor %}{% for i in (1..n) %}{% endfor %}"
    assert template.render(text, {"n": 5000}, LIQUID) == ""
    with pytest.raises(template.TemplateError) as info:
        template.render(text, {"n": 6000}, LIQUID)
    assert str(info.value) == f"more than 10,000 loop iterations {BOUNDED}"


def test_the_output_is_cut_at_one_mib_with_a_marker() -> None:
    big = {"xs": ["y" * 1000] * 2000}
    out = template.render("{% for x in xs %}{{ x }}{% endfor %}", big, LIQUID)
    marker = "\n[… cut by uwf: the rendered prompt passed 1,048,576 characters]"
    assert out == "y" * (1 << 20) + marker


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (  # the audit's: 27 doublings made a 1 GiB string (40: the OOM killer)
            "{% assign s = 'xxxxxxxx' %}{% for i in (1..40) %}{% assign s = s | append: s %}"
            "{% endfor %}{{ s | size }}",
            "append: a value that prints as 4,194,304 characters, over the limit of 2,097,152",
        ),
        (  # each replace multiplies: refused before it runs
            "{% assign s = 'ab' %}{% for i in (1..30) %}{% assign s = s | replace: 'a', s %}"
            "{% endfor %}",
            "replace: a value that prints as 2,097,153 characters, over the limit of 2,097,152",
        ),
        (
            "{% capture s %}x{% endcapture %}{% for i in (1..40) %}{% capture s %}{{ s }}{{ s }}"
            "{% endcapture %}{% endfor %}",
            "a captured value passed 2,097,152 characters",
        ),
        (
            "{% assign n = 99 %}{% for i in (1..30) %}{% assign n = n | times: n %}{% endfor %}",
            "times: a value that has 8,176 digits, over the limit of 4,300",
        ),
        (  # a range from a value: lazy until a filter would make its items
            "{% assign n = 20000000 %}{{ (1..n) | join: ',' | size }}",
            "a range of 20,000,000 items, over the limit of 100,000",
        ),
        (
            "{% assign s = 'x' | append: big %}{{ s | split: '' | size }}",
            "split: a value that has 1,500,001 items, over the limit of 100,000",
        ),
        (  # a list of one big string, doubled: what it prints, not what it holds, counts
            "{% assign a = big | split: '#' %}{% for i in (1..20) %}"
            "{% assign a = a | concat: a %}{% endfor %}",
            "concat: a value that prints as 3,000,006 characters, over the limit of 2,097,152",
        ),
        (
            "{% assign a = big %}{% assign b = big | upcase %}{% assign c = big | downcase %}"
            "{% assign d = big | strip %}{% assign e = big | capitalize %}"
            "{% assign f = big | lstrip %}",
            "the assigned values would print as 9,000,000 characters together, over the limit "
            "of 8,388,608",
        ),
    ],
)
def test_what_a_template_makes_is_bounded(text: str, reason: str) -> None:
    with pytest.raises(template.TemplateError) as info:
        template.render(text, {"big": "b" * 1_500_000}, LIQUID)
    assert str(info.value) == f"{reason} {BOUNDED}"


def test_a_range_that_could_never_be_used_does_not_parse() -> None:
    assert template.check("{{ (1..20000000) | join: ',' | size }}", LIQUID) == (
        f"the range (1..20000000) has 20,000,000 items, over the limit of 100,000 {BOUNDED}"
    )
    # within the limits: a range prints as its bounds, and a loop may take a part of one
    text = "{{ (1..100000) }} {% for i in (1..20000) limit: 3 %}{{ i }}{% endfor %}"
    assert template.render(text, {}, LIQUID) == "1..100000 123"


def test_a_rendering_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from uwf.adapters.template import bounds

    monkeypatch.setattr(bounds, "TIME_LIMIT", 0.2)
    text = "{% for i in (1..10000) %}{% assign b = a | sort | reverse %}{% endfor %}done"
    with pytest.raises(template.TemplateError) as info:
        template.render(text, {"a": list(range(20000))}, LIQUID)
    assert str(info.value) == (
        "rendering took more than 0.2 s (a prompt template is bounded in time: "
        "docs/format.md, Edge prompts)"
    )


def test_the_moderator_routes_on_status_and_renders_liquid() -> None:
    graph = Graph(
        {
            "$START": {"new": {"role": "a", "prompt": "Task: {{ _body }}"}},
            "a": {"done": {"role": "$END", "prompt": "{{ items | first }}", "location": "sub"}},
        }
    )
    start = evaluate(graph, "$START", {"$status": "new", "_body": "fix"}, V1)
    assert (start.role, start.prompt, start.status) == ("a", "Task: fix", "new")
    done = evaluate(graph, "a", {"$status": "done", "status": "ignored", "items": ["x"]}, V1)
    assert (done.role, done.prompt, done.location) == ("$END", "x", "sub")
    with pytest.raises(ModeratorError) as info:
        evaluate(graph, "a", {"status": "done"}, V1)  # uwf 0.5's field is not read
    assert info.value.message == 'no transition for role "a" with status "_"'
