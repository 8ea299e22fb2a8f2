"""The template adapter (uwf.adapters.template): the one place prompts are parsed and rendered.

The moderator's table (tests/test_moderator.py) covers how values render; here: what the
adapter says of a template, and what it never does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from uwf.adapters import template


def test_names_are_the_top_level_lookups_in_order() -> None:
    text = "{{b}} {{a.x}} {{#s}}{{inner}}{{/s}} {{b}} {{{raw}}} {{&amp}} {{.}}"
    assert template.names(text) == ["b", "a", "s", "raw", "amp"]


def test_an_inverted_section_reads_its_names_from_the_top_level() -> None:
    # {{^s}} renders when s is empty, so what it holds is looked up in the output itself
    assert template.names("{{^s}}{{fallback}}{{/s}}") == ["s", "fallback"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{{#s}}unclosed", 'Unexpected EOF the tag "s" was never closed was opened at line 1'),
        ("{{x", "unclosed tag at line 1"),
        ("{{#a}}{{/b}}", 'Trying to close tag "b" last open tag is "a" line 2'),  # sic
    ],
)
def test_a_template_that_does_not_parse_says_why(text: str, reason: str) -> None:
    assert template.check(text) == reason
    with pytest.raises(template.TemplateError) as err:
        template.render(text, {})
    assert str(err.value) == reason


def test_partials_are_never_read_from_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "secret.mustache").write_text("the file's content", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert template.render("[{{> secret}}]", {}) == "[]"


def test_values_are_data_never_templates() -> None:
    # an output that holds Mustache is printed as it is, not rendered again
    assert template.render("{{x}}", {"x": "{{y}} <b>"}) == "{{y}} <b>"


def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(template.TemplateError, match="unknown template dialect 'jinja'"):
        template.render("{{ x }}", {}, dialect="jinja")
    assert template.check("x", dialect="jinja") == "unknown template dialect 'jinja'"


def test_sections_over_a_list_are_bounded_not_multiplied() -> None:
    """Five sections over one list of 100 items would print 10^10 times: it fails past
    10,000 iterations in all, at once."""
    text = "{{#a}}{{#a}}{{#a}}{{#a}}{{#a}}x{{/a}}{{/a}}{{/a}}{{/a}}{{/a}}"
    with pytest.raises(template.TemplateError) as err:
        template.render(text, {"a": list(range(100))})
    assert str(err.value) == (
        "more than 10,000 loop iterations (a prompt template is bounded: docs/format.md, Edge "
        "prompts)"
    )
    nested = "{{#a}}{{#a}}.{{/a}}{{/a}}"
    assert template.render(nested, {"a": list(range(1, 100))}) == "." * 99 * 99  # 9,900 passes
    with pytest.raises(template.TemplateError):
        template.render(nested, {"a": list(range(1, 101))})  # 10,100


def test_the_output_is_cut_at_one_mib_with_a_marker() -> None:
    """What an answer prints shortens the prompt, never fails it: 20 children's 300 KB
    fields at a join, a field printed 2,000 times."""
    marker = "\n[… cut by uwf: the rendered prompt passed 1,048,576 characters]"
    children = [{"task": f"t{i}", "output": {"text": "y" * 300_000}} for i in range(20)]
    text = "Review: {{#children}}{{task}}: {{output.text}}; {{/children}}Be brief."
    out = template.render(text, {"children": children})
    assert out.startswith("Review: t0: yyy") and out.endswith("; Be brief." + marker)
    assert len(out) - len(marker) - len("Be brief.") < (1 << 20) + 100
    out = template.render("{{x}}" * 2000, {"x": "z" * 10_000})
    assert out == "z" * (1 << 20) + marker
