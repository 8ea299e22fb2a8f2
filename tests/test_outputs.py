"""What every command prints has the keys of its type (uwf.util.outputs, docs/format.md,
"Command output"): each command runs through the real CLI, and every JSON object it prints —
nested ones too — is compared with its TypedDict: the required keys are there, and no key is
printed that the type does not name. Every type is met at least once, and docs/format.md
names every one."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

import pytest

import version1
from support import APPROVE, DEV, EXAMPLES, PLAN, REJECT
from uwf.backend import open_backend
from uwf.protocol import schemas
from uwf.testing import Clock
from uwf.util import outputs
from uwf.util.ulid import ThreadId

# Types whose objects may carry more keys than the type names (a log line's extra fields).
OPEN = {outputs.LogEntry}
TYPES = {
    obj
    for obj in (getattr(outputs, name) for name in outputs.__all__)
    if is_typeddict(obj) and obj.__module__.startswith(outputs.__name__ + ".")
}


class Checker:
    """Compares printed JSON with TypedDicts, noting each type it met."""

    def __init__(self) -> None:
        self.met: set[Any] = set()
        self.problems: list[str] = []

    def check(self, what: str, value: Any, expected: Any) -> None:
        """``value`` (parsed JSON) against ``expected``: a TypedDict, ``list[…]``, a union."""
        if is_typeddict(expected):
            self._object(what, value, expected)
            return
        origin = get_origin(expected)
        if origin is list:
            if not isinstance(value, list):
                self.problems.append(f"{what}: expected a list, got {value!r:.80}")
                return
            for i, item in enumerate(value):
                self.check(f"{what}[{i}]", item, get_args(expected)[0])
        elif origin in (typing.Union, types.UnionType):
            self._union(what, value, get_args(expected))
        elif origin is typing.NotRequired:
            self.check(what, value, get_args(expected)[0])

    def _object(self, what: str, value: Any, td: Any) -> None:
        self.met.add(td)
        if not isinstance(value, dict):
            self.problems.append(f"{what}: expected a {td.__name__} object, got {value!r:.80}")
            return
        keys = set(value)
        missing = td.__required_keys__ - keys
        extra = set() if td in OPEN else keys - td.__required_keys__ - td.__optional_keys__
        if missing or extra:
            self.problems.append(
                f"{what} ({td.__name__}): missing {sorted(missing)}, unknown {sorted(extra)}"
            )
        hints = get_type_hints(td)
        for key in keys & set(hints):
            self.check(f"{what}.{key}", value[key], hints[key])

    def _union(self, what: str, value: Any, options: tuple[Any, ...]) -> None:
        if value is None and type(None) in options:
            return
        shapes = [o for o in options if is_typeddict(o)]
        if not shapes:
            return
        fitting = [
            td
            for td in shapes
            if isinstance(value, dict)
            and td.__required_keys__ <= set(value) <= td.__required_keys__ | td.__optional_keys__
        ]
        self.check(what, value, fitting[0] if fitting else shapes[0])


@pytest.fixture
def checker() -> Checker:
    return Checker()


def printed(result: Any) -> Any:
    assert result.code == 0, result.err
    return result.json()


def lines(result: Any) -> list[Any]:
    assert result.code == 0, result.err
    return list(result.jsonl())


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


WRITER = """\
import os, sys
sys.stdin.read()
with open(os.path.join(os.environ["UWF_ARTIFACTS_DIR"], "notes.txt"), "w") as f:
    f.write("made by the step")
