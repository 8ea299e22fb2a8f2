"""README.md quotes uwf's error texts: each quote is checked against what uwf really prints.

A quote is an inline code span of README.md (outside code blocks) that holds an error text:
it starts with ``error:`` or says what a schema expected. Each must be one this file
reproduces, so a reworded message (or a new quote) cannot leave the README behind.
Placeholders written ``<like this>`` stand for any text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from support import EXAMPLES, REPO

README = REPO / "README.md"
REJECTION = "a rejection names the field: "


def quotes(text: str) -> list[str]:
    """The inline code spans of a markdown text outside its fenced blocks, white space
    collapsed (a span may wrap across lines)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [" ".join(m.group(1).split()) for m in re.finditer(r"`([^`\n]+(?:\n[^`\n]+)*)`", prose)]


def is_error_text(quote: str) -> bool:
    return quote.startswith("error: ") or bool(
        re.search(r"\bexpected one of\b|\bis not one of\b", quote)
    )


def as_pattern(quote: str) -> re.Pattern[str]:
    """The quote with each ``<placeholder>`` matching any text."""
    parts = re.split(r"<[^<>]+>", quote)
    return re.compile(".+?".join(re.escape(part) for part in parts))


def quoted_after(text: str, marker: str) -> str:
    """The code span that follows ``marker`` in the README."""
    flat = " ".join(text.split())
    at = flat.index(marker) + len(marker)
    assert flat[at] == "`", flat[at : at + 40]
    return flat[at + 1 : flat.index("`", at + 1)]


def test_every_quoted_error_is_one_this_file_checks() -> None:
    text = README.read_text(encoding="utf-8")
    found = {quote for quote in quotes(text) if is_error_text(quote)}
    checked = {quoted_after(text, REJECTION), "error: <message>", AGENT_FAILED}
    assert found <= checked, sorted(found - checked)
    assert quoted_after(text, REJECTION) in found


def test_the_schema_rejection_quoted_is_what_fork_prints(cli: Any, tmp_path: Path) -> None:
    quote = quoted_after(README.read_text(encoding="utf-8"), REJECTION)
    assert cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    thread = cli("thread", "start", "solve-issue", "-p", "Fix it").json()["thread"]
    scenario = EXAMPLES / "solve-issue.mock.yaml"
    stepped = cli("thread", "step", thread, "-c", "3", "--agent", f"uwf-mock --scenario {scenario}")
    assert stepped.code == 0, stepped.err
    head = cli("thread", "show", thread).json()["head"]
    answer = tmp_path / "answer.md"
    answer.write_text("---\nstatus: maybe\ncomments: no idea\n---\nHmm.\n")
    refused = cli("thread", "fork", head, "--output", str(answer))
    assert refused.code == 1
    assert refused.err_line.startswith("error: ")
    assert refused.err_line.endswith(quote), (refused.err_line, quote)


AGENT_FAILED = "error: agent command failed (<command>) with exit code <n>: <its last error line>"


def test_the_agent_failure_quoted_is_what_a_step_prints(
    cli_proc: Any, new_thread: Any, agent_script: Any
) -> None:
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert f"`{AGENT_FAILED}`" in text
    thread = new_thread()
    agent = agent_script("sys.stderr.write('error: the disk is full\\n'); sys.exit(3)\n")
    failed = cli_proc("thread", "step", thread, "--agent", agent)
    assert failed.code == 5
    last = failed.err.strip().splitlines()[-1]  # the agent's own stderr is relayed before it
    assert as_pattern(AGENT_FAILED).fullmatch(last), last
    assert last.endswith("with exit code 3: error: the disk is full")
