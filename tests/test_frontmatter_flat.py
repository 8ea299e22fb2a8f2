"""The flat frontmatter form read without PyYAML (``uwf.util.frontmatter._flat``): whatever it
reads, it reads exactly as the safe loader does, and what it does not read is left to it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from uwf.util import frontmatter, yamlio

# Characters chosen to reach every rule: YAML's indicators, quotes and escapes, line breaks of
# YAML's own (NEL, U+2028), control characters, a BOM, surrogates and plain text.
TRICKY = st.sampled_from(
    [
        *"aZ$_-09 .,/()'\"\\:#[]{}!&*%@`|>?~=<\t\r",
        *["\x85", "\u2028", "\ufeff", "\ud800", "é", "…", "\\u0041", "\\n", "\\/", "\\x41"],
    ]
)
WORDS = st.sampled_from(
    ["status", "$status", "plan", "yes", "No", "null", "on", "_", "$SUSPEND", "1", "1e5", "0x1"]
)


def text(chars: Any = TRICKY) -> Any:
    return st.lists(chars, max_size=12).map("".join)


def quoted() -> Any:
    return text().map(lambda t: f'"{t}"')


def value() -> Any:
    listed = st.lists(quoted(), max_size=3).map(lambda items: "[" + ", ".join(items) + "]")
    return st.one_of(WORDS, text(), quoted(), listed, st.builds(" ".join, st.lists(WORDS)))


def line() -> Any:
    key = st.one_of(WORDS, text())
    sep = st.sampled_from([": ", ":  ", ":", " : "])
    return st.builds(lambda k, s, v: f"{k}{s}{v}", key, sep, value())


def loaded(block: str) -> Any:
    try:
        return yamlio.load(block, source="frontmatter")
    except Exception as exc:  # the loader refuses it: the flat reader must too
        return exc


@settings(max_examples=1500, deadline=None)
@given(st.lists(line(), min_size=1, max_size=4).map("\n".join))
def test_the_flat_form_is_read_as_the_safe_loader_reads_it(block: str) -> None:
    flat = frontmatter._flat(block)
    if flat is not None:
        assert flat == loaded(block), block


ANSWERS = [
    'status: "_"\nplan: "Fix it: the \\"lock\\" first #1."\nsteps: ["Add a test.", "Remove x/y"]',
    "status: approved\nnotes: looks good, ship it",
    "$status: $SUSPEND\nreason: waiting for the owner's answer",
    'comments: "- first\\n- second\\\\ and a tab\\there"\nfiles: []',
    'summary: "Unicode is fine: é … 日本"',
]


def test_answers_of_the_usual_form_are_read_without_the_loader() -> None:
    for block in ANSWERS:
        flat = frontmatter._flat(block)
        assert flat is not None, block
        assert flat == loaded(block)


def test_everything_else_is_left_to_the_loader() -> None:
    others = [
        "count: 3",  # a number
        "done: yes",  # a boolean
        "yes: done",  # a boolean key
        "reason:",  # a null
        "a: b\na: c",  # a key twice
        "plan: do it # later",  # a comment
        "list:\n  - a",  # nesting
        'a: "\\u00e9"',  # an escape JSON and YAML may read apart
        "a: 'single'",
        "a: {b: c}",
        "",
    ]
    for block in others:
        assert frontmatter._flat(block) is None, block


def test_load_mapping_reads_both_forms_alike() -> None:
    assert frontmatter.load_mapping("status: approved\nn: 3") == {"status": "approved", "n": 3}
    assert frontmatter.load_mapping("status: approved") == {"status": "approved"}
    assert frontmatter.load_mapping("- a") is None
