"""Security properties (docs/architecture.md, "Security").

Nothing from a workflow file or a thread becomes an argv flag, a path or a shell word; YAML
is only loaded with the safe loader; ``.env`` is created 0600; an API key never appears
anywhere but ``.env``: not in logs, errors, ``step-details``, ``thread read`` or any file.
"""

from __future__ import annotations

import ast
import json
import os
import re
import stat
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import EXAMPLES, REPO, Result
from uwf.engine.workflows.files import load_file
from uwf.util.base32 import describe
from uwf.util.errors import InvalidInput

SRC = REPO / "src" / "uwf"
KEY = "sk-SECRET-123"
NAME_RULE = "letters, digits, _ and -, starting with a letter or _, at most 64 characters"
WORKFLOW_RULE = (
    "letters, digits, _, - and ., starting with a letter, a digit or _, at most 64 characters"
)


def sources() -> Iterator[tuple[Path, str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        yield path, text, ast.parse(text)


def ok(cli: Any, *args: str) -> Any:
    r: Result = cli(*args)
    assert r.code == 0, (args, r.err)
    return r.json() if r.out.startswith(("{", "[")) else r.out


# -- YAML and shells -----------------------------------------------------------------------


def test_yaml_is_only_loaded_with_the_safe_loader() -> None:
    """One place loads YAML (uwf.util.yamlio), with the safe loader; nothing else can."""
    unsafe = re.compile(r"\b(unsafe_load|full_load|FullLoader|UnsafeLoader|CLoader|CFullLoader)\b")
    loads: list[str] = []
    for path, text, tree in sources():
        assert not unsafe.search(text), path
        assert not re.search(r"\byaml\.Loader\b", text), path
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "yaml"
                and node.func.attr in ("load", "load_all", "safe_load", "safe_load_all", "compose")
            ):
                loads.append(f"{path.relative_to(SRC)}:{ast.unparse(node)}")
    # ``loader``: the safe loader's subclass with !include (uwf.util.includes), or None
    assert loads == ["util/yamlio.py:yaml.load(text, Loader=loader or _loader())"]
    from uwf.util import includes, yamlio

    assert includes._Loader.__mro__[1] is yamlio.safe_loader()  # one tag more, nothing else
    assert set(includes._Loader.yaml_constructors) - set(
        yamlio.safe_loader().yaml_constructors
    ) == {includes.TAG}
    from uwf.util import yamlio

    assert yamlio._loader().__name__ in ("CSafeLoader", "SafeLoader")


def test_a_python_tag_is_refused(tmp_path: Path) -> None:
    from uwf.util import yamlio

    with pytest.raises(InvalidInput) as info:
        yamlio.load("x: !!python/object/apply:os.system ['touch pwned']\n")
    assert "could not determine a constructor" in str(info.value)
    assert not (tmp_path / "pwned").exists()


SUBPROCESS_CALLS = {"Popen", "run", "call", "check_call", "check_output", "getoutput"}


def test_no_shell() -> None:
    """No ``shell=`` for a subprocess (nor ``shell=True`` anywhere), ``os.system`` or
    ``os.popen``. Two ``/bin/sh -c`` are allowed: the builtin agent's run_command tool, whose
    purpose is the model's shell commands, and uwf's watchdog, a fixed script (its ``SCRIPT``)
    that reads process group ids from uwf on its stdin and is handed nothing else.
    (``shell=`` naming the shell a completion script is for, in ``typer.completion``'s calls,
    runs nothing; nor does ``SHELLS``, the names of the shells whose completion scripts
    ``uwf --show-completion`` prints.)"""
    sh: list[str] = []
    for path, text, tree in sources():
        assert "os.system(" not in text and "os.popen(" not in text, path
        names = {
            id(const)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["SHELLS"]
            for const in ast.walk(node.value)
        }
        for node in ast.walk(tree):
            if id(node) in names:
                continue
            shell_true = isinstance(node, ast.keyword) and node.arg == "shell"
            if shell_true and isinstance(node.value, ast.Constant) and node.value.value is True:
                pytest.fail(f"{path}: shell=True")
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in SUBPROCESS_CALLS and any(k.arg == "shell" for k in node.keywords):
                    pytest.fail(f"{path}: shell= keyword of {name}")
            if isinstance(node, ast.Constant) and node.value in ("/bin/sh", "sh", "bash"):
                sh.append(f"{path.relative_to(SRC)}")
    assert sorted(sh) == ["adapters/watchdog.py", "agents/builtin/tools.py"]


# -- names from a workflow file ----------------------------------------------------------------


def write_workflow(tmp_path: Path, name: str, roles: list[str]) -> Path:
    doc = yaml.safe_load((EXAMPLES / "solve-issue.yaml").read_text(encoding="utf-8"))
    spec = doc["roles"]["planner"]
    doc["name"] = name
    doc["roles"] = {role: spec for role in roles}
    first = roles[0]
    doc["graph"] = {"$START": {"_": {"role": first, "prompt": "go"}}}
    for role in roles:
        doc["graph"][role] = {"_": {"role": "$END", "prompt": "done"}}
    path = tmp_path / f"{name.replace('/', '_')}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "name",
    ["--rm", "-x", "../etc", "a/b", ".hidden", "..", "a b", "x" * 65, "$(id)", "~root", "wf\n"],
)
def test_a_workflow_name_that_looks_like_a_flag_or_a_path_is_refused(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / "wf.yaml"
    path.write_text(
        write_workflow(tmp_path, "wf", ["planner"])
        .read_text()
        .replace("name: wf", f"name: {json.dumps(name)}", 1)
    )
    with pytest.raises(InvalidInput) as info:
        load_file(path)
    lines = str(info.value).splitlines()
    assert f"  - name: {describe(name)} is not a valid workflow name ({WORKFLOW_RULE})" in lines


@pytest.mark.parametrize(
    "role", ["--help", "-v", "../../etc", "a/b", "x;rm", "$HOME", ".", "planner\n"]
)
def test_a_role_name_that_looks_like_a_flag_or_a_path_is_refused(tmp_path: Path, role: str) -> None:
    path = write_workflow(tmp_path, "wf", [role])
    with pytest.raises(InvalidInput) as info:
        load_file(path)
    where = (
        f"roles.{role}" if re.fullmatch(r"[A-Za-z0-9_$-]+", role) else f"roles[{json.dumps(role)}]"
    )
    assert (
        f"  - {where}: role name is not a plain identifier ({NAME_RULE})"
        in str(info.value).splitlines()
    )


RECORDER = """
import json, os, sys
with open({out!r}, "w") as fh:
    json.dump({{"argv": sys.argv, "prompt": os.environ.get("UWF_EDGE_PROMPT"),
               "root": os.environ.get("WORKFLOW_STORAGE_ROOT"),
               "key": os.environ.get("OPENAI_API_KEY")}}, fh)
sys.exit(5)
"""


def test_nothing_from_a_workflow_or_a_thread_becomes_an_argument(
    cli: Any, root: Path, tmp_path: Path
) -> None:
    """The agent gets ``<command> <args…> <thread-id> <role>``: the thread id is a checked
    ULID, the role a checked identifier; the prompt travels in the environment."""
    hostile = "--rm -rf / $(reboot) `id`; {{plan}} ' \""
    doc = yaml.safe_load((EXAMPLES / "solve-issue.yaml").read_text(encoding="utf-8"))
    doc["graph"]["$START"]["_"]["prompt"] = hostile
    path = tmp_path / "solve-issue.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    ok(cli, "workflow", "put", str(path))
    thread = ok(cli, "thread", "start", "solve-issue", "-p", "--version; rm -rf ~")["thread"]
    out = tmp_path / "seen.json"
    script = tmp_path / "agent.py"
    script.write_text(RECORDER.format(out=str(out)))
    r = cli("thread", "step", thread, "--agent", f"{sys.executable} {script}")
    assert r.code == 5
    seen = json.loads(out.read_text())
    assert seen["argv"] == [str(script), thread, "planner"]
    assert seen["prompt"] == hostile.replace("{{plan}}", "")  # rendered: an empty view
    assert seen["root"] == str(root)


# -- .env and API keys ---------------------------------------------------------------------------


class FakeLLM:
    """An OpenAI-compatible endpoint: answers the extract request, or fails when told to."""

    def __init__(self) -> None:
        self.fail = False
        self.authorizations: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(length)
                outer.authorizations.append(self.headers.get("Authorization", ""))
                if outer.fail:
                    body = b"upstream exploded"
                    self.send_response(500)
                else:
                    answer = {"status": "_", "plan": "extracted", "steps": ["one"]}
                    message = {"role": "assistant", "content": json.dumps(answer)}
                    body = json.dumps({"choices": [{"message": message}]}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM()
    yield server
    server.close()


def setup_key(cli: Any, url: str) -> Result:
    r: Result = cli(
        "setup", "--provider", "openai", "--base-url", url, "--api-key", KEY, "--model", "m1"
    )
    assert r.code == 0, r.err
    return r


def test_env_file_is_created_0600(cli: Any, root: Path, llm: FakeLLM) -> None:
    old = os.umask(0)  # even a permissive umask cannot widen it
    try:
        setup_key(cli, llm.url)
    finally:
        os.umask(old)
    assert stat.S_IMODE((root / ".env").stat().st_mode) == 0o600
    (root / ".env").chmod(0o644)  # a hand-made .env is tightened on the next write
    setup_key(cli, llm.url)
    assert stat.S_IMODE((root / ".env").stat().st_mode) == 0o600
    assert (root / ".env").read_text() == f"OPENAI_API_KEY={KEY}\n"


def test_an_api_key_appears_nowhere_but_in_env(
    cli: Any, root: Path, llm: FakeLLM, scenario: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    printed = [setup_key(cli, llm.url)]
    ok(cli, "workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    thread = ok(cli, "thread", "start", "solve-issue", "-p", "task")["thread"]
    # the planner answers without frontmatter: the agent asks the model (with the key)
    agent = scenario(
        {"planner": ["a plan in prose only"], "developer": ["no frontmatter"]}, inprocess=False
    )
    step = cli("thread", "step", thread, "--agent", agent)
    assert step.code == 0, step.err
    # the key was really used: by setup's model check, then by the extract
    assert llm.authorizations == [f"Bearer {KEY}"] * 2
    head = step.json()["head"]
    llm.fail = True  # the developer's extract fails: an error quoting the model's answer
    failed = cli("thread", "step", thread, "--agent", agent)
    assert failed.code == 5
    assert "LLM HTTP 500: upstream exploded" in failed.err
    printed += [
        step,
        failed,
        cli("thread", "step-details", head),
        cli("step", "show", head, "--format", "json"),
        cli("thread", "read", thread),
        cli("step", "read", head),
        cli("thread", "steps", thread),
        cli("log", "show"),
        cli("thread", "step", thread, "--dry-run", "--agent", agent),
    ]
    for r in printed:
        assert KEY not in r.out and KEY not in r.err
    leaks = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and KEY.encode() in p.read_bytes()
    ]
    assert leaks == [".env"]
    assert list((root / "logs").glob("*.jsonl"))  # the logs were written, and checked


def test_the_agent_inherits_env_and_the_dotenv_keys(
    cli: Any, root: Path, tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What docs/architecture.md says an agent gets: uwf's environment, plus the ``.env``
    entries it does not already have, plus UWF_EDGE_PROMPT and WORKFLOW_STORAGE_ROOT."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    setup_key(cli, llm.url)
    ok(cli, "workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    thread = ok(cli, "thread", "start", "solve-issue", "-p", "task")["thread"]
    out = tmp_path / "seen.json"
    script = tmp_path / "agent.py"
    script.write_text(RECORDER.format(out=str(out)))
    assert cli("thread", "step", thread, "--agent", f"{sys.executable} {script}").code == 5
    assert json.loads(out.read_text())["key"] == KEY
    monkeypatch.setenv("OPENAI_API_KEY", "from-the-environment")  # the environment wins
    assert cli("thread", "step", thread, "--agent", f"{sys.executable} {script}").code == 5
    assert json.loads(out.read_text())["key"] == "from-the-environment"


def test_a_role_stored_around_the_validator_never_becomes_a_flag(cli: Any) -> None:
    wf = ok(cli, "workflow", "put", str(EXAMPLES / "solve-issue.yaml"))["hash"]
    shown = ok(cli, "workflow", "show", wf)
    payload = shown["payload"]
    payload["name"] = "evil"
    payload["roles"]["--rm"] = payload["roles"].pop("planner")
    payload["graph"]["--rm"] = payload["graph"].pop("planner")
    payload["graph"]["$START"]["_"]["role"] = "--rm"
    evil = ok(cli, "cas", "put", shown["type"], json.dumps(payload))["hash"]
    thread = ok(cli, "thread", "start", evil, "-p", "task")["thread"]
    r = cli("thread", "step", thread, "--dry-run", "--agent", "echo")
    assert r.code == 1 and "--rm" not in r.out, r.out
    assert r.err_line.startswith("error: ")
