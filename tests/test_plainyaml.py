"""The plain YAML form read without PyYAML (``uwf.util.plainyaml``): whatever it reads, it
reads exactly as PyYAML's safe loader does, and what it does not read is left to the loader
(``uwf.util.yamlio``)."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from uwf.util import frontmatter, plainyaml, yamlio

# Characters chosen to reach every rule: YAML's indicators, quotes and escapes, line breaks of
# YAML's own (NEL, U+2028), control characters, a BOM, surrogates and plain text.
TRICKY = st.sampled_from(
    [
        *"aZ$_-09 .,/()'\"\\:#[]{}!&*%@`|>?~=<\t\r\n",
        *["\x85", "\u2028", "\ufeff", "\ud800", "\xa0", "é", "…", "\\u0041", "\\n", "\\/"],
    ]
)
WORDS = st.sampled_from(
    [
        *["status", "$status", "plan", "yes", "No", "null", "on", "_", "$SUSPEND", "/usr/bin/x"],
        *["0", "1", "010", "12", "-3", "1e5", "0x1", "1.5", "1:20", "2024-01-02", "~", ".inf"],
    ]
)
INDENTS = st.sampled_from(["", "", "  ", "    ", " "])


def text(chars: Any = TRICKY) -> Any:
    return st.lists(chars, max_size=10).map("".join)


def quoted() -> Any:
    return text().map(lambda t: f'"{t}"')


def value() -> Any:
    listed = st.lists(quoted(), max_size=3).map(lambda items: "[" + ", ".join(items) + "]")
    words = st.lists(WORDS, min_size=1, max_size=3).map(" ".join)
    return st.one_of(WORDS, text(), quoted(), listed, words, st.just(""))


def line() -> Any:
    key = st.one_of(WORDS, text())
    sep = st.sampled_from([": ", ":  ", ":", " : ", ": "])
    comment = st.sampled_from(["", "", " # note", "\n# a comment", "\n", "\n  "])
    return st.builds(lambda i, k, s, v, c: f"{i}{k}{s}{v}{c}", INDENTS, key, sep, value(), comment)


def loaded(document: str) -> Any:
    try:
        return yaml.load(document, Loader=yamlio.safe_loader())
    except Exception as exc:  # the loader refuses it: the plain reader must too
        return exc


@settings(max_examples=2000, deadline=None)
@given(st.lists(line(), min_size=1, max_size=5).map("\n".join))
def test_the_plain_form_is_read_as_the_safe_loader_reads_it(document: str) -> None:
    plain = plainyaml.read(document)
    if plain is not None:
        assert plain == loaded(document), document


KEYS = st.sampled_from(["a", "b", "$status", "agents", "mock", "k-1", "_", "yes", "x"])
LEAF = st.one_of(WORDS, quoted(), st.lists(quoted(), max_size=2).map(lambda i: f"[{', '.join(i)}]"))
TREE = st.recursive(
    st.dictionaries(KEYS, LEAF, min_size=1, max_size=3),
    lambda children: st.dictionaries(KEYS, st.one_of(LEAF, children), min_size=1, max_size=3),
    max_leaves=8,
)


def render(tree: dict[str, Any], indent: str, step: str) -> str:
    out = ""
    for key, item in tree.items():
        if isinstance(item, dict):
            out += f"{indent}{key}:\n" + render(item, indent + step, step)
        else:
            out += f"{indent}{key}: {item}\n"
    return out


@settings(max_examples=1000, deadline=None)
@given(TREE, st.sampled_from(["  ", "    ", " "]), st.sampled_from(["", "# c\n", "\n"]))
def test_nested_mappings_are_read_as_the_safe_loader_reads_them(
    tree: dict[str, Any], step: str, extra: str
) -> None:
    document = extra + render(tree, "", step)
    plain = plainyaml.read(document)
    if plain is not None:
        assert plain == loaded(document), document


DOCUMENTS = [
    'status: "_"\nplan: "Fix it: the \\"lock\\" first #1."\nsteps: ["Add a test.", "Remove x/y"]',
    "status: approved\nnotes: looks good, ship it",
    "$status: $SUSPEND\nreason: waiting for the owner's answer",
    'comments: "- first\\n- second\\\\ and a tab\\there"\nfiles: []',
    'summary: "Unicode is fine: é … 日本"',
    # a config.yaml
    "# my setup\nagents:\n  mock:\n    command: /usr/bin/python3\n"
    '    args: ["/work/mock_agent.py", "--x"]\n\n  other:\n    command: uwf-mock\n'
    "defaultAgent: mock\nmaxRounds: 50\n",
]


def test_documents_of_the_plain_form_are_read_without_the_loader() -> None:
    for document in DOCUMENTS:
        plain = plainyaml.read(document)
        assert plain is not None, document
        assert plain == loaded(document)
        assert yamlio.load(document) == plain
        assert yamlio.load(document.encode()) == plain  # as a file's bytes


def test_everything_else_is_left_to_the_loader() -> None:
    others = [
        "ratio: 1.5",  # a float
        "mode: 0755",  # an octal number
        "done: yes",  # a boolean
        "yes: done",  # a boolean key
        "reason:",  # a null
        "a: b\na: c",  # a key twice
        "plan: do it # later",  # a comment after a value
        "list:\n  - a",  # a sequence
        "a: b\n  c",  # a value on two lines
        'a: "\\u00e9"',  # an escape JSON and YAML may read apart
        "a: 'single'",
        "a: {b: c}",
        "a: ~/x",
        "",
        "# nothing",
        "a:b",
    ]
    for document in others:
        assert plainyaml.read(document) is None, document


def test_yamlio_limits_hold_for_the_plain_form() -> None:
    deep = "".join(f"{'  ' * i}k{i}:\n" for i in range(70)) + f"{'  ' * 70}leaf: x\n"
    assert plainyaml.read(deep) is not None
    try:
        yamlio.load(deep)
    except Exception as exc:
        assert str(exc) == "invalid YAML: nested deeper than 64 levels"
    else:
        raise AssertionError("a plain document nested 71 deep was read")


def test_load_mapping_reads_both_forms_alike() -> None:
    assert frontmatter.load_mapping("status: approved\nn: 1.5") == {"status": "approved", "n": 1.5}
    assert frontmatter.load_mapping("status: approved") == {"status": "approved"}
    assert frontmatter.load_mapping("- a") is None
