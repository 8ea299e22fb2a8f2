"""Liquid edge prompts (version-1 workflows, docs/format.md "Edge prompts"): filters, loops,
``_body``, how values print, what a template may not do, and the bounds on rendering."""

from __future__ import annotations

import pytest

from uwf.adapters import template
from uwf.adapters.template import LIQUID
from uwf.moderator.evaluate import V1, ModeratorError, evaluate


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


def test_rendering_is_bounded() -> None:
    with pytest.raises(template.TemplateError) as info:
        template.render("{% for i in (1..100000) %}x{% endfor %}", {}, LIQUID)
    assert str(info.value) == "loop iteration limit reached"
    big = {"xs": ["y" * 1000] * 2000}
    with pytest.raises(template.TemplateError) as info:
        template.render("{% for x in xs %}{{ x }}{% endfor %}", big, LIQUID)
    assert str(info.value) == "output stream limit reached"


def test_the_moderator_routes_on_status_and_renders_liquid() -> None:
    graph = {
        "$START": {"new": {"role": "a", "prompt": "Task: {{ _body }}"}},
        "a": {"done": {"role": "$END", "prompt": "{{ items | first }}", "location": "sub"}},
    }
    start = evaluate(graph, "$START", {"$status": "new", "_body": "fix"}, V1)
    assert (start.role, start.prompt, start.status) == ("a", "Task: fix", "new")
    done = evaluate(graph, "a", {"$status": "done", "status": "ignored", "items": ["x"]}, V1)
    assert (done.role, done.prompt, done.location) == ("$END", "x", "sub")
    with pytest.raises(ModeratorError) as info:
        evaluate(graph, "a", {"status": "done"}, V1)  # uwf 0.5's field is not read
    assert info.value.message == 'no transition for role "a" with status "_"'
