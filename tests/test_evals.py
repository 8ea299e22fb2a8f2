"""``uwf eval``: task folders run as threads in fresh copies of their fixture, judged, recorded
as EvalRun nodes, listed and reported (docs/evals.md). Driven through the real CLI with
``uwf-mock`` and ``uwf-cmd``."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_server import LLMServer, llm_fixture, write_config  # noqa: F401
from support import EXAMPLES, Result
from uwf.protocol import schemas

FAIL_ONCE = {"planner": [{"exit": 1, "stderr": "error: rate limited"}]}


@pytest.fixture
def task(tmp_path: Path, cli: Any) -> Any:
    """Write a task folder (task.yaml, an optional fixture and files); return its path."""
    assert cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    counter = iter(range(1000))

    def make(
        spec: dict[str, Any] | str | None = None,
        *,
        fixture: dict[str, str] | None = None,
        files: dict[str, str] | None = None,
        name: str | None = None,
    ) -> Path:
        folder = tmp_path / "tasks" / (name or f"task{next(counter)}")
        folder.mkdir(parents=True)
        body = spec if spec is not None else {"workflow": "solve-issue", "prompt": "Fix it."}
        text = body if isinstance(body, str) else yaml.safe_dump(body, sort_keys=False)
        (folder / "task.yaml").write_text(text)
        for rel, content in (fixture or {}).items():
            path = folder / "fixture" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        for rel, content in (files or {}).items():
            path = folder / rel
            path.write_text(content)
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return folder

    return make


def evalrun(cli: Any, h: str) -> dict[str, Any]:
    node = cli("cas", "get", h).json()
    assert node["type"] == schemas.hashes().eval_run
    payload: dict[str, Any] = node["payload"]
    return payload


def judged(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {j["name"]: j for j in run["judges"]}


BUILTINS = [
    {"name": "outcome", "builtin": "outcome"},
    {"name": "cost", "weight": 0, "builtin": "cost"},
    {"name": "compliance", "builtin": "compliance"},
]


def test_a_run_is_a_thread_in_a_copy_of_the_fixture_judged_and_recorded(
    cli_proc: Any, cli: Any, task: Any, scenario: Any, tmp_path: Path
) -> None:
    folder = task(
        {"name": "fix", "workflow": "solve-issue", "prompt": "Fix it.", "judges": BUILTINS},
        fixture={"src/app.py": "print('hi')\n"},
    )
    tmp = {"TMPDIR": str(tmp_path)}
    result = cli_proc(
        "eval", "run", folder, "--agent", scenario(inprocess=False), "--keep-workdir", env=tmp
    )
    assert result.code == 0, result.err
    [line] = result.jsonl()
    assert set(line) == {"run", "task", "batch", "thread", "outcome", "score", "judges", "workdir"}
    assert line["task"] == "fix" and line["outcome"] == "completed"
    assert line["judges"] == {"outcome": 1, "cost": 1, "compliance": 1}
    assert line["score"] == 1
    workdir = Path(line["workdir"])
    assert (workdir / "src" / "app.py").read_text() == "print('hi')\n"
    assert (folder / "fixture" / "src" / "app.py").exists()  # copied, not moved

    run = evalrun(cli, line["run"])
    assert run["thread"] == line["thread"] and run["outcome"] == "completed"
    assert run["agents"] == ["uwf-mock"] and run["models"] == []
    assert run["agent"].startswith("uwf-mock --scenario ")
    shown = cli("thread", "show", line["thread"]).json()
    assert shown["cwd"] == str(workdir) and shown["status"] == "completed"
    assert run["head"] == shown["head"]
    verdicts = judged(run)
    assert verdicts["outcome"]["data"] == {"outcome": "completed", "steps": 5}
    assert verdicts["compliance"]["data"] == {
        "steps": 5,
        "fastPath": 5,
        "corrected": 0,
        "extracted": 0,
        "person": 0,
        "corrections": 0,
    }
    assert verdicts["cost"]["data"]["steps"] == 5 and verdicts["cost"]["weight"] == 0
    assert (
        cli("cas", "get", run["taskFile"]).json()["payload"] == (folder / "task.yaml").read_text()
    )


def test_the_working_directory_is_removed_unless_kept(
    cli_proc: Any, task: Any, scenario: Any, tmp_path: Path
) -> None:
    folder = task(fixture={"a.txt": "x"})
    result = cli_proc("eval", "run", folder, "--agent", scenario(), env={"TMPDIR": str(tmp_path)})
    assert result.code == 0, result.err
    assert "workdir" not in result.jsonl()[0]
    assert not list(tmp_path.glob("uwf-eval-*"))


def test_count_runs_each_task_in_order_in_one_batch(
    cli_proc: Any, cli: Any, task: Any, scenario: Any
) -> None:
    a, b = task(name="alpha"), task(name="beta")
    result = cli_proc("eval", "run", a, b, "--count", "2", "--agent", scenario())
    assert result.code == 0, result.err
    lines = result.jsonl()
    assert [x["task"] for x in lines] == ["alpha", "alpha", "beta", "beta"]
    assert len({x["thread"] for x in lines}) == 4
    listed = cli("eval", "list").json()
    assert [x["run"] for x in listed] == [x["run"] for x in lines]
    assert len({x["batch"] for x in listed}) == 1
    assert [x["task"] for x in cli("eval", "list", "--task", "beta").json()] == ["beta", "beta"]


def test_outcomes_failed_and_max_rounds_kill_or_end_the_thread(
    cli_proc: Any, cli: Any, task: Any, scenario: Any
) -> None:
    failing = task({"workflow": "solve-issue", "prompt": "Fix it."})
    result = cli_proc("eval", "run", failing, "--agent", scenario(FAIL_ONCE))
    assert result.code == 0, result.err
    [line] = result.jsonl()
    assert line["outcome"] == "failed" and line["score"] == 0
    run = evalrun(cli, line["run"])
    assert "rate limited" in run["error"]
    assert cli("thread", "show", line["thread"]).json()["status"] == "killed"

    short = task({"workflow": "solve-issue", "prompt": "Fix it.", "limits": {"maxSteps": 2}})
    [line] = cli_proc("eval", "run", short, "--agent", scenario()).jsonl()
    assert line["outcome"] == "max_rounds"
    assert evalrun(cli, line["run"])["judges"][0]["data"] == {"outcome": "max_rounds", "steps": 2}


JUDGE = """#!/bin/sh
# a command judge: the thread id last, UWF_THREAD set, run in the working directory
test -f fixed.txt || { echo '{"score": 0, "data": "not fixed"}'; exit 0; }
echo "checking $1" >&2
printf '{"score": 0.75, "data": {"arg": "%s", "env": "%s", "fixture": "%s"}}\\n' \
  "$1" "$UWF_THREAD" "$(cat fixture.txt)"
