"""Property tests: no input makes an exception escape as a traceback.

The workflow validator gets arbitrary documents, mutations of a valid workflow and arbitrary
text; the CLI gets arbitrary arguments for the commands that take user values. Every answer
is either a result or a ``UwfError`` with its one-line message (a workflow file's problem
list is the one multi-line message). The frontmatter parser and the hash codec have their
own property tests (tests/test_frontmatter.py, tests/test_cas_hash.py).
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from support import EXAMPLES, ONE_REJECTION, Result, tiers
from uwf.backend.memory import MemoryStore
from uwf.cas import schema as cas_schema
from uwf.engine.workflows.files import load_file, store_definition
from uwf.moderator.validate import validate as _validate
from uwf.protocol import schemas, workflow_schemas
from uwf.util.errors import UwfError

BASE = yaml.safe_load((EXAMPLES / "solve-issue.yaml").read_text(encoding="utf-8"))

# Words the validator looks for, so that random documents reach its deeper checks.
VOCAB = [
    "name",
    "description",
    "roles",
    "graph",
    "conditions",
    "$START",
    "$END",
    "_",
    "meta",
    "frontmatter",
    "status",
    "enum",
    "const",
    "type",
    "object",
    "string",
    "null",
    "properties",
    "required",
    "anyOf",
    "oneOf",
    "role",
    "prompt",
    "goal",
    "procedure",
    "output",
    "capabilities",
    "planner",
    "developer",
    "reviewer",
    "approved",
    "rejected",
    "wf",
    "{{plan}}",
    "{{#steps}}",
    "{{/x}}",
    "--rm",
    "../x",
]

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(VOCAB),
)
KEYS = st.one_of(
    st.sampled_from(VOCAB), st.text(max_size=8), st.integers(), st.booleans(), st.none()
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=40,
)
FUZZ = (60, 300)  # examples: the default run, the stress tier


def fuzz(examples: int) -> Any:
    return settings(max_examples=examples, deadline=None)


def _check(document: Any) -> None:
    """Validate; a valid result must also store and re-validate as a Workflow node."""
    definition, problems = _validate(document, "wf.yaml")
    for line in problems.lines + problems.warnings:
        assert isinstance(line, str) and line
        assert "\n" not in line, line
    if problems.lines:
        return
    store = MemoryStore()
    h = store_definition(store, definition)
    node = store.get(h)
    assert node is not None and node.type == schemas.hashes().workflow
    assert cas_schema.validate(workflow_schemas.WORKFLOW, node.payload) == []


@tiers("examples", *FUZZ)
def test_validator_never_raises_on_any_document(examples: int) -> None:
    @fuzz(examples)
    @given(st.dictionaries(KEYS, VALUES, max_size=6))
    def check(document: dict[Any, Any]) -> None:
        _check(document)

    check()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


PATHS = _paths(BASE)[1:]


@tiers("examples", *FUZZ)
def test_validator_never_raises_on_a_mutated_workflow(examples: int) -> None:
    """Replace (or delete) a few parts of a valid workflow anywhere in its tree."""

    @fuzz(examples)
    @given(
        st.lists(st.tuples(st.sampled_from(PATHS), VALUES, st.booleans()), min_size=1, max_size=4)
    )
    def check(changes: list[tuple[tuple[Any, ...], Any, bool]]) -> None:
        document = copy.deepcopy(BASE)
        for path, value, delete in changes:
            parent = document
            try:
                for key in path[:-1]:
                    parent = parent[key]
                if delete and isinstance(parent, dict):
                    parent.pop(path[-1], None)
                else:
                    parent[path[-1]] = value
            except (KeyError, IndexError, TypeError):
                continue  # an earlier change removed this place
        _check(document)

    check()


@pytest.mark.parametrize("value", [[], {"a": 1}])
def test_an_unhashable_status_value_is_a_problem(value: Any) -> None:
    document = copy.deepcopy(BASE)
    document["roles"]["planner"]["meta"]["properties"]["status"]["enum"] = [value]
    _, problems = _validate(document, "solve-issue.yaml")
    shown = json.dumps(value)
    assert f"roles.planner.meta: status value {shown} is not a string; quote it in the YAML" in (
        problems.lines
    )


@pytest.mark.parametrize("where", ["target", "key"])
def test_a_line_break_in_a_name_stays_in_its_problem_line(where: str) -> None:
    document = copy.deepcopy(BASE)
    if where == "target":
        document["graph"]["planner"]["_"]["role"] = "a\nb"
    else:
        document["graph"]["a\nb"] = {"_": {"role": "planner", "prompt": "p"}}
    _, problems = _validate(document, "solve-issue.yaml")
    assert problems.lines and all("\n" not in line for line in problems.lines)


def test_the_base_workflow_is_valid() -> None:
    definition, problems = _validate(copy.deepcopy(BASE), "solve-issue.yaml")
    assert problems.lines == [] and definition["name"] == "solve-issue"


@tiers("examples", *FUZZ)
def test_load_file_never_raises_anything_but_one_uwf_error(examples: int) -> None:
    @fuzz(examples)
    @given(st.one_of(st.text(max_size=300), st.builds(yaml.safe_dump, VALUES)))
    def check(text: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "wf.yaml"
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
            try:
                load_file(path)
            except UwfError as exc:
                lines = exc.message.split("\n")
                assert lines and lines[0]
                assert all(line.startswith("  - ") for line in lines[1:]), exc.message
                assert len(lines) == 1 or lines[0].startswith("invalid workflow ")

    check()


# -- the command line ------------------------------------------------------------------------

# Values a user might type, plus arbitrary text (no NUL: argv cannot hold one; no lone
# surrogates: docs and tests/test_errors_catalogue.py track those as known bugs).
INTERESTING = [
    "",
    " ",
    "-",
    "--",
    "--help",
    "..",
    "../../etc/passwd",
    "/",
    "0",
    "-1",
    "1e9",
    "nan",
    "inf",
    "0123456789ABC",
    "0123456789abc",
    "ZZZZZZZZZZZZZ",
    "01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
    "2026-02-30",
    "7d",
    "1h",
    "{}",
    "[]",
    '"text"',
    "null",
    "'unclosed",
    "a b c",
    "$(id)",
    "idle,bogus",
    "\u00e9\u4e2d\U0001f600",
]
ARG = st.one_of(
    st.sampled_from(INTERESTING),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        max_size=30,
    ),
)

COMMANDS: list[tuple[str, ...]] = [
    ("cas", "get", "@"),
    ("cas", "has", "@"),
    ("cas", "refs", "@"),
    ("cas", "walk", "@"),
    ("cas", "schema", "get", "@"),
    ("cas", "put", "{text}", "@"),
    ("cas", "put", "@", "{}"),
    ("cas", "gc", "--dry-run", "--grace", "@"),
    ("workflow", "show", "@"),
    ("workflow", "history", "@"),
    ("workflow", "rollback", "@", "@"),
    ("workflow", "put", "@"),
    ("thread", "show", "@"),
    ("thread", "steps", "@"),
    ("thread", "read", "@"),
    ("thread", "read", "{thread}", "--quota", "@"),
    ("thread", "read", "{thread}", "--before", "@"),
    ("thread", "fork", "@"),
    ("thread", "step-details", "@"),
    ("thread", "kill", "@"),
    ("thread", "step", "@", "--dry-run"),
    ("thread", "step", "{thread}", "--dry-run", "--agent", "@"),
    ("thread", "step", "{thread}", "--dry-run", "-c", "@", "--agent", "x"),
    ("thread", "start", "@", "-p", "task"),
    ("thread", "list", "--status", "@"),
    ("thread", "list", "--after", "@"),
    ("thread", "list", "--before", "@"),
    ("thread", "list", "--skip", "@"),
    ("thread", "list", "--take", "@"),
    ("step", "read", "@"),
    ("step", "read", "{step}", "--quota", "@"),
    ("log", "show", "--date", "@"),
    ("log", "show", "--thread", "@"),
    ("setup", "--provider", "@"),
]


@pytest.fixture
def populated(cli: Any, scenario: Any, root: Path) -> dict[str, str]:
    """A root with a workflow, a thread with one step, and a Text node."""

    def ok(*args: str) -> Any:
        r: Result = cli(*args)
        assert r.code == 0, r.err
        return r.json()

    ok("workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    thread = ok("thread", "start", "solve-issue", "-p", "task")["thread"]
    step = ok("thread", "step", thread, "--agent", scenario(ONE_REJECTION))["head"]
    ok("cas", "put-text", "a note")
    return {"thread": thread, "step": step, "text": schemas.hashes().text}


@tiers("examples", 80, 400)
def test_no_argument_makes_a_traceback(cli: Any, populated: dict[str, str], examples: int) -> None:
    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(COMMANDS), st.lists(ARG, min_size=2, max_size=2))
    def check(command: tuple[str, ...], args: list[str]) -> None:
        values = iter(args)
        argv = [
            next(values) if a == "@" else re.sub(r"\{(\w+)\}", lambda m: populated[m[1]], a)
            for a in command
        ]
        assume(argv[:2] != ["workflow", "put"] or not Path(argv[2]).exists())  # a real file is fine
        r: Result = cli(*argv)
        assert "Traceback" not in r.err
        assert "internal error" not in r.err, (argv, r.err)
        assert r.code in (0, 1, 2), (argv, r.code, r.err)
        own = [line for line in r.err.split("\n") if line.startswith("error: ")]
        if r.code == 1 and argv[:2] != ["cas", "has"]:
            assert r.err.startswith("error: ") and len(own) == 1, (argv, r.err)
            problem_list = own[0].startswith("error: invalid workflow ")
            line_break = any(c in a for a in args for c in "\r\n")  # see the test below
            if not problem_list and not line_break:
                assert r.err == own[0] + "\n" and "\r" not in r.err, (argv, r.err)
        if r.code == 2:
            assert own or r.err.startswith("Usage: "), (argv, r.err)

    check()


@pytest.mark.parametrize(
    "command",
    [
        ["cas", "get", "@"],
        ["cas", "put", "{text}", "@"],
        ["cas", "gc", "--grace", "@"],
        ["workflow", "show", "@"],
        ["thread", "show", "@"],
        ["thread", "fork", "@"],
        ["thread", "list", "--skip", "@"],
        ["workflow", "put", "@"],
        ["thread", "list", "--status", "@"],
        ["thread", "list", "--after", "@"],
        ["thread", "step", "{thread}", "-c", "@"],
        ["log", "show", "--date", "@"],
    ],
    ids=lambda c: " ".join(c[:3]),
)
def test_a_line_break_in_a_value_stays_on_one_line(
    cli: Any, populated: dict[str, str], command: list[str]
) -> None:
    argv = [
        "a\nb" if a == "@" else re.sub(r"\{(\w+)\}", lambda m: populated[m[1]], a) for a in command
    ]
    r: Result = cli(*argv)
    usage = command[:3] in (["thread", "list", "--skip"], ["thread", "list", "--status"])
    usage = usage or command[:2] == ["thread", "step"]  # a bad option value: a usage error
    assert r.code == (2 if usage else 1)
    assert r.err.count("\n") == 1 and r.err.startswith("error: "), r.err