print({output!r})
"""


def test_every_command_prints_the_keys_of_its_type(
    cli: Any, root: Path, tmp_path: Path, scenario: Any, agent_script: Any, checker: Checker
) -> None:
    c, o = checker.check, outputs
    wf = EXAMPLES / "solve-issue.yaml"
    put = printed(cli("workflow", "put", wf))
    c("workflow put", put, o.WorkflowRef)
    c("workflow check", printed(cli("workflow", "check", wf)), list[o.WorkflowChecked])
    c("workflow show", printed(cli("workflow", "show", "solve-issue")), o.WorkflowShown)
    project = tmp_path / "cwd" / ".workflows"
    project.mkdir()
    write(project / "local-one.yaml", "name: local-one\n")
    c("workflow list", printed(cli("workflow", "list")), list[o.WorkflowListed])
    c(
        "workflow history",
        printed(cli("workflow", "history", "solve-issue")),
        list[o.WorkflowVersion],
    )
    rolled = cli("workflow", "rollback", "solve-issue", put["hash"])
    c("workflow rollback", printed(rolled), o.WorkflowRolledBack)

    mock = scenario({"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT, APPROVE]})
    started = printed(cli("thread", "start", "solve-issue", "-p", "Fix the bug"))
    c("thread start", started, o.ThreadStarted)
    keyed = cli("thread", "start", "solve-issue", "-p", "Once", "--key", "k1")
    c("thread start --key", printed(keyed), o.ThreadStarted)
    printed(cli("thread", "kill", printed(keyed)["thread"]))
    thread = started["thread"]
    dry = cli("thread", "step", thread, "--dry-run", "--agent", mock)
    c("thread step --dry-run", printed(dry), o.DryRun)
    c("thread step", lines(cli("thread", "step", thread, "--agent", mock)), list[o.StepLine])
    writer = "uwf-cmd -- " + agent_script(WRITER.format(output=DEV))
    stepped = cli("thread", "step", thread, "--agent", writer)
    c("thread step (artifacts)", lines(stepped), list[o.StepLine])
    stepped = cli("thread", "step", thread, "--agent", mock, "-c", "3")  # reject, dev, approve
    c("thread step -c", lines(stepped), list[o.StepLine])
    approved = printed(cli("thread", "show", thread))["head"]
    at_the_end = printed(cli("thread", "fork", approved))["thread"]  # its next move is $END
    ending = cli("thread", "step", at_the_end, "--dry-run", "--agent", mock)
    c("thread step --dry-run (the thread ends)", printed(ending), o.DryRun)
    c("thread kill", printed(cli("thread", "kill", at_the_end)), o.Killed)
    c("thread show", printed(cli("thread", "show", thread)), o.ThreadShown)
    c("thread show --full", printed(cli("thread", "show", thread, "--full")), o.ThreadShown)
    chain = printed(cli("thread", "steps", thread))
    c("thread steps", chain, o.ThreadSteps)
    c("thread steps --at 0", printed(cli("thread", "steps", thread, "--at", "0")), o.StartAt)
    c("thread steps --at 2", printed(cli("thread", "steps", thread, "--at", "2")), o.StepAt)
    forked_at = printed(cli("thread", "fork", thread, "--at", "1"))
    c("thread fork --at", forked_at, o.Forked)
    poked = cli("thread", "poke", forked_at["thread"], "-p", "Again.", "--agent", mock)
    c("thread poke", printed(poked), o.PokeLine)
    turns = cli("step", "turns", forked_at["thread"])
    assert turns.code == 0, turns.err
    c("step turns", turns.jsonl(), list[o.StepTurn])
    developer = chain["steps"][2]["hash"]
    c("step artifacts", printed(cli("step", "artifacts", developer)), list[o.ArtifactListed])
    extracted = cli("step", "artifacts", developer, "--extract", tmp_path / "out")
    c("step artifacts --extract", printed(extracted), list[o.ArtifactExtracted])

    planner = chain["steps"][1]["hash"]
    c("thread fork", printed(cli("thread", "fork", planner)), o.Forked)
    c(
        "thread fork --workflow",
        printed(cli("thread", "fork", planner, "--workflow", "solve-issue")),
        o.ForkedOnto,
    )
    edited = cli("thread", "fork", planner, "--output", write(tmp_path / "plan.md", PLAN))
    c("thread fork --output", printed(edited), o.ForkedEdited)
    rerun = cli("thread", "rerun", developer, "--agent", mock)
    c("thread rerun", lines(rerun), list[o.RerunLine])
    reruns = cli("thread", "rerun", thread, forked_at["thread"], "--agent", mock)
    c("thread rerun (bulk)", lines(reruns), list[o.BulkLine])

    waits = printed(cli("thread", "start", "solve-issue", "-p", "Wait for me"))["thread"]
    deferring = agent_script("print('a person answers', file=sys.stderr)\nsys.exit(75)")
    assert cli("thread", "step", waits, "--agent", deferring).code == 6
    c("thread show (waiting)", printed(cli("thread", "show", waits)), o.ThreadShown)
    fails = printed(cli("thread", "start", "solve-issue", "-p", "Fail for me"))["thread"]
    failing = agent_script("print('error: out of tokens', file=sys.stderr)\nsys.exit(1)")
    assert cli("thread", "step", fails, "--agent", failing).code == 5
    c("thread show (failing)", printed(cli("thread", "show", fails)), o.ThreadShown)
    c("thread list (failing)", printed(cli("thread", "list")), list[o.ThreadListed])
    for name in ("dev-task", "plan-parallel"):
        printed(cli("workflow", "put", EXAMPLES / f"{name}.yaml"))
    parent = printed(cli("thread", "start", "plan-parallel", "-p", "Fan out"))["thread"]
    fanning = scenario(
        {"planner": ["---\nstatus: _\nplan: split\nsubtasks: [one, two]\n---\nSplit."]}
    )
    assert cli("thread", "step", parent, "--agent", fanning).code == 0
    c("thread list (a fan-out)", printed(cli("thread", "list")), list[o.ThreadListed])
    c("thread show (a fan-out)", printed(cli("thread", "show", parent)), o.ThreadShown)
    printed(cli("thread", "kill", parent))
    bulk = cli("thread", "retry", fails, waits, "--dry-run")  # waits: no failure, an error
    assert bulk.code == 1
    c("thread retry --dry-run", bulk.jsonl(), list[o.BulkLine])
    c("thread retry", printed(cli("thread", "retry", fails)), o.Retried)
    killed = cli("thread", "kill", "--status", "killed", "--workflow", "solve-issue")
    c("thread kill --status (skipped)", lines(killed), list[o.BulkLine])
    c("thread priority", printed(cli("thread", "priority", fails, "4")), o.Prioritized)
    c("thread show (priority)", printed(cli("thread", "show", fails)), o.ThreadShown)
    c("thread list", printed(cli("thread", "list", "--all")), list[o.ThreadListed])
    summary = write(tmp_path / "summary.txt", "Planned, built, reviewed.")
    answered = cli("thread", "answer", waits, "--file", write(tmp_path / "answer.md", PLAN))
    c("thread answer", lines(answered), list[o.StepLine])
    c("thread compact", printed(cli("thread", "compact", waits, "--text", summary)), o.Compacted)
    html = tmp_path / "thread.html"
    c("thread export", printed(cli("thread", "export", waits, "--html", html)), o.Exported)

    project = tmp_path / "cwd"  # a version-1 workflow, a thread with a working directory
    version1.write_review(project)
    v1_mock = scenario(
        {
            "planner": [{"attempts": [version1.SUSPEND, version1.PLAN]}, version1.PLAN],
            "builder": [version1.BUILT],
            "reviewer": [version1.APPROVED],
        }
    )
    suspends = printed(cli("thread", "start", "review", "-p", "Add", "--cwd", project))["thread"]
    assert cli("thread", "step", suspends, "--agent", v1_mock).code == 6
    c("thread show (cwd, waiting)", printed(cli("thread", "show", suspends)), o.ThreadShown)
    resumed = cli("thread", "resume", suspends, "-p", "main", "--agent", v1_mock)
    c("thread resume", lines(resumed), list[o.ResumeLine])
    in_work = cli("thread", "step", suspends, "--dry-run", "--agent", v1_mock)
    c("thread step --dry-run (cwd)", printed(in_work), o.DryRun)
    assert cli("thread", "step", suspends, "-c", "3", "--agent", v1_mock).code == 0
    again = cli("thread", "resume", suspends, "-p", "more", "--agent", v1_mock)
    c("thread resume (an ended thread)", lines(again), list[o.ResumeLine])

    slow = agent_script("time.sleep(30)")
    running = printed(cli("thread", "start", "solve-issue", "-p", "Run in the background"))
    launched = cli("thread", "step", running["thread"], "--background", "--agent", slow)
    c("thread step --background", printed(launched), o.BackgroundStarted)
    c("thread show (background)", printed(cli("thread", "show", running["thread"])), o.ThreadShown)
    c("thread stop", printed(cli("thread", "stop", running["thread"])), o.BackgroundStopped)
    c(
        "thread kill (bulk)",
        lines(cli("thread", "kill", running["thread"], waits)),
        list[o.BulkLine],
    )

    failing = agent_script("sys.exit(1)")
    # it stops (0.5 s idle) before the back-off (1 s) ends: the thread fails once, not twice
    worked = cli("worker", "--max-steps", "1", "--idle-exit", "0.5", "--agent", failing)
    c("worker (failure)", lines(worked), list[o.WorkerFailure])
    with Clock() as clock:
        clock.advance(1.1)  # the failed thread cools down before it is picked again
        worked = cli("worker", "--max-steps", "1", "--idle-exit", "5", "--agent", mock)
    c("worker", lines(worked), list[o.WorkerStep])
    listed = printed(cli("worker", "list"))
    c("worker list", listed, list[o.WorkerListed])
    held = ThreadId(printed(cli("thread", "start", "solve-issue", "-p", "Held"))["thread"])
    with open_backend() as backend, backend.locks.step(held, wait=False, worker=listed[0]["id"]):
        c("thread show (a worker steps it)", printed(cli("thread", "show", held)), o.ThreadShown)

    text = printed(cli("cas", "put-text", "hello"))
    c("cas put-text", text, o.Hashed)
    c("cas put", printed(cli("cas", "put", schemas.HASHES.text, '"x"')), o.Hashed)
    c("cas get", printed(cli("cas", "get", developer)), o.NodeShown)
    c("cas get --timestamp", printed(cli("cas", "get", developer, "--timestamp")), o.NodeShown)
    c("cas has", printed(cli("cas", "has", developer)), o.Exists)
    c("cas refs", printed(cli("cas", "refs", developer)), o.Refs)
    c("cas walk", printed(cli("cas", "walk", developer)), o.Walked)
    c("cas reindex", printed(cli("cas", "reindex")), o.Reindexed)
    c("cas verify", printed(cli("cas", "verify")), o.Verified)
    c("cas schema list", printed(cli("cas", "schema", "list")), list[o.SchemaListed])
    c("cas gc --dry-run", printed(cli("cas", "gc", "--dry-run")), o.Collected)
    c("cas gc", printed(cli("cas", "gc")), o.Collected)
    c("cas pack", printed(cli("cas", "pack")), o.Packed)

    c("log list", printed(cli("log", "list")), list[o.LogFile])
    c("log show", printed(cli("log", "show")), list[o.LogEntry])
    c("log clean", printed(cli("log", "clean", "--before", "2000-01-01")), o.LogsCleaned)

    c("store init", printed(cli("store", "init")), o.StoreInitialised)
    c("store copy", printed(cli("store", "copy", root, tmp_path / "copy")), o.StoreCopied)

    evaluated = tmp_path / "eval-task"  # an eval task: a run, the list, both reports
    evaluated.mkdir()
    write(evaluated / "task.yaml", "workflow: solve-issue\nprompt: Fix it.\n")
    ran = cli("eval", "run", evaluated, "--agent", mock)
    c("eval run", lines(ran), list[o.EvalRunLine])
    c("eval list", printed(cli("eval", "list")), list[o.EvalListed])
    run_hash = lines(ran)[0]["run"]
    c("eval report <run>", printed(cli("eval", "report", run_hash)), o.EvalRunShown)
    c("eval report <task>", printed(cli("eval", "report", "eval-task")), o.EvalTaskReport)
    batch = lines(ran)[0]["batch"]
    c("eval diff", printed(cli("eval", "diff", batch, run_hash)), o.EvalDiff)
    page = tmp_path / "eval.html"
    c(
        "eval report --html",
        printed(cli("eval", "report", run_hash, "--html", page)),
        o.EvalExported,
    )

    closed = "http://127.0.0.1:9/v1"  # nothing listens: the check fails at once, with an error
    setup = cli("setup", "--provider", "p", "--base-url", closed, "--api-key", "k", "--model", "m")
    assert setup.code == 1  # the model check failed: printed first, then the error (exit 1)
    c("setup", setup.json(), o.SetupDone)
    default = cli("setup", "--default-agent", "uwf-mock")  # a command on PATH
    c("setup --default-agent", printed(default), o.DefaultAgentSet)
    c("config set", printed(cli("config", "set", "maxRounds", "9")), o.ConfigSet)

    damaged = tmp_path / "damaged"
    node = printed(cli("--store", damaged, "cas", "put-text", "to be damaged"))["hash"]
    loose = damaged / "cas" / "objects" / node[:2] / node
    loose.chmod(0o644)
    loose.write_text(loose.read_text().replace("damaged", "repaired"))
    verified = cli("--store", damaged, "cas", "verify")
    assert verified.code == 1
    c("cas verify (a damaged node)", verified.json(), o.Verified)
    packed = tmp_path / "packed"
    printed(cli("--store", packed, "cas", "put-text", "to be packed"))
    printed(cli("--store", packed, "cas", "pack"))
    (pack,) = (packed / "cas" / "packs").glob("*.pack")
    data = bytearray(pack.read_bytes())
    data[-1] ^= 0xFF
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    verified = cli("--store", packed, "cas", "verify")
    assert verified.code == 1
    c("cas verify (a damaged pack)", verified.json(), o.Verified)
    roots = tmp_path / "roots"  # a registry entry naming no node, and an emptied threads.yaml
    missing = "1" * 13  # a hash no node has
    roots.mkdir()
    (roots / "registry.yaml").write_text(f'"gone": "{missing}"\n')
    (roots / "threads.yaml").write_text("")
    verified = cli("--store", roots, "cas", "verify")
    assert verified.code == 1
    kinds = [sorted(d) for d in verified.json()["damaged"]]
    assert kinds == [["problem", "state"], ["problem", "workflow"]]
    c("cas verify (damaged roots)", verified.json(), o.Verified)
    reindexed = printed(cli("--store", packed, "cas", "reindex"))
    c("cas reindex", reindexed, o.Reindexed)

    assert checker.problems == []
    unmet = {t.__name__ for t in TYPES if not any(_within(t, m) for m in checker.met)}
    assert unmet == set()  # a type no command printed: test the command that prints it


def _within(small: Any, big: Any) -> bool:
    """Whether every field of ``small`` is a field of ``big``, of the same type (``big``
    extends it: checking ``big`` checked it)."""
    return get_type_hints(small).items() <= get_type_hints(big).items()


def test_docs_name_every_output_type() -> None:
    """docs/format.md, "Command output", names every type of uwf.util.outputs."""
    text = (Path(__file__).parent.parent / "docs" / "format.md").read_text()
    section = text.split("## Command output", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([A-Z][A-Za-z]+)`", section))
    assert {t.__name__ for t in TYPES} - named == set()