"""

FIXER = """
open("fixed.txt", "w").write("yes")
print("---\\nstatus: _\\nplan: p\\nsteps: [a]\\nfilesChanged: [fixed.txt]\\nsummary: s\\n"
      "comments: ok\\n---\\ndone")
"""


def test_a_command_judge_runs_in_the_working_directory_with_the_thread(
    cli_proc: Any, cli: Any, task: Any, agent_script: Any
) -> None:
    folder = task(
        {
            "workflow": "solve-issue",
            "prompt": "Fix it.",
            "limits": {"maxSteps": 2},
            "judges": [{"name": "tests", "weight": 2, "command": "judge.sh"}],
        },
        fixture={"fixture.txt": "from the fixture"},
        files={"judge.sh": JUDGE},
    )
    agent = f"uwf-cmd -- {agent_script(FIXER)}"
    result = cli_proc("eval", "run", folder, "--agent", agent)
    assert result.code == 0, result.err
    [line] = result.jsonl()
    run = evalrun(cli, line["run"])
    verdict = judged(run)["tests"]
    assert verdict["score"] == 0.75 and "error" not in verdict, verdict
    assert verdict["data"] == {
        "arg": line["thread"],
        "env": line["thread"],
        "fixture": "from the fixture",
    }
    assert verdict["command"] == "judge.sh" and verdict["weight"] == 2
    assert run["score"] == 0.75


@pytest.mark.parametrize(
    ("command", "script", "error"),
    [
        ("judge.sh", "#!/bin/sh\necho oops >&2\nexit 3\n", "exited 3: oops"),
        ("judge.sh", "#!/bin/sh\necho hello\n", "its last line is not JSON: hello"),
        (
            "judge.sh",
            "#!/bin/sh\necho '{\"score\": 3}'\n",
            'expected {"score": 0..1, "data": …}, got: {"score": 3}',
        ),
        (
            "judge.sh",
            "#!/bin/sh\n",
            'printed nothing (expected a last line {"score": 0..1, "data": …})',
        ),
        ("'unclosed", "", "invalid command line: No closing quotation"),
        ("./missing.sh", "", "judge command not found: "),
    ],
)
def test_a_failing_judge_scores_0_with_its_error_and_the_eval_goes_on(
    cli_proc: Any, cli: Any, task: Any, scenario: Any, command: str, script: str, error: str
) -> None:
    folder = task(
        {
            "workflow": "solve-issue",
            "prompt": "Fix it.",
            "judges": [
                {"name": "outcome", "builtin": "outcome"},
                {"name": "j", "command": command},
            ],
        },
        files={"judge.sh": script} if script else None,
    )
    result = cli_proc("eval", "run", folder, "--agent", scenario())
    assert result.code == 0, result.err
    [line] = result.jsonl()
    assert line["judges"] == {"outcome": 1, "j": 0} and line["score"] == 0.5
    verdict = judged(evalrun(cli, line["run"]))["j"]
    assert verdict["data"] is None and verdict["error"].startswith(error), verdict


CORRECTED = """
import pathlib
seen = pathlib.Path("ran")
if not seen.exists():
    seen.write_text("1")
    print("I forgot the frontmatter.")
