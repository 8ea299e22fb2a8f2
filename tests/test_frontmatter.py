"""Frontmatter parsing and the fast path (docs/agents.md, "A Python agent on the agent
kit"; docs/format.md, "What a role can emit"), plus property tests: no agent answer can make
the fast path raise."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import tiers
from uwf.agent_kit.fastpath import (
    candidate,
    offer,
    parse,
    parse_standard,
    split,
    validate_standard,
)
from uwf.backend.memory import MemoryStore
from uwf.cas import schema as cas_schema
from uwf.util.jsonfmt import canonical, dumps


def fast_path(raw: str, schema_hash: str, store: MemoryStore) -> tuple[str, str] | None:
    """``(output hash, body)`` of an accepted offer, else None."""
    result = offer(raw, schema_hash, store)
    return None if result.hash is None else (result.hash, result.body)


STANDARD = {
    "type": "object",
    "properties": {
        "status": {"enum": ["done", "needs_input", "in_progress", "failed"]},
        "next": {"type": ["string", "null"]},
        "confidence": {"type": ["number", "null"]},
        "artifacts": {"type": "array", "items": {"type": "string"}},
        "scope": {"enum": ["role", "thread"]},
    },
    "required": ["status", "next", "confidence", "artifacts", "scope"],
    "additionalProperties": False,
}
REVIEWER = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
    "additionalProperties": False,
}
PLANNER = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["ready", "insufficient_info"]},
        "plan": {"type": "string"},
    },
    "required": ["status", "plan"],
    "additionalProperties": False,
}


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


def payload(store: MemoryStore, h: str) -> Any:
    node = store.get(h)
    assert node is not None
    return node.payload


# -- split / parse (Utilities) ------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "just markdown\nstatus: done\n",
        "# Title\n---\nstatus: done\n---\nbody",
        "--- inline\nstatus: done\n---\n",
        "---status: done\n---\n",
        "---\nstatus: done\nno closing fence",
        "---",
        " ---\nstatus: done\n---\n",
    ],
)
def test_no_frontmatter_gives_none_and_the_input_as_body(raw: str) -> None:
    assert split(raw) == (None, raw)
    assert parse(raw) == (None, raw)


def test_full_document() -> None:
    raw = (
        "---\n"
        "status: done\n"
        "next: reviewer\n"
        "confidence: 0.9\n"
        "artifacts:\n"
        "  - src/auth.ts\n"
        "  - 6KWJ7TFJ2GJTG\n"
        "scope: thread\n"
        "---\n"
        "\n\n## Implementation\nFixed it.\n"
    )
    record, body = parse(raw)
    assert record == {
        "status": "done",
        "next": "reviewer",
        "confidence": 0.9,
        "artifacts": ["src/auth.ts", "6KWJ7TFJ2GJTG"],
        "scope": "thread",
    }
    assert body == "## Implementation\nFixed it.\n"


def test_body_is_empty_when_nothing_follows_the_closing_fence() -> None:
    assert split("---\nstatus: done\n---") == ("status: done", "")
    assert split("---\nstatus: done\n---\n\n") == ("status: done", "")


def test_empty_block_gives_defaults() -> None:
    assert split("---\n---\nbody") == ("", "body")
    record, body = parse("---\n---\nbody")
    assert record == {
        "status": None,
        "next": None,
        "confidence": None,
        "artifacts": [],
        "scope": "role",
    }
    assert body == "body"


def test_crlf_fences_are_accepted() -> None:
    block, body = split("---\r\nstatus: done\r\n---\r\nbody\r\n")
    assert body == "body\r\n"
    assert block is not None and parse_standard(block)["status"] == "done"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("status: done", "done"),
        ("status: needs_input", "needs_input"),
        ("status: in_progress", "in_progress"),
        ("status: FAILED", "failed"),
        ("status: Done", "done"),
        ("status: approved", None),
        ("status: 1", None),
        ("", None),
    ],
)
def test_status(line: str, expected: str | None) -> None:
    assert parse_standard(line)["status"] == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("confidence: 1", 1),
        ("confidence: 0.75", 0.75),
        ("confidence: high", None),
        ('confidence: "0.5"', None),
        ("confidence:", None),
        ("", None),
    ],
)
def test_confidence(line: str, expected: Any) -> None:
    assert parse_standard(line)["confidence"] == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [("next: reviewer", "reviewer"), ("next: '  padded '", "padded"), ("next:", None), ("", None)],
)
def test_next(line: str, expected: str | None) -> None:
    assert parse_standard(line)["next"] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("artifacts:\n  - a.ts\n  - b.ts", ["a.ts", "b.ts"]),
        ("artifacts: [a.ts, b.ts]", ["a.ts", "b.ts"]),
        ("artifacts: a.ts", ["a.ts"]),
        ("artifacts:", []),
        ("", []),
        ("artifacts: ['', x]", ["x"]),
    ],
)
def test_artifacts(text: str, expected: list[str]) -> None:
    assert parse_standard(text)["artifacts"] == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [("scope: role", "role"), ("scope: thread", "thread"), ("scope: world", "role"), ("", "role")],
)
def test_scope(line: str, expected: str) -> None:
    assert parse_standard(line)["scope"] == expected


def test_unknown_keys_and_comments_are_ignored() -> None:
    record = parse_standard("# a comment\nstatus: done\nmood: happy\n# another\nnext: dev")
    assert record == {
        "status": "done",
        "next": "dev",
        "confidence": None,
        "artifacts": [],
        "scope": "role",
    }


def test_a_block_that_is_not_a_mapping_gives_defaults() -> None:
    assert parse_standard("- a\n- b") == parse_standard("")
    assert parse_standard("status: [unclosed") == parse_standard("")
    assert parse_standard("when: 2024-13-45") == parse_standard("")


# -- validation (Utilities) ---------------------------------------------------------------------

ALL_NULL = {"status": None, "next": None, "confidence": None, "artifacts": [], "scope": "role"}


def test_valid_and_all_null_records_have_no_errors() -> None:
    assert validate_standard(ALL_NULL) == []
    good = {**ALL_NULL, "status": "done", "next": "code-reviewer", "artifacts": ["a.ts"]}
    assert validate_standard(good) == []


@pytest.mark.parametrize("value", [0, 1, 0.5])
def test_confidence_bounds_ok(value: float) -> None:
    assert validate_standard({**ALL_NULL, "confidence": value}) == []


@pytest.mark.parametrize("value", [-0.1, 1.01, "high", True])
def test_confidence_bounds_error(value: Any) -> None:
    assert validate_standard({**ALL_NULL, "confidence": value}) == [
        "confidence must be a number between 0 and 1"
    ]


@pytest.mark.parametrize("value", ["some role", "a\tb", "", "  "])
def test_next_with_whitespace_or_blank_is_an_error(value: str) -> None:
    assert validate_standard({**ALL_NULL, "next": value}) == [
        "next must be a role name without whitespace"
    ]


@pytest.mark.parametrize("value", ["", "   "])
def test_blank_artifact_is_an_error(value: str) -> None:
    assert validate_standard({**ALL_NULL, "artifacts": ["ok.ts", value]}) == [
        "artifacts[1] must not be blank"
    ]


def test_bad_scope_and_status_are_errors() -> None:
    assert validate_standard({**ALL_NULL, "scope": "world"}) == ["scope must be role or thread"]
    assert validate_standard({**ALL_NULL, "status": "approved"}) == [
        "status must be one of done, needs_input, in_progress, failed"
    ]


def test_several_errors_are_reported_together() -> None:
    bad = {"status": None, "next": "a b", "confidence": 2, "artifacts": [" "], "scope": "x"}
    assert validate_standard(bad) == [
        "confidence must be a number between 0 and 1",
        "next must be a role name without whitespace",
        "artifacts[0] must not be blank",
        "scope must be role or thread",
    ]


# -- candidate ----------------------------------------------------------------------------------


def test_candidate_takes_the_schema_fields_only() -> None:
    block = "approved: true\nstatus: done\nscope: thread\nnotes: extra"
    assert candidate(block, REVIEWER) == {"approved": True}


def test_candidate_custom_status_passes_through_and_standard_status_is_lowered() -> None:
    assert candidate("status: ready\nplan: do it", PLANNER) == {"status": "ready", "plan": "do it"}
    assert candidate("status: Done\nplan: x", PLANNER) == {"status": "done", "plan": "x"}


def test_candidate_standard_names_present_as_null_when_absent() -> None:
    schema = {"properties": {"status": {}, "next": {}, "confidence": {}, "other": {}}}
    assert candidate("", schema) == {"status": None, "next": None, "confidence": None}
    assert candidate("confidence: high", schema) == {
        "status": None,
        "next": None,
        "confidence": "high",
    }


def test_candidate_without_schema_fields_is_the_standard_record() -> None:
    assert candidate("status: done\nplan: x", {"type": "object"}) == {
        "status": "done",
        "next": None,
        "confidence": None,
        "artifacts": [],
        "scope": "role",
    }


def test_candidate_union_schema_uses_union_fields() -> None:
    union = {"anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]}
    assert candidate("a: 1\nb: [x]\nc: 3", union) == {"a": 1, "b": ["x"]}


def test_candidate_keeps_nested_values_and_stringifies_dates_and_keys() -> None:
    schema = {"properties": {"meta": {}, "when": {}}}
    block = "meta:\n  1: one\n  null: nothing\n  list: [1.0, 2.5]\nwhen: 2024-05-01"
    assert candidate(block, schema) == {
        "meta": {"1": "one", "null": "nothing", "list": [1, 2.5]},
        "when": "2024-05-01",
    }


def test_standard_checks_apply_only_to_fields_the_schema_has() -> None:
    assert candidate("approved: true\nconfidence: 85\nnext: a b", REVIEWER) == {"approved": True}
    assert candidate("status: done\nconfidence: 1.5", STANDARD) is None
    assert candidate("status: done\nnext: some role", STANDARD) is None


@pytest.mark.parametrize(
    "block",
    [
        "a: .nan",
        "a: !!binary aGVsbG8=",
        "a: !!set {x, y}",
        "a: 2024-13-45",
        "a: !!float abc",
        "a: !!python/object:os.system x",
        "a: [unclosed",
        "&a [*a]",
        "just a string",
        "- a list",
        "a: &x [1]\nb: *x",
    ],
)
def test_candidate_unusable_blocks(block: str) -> None:
    result = candidate(block, {"properties": {"a": {}, "b": {}}})
    if block.startswith("a: &x"):  # aliases are fine when they stay small
        assert result == {"a": [1], "b": [1]}
    else:
        assert result is None


# -- fast path (Agent kit — extraction) ---------------------------------------------------------


def test_fast_path_valid_frontmatter(store: MemoryStore) -> None:
    h = store.put_schema(STANDARD)
    result = fast_path("---\nstatus: done\n---\n\n# Work\nDone it.", h, store)
    assert result is not None
    output_hash, body = result
    assert body == "# Work\nDone it."
    assert payload(store, output_hash) == {
        "status": "done",
        "next": None,
        "confidence": None,
        "artifacts": [],
        "scope": "role",
    }
    assert output_hash in store.index(h)


@pytest.mark.parametrize(
    "raw",
    [
        "no frontmatter here",
        "---\nstatus: done\nconfidence: 1.5\n---\n",
        "---\nstatus: done\nnext: some role\n---\n",
        "---\nstatus: done\nartifacts: ['  ']\n---\n",
    ],
)
def test_fast_path_rejections_with_the_standard_schema(store: MemoryStore, raw: str) -> None:
    h = store.put_schema(STANDARD)
    before = dict(store.nodes)
    assert fast_path(raw, h, store) is None
    assert store.nodes == before


def test_fast_path_required_field_absent(store: MemoryStore) -> None:
    h = store.put_schema(PLANNER)
    before = dict(store.nodes)
    assert fast_path("---\nstatus: ready\n---\nbody", h, store) is None
    assert store.nodes == before  # an invalid candidate is never stored


def test_fast_path_reviewer_payload_is_exactly_the_schema_fields(store: MemoryStore) -> None:
    h = store.put_schema(REVIEWER)
    result = fast_path("---\napproved: true\n---\nLGTM", h, store)
    assert result is not None
    assert dumps(payload(store, result[0])) == '{"approved":true}'
    assert result[1] == "LGTM"


def test_fast_path_planner_keeps_custom_status_and_plan(store: MemoryStore) -> None:
    h = store.put_schema(PLANNER)
    result = fast_path("---\nstatus: ready\nplan: step one\n---\nThe plan.", h, store)
    assert result is not None
    stored = payload(store, result[0])
    assert stored == {"status": "ready", "plan": "step one"}
    assert "scope" not in stored


def test_fast_path_wrong_type_is_rejected(store: MemoryStore) -> None:
    h = store.put_schema(REVIEWER)
    assert fast_path('---\napproved: "yes please"\n---\n', h, store) is None


def test_fast_path_missing_schema_node(store: MemoryStore) -> None:
    other = MemoryStore()
    h = other.put_schema(REVIEWER)
    assert fast_path("---\napproved: true\n---\n", h, store) is None


def test_fast_path_is_idempotent(store: MemoryStore) -> None:
    h = store.put_schema(REVIEWER)
    first = fast_path("---\napproved: false\n---\na", h, store)
    second = fast_path("---\napproved: false\n---\nb", h, store)
    assert first is not None and second is not None
    assert first[0] == second[0]
    assert (first[1], second[1]) == ("a", "b")


# -- properties ---------------------------------------------------------------------------------

YAMLISH_KEYS = st.sampled_from(
    ["status", "next", "confidence", "artifacts", "scope", "approved", "plan", "a", "1", "? x"]
)
YAMLISH_VALUES = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "done",
            "Done",
            "ready",
            "true",
            "yes",
            "null",
            "~",
            "0.5",
            "1.5",
            "-1",
            ".nan",
            ".inf",
            "[a, b]",
            "[a, [b",
            "{x: 1}",
            "{",
            "&a x",
            "*a",
            "*b",
            "!!binary aGk=",
            "!!set {a}",
            "!!float x",
            "!!python/name:os.system",
            "2024-01-01",
            "2024-13-45",
            "'quoted",
            '"dq"',
            "a b",
            "|",
            ">-",
            "- item",
            "\n  - x\n  - ''",
            "\n  nested: 1",
            "---",
            "...",
            "#",
            "%YAML 1.1",
        ]
    ),
)
YAMLISH_LINE = st.one_of(
    st.builds(lambda k, v: f"{k}: {v}", YAMLISH_KEYS, YAMLISH_VALUES),
    st.text(max_size=30),
)
YAMLISH_BLOCK = st.lists(YAMLISH_LINE, max_size=8).map("\n".join)
SCHEMAS = st.sampled_from(
    [
        STANDARD,
        REVIEWER,
        PLANNER,
        {"type": "object"},
        {"type": "string"},
        {"anyOf": [{"properties": {"a": {}}}, {"properties": {"plan": {"type": "string"}}}]},
        {"properties": {"a": {}, "1": {}, "status": {}, "next": {}, "confidence": {}}},
    ]
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.text())
def test_split_and_parse_never_raise(raw: str) -> None:
    block, body = split(raw)
    if block is None:
        assert body == raw
    else:
        assert raw.startswith("---") and not body.startswith(("\n", "\r"))
        record = parse_standard(block)
        assert set(record) == {"status", "next", "confidence", "artifacts", "scope"}
        assert isinstance(validate_standard(record), list)


@SETTINGS
@given(
    st.text().filter(lambda b: "\n---" not in "\n" + b),
    st.text(),
)
def test_split_round_trip(block: str, body: str) -> None:
    assert split(f"---\n{block}\n---\n{body}") == (block, body.lstrip("\r\n"))


@SETTINGS
@given(YAMLISH_BLOCK)
def test_parse_standard_is_always_well_formed(block: str) -> None:
    record = parse_standard(block)
    assert record["status"] in (None, "done", "needs_input", "in_progress", "failed")
    assert record["scope"] in ("role", "thread")
    assert all(isinstance(a, str) and a for a in record["artifacts"])
    assert record["next"] is None or record["next"] == record["next"].strip()
    assert record["confidence"] is None or isinstance(record["confidence"], (int, float))


@SETTINGS
@given(YAMLISH_BLOCK, SCHEMAS)
def test_candidate_never_raises_and_is_json(block: str, schema: Any) -> None:
    result = candidate(block, schema)
    if result is not None:
        assert isinstance(result, dict)
        assert dumps(canonical(result)).startswith("{")  # storable as is


# Control, surrogate and line-separator characters are left out: PyYAML's own dumper does not
# round-trip them (it writes U+0085 as a plain scalar that loads back as a space).
TEXT = st.text(
    alphabet=st.characters(
        exclude_categories=("Cc", "Cs", "Zl", "Zp"), exclude_characters="\ufeff"
    ),
    max_size=20,
)
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)


@tiers("examples", 60, 300)
def test_candidate_round_trips_dumped_yaml(examples: int) -> None:
    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), JSON_VALUES, max_size=5))
    def round_trips(data: dict[str, Any]) -> None:
        data = {k: v for k, v in data.items() if k not in STANDARD["properties"]}
        schema = {"type": "object", "properties": {k: {} for k in [*data, "absent"]}}
        block = yaml.safe_dump(data, allow_unicode=True)
        assert candidate(block, schema) == canonical(data)

    round_trips()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(st.text(), st.builds(lambda b, t: f"---\n{b}\n---\n{t}", YAMLISH_BLOCK, st.text())),
    SCHEMAS,
)
def test_fast_path_never_raises(raw: str, schema: Any) -> None:
    store = MemoryStore()
    h = store.put_schema(schema)
    before = set(store.nodes)
    result = fast_path(raw, h, store)
    if result is None:
        assert set(store.nodes) == before
    else:
        output_hash, body = result
        assert body == split(raw)[1]
        assert cas_schema.validate(schema, payload(store, output_hash)) == []


# -- why an offer is refused ----------------------------------------------------------------

NOTES = {
    "type": "object",
    "properties": {
        "status": {"enum": ["ok"]},
        "notes": {"type": "string"},
        "items": {"type": "array", "items": {"type": "integer"}},
        "confidence": {"type": ["number", "null"]},
    },
    "required": ["status", "notes"],
}


@pytest.mark.parametrize(
    ("raw", "problems"),
    [
        ("no block at all", []),
        ("---\n- a list\n---\n", ["the frontmatter block is not a YAML mapping of fields"]),
        ("---\nstatus: ok\nnotes: no\n---\n", ["notes: expected a string, got a boolean"]),
        (
            "---\nstatus: bad\nitems: [1, x]\n---\n",
            [  # top to bottom, what is missing last
                'status: expected one of "ok", got "bad"',
                "items[1]: expected an integer, got a string",
                "notes: missing (expected a string)",
            ],
        ),
        (
            "---\nstatus: ok\nnotes: n\nconfidence: 85\n---\n",
            ["confidence must be a number between 0 and 1"],
        ),
    ],
)
def test_offer_names_every_rejected_field(
    store: MemoryStore, raw: str, problems: list[str]
) -> None:
    h = store.put_schema(NOTES)
    before = dict(store.nodes)
    result = offer(raw, h, store)
    assert (result.hash, list(result.problems)) == (None, problems)
    assert store.nodes == before


def test_the_correction_message_lists_the_problems_after_its_first_line() -> None:
    from uwf.agent_kit.prompts import CORRECTION_MESSAGE, correction_message

    assert correction_message([]) == CORRECTION_MESSAGE
    lines = correction_message(["notes: expected a string, got a boolean", "x: y"]).split("\n")
    original = CORRECTION_MESSAGE.split("\n")
    assert lines == [
        original[0],
        "What was wrong:",
        "- notes: expected a string, got a boolean",
        "- x: y",
        *original[1:],
    ]
