"""The answers every side of the benchmark writes: seeded, realistic, a different one per step.

Standard library only: uwf's benchmark agent (``mock_agent.py``), the in-process chain
builder (``uwf_bench.py``) and the peers' nodes (``peers/``, in the peer venv) all import it,
so that step ``n`` of the thread whose task is ``t`` carries byte for byte the same answer on
every side. An answer is what an agent of the ``solve-issue`` workflow prints: a YAML
frontmatter block with the role's fields (``examples/solve-issue.yaml``) and a markdown body,
of a few hundred to a few thousand bytes (log-uniform), made of words drawn from a fixed
vocabulary by a generator seeded with (task, role, step): the same arguments give the same
answer in any process, and no two steps of a thread give the same one.

    answer(task, role, step) -> str       # the raw answer (frontmatter + body)
    fields(task, role, step) -> dict      # its frontmatter as a JSON object
    body(task, role, step) -> str         # its markdown body

The reviewer always rejects, so the loop runs planner -> developer -> reviewer -> developer ->
reviewer … for ever (``role_at``).
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

SEED = "uwf-benchmark-1"  # change it and every generated answer changes
MIN_BYTES, MAX_BYTES = 300, 3000  # the range of an answer's size (log-uniform)

ROLES = ("planner", "developer", "reviewer")

WORDS = """
the a an of to in for on with by from as at into over after before when while if then
because so that which this these those it its they them their we our you your each every
function module class method test tests fixture parser lexer token tree node graph edge
thread step role agent output schema hash store cache index pack file files directory path
config option flag value default error message exit code status result record line lines
read write append rename lock unlock retry timeout signal process child parent worker queue
request response client server connection socket buffer stream chunk byte bytes length
size limit bound check checks validate validation invalid missing empty null none true false
return returns raise raises handle handles call calls caller callee argument arguments
parameter parameters variable constant loop branch condition case cases edge-case corner
add adds remove removes rename renames move moves split merge merges refactor refactors fix
fixes bug bugs issue issues change changes patch diff commit review reviewer comment comments
plan plans design decision trade-off cost costs fast slow faster slower memory disk network
latency throughput benchmark measure measures figure figures row rows table column columns
user users script scripts command commands terminal shell input inputs format formats json
yaml markdown text unicode encoding decode encode escape quote quoted unquoted newline space
""".split()  # noqa: SIM905 - a vocabulary reads better as text
NAMES = """
parser store runner backend session cache history prompts frontmatter moderator graph
config lock packs index chain cost window compact artifacts process signals errors log
""".split()  # noqa: SIM905
EXTENSIONS = (".py", ".md", ".yaml", ".toml", ".json")
VERBS = (
    "Add",
    "Remove",
    "Rename",
    "Check",
    "Move",
    "Split",
    "Document",
    "Test",
    "Handle",
    "Bound",
)


def _rng(task: str, role: str, step: int) -> random.Random:
    return random.Random(f"{SEED}\x00{task}\x00{role}\x00{step}")


def _sentence(rng: random.Random, low: int = 6, high: int = 18) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def _paragraph(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        s = _sentence(rng)
        out.append(s)
        length += len(s) + 1
    return " ".join(out)


def _path(rng: random.Random) -> str:
    parts = [rng.choice(("src/uwf", "tests", "docs", "benchmarks", "src/uwf/engine"))]
    parts.append(rng.choice(NAMES) + rng.choice(EXTENSIONS))
    return "/".join(parts)


def _size(rng: random.Random) -> int:
    return int(math.exp(rng.uniform(math.log(MIN_BYTES), math.log(MAX_BYTES))))


def _generate(task: str, role: str, step: int) -> tuple[dict[str, Any], str]:
    """(frontmatter fields, markdown body) of one answer."""
    if role not in ROLES:
        raise ValueError(f"no answers for role {role!r}")
    rng = _rng(task, role, step)
    size = _size(rng)
    share = rng.uniform(0.3, 0.7)  # of the answer in its structured fields, the rest body
    in_fields = max(80, int(size * share))
    fields: dict[str, Any]
    if role == "planner":
        count = rng.randint(3, 7)
        fields = {
            "status": "_",
            "plan": _paragraph(rng, in_fields // 2),
            "steps": [f"{rng.choice(VERBS)} {_sentence(rng, 4, 10)}" for _ in range(count)],
        }
    elif role == "developer":
        fields = {
            "status": "_",
            "filesChanged": sorted({_path(rng) for _ in range(rng.randint(1, 6))}),
            "summary": _paragraph(rng, in_fields),
        }
    else:  # the reviewer always rejects: the loop goes on for ever
        comments = [f"- {_paragraph(rng, rng.randint(60, 240))}" for _ in range(8)]
        kept, length = [], 0
        for comment in comments:
            kept.append(comment)
            length += len(comment) + 1
            if length >= in_fields:
                break
        fields = {"status": "rejected", "comments": "\n".join(kept)}
    heading = {"planner": "Plan", "developer": "Changes", "reviewer": "Review"}[role]
    rest = max(40, size - len(json.dumps(fields)))
    body = f"## {heading}\n\n{_paragraph(rng, rest)}\n"
    if role == "developer" and rng.random() < 0.5:
        name = fields["filesChanged"][0]
        body += f"\n```diff\n--- a/{name}\n+++ b/{name}\n"
        for _ in range(rng.randint(2, 6)):
            body += f"-    {rng.choice(WORDS)} = {rng.choice(WORDS)}({rng.choice(WORDS)})\n"
            body += f"+    {rng.choice(WORDS)} = {rng.choice(WORDS)}({rng.choice(WORDS)})\n"
        body += "```\n"
    return fields, body


def fields(task: str, role: str, step: int) -> dict[str, Any]:
    """The structured output of the answer: the frontmatter as a JSON object."""
    return _generate(task, role, step)[0]


def body(task: str, role: str, step: int) -> str:
    """The markdown body of the answer (after the frontmatter)."""
    return _generate(task, role, step)[1]


def answer(task: str, role: str, step: int) -> str:
    """The raw answer an agent prints for step ``step`` (1-based) of the thread with task
    ``task``: ``---``, one ``key: <JSON value>`` line per field (JSON is YAML), ``---``, body."""
    data, text = _generate(task, role, step)
    block = "".join(f"{key}: {json.dumps(value)}\n" for key, value in data.items())
    return f"---\n{block}---\n{text}"


def role_at(step: int) -> str:
    """The role that runs step ``step`` of the loop (1: planner, then developer and reviewer
    in turn: the reviewer always rejects)."""
    if step < 1:
        raise ValueError("steps are numbered from 1")
    if step == 1:
        return "planner"
    return "developer" if step % 2 == 0 else "reviewer"