else:
    print("---\\nstatus: _\\nplan: p\\nsteps: [a]\\n---\\nplanned")
"""


def test_compliance_counts_corrections_from_the_detail(
    cli_proc: Any, cli: Any, task: Any, agent_script: Any
) -> None:
    folder = task(
        {
            "workflow": "solve-issue",
            "prompt": "Fix it.",
            "limits": {"maxSteps": 1},
            "judges": [{"name": "compliance", "builtin": "compliance"}],
        }
    )
    result = cli_proc("eval", "run", folder, "--agent", f"uwf-cmd -- {agent_script(CORRECTED)}")
    assert result.code == 0, result.err
    [line] = result.jsonl()
    assert line["judges"] == {"compliance": 0}
    data = judged(evalrun(cli, line["run"]))["compliance"]["data"]
    assert data == {
        "steps": 1,
        "fastPath": 0,
        "corrected": 1,
        "extracted": 0,
        "person": 0,
        "corrections": 1,
    }


def test_report_of_a_run_and_of_a_task(cli_proc: Any, cli: Any, task: Any, scenario: Any) -> None:
    folder = task(
        {"name": "fix", "workflow": "solve-issue", "prompt": "Fix it.", "judges": BUILTINS}
    )
    good = cli_proc("eval", "run", folder, "--count", "2", "--agent", scenario()).jsonl()
    bad = cli_proc("eval", "run", folder, "--agent", scenario(FAIL_ONCE)).jsonl()

    shown = cli("eval", "report", good[0]["run"]).json()
    assert shown["run"] == good[0]["run"] and shown["task"] == "fix"
    assert shown == {"run": good[0]["run"], **evalrun(cli, good[0]["run"])}

    report = cli("eval", "report", "fix").json()
    assert report["task"] == "fix"
    [mock, failing] = report["groups"]
    assert mock["runs"] == 2 and mock["outcomes"] == {"completed": 2}
    assert mock["score"] == {"n": 2, "mean": 1, "stdev": 0, "min": 1, "max": 1}
    assert failing["outcomes"] == {"failed": 1} and failing["score"]["mean"] == 0
    assert failing["judges"]["outcome"] == {"n": 1, "mean": 0, "stdev": 0, "min": 0, "max": 0}
    assert bad[0]["run"] not in {g["run"] for g in good}

    text = cli("eval", "report", "fix", "--format", "table").out
    assert text.splitlines()[0].split()[:4] == ["WORKFLOW", "AGENT", "RUNS", "SCORE"]
    assert "outcome 1.000±0.000" in text
    text = cli("eval", "report", good[0]["run"], "--format", "table").out
    assert "JUDGE" in text and "compliance" in text
    listing = cli("eval", "list", "--format", "table").out.splitlines()
    assert listing[0].split() == ["RUN", "TASK", "WORKFLOW", "AGENT", "OUTCOME", "SCORE", "THREAD"]
    assert len(listing) == 4


def test_gc_keeps_eval_runs_and_their_threads(
    cli_proc: Any, cli: Any, task: Any, scenario: Any
) -> None:
    [line] = cli_proc("eval", "run", task(), "--agent", scenario()).jsonl()
    run = evalrun(cli, line["run"])
    assert cli("cas", "gc", "--grace", "0").code == 0
    assert evalrun(cli, line["run"]) == run
    assert cli("thread", "read", line["thread"]).code == 0
    assert cli("cas", "verify").json()["damaged"] == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "prompt: x\n",
            "invalid task.yaml {path}: workflow: missing (expected a non-empty string)",
        ),
        (
            {"workflow": "w", "prompt": "p", "judges": [{"name": "a", "builtin": "speed"}]},
            "invalid task.yaml {path}: judges[0].builtin: expected one of",
        ),
        (
            {"workflow": "w", "prompt": "p", "limits": {"maxSteps": 0}},
            "invalid task.yaml {path}: limits.maxSteps: expected a positive integer, got 0",
        ),
        (
            {
                "workflow": "w",
                "prompt": "p",
                "judges": [{"name": "a", "builtin": "cost"}, {"name": "a", "command": "x"}],
            },
            'invalid task.yaml {path}: judges[1].name: "a" names an earlier judge too',
        ),
        (
            {"workflow": "w", "prompt": "p", "judges": [{"name": "a"}]},
            "invalid task.yaml {path}: judges[0]: a judge has one of builtin (outcome, cost, "
            "compliance), command, or entry (uwf 0.8's node script)",
        ),
        (
            {"workflow": "w", "prompt": "p", "timeout": 3},
            "invalid task.yaml {path}: timeout: unknown key",
        ),
    ],
)
def test_a_bad_task_yaml_is_refused_before_anything_runs(
    cli_proc: Any, cli: Any, task: Any, scenario: Any, spec: Any, message: str
) -> None:
    good = task()
    bad = task(spec)
    result = cli_proc("eval", "run", good, bad, "--agent", scenario())
    assert result.code == 1 and result.out == ""
    assert result.err_line.startswith("error: " + message.format(path=bad / "task.yaml")), (
        result.err
    )
    assert cli("eval", "list").json() == []
    assert cli("thread", "list").json() == []


def test_bad_arguments(cli_proc: Any, task: Any, tmp_path: Path) -> None:
    def first(*args: Any) -> Result:
        return cli_proc("eval", "run", *args)

    assert first(tmp_path / "none").err_line == (
        f"error: not an eval task folder: {tmp_path / 'none'} (no such directory)"
    )
    (tmp_path / "file").write_text("")
    assert first(tmp_path / "file").err_line == (
        f"error: not an eval task folder: {tmp_path / 'file'} (not a directory)"
    )
    assert first(tmp_path).err_line == (
        f"error: not an eval task folder: {tmp_path} (it has no task.yaml)"
    )
    result = first(task(), "--count", "0")
    assert (result.code, result.err_line) == (
        2,
        "error: --count must be between 1 and 1000, got: 0",
    )
    result = first(task({"workflow": "nope", "prompt": "p"}, name="t"))
    assert result.code == 1 and result.err_line.startswith("error: eval task t: "), result.err
    assert cli_proc("eval", "report", "0123456789ABC").err_line == (
        "error: not an eval run: 0123456789ABC"
    )
    assert cli_proc("eval", "report", "fix").err_line == (
        "error: no eval runs of task fix (uwf eval list shows the tasks run)"
    )


def test_a_task_workflow_file_is_the_task_folders(cli_proc: Any, task: Any, scenario: Any) -> None:
    text = (EXAMPLES / "solve-issue.yaml").read_text()
    folder = task({"workflow": "flows/solve-issue.yaml", "prompt": "Fix it."})
    (folder / "flows").mkdir()
    (folder / "flows" / "solve-issue.yaml").write_text(text)
    result = cli_proc("eval", "run", folder, "--agent", scenario())
    assert result.code == 0, result.err
    assert result.jsonl()[0]["outcome"] == "completed"


def test_eval_runs_on_postgresql_too(
    any_store: str, cli_proc: Any, cli: Any, task: Any, scenario: Any
) -> None:
    folder = task({"workflow": "solve-issue", "prompt": "Fix it.", "judges": BUILTINS})
    result = cli_proc("eval", "run", folder, "--agent", scenario())
    assert result.code == 0, result.err
    [line] = result.jsonl()
    assert line["outcome"] == "completed" and line["score"] == 1
    assert [x["run"] for x in cli("eval", "list").json()] == [line["run"]]


def test_diff_two_runs_and_two_batches(cli_proc: Any, cli: Any, task: Any, scenario: Any) -> None:
    folder = task(
        {"name": "fix", "workflow": "solve-issue", "prompt": "Fix it.", "judges": BUILTINS}
    )
    good = cli_proc("eval", "run", folder, "--count", "2", "--agent", scenario()).jsonl()
    bad = cli_proc("eval", "run", folder, "--count", "2", "--agent", scenario(FAIL_ONCE)).jsonl()

    one = cli("eval", "diff", bad[0]["run"], good[0]["run"]).json()
    assert one["a"] == bad[0]["run"] and one["onlyA"] == [] and one["onlyB"] == []
    [fix] = one["tasks"]
    assert fix["score"]["delta"] == 1 and fix["score"]["clear"] is True
    assert fix["judges"]["outcome"]["a"] == {"n": 1, "mean": 0, "stdev": 0, "min": 0, "max": 0}

    both = cli("eval", "diff", bad[0]["batch"], good[0]["batch"]).json()
    [fix] = both["tasks"]
    assert fix["score"]["a"]["n"] == 2 and fix["score"]["b"]["mean"] == 1
    assert fix["judges"]["outcome"] == {
        "a": {"n": 2, "mean": 0, "stdev": 0, "min": 0, "max": 0},
        "b": {"n": 2, "mean": 1, "stdev": 0, "min": 1, "max": 1},
        "delta": 1,
        "clear": True,
    }
    assert fix["judges"]["cost"]["clear"] is False  # no budget: 1 on both sides
    text = cli("eval", "diff", bad[0]["batch"], good[0]["batch"], "--format", "table").out
    assert text.splitlines()[0].split() == ["TASK", "SCORE", "A", "B", "DELTA", "CLEAR"]
    rows = [row.split() for row in text.splitlines()]
    assert ["fix", "outcome", "0.000±0.000", "1.000±0.000", "+1.000", "yes"] in rows

    other = task({"name": "other", "workflow": "solve-issue", "prompt": "Other."})
    alone = cli_proc("eval", "run", other, "--agent", scenario()).jsonl()
    apart = cli("eval", "diff", good[0]["batch"], alone[0]["batch"]).json()
    assert apart == {
        "a": good[0]["batch"],
        "b": alone[0]["batch"],
        "tasks": [],
        "onlyA": ["fix"],
        "onlyB": ["other"],
    }
    assert cli("eval", "diff", "01ARZ3NDEKTSV4RRFFQ69G5FAV", good[0]["run"]).err_line == (
        "error: no eval runs for 01ARZ3NDEKTSV4RRFFQ69G5FAV (expected an EvalRun hash or a "
        "batch; see uwf eval list)"
    )


SUITE = EXAMPLES / "evals"


def test_the_example_suite_shows_the_better_agent(cli_proc: Any, cli: Any) -> None:
    """examples/evals: two tasks whose fixture has a failing test; the fixer agent fixes it,
    the idler does not, and `eval diff` says so (docs/evals.md, "The example suite")."""
    tasks = sorted(str(p) for p in (SUITE / "tasks").iterdir() if p.is_dir())

    def batch(agent: str) -> list[dict[str, Any]]:
        command = f"uwf-cmd -- sh {SUITE / 'agents' / agent}"
        shared = ("--allow-outside", str(SUITE))  # its tasks share a workflow and a judge
        result = cli_proc("eval", "run", *tasks, *shared, "--count", "2", "--agent", command)
        assert result.code == 0, result.err
        lines: list[dict[str, Any]] = result.jsonl()
        return lines

    idle, fixed = batch("idler.sh"), batch("fixer.sh")
    assert [x["judges"]["tests"] for x in idle] == [0, 0, 0, 0]
    assert [x["judges"]["tests"] for x in fixed] == [1, 1, 1, 1]
    assert {x["outcome"] for x in idle + fixed} == {"completed"}
    found = cli("eval", "diff", idle[0]["batch"], fixed[0]["batch"]).json()
    assert [t["task"] for t in found["tasks"]] == ["fix-add", "fix-max"]
    for compared in found["tasks"]:
        assert compared["judges"]["tests"]["delta"] == 1 and compared["judges"]["tests"]["clear"]
        assert compared["judges"]["outcome"]["delta"] == 0
        assert compared["score"]["a"]["mean"] == 0.4 and compared["score"]["b"]["mean"] == 1
    for task_dir in tasks:  # the fixture itself is never changed
        assert "return a - b" in (Path(task_dir) / "fixture" / "calc.py").read_text() or (
            "return min(a, b)" in (Path(task_dir) / "fixture" / "calc.py").read_text()
        )


HOSTILE = """#!/bin/sh
echo '{"score": 1, "data": {"note": "<script>alert(1)</script>"}}'
"""


def test_report_html_is_one_self_contained_page(
    cli_proc: Any, cli: Any, task: Any, scenario: Any, tmp_path: Path
) -> None:
    folder = task(
        {
            "name": "fix",
            "workflow": "solve-issue",
            "prompt": "Fix it.",
            "judges": [*BUILTINS, {"name": "hostile", "command": "judge.sh"}],
        },
        files={"judge.sh": HOSTILE},
    )
    [line] = cli_proc("eval", "run", folder, "--agent", scenario()).jsonl()
    page = tmp_path / "run.html"
    shown = cli("eval", "report", line["run"], "--html", page).json()
    assert shown == {"report": line["run"], "file": str(page), "bytes": page.stat().st_size}
    html = page.read_text()
    assert line["thread"] in html and "compliance" in html and "hostile" in html
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Content-Security-Policy" in html
    whole = cli("eval", "report", "fix", "--html", "-")
    assert whole.code == 0 and "<h1>Eval task fix</h1>" in whole.out and "weighted" in whole.out


def test_an_extracted_output_and_its_tokens_are_judged(
    cli_proc: Any, cli: Any, task: Any, scenario: Any, root: Path, llm: LLMServer
) -> None:
    """A planner without frontmatter: the LLM extract writes its output (compliance says
    extracted) and its call is the step's cost (the cost judge sums it, within budget)."""
    write_config(root, llm.base_url)
    plan = {"status": "_", "plan": "refactor", "steps": ["one"]}
    usage = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    llm.reply({"content": json.dumps(plan), "usage": usage})
    folder = task(
        {
            "workflow": "solve-issue",
            "prompt": "Fix it.",
            "limits": {"maxSteps": 1},
            "judges": [
                {"name": "compliance", "builtin": "compliance"},
                {"name": "cost", "builtin": "cost", "budget": {"tokens": 75, "calls": 1}},
            ],
        }
    )
    agent = scenario({"planner": ["Here is my plan: refactor it."]})
    [line] = cli_proc("eval", "run", folder, "--agent", agent).jsonl()
    verdicts = judged(evalrun(cli, line["run"]))
    assert verdicts["compliance"]["score"] == 0
    assert verdicts["compliance"]["data"]["extracted"] == 1
    spent = verdicts["cost"]["data"]
    assert (spent["calls"], spent["tokens"], spent["promptTokens"]) == (1, 150, 120)
    assert verdicts["cost"]["score"] == 0.75  # tokens: 75/150, calls: within the budget


