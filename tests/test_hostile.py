"""Hostile agents and damaged stores (docs/reliability.md, "Hostile agents" and "Repairing
damaged state"), each attack driven through the real CLI in subprocesses.

An agent's output comes from a model that reads the web: it may print a key it was shown,
flood stderr, answer 200 KB where a line was expected, swap its artifacts directory for a
link, write names no directory can hold, put NUL bytes and terminal escapes in its words.
And a store may be damaged by a crash or a hand: an emptied ``threads.yaml``, a head that is
not a hash, a cut history line, a lost pack index, a deleted head node. Each test sets up one
of these and checks what uwf does now: secrets stay out of what a model sees and of
everything printed, logged or stored; memory stays bounded; the thread keeps stepping;
damage is an error naming the file, never read as nothing, and gc deletes nothing.
"""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_server import (
    TEST_KEY,
    TEST_KEY_ENV,
    LLMServer,
    llm_fixture,  # noqa: F401
    write_config,
)
from rootfiles import lose_node
from support import BIN, EXAMPLES, PLAN, Result, take_snapshot
from uwf.util.base32 import describe

REPAIR = 'see docs/reliability.md, "Repairing damaged state"'
TOKEN = "tok-deploy-8c1f3a9e77"  # a variable the user lists under secrets:
PG_PASSWORD = "s3cret-pw-9f2k"  # tests/pgserver.py's


def ok(cli_proc: Any, *args: str, **kw: Any) -> Any:
    r: Result = cli_proc(*args, **kw)
    assert r.code == 0, (args, r.out, r.err)
    return r.json() if r.out.startswith(("{", "[")) else r.out


def start(cli_proc: Any, workflow: Path | str = EXAMPLES / "solve-issue.yaml", **kw: Any) -> str:
    name = Path(workflow).stem
    ok(cli_proc, "workflow", "put", str(workflow))
    return str(ok(cli_proc, "thread", "start", name, "-p", "the task", **kw)["thread"])


def script(tmp_path: Path, name: str, body: str) -> str:
    """An agent command: a Python script run by this interpreter."""
    path = tmp_path / name
    path.write_text("import os, sys\n" + body)
    return f"{sys.executable} {path}"


def mock(tmp_path: Path, roles: dict[str, Any], name: str = "scenario.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"roles": roles}))
    return f"uwf-mock --scenario {path}"


LOOP = {
    "name": "loop",
    "description": "One role that goes round until it approves.",
    "roles": {
        "writer": {
            "description": "writes",
            "goal": "Write.",
            "capabilities": [],
            "procedure": "Write.",
            "output": "notes",
            "meta": {
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["again", "approved"]},
                    "notes": {"type": "string"},
                },
                "required": ["status"],
            },
        }
    },
    "graph": {
        "$START": {"_": {"role": "writer", "prompt": "Start."}},
        "writer": {
            "again": {"role": "writer", "prompt": "Again, after these notes: {{notes}}"},
            "approved": {"role": "$END", "prompt": "Done."},
        },
    },
}


def loop_workflow(tmp_path: Path) -> Path:
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump(LOOP))
    return path


def again(notes: str = "short", body: str = "Written.") -> str:
    return f"---\nstatus: again\nnotes: {json.dumps(notes)}\n---\n{body}"


# -- 1, 2: credentials never reach a model, and every known secret is masked ----------------