def test_timeout_minutes_stops_the_run_and_kills_the_thread(
    cli_proc: Any, cli: Any, task: Any, agent_script: Any
) -> None:
    folder = task(
        {"workflow": "solve-issue", "prompt": "Fix it.", "limits": {"timeoutMinutes": 0.01}}
    )
    result = cli_proc("eval", "run", folder, "--agent", agent_script("time.sleep(30)"))
    assert result.code == 0, result.err
    [line] = result.jsonl()
    assert line["outcome"] == "timeout" and line["score"] == 0
    run = evalrun(cli, line["run"])
    assert run["error"] == "passed limits.timeoutMinutes (0.01)" and run["durationMs"] < 20_000
    assert cli("thread", "show", line["thread"]).json()["status"] == "killed"


def test_every_problem_of_a_task_yaml_at_once(cli_proc: Any, task: Any) -> None:
    bad = task({"workflow": "", "prompt": "p", "limits": {"maxSteps": "many"}})
    result = cli_proc("eval", "run", bad)
    assert result.code == 1
    assert result.err.splitlines() == [
        f"error: invalid task.yaml {bad / 'task.yaml'}: 2 problems",
        '  - workflow: expected a non-empty string, got ""',
        "  - limits.maxSteps: expected a positive integer, got a string",
    ]


def test_an_agent_that_asks_for_a_person_ends_the_run_waiting(
    cli_proc: Any, cli: Any, task: Any, agent_script: Any
) -> None:
    deferring = agent_script("print('error: a person must answer', file=sys.stderr)\nsys.exit(75)")
    [line] = cli_proc("eval", "run", task(), "--agent", deferring).jsonl()
    assert line["outcome"] == "waiting"
    assert "a person must answer" in evalrun(cli, line["run"])["error"]
    assert cli("thread", "show", line["thread"]).json()["status"] == "killed"