def test_a_model_never_sees_store_credentials_or_listed_secrets(
    cli_proc: Any,
    root: Path,
    llm: LLMServer,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """uwf-builtin's model runs `env` and `cat .env` on a store in PostgreSQL whose password
    is in $UWF_STORE and $PGPASSWORD: the tool result it gets (and the turns stored in the
    database, and the export) hold none of them, nor the key, nor a `secrets:` variable."""
    monkeypatch.setenv("UWF_STORE", pg_url)
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    monkeypatch.setenv("MY_DEPLOY_TOKEN", TOKEN)
    config = write_config(root, llm.base_url)
    settings = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**settings, "secrets": ["MY_DEPLOY_TOKEN"]}))
    thread = start(cli_proc)
    command = f"env; echo token=$MY_DEPLOY_TOKEN; cat {root}/.env"
    llm.reply({"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]}, PLAN)
    ok(cli_proc, "thread", "step", thread, "--agent", "uwf-builtin")
    result = next(m for m in llm.chat_requests()[1].body["messages"] if m["role"] == "tool")
    seen = result["content"]
    assert seen.startswith("exit_code: 0\n--- stdout ---\n")
    assert f"UWF_STORE={pg_url.replace(':' + PG_PASSWORD, '')}\n" in seen  # no password
    assert "token=\n" in seen and f"{TEST_KEY_ENV}=***" in seen  # `.env` read: key masked
    export = ok(cli_proc, "thread", "export", thread, "--html", "-")
    from pgserver import connect

    with connect(pg_url) as conn:
        for secret in (PG_PASSWORD, TEST_KEY, TOKEN):
            assert secret not in seen and secret not in export
            stored = conn.execute(
                "SELECT count(*) FROM uwf_nodes WHERE payload LIKE %s", (f"%{secret}%",)
            ).fetchone()
            assert stored == (0,), secret


def test_a_key_echoed_by_the_model_server_is_masked_everywhere(
    cli_proc: Any, root: Path, llm: LLMServer, tmp_path: Path
) -> None:
    """The server quotes the key in its error body: the step's error line, the debug log,
    a background run's log and `uwf setup`'s check all show `***`; the log files are private
    to the user."""
    write_config(root, llm.base_url)
    thread = start(cli_proc)
    echo = {"status": 401, "body": f"invalid api key {TEST_KEY} for this account"}
    llm.reply(echo, echo)
    agent = mock(tmp_path, {"planner": ["a plan in prose only, no frontmatter"]})
    failed = cli_proc("thread", "step", thread, "--agent", agent)
    assert failed.code == 5 and "invalid api key *** for this account" in failed.err
    run = ok(cli_proc, "thread", "step", thread, "--agent", agent, "--background")
    log = Path(run["log"])
    deadline = time.monotonic() + 60
    while "ended:" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "invalid api key *** for this account" in log.read_text()
    llm.reply(echo)
    setup = cli_proc(
        "setup",
        "--provider",
        "p",
        "--base-url",
        llm.base_url,
        "--api-key",
        TEST_KEY,
        "--model",
        "m",
    )
    assert "invalid api key ***" in setup.out + setup.err
    for printed in (failed, setup):
        assert TEST_KEY not in printed.out + printed.err
    logs = list((root / "logs").glob("*.jsonl"))
    assert logs and log.exists()
    for path in [*logs, log]:
        assert TEST_KEY.encode() not in path.read_bytes(), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path.parent


# -- 3: damage is reported, never read as nothing; gc deletes nothing ------------------------


def a_finished_and_an_active_thread(cli_proc: Any, tmp_path: Path) -> tuple[str, str]:
    done = start(cli_proc)
    agent = mock(tmp_path, {"planner": [PLAN]})
    ok(cli_proc, "thread", "step", done, "--agent", agent)
    ok(cli_proc, "thread", "kill", done)
    active = ok(cli_proc, "thread", "start", "solve-issue", "-p", "another")["thread"]
    ok(cli_proc, "thread", "step", active, "--agent", agent)
    return done, active


def refused_by_gc(cli_proc: Any, root: Path, line: str) -> None:
    """`cas gc --grace 0` fails with ``line`` (its start) and deletes nothing."""
    before = take_snapshot(root / "cas")
    r = cli_proc("cas", "gc", "--grace", "0")
    assert r.code == 1 and r.err.startswith(line), r.err
    assert take_snapshot(root / "cas") == before


def damaged_by_verify(cli_proc: Any, expected: dict[str, str]) -> None:
    r = cli_proc("cas", "verify")
    report = r.json()
    assert report["ok"] is False and expected in report["damaged"], report


@pytest.mark.parametrize("how", ["emptied", "cut", "head"])
def test_a_damaged_threads_yaml_is_an_error_naming_it(
    cli_proc: Any, root: Path, tmp_path: Path, how: str
) -> None:
    _done, active = a_finished_and_an_active_thread(cli_proc, tmp_path)
    path = root / "threads.yaml"
    text = path.read_text()
    head = ok(cli_proc, "thread", "show", active)["head"]
    if how == "emptied":
        path.write_text("")
        what = "it is empty (uwf always writes at least its header line)"
    elif how == "cut":
        path.write_text(text[: text.index(head) + 4])
        what = (
            'invalid YAML: while scanning a quoted scalar in "threads.yaml", line 2, column 39 '
            'found unexpected end of stream in "threads.yaml", line 2, column 44'
        )
    else:
        path.write_text(text.replace(head, "not-a-hash"))
        what = f'the head of {active} is not valid: "not-a-hash"'
    line = f"error: {path} is damaged: {what}; {REPAIR}\n"
    for args in (["thread", "list"], ["thread", "list", "--all"], ["thread", "show", active]):
        r = cli_proc(*args)
        assert (r.code, r.out, r.err) == (1, "", line), args
    refused_by_gc(cli_proc, root, line)
    damaged_by_verify(cli_proc, {"state": "active", "problem": line[7:-1]})


def test_a_cut_history_line_is_an_error_naming_the_file(
    cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    done, _ = a_finished_and_an_active_thread(cli_proc, tmp_path)
    path = root / "history.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b'"head"')])  # the last (only) line, cut mid-way
    shown = describe(data[: data.index(b'"head"')][:60].decode(), 60)
    line = f"error: {path} is damaged: line 1 is not a whole entry: {shown}; {REPAIR}\n"
    for args in (["thread", "list", "--all"], ["thread", "show", done]):
        r = cli_proc(*args)
        assert (r.code, r.err) == (1, line), args
    refused_by_gc(cli_proc, root, line)
    damaged_by_verify(cli_proc, {"state": "history", "problem": line[7:-1]})


def test_a_lost_pack_index_is_reported_kept_and_rebuilt(
    cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    done, active = a_finished_and_an_active_thread(cli_proc, tmp_path)
    ok(cli_proc, "cas", "pack")
    (index,) = (root / "cas" / "packs").glob("*.idx")
    index.unlink()
    pack = index.with_suffix(".pack")
    r = cli_proc("thread", "show", active)
    assert r.code == 1 and f"({pack} has no index: `uwf cas verify`" in r.err, r.err
    report = cli_proc("cas", "verify").json()
    assert report["ok"] is False
    problems = [d["problem"] for d in report["damaged"] if d.get("pack") == pack.stem]
    assert len(problems) == 1 and problems[0].startswith(f"{pack} has no index ({pack.stem}.idx)")
    refused_by_gc(cli_proc, root, "error: cas gc stopped, nothing was deleted: a root is in doubt")
    ok(cli_proc, "cas", "pack")  # a leftover of a crash would go: this one holds the only copies
    assert pack.exists()
    assert ok(cli_proc, "cas", "reindex")["repaired"] == 1
    assert ok(cli_proc, "cas", "verify")["ok"] is True
    assert ok(cli_proc, "thread", "show", active)["steps"] == 1
    assert ok(cli_proc, "thread", "show", done)["status"] == "killed"


def test_a_deleted_head_node_fails_verify_and_stops_gc(
    cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    _done, active = a_finished_and_an_active_thread(cli_proc, tmp_path)
    head = ok(cli_proc, "thread", "show", active)["head"]
    lose_node(root / "cas", head)  # with the rest of its step's pack
    problem = f"its head {head} is missing"
    damaged_by_verify(cli_proc, {"thread": active, "problem": problem})
    refused_by_gc(
        cli_proc,
        root,
        f"error: cas gc stopped, nothing was deleted: a root is in doubt: {active}: {problem}",
    )


def test_a_head_that_is_not_a_hash_in_postgresql_is_an_error(
    cli_proc: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pgserver import connect

    monkeypatch.setenv("UWF_STORE", pg_url)
    thread = start(cli_proc)
    with connect(pg_url) as conn:
        conn.execute("UPDATE uwf_threads SET head = 'oops' WHERE thread = %s", (thread,))
    r = cli_proc("thread", "list")
    line = f'error: table uwf_threads is damaged: the head of thread {thread} is not a hash: "oops"'
    assert (r.code, r.err) == (1, f"{line}; {REPAIR}\n")
    refused_by_gc(cli_proc, Path(tmp_path / "none"), line)


# -- 4, 5: bounded reading; no answer can stop a thread from stepping ------------------------


def test_a_stderr_flood_without_newline_takes_fixed_memory(
    cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    """80 MB on stderr in one line: `uwf thread step` stays small (it used to hold the line,
    several times over), shows the line's start and says how much it did not show."""
    thread = start(cli_proc)
    agent = script(
        tmp_path,
        "flood.py",
        "chunk = b'x' * (1 << 20)\n"
        "for _ in range(80):\n    sys.stderr.buffer.write(chunk)\n"
        "sys.stderr.buffer.write(b'\\nerror: flooded\\n'); sys.exit(1)\n",
    )
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    # A small launcher runs the step and reports its peak: the peak of a child forked from
    # pytest itself would count pytest's own pages, copied at the fork.
    launcher = (
        "import resource, subprocess, sys\n"
        "code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(code, peak)\n"
    )
    step = [str(BIN / "uwf"), "thread", "step", thread, "--agent", agent]
    with (tmp_path / "err").open("wb") as stderr:
        ran = subprocess.run(
            [sys.executable, "-c", launcher, *step],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            text=True,
            check=True,
        )
    code, peak_kb = (int(word) for word in ran.stdout.split())
    assert code == 5
    peak_mb = peak_kb / 1024  # kilobytes on Linux
    assert peak_mb < 120, f"peak RSS {peak_mb:.0f} MB"
    err = (tmp_path / "err").read_text().splitlines()
    name = Path(sys.executable).name
    assert err[0] == f"{name}: " + "x" * 8192 + " …"
    assert err[1] == f"{name}: [… {80 * (1 << 20) - 8192} more bytes of this line not shown]"
    assert (
        err[-1]
        == f"error: agent command failed ({sys.executable}) with exit code 1: error: flooded"
    )


def test_an_edge_prompt_too_long_for_the_environment_goes_by_file(
    cli_proc: Any, tmp_path: Path
) -> None:
    """A 200 KB field rendered into the next edge prompt: over Linux's 128 KiB per variable,
    so the agent could not even start (exit 1, every later step). The prompt now goes in a
    file ($UWF_EDGE_PROMPT_FILE): the agent kit reads it, uwf-cmd passes it on whole; the
    prompt it composes fits the context budget (tests/test_hostile_bounds.py)."""
    notes = "n" * 200_000
    thread = start(cli_proc, loop_workflow(tmp_path))
    agent = mock(tmp_path, {"writer": [again(notes)]})
    ok(cli_proc, "thread", "step", thread, "--agent", agent)
    ok(cli_proc, "thread", "step", thread, "--agent", agent)  # once wedged here, for good
    head = ok(cli_proc, "thread", "show", thread)["head"]
    step = ok(cli_proc, "cas", "get", head)["payload"]
    assert step["edgePrompt"] == f"Again, after these notes: {notes}"
    seen = tmp_path / "seen.json"
    cmd = script(
        tmp_path,
        "cmd.py",
        "prompt = sys.stdin.read()\n"
        "edge = open(os.environ['UWF_EDGE_PROMPT_FILE']).read()\n"
        f"open({str(seen)!r}, 'w').write(__import__('json').dumps([len(prompt), edge]))\n"
        "print('---\\nstatus: approved\\n---\\nDone.')\n",
    )
    ok(cli_proc, "thread", "step", thread, "--agent", f"uwf-cmd -- {cmd}")
    prompt_size, edge = json.loads(seen.read_text())
    assert prompt_size < 100_000 and edge == f"Again, after these notes: {notes}"


def test_a_prompt_too_long_for_an_argument_fails_naming_the_limit(
    cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    """A context budget too large for an argument (the default's prompts fit one: a big
    field is cut to it, tests/test_hostile_bounds.py): the step fails naming the limit."""
    thread = start(cli_proc, loop_workflow(tmp_path))
    (root / "config.yaml").write_text("contextBudget: 500000\n")
    ok(
        cli_proc,
        "thread",
        "step",
        thread,
        "--agent",
        mock(tmp_path, {"writer": [again("n" * 200_000)]}),
    )
    echo = script(tmp_path, "echo.py", "print('---\\nstatus: approved\\n---\\nDone.')\n")
    r = cli_proc("thread", "step", thread, "--agent", f"uwf-cmd -- {echo} {{prompt}}")
    assert r.code == 5
    assert "over the limit of 131071 bytes Linux sets on one command-line argument" in r.err
    assert "(MAX_ARG_STRLEN): give it to the command on its stdin" in r.err
    by_file = script(
        tmp_path,
        "by_file.py",
        "assert os.path.getsize(sys.argv[1]) > 200_000\n"
        "print('---\\nstatus: approved\\n---\\nDone.')\n",
    )
    done = ok(
        cli_proc, "thread", "step", thread, "--agent", f"uwf-cmd -- {by_file} {{prompt_file}}"
    )
    assert done["done"] is True


# -- 7, 8: artifacts -------------------------------------------------------------------------


def test_an_artifacts_directory_swapped_for_a_link_is_never_followed(
    cli_proc: Any, tmp_path: Path
) -> None:
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "stolen.txt").write_text("the user's file")
    thread = start(cli_proc)
    swap = script(
        tmp_path,
        "swap.py",
        "import shutil\nd = os.environ['UWF_ARTIFACTS_DIR']\nshutil.rmtree(d)\n"
        f"os.symlink({str(secret)!r}, d)\n"
        "print('---\\nstatus: _\\nplan: p\\nsteps: [a]\\n---\\nPlanned.')\n",
    )
    r = cli_proc("thread", "step", thread, "--agent", f"uwf-cmd -- {swap}")
    assert r.code == 5, r.err
    assert "was replaced by a symbolic link; nothing is stored through it" in r.err
    assert (secret / "stolen.txt").read_text() == "the user's file"  # removed, not followed
    ok(cli_proc, "thread", "step", thread, "--agent", mock(tmp_path, {"planner": [PLAN]}))
    assert ok(cli_proc, "thread", "show", thread)["steps"] == 1


def _step_with_artifacts(root: Path, thread: str, paths: list[str]) -> str:
    """A StepNode (not on any thread) whose detail lists ``paths``, each a Text node: what a
    hand-written agent, or an older uwf, could store."""
    from uwf.backend.fs import FsBackend
    from uwf.model.turns import detail_schema
    from uwf.protocol import schemas

    store = FsBackend(root).nodes
    head = FsBackend(root).threads.head(thread)
    assert head is not None
    step = store.require(head).payload
    text = store.put(schemas.ensure(store).text, "x")
    listed = [{"path": p, "hash": text, "size": 1} for p in paths]
    kind = store.put_schema(detail_schema("HandDetail", {}))
    detail = store.put(kind, {"turns": [], "artifacts": listed})
    return str(store.put(schemas.ensure(store).step, {**step, "detail": detail}))


@pytest.mark.parametrize(
    ("paths", "problem"),
    [
        (
            ["a" * 300],
            f"artifact path {describe('a' * 300, 100)} is too long (300 bytes, a name of 300; "
            "the limits are 4095 and 255)",
        ),
        (["f", "f/g"], 'artifact paths "f" and "f/g" collide: one would be a file and a directory'),
        (["same", "same"], 'artifact path "same" is listed twice'),
    ],
)
def test_artifact_names_are_checked_before_extract_writes_anything(
    cli_proc: Any, root: Path, tmp_path: Path, paths: list[str], problem: str
) -> None:
    thread = start(cli_proc)
    ok(cli_proc, "thread", "step", thread, "--agent", mock(tmp_path, {"planner": [PLAN]}))
    step = _step_with_artifacts(root, thread, paths)
    target = tmp_path / "out"
    r = cli_proc("step", "artifacts", step, "--extract", str(target))
    assert (r.code, r.err) == (1, f"error: {problem}\n")
    assert not target.exists() or list(target.iterdir()) == []


def test_artifact_names_are_checked_when_the_step_commits(
    cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    thread = start(cli_proc)
    ok(cli_proc, "thread", "step", thread, "--agent", mock(tmp_path, {"planner": [PLAN]}))
    head = ok(cli_proc, "thread", "show", thread)["head"]
    agent = script(
        tmp_path,
        "names.py",
        "from uwf.backend import open_backend\n"
        "from uwf.model.turns import detail_schema\n"
        "from uwf.protocol import schemas\n"
        "store = open_backend().nodes\n"
        f"step = store.require({head!r}).payload\n"
        "text = store.put(schemas.ensure(store).text, 'x')\n"
        "kind = store.put_schema(detail_schema('HandDetail', {}))\n"
        "listed = [{'path': p, 'hash': text, 'size': 1} for p in ('f', 'f/g')]\n"
        "detail = store.put(kind, {'turns': [], 'artifacts': listed})\n"
        f"new = {{**step, 'prev': {head!r}, 'depth': 2, 'role': 'developer', 'detail': detail}}\n"
        "print(store.put(schemas.ensure(store).step, new))\n",
    )
    r = cli_proc("thread", "step", thread, "--agent", agent)
    assert r.code == 5
    assert r.err.endswith(
        'with bad artifacts: artifact paths "f" and "f/g" collide: one would be a file and a '
        "directory\n"
    ), r.err
    assert ok(cli_proc, "thread", "show", thread)["head"] == head


# -- 9: one rule for NUL on every backend ----------------------------------------------------


def test_nul_in_a_task_and_a_reason_reads_the_same_on_every_backend(
    cli_proc: Any, any_store: str, tmp_path: Path
) -> None:
    ok(cli_proc, "workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    thread = ok(cli_proc, "thread", "start", "solve-issue", "-p", "-", input="fix\0it\nmore")[
        "thread"
    ]
    defer = script(
        tmp_path, "defer.py", "sys.stderr.write('error: rate\\0limited\\n'); sys.exit(75)\n"
    )
    r = cli_proc("thread", "step", thread, "--agent", defer)
    assert r.code == 6, r.err
    listed = ok(cli_proc, "thread", "list")
    assert [t["task"] for t in listed] == ["fix\ufffdit"]
    assert "rate\ufffdlimited" in json.dumps(
        ok(cli_proc, "thread", "show", thread), ensure_ascii=False
    )


def test_store_copy_of_a_store_with_nul_never_fails(
    cli_proc: Any, root: Path, pg_url: str, tmp_path: Path
) -> None:
    """A filesystem store written by an older uwf, with NUL in a task line and a reason,
    copies into PostgreSQL (which cannot hold NUL in text) and verifies."""
    thread = start(cli_proc)
    path = root / "threads.yaml"
    record = {"head": ok(cli_proc, "thread", "show", thread)["head"], "task": "old\0task"}
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + json.dumps(thread) + ": " + json.dumps(record) + "\n")
    copied = ok(cli_proc, "store", "copy", str(root), pg_url)
    assert copied["verified"] is True


# -- 10: control characters from agents are shown, never obeyed ------------------------------

ESCAPES = "\x1b]0;pwned\x07 \x1b]52;c;cm0gLXJmIH4=\x07 \x1b[2J"
SHOWN = "\\x1b]0;pwned\\x07 \\x1b]52;c;cm0gLXJmIH4=\\x07 \\x1b[2J"


def test_escapes_in_an_agents_stderr_and_error_line_are_escaped(
    cli_proc: Any, tmp_path: Path
) -> None:
    thread = start(cli_proc)
    agent = script(
        tmp_path, "esc.py", f"sys.stderr.write('error: ' + {ESCAPES!r} + '\\n'); sys.exit(1)\n"
    )
    r = cli_proc("thread", "step", thread, "--agent", agent)
    assert r.code == 5 and "\x1b" not in r.err and "\x07" not in r.err
    assert r.err.splitlines()[-1].endswith(f"with exit code 1: error: {SHOWN}")


def test_escapes_in_an_output_are_escaped_by_thread_watch(cli_proc: Any, tmp_path: Path) -> None:
    thread = start(cli_proc)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    watch = subprocess.Popen(
        [str(BIN / "uwf"), "thread", "watch", thread, "--interval", "0.05"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert watch.stdout is not None
    seen = watch.stdout.readline()  # it has drawn the thread once
    assert seen
    output = f"---\nstatus: _\nplan: p\nsteps: [a]\n---\nPlanned {ESCAPES} here."
    ok(cli_proc, "thread", "step", thread, "--agent", mock(tmp_path, {"planner": [output]}))
    while f"Planned {SHOWN} here." not in seen:  # and the step, escaped
        line = watch.stdout.readline()
        assert line, seen
        seen += line
    ok(cli_proc, "thread", "kill", thread)
    out = seen + watch.communicate(timeout=30)[0]
    assert "\x1b" not in out and "\x07" not in out
    assert f"Planned {SHOWN} here." in out


# -- 12: remote images are links, in the page and the export ---------------------------------


def test_a_remote_image_is_a_link_in_the_export(cli_proc: Any, tmp_path: Path) -> None:
    thread = start(cli_proc)
    output = "---\nstatus: _\nplan: p\nsteps: [a]\n---\nSee ![the pixel](http://127.0.0.1:9/p.png)"
    ok(cli_proc, "thread", "step", thread, "--agent", mock(tmp_path, {"planner": [output]}))
    html = ok(cli_proc, "thread", "export", thread, "--html", "-")
    assert "<img" not in html
    assert (
        '<a class="image-link" href="http://127.0.0.1:9/p.png" rel="noopener noreferrer '
        'nofollow">the pixel</a>'
    ) in html


# -- 6: uwf ui against hostile pages and floods ----------------------------------------------


class Ui:
    """`uwf ui` in a subprocess (optionally with a low open-file limit)."""

    def __init__(self, nofile: int | None = None) -> None:
        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [str(BIN / "uwf"), "ui", "--port", "0"],
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=limit,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        self.port = int(line.split("http://127.0.0.1:")[1].split("/")[0])

    def request(self, path: str, host: str | None = None, keep: bool = False) -> Any:
        """Send a GET; the open socket when ``keep``, else (status, body)."""
        import socket

        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        shown = host if host is not None else f"127.0.0.1:{self.port}"
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {shown}\r\nConnection: close\r\n\r\n".encode())
        if keep:
            return sock
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        sock.close()
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), body

    def stop(self) -> str:
        import signal

        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(timeout=30) == 0
        assert self.proc.stderr is not None
        with self.proc.stderr:
            return self.proc.stderr.read()


@pytest.fixture
def ui(root: Path) -> Iterator[Ui]:
    root.mkdir(parents=True, exist_ok=True)
    server = Ui()
    yield server
    server.stop()


def test_ui_answers_only_the_hosts_it_serves(ui: Ui, cli_proc: Any) -> None:
    """A DNS-rebinding page reaches the server under its own name: refused."""
    assert ui.request("/", host="evil.example:8765") == (
        421,
        b"uwf ui does not serve the host evil.example\n",
    )
    assert ui.request("/", host="evil.example")[0] == 421
    for host in (f"127.0.0.1:{ui.port}", f"localhost:{ui.port}", "localhost", f"[::1]:{ui.port}"):
        assert ui.request("/", host=host)[0] == 200, host


def test_ui_caps_event_streams_with_a_clear_503(ui: Ui, cli_proc: Any) -> None:
    streams = [ui.request("/events", keep=True) for _ in range(32)]
    for sock in streams:
        assert sock.recv(20).startswith(b"HTTP/1.1 200")
    extra = ui.request("/events", keep=True)
    head, _, body = _read_all(extra).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 "), head
    assert body == (
        b"too many event streams: uwf ui serves at most 32 at once; close some pages "
        b"(this one reloads by itself)\n"
    )
    for sock in streams:
        sock.close()
    deadline = time.monotonic() + 10
    while True:
        with ui.request("/events", keep=True) as sock:
            if not sock.recv(4096).startswith(b"HTTP/1.1 503"):
                break
        assert time.monotonic() < deadline, "closed streams were never counted out"
        time.sleep(0.2)


def _read_all(sock: Any) -> bytes:
    """What the server sends until it closes the connection (a 503 closes it)."""
    data = b""
    with sock:
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_ui_past_its_descriptors_answers_503_without_a_traceback_flood(
    root: Path, cli_proc: Any
) -> None:
    """300 event-stream clients on a server allowed 160 open files: the ones past the caps
    get 503, the server keeps serving pages, and its stderr has no traceback."""
    root.mkdir(parents=True, exist_ok=True)
    thread = start(cli_proc)
    server = Ui(nofile=160)
    try:
        held = []
        statuses: dict[str, int] = {}
        for i in range(300):
            path = f"/events?thread={thread}" if i % 2 else "/events"
            sock = server.request(path, keep=True)
            sock.settimeout(5)
            try:
                line = sock.recv(64).split(b"\r\n")[0].decode()
            except OSError:
                line = "no answer"
            statuses[line] = statuses.get(line, 0) + 1
            held.append(sock)
        assert statuses.get("HTTP/1.1 200 OK") == 32, statuses
        assert statuses.get("HTTP/1.1 503 Service Unavailable") == 268, statuses
        assert server.request(f"/thread/{thread}")[0] == 200
        for sock in held:
            sock.close()
    finally:
        err = server.stop()
    assert "Traceback" not in err and len(err.splitlines()) < 10, err


def test_a_long_output_is_folded_and_loaded_on_demand(
    ui: Ui, cli_proc: Any, tmp_path: Path
) -> None:
    thread = start(cli_proc)
    writer = script(
        tmp_path,
        "long.py",
        "line = 'lorem ipsum dolor sit amet ' * 3 + '\\n'\n"
        "print('---\\nstatus: _\\nplan: p\\nsteps: [a]\\n---\\n' + line * 25_000 + 'THE END')\n",
    )
    ok(cli_proc, "thread", "step", thread, "--agent", f"uwf-cmd -- {writer}")
    head = ok(cli_proc, "thread", "show", thread)["head"]
    status, page = ui.request(f"/thread/{thread}")
    assert status == 200 and len(page) < 100_000, len(page)
    assert b"Show the whole output (2050007 characters)" in page
    assert f'data-src="/step/{head}/output"'.encode() in page and b"THE END" not in page
    status, whole = ui.request(f"/step/{head}/output")
    assert status == 200 and len(whole) > 2_000_000 and b"THE END" in whole
