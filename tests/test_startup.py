"""Start-up is paid on every step: a command, and an agent, imports only what it uses.

Each check runs the real CLI or agent in a fresh interpreter and looks at ``sys.modules`` (never
at the clock: timing is measured in ``benchmarks/``). ``uwf --help`` must load the root alone, a
command its own group alone (cli/lazy.py), and none of them the heavy libraries. These are the
speed rules of docs/performance.md ("Start-up"), as tests: no module on these paths compiles a
regular expression at import; ``thread show`` and the agents that run at once (``uwf-mock``,
``uwf-cmd`` up to its command, ``uwf-human``) define no dataclass (``dataclasses`` imports
``inspect``, ~10 ms); CLI modules keep real annotations (no postponed ones, which Typer would
evaluate on every call).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from uwf.cli.main import COMMANDS

HEAVY = (
    "jsonschema",
    "httpx",
    "pydantic",
    "rich",
    "chevron_blue",  # the template library
    "liquid",  # only for the prompts of a version-1 workflow
    "psycopg2",  # only for a postgresql:// store
    "psycopg",
    "uwf.agent_kit",
    "uwf.agents",
)
GROUPS = sorted({target.partition(":")[0] for target, _help in COMMANDS.values()})

# What `uwf --help` may load of uwf: the root of the tree and the options it shows. A module
# added here costs every command its import; prefer importing it where it is used.
HELP_MODULES = {
    "uwf",
    "uwf.cli",
    "uwf.cli.main",
    "uwf.cli.lazy",
    "uwf.cli.options",
    "uwf.util",
    "uwf.util.errors",
    "uwf.util.root",
    "uwf.util.signals",
}

# Runs a console script's function (argv[1], "module:function") on the rest of argv in this
# fresh interpreter and reports, as JSON on stderr: its exit code; sys.modules after it ran, or
# at its first spawn when UWF_PROBE_SPAWN is set (what `thread step` loaded before it started
# its agent); and the uwf modules that compiled a regular expression while being imported.
PROBE = """
import importlib, os, re, subprocess, sys
seen, compiled = [], []
if os.environ.get("UWF_PROBE_SPAWN"):
    real = subprocess.Popen.__init__
    def spy(self, *args, **kwargs):
        seen.append(sorted(sys.modules))
        real(self, *args, **kwargs)
    subprocess.Popen.__init__ = spy
real_compile = re._compile  # what re.compile, re.match… call (the cache in front of it too)
def watch(pattern, flags):
    frame = sys._getframe(1)
    while frame.f_globals.get("__name__", "").partition(".")[0] == "re":
        frame = frame.f_back
    name = frame.f_globals.get("__name__", "")
    if frame.f_code.co_name == "<module>" and name.partition(".")[0] == "uwf":
        compiled.append(name)
    return real_compile(pattern, flags)
re._compile = watch
module, _, function = sys.argv.pop(1).partition(":")
code = 0
try:
    getattr(importlib.import_module(module), function)()  # what the console script runs
except SystemExit as exc:
    code = exc.code
modules = seen[0] if seen else sorted(sys.modules)
import json
print(json.dumps({"code": code, "modules": modules, "compiled": compiled}), file=sys.stderr)
"""


def probe(entry: str, *args: str, spawn: bool = False, code: int = 0) -> dict[str, Any]:
    """Run ``entry`` ("module:function") on ``args`` in a fresh interpreter: the report."""
    env = {**os.environ, "UWF_PROBE_SPAWN": "1" if spawn else ""}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, entry, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    report: dict[str, Any] = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == code, proc.stderr
    assert report["compiled"] == [], "compiled a regular expression at import (compile it on use)"
    return report


def loaded_modules(*args: str, spawn: bool = False) -> list[str]:
    """What ``uwf <args>`` loads (up to its first spawn with ``spawn``)."""
    return list(probe("uwf.cli.main:main", *args, spawn=spawn)["modules"])


def among(modules: list[str], names: tuple[str, ...] | list[str]) -> list[str]:
    """The modules that are one of ``names`` or inside one of them."""
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_help_loads_the_root_alone(args: list[str]) -> None:
    modules = loaded_modules(*args)
    assert {m for m in modules if m.split(".")[0] == "uwf"} <= HELP_MODULES
    assert among(modules, [*HEAVY, "json", "yaml", "cbor2", "xxhash"]) == []


def test_group_help_loads_its_group_alone() -> None:
    modules = loaded_modules("thread", "--help")
    assert "uwf.cli.thread" in modules
    others = [g for g in GROUPS if g != "uwf.cli.thread"]
    assert among(modules, [*HEAVY, *others, "uwf.engine", "yaml"]) == []


# The thread group's command modules: each is imported only when one of its commands is built
# (``App.lazy``, cli/lazy.py), so a command loads its own module and no other.
THREAD_MODULES = [
    "uwf.cli.thread.lifecycle",
    "uwf.cli.thread.views",
    "uwf.cli.thread.steering",
    "uwf.cli.thread.bulk",
    "uwf.cli.stepping",
]


def test_thread_show_loads_only_what_it_reads(new_thread: Any) -> None:
    thread = new_thread()
    modules = loaded_modules("thread", "show", thread)
    assert "uwf.engine.threads.lifecycle" in modules  # the probe really ran the command
    assert "uwf.cli.thread.lifecycle" in modules
    others = [g for g in GROUPS if g != "uwf.cli.thread"]
    others += [m for m in THREAD_MODULES if m != "uwf.cli.thread.lifecycle"]
    unused = [
        "yaml",  # threads.yaml is read on its fast path
        "ulid",  # only new thread ids need python-ulid
        "socket",  # the lock record's host is os.uname().nodename
        "tempfile",
        "json",  # jsonfmt parses and prints through _json: no regexes compiled
        "uwf.util.log",  # show writes no log line
        "uwf.backend.fs.packwrite",
        "uwf.config",
        "uwf.moderator",
        "uwf.engine.workflows.stored",
        "uwf.engine.step",
        "uwf.engine.views.read",
        "uwf.cas.fastschema",
        "uwf.cli.complete",  # shell completion: only when a shell asks
        "dataclasses",  # the read path's records are NamedTuples (backend/base.py)
        "uwf.api",  # the Python API wraps the engine the CLI calls: never on the CLI's path
        "uwf.util.clock",  # show reads no clock
        # write-side parts of the backend: the fleet's limits, the worker registry
        "uwf.backend.fs.limits",
        "uwf.backend.fs.workers",
        "uwf.backend.workers",
        "hashlib",  # a limit's file name: only where a limit is configured
        "uwf.engine.threads.bulk",  # the bulk commands' engine (bulk.py's, never imported)
        "uwf.engine.views",  # read, graph, watch, export
        "uwf.cli.tables",  # --format table's rows and columns: only when asked for
        "uwf.util.yamlio",  # config.yaml is looked at for store: with no YAML module
        "uwf.cli.columns",
    ]
    assert among(modules, [*HEAVY, *others, *unused]) == []


def test_thread_list_loads_its_own_command_module_alone(new_thread: Any) -> None:
    new_thread()
    modules = loaded_modules("thread", "list")
    assert "uwf.cli.thread.lifecycle" in modules  # the probe really ran the command
    others = [m for m in THREAD_MODULES if m != "uwf.cli.thread.lifecycle"]
    unused = ["uwf.engine.threads.bulk", "uwf.engine.step", "uwf.backend.fs.limits"]
    unused += ["uwf.cli.tables", "uwf.cli.columns"]  # --format table only
    assert among(modules, [*HEAVY, *others, *unused]) == []


def test_the_cli_collects_garbage_after_its_start_up() -> None:
    """``uwf.cli.main`` pauses the collector while Typer is imported (docs/performance.md,
    "Processes and start-up") and resumes it: a long-lived command (``uwf worker``) and a
    program that imports the CLI keep collecting."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc, uwf.cli.main; print(gc.isenabled(), gc.get_freeze_count() > 0)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.split() == ["True", "True"], proc.stderr


def test_thread_step_loads_only_what_it_needs_before_spawning(
    new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    modules = loaded_modules(
        "thread", "step", thread, "--agent", scenario(inprocess=False), spawn=True
    )
    assert "uwf.adapters.process" in modules  # the probe saw the spawn
    others = [g for g in GROUPS if g != "uwf.cli.thread"]
    others += [m for m in THREAD_MODULES if m != "uwf.cli.stepping"]
    heavy = [h for h in HEAVY if h != "chevron_blue"]  # it renders the edge prompt
    unused = ["yaml", "uwf.engine.workflows.stored", "uwf.engine.views.read", "uwf.cas.fastschema"]
    unused += ["uwf.cli.complete", "uwf.cli.background", "uwf.engine.step.background"]
    unused += ["json", "socket", "uwf.engine.step.relay", "uwf.backend.relay"]  # not on a disk
    assert among(modules, [*heavy, *others, *unused]) == []


def test_a_version_1_step_renders_liquid_and_loads_no_mustache(
    tmp_path: Path, cli: Any, scenario: Any
) -> None:
    import version1

    version1.write_review(tmp_path / "cwd")
    started = cli("thread", "start", "review", "-p", "Add a flag")
    assert started.code == 0, started.err
    agent = scenario({"planner": [version1.PLAN]}, inprocess=False)
    modules = loaded_modules(
        "thread", "step", started.json()["thread"], "--agent", agent, spawn=True
    )
    assert "liquid" in modules  # the $START.new prompt is Liquid
    heavy = [h for h in HEAVY if h != "liquid"]
    assert among(modules, heavy) == []


def test_config_yaml_is_checked_without_jsonschema(
    root: Path, new_thread: Any, scenario: Any
) -> None:
    """A step reads config.yaml and checks it against its JSON Schema with the fast validator
    alone: jsonschema and the wording of problems load only for a wrong file."""
    thread = new_thread()
    (root / "config.yaml").write_text(
        "agents:\n  mock: {command: uwf-mock, args: []}\ndefaultAgent: mock\nmaxRounds: 50\n"
    )
    modules = loaded_modules(
        "thread", "step", thread, "--agent", scenario(inprocess=False), spawn=True
    )
    assert "uwf.config.schema" in modules  # the probe saw the check
    assert among(modules, ["jsonschema", "uwf.cas.schema", "uwf.cas.wording"]) == []


def test_a_plain_config_yaml_is_read_without_yaml(
    root: Path, new_thread: Any, scenario: Any
) -> None:
    """A config.yaml of the plain form (uwf.util.plainyaml: block mappings of words, numbers,
    quoted strings and lists of them) is read without PyYAML, whose import was the largest
    part of a step's own start-up."""
    thread = new_thread()
    (root / "config.yaml").write_text(
        "# the agents\nagents:\n  mock:\n    command: uwf-mock\n    args: []\n"
        "defaultAgent: mock\nmaxRounds: 50\n"
    )
    modules = loaded_modules(
        "thread", "step", thread, "--agent", scenario(inprocess=False), spawn=True
    )
    assert "uwf.config.config" in modules  # the probe saw the config read
    assert among(modules, ["yaml", "jsonschema"]) == []


# -- the agents ---------------------------------------------------------------------------

# No agent needs the CLI, the engine, the web view, or a heavy library it does not use.
AGENT_HEAVY = [
    *("jsonschema", "httpx", "pydantic", "rich", "chevron_blue", "psycopg2", "opentelemetry"),
    *("typer", "uwf.cli", "uwf.engine", "uwf.web"),
]


def test_uwf_mock_loads_only_what_a_scripted_step_needs(new_thread: Any, scenario: Any) -> None:
    """The agent of every benchmark's cold step: a whole step, no dataclass, no jsonschema
    (its output is checked by the small validator, cas/fastschema.py). Measured on its second
    run: the first stores the agent's schemas, and checking a new schema takes jsonschema."""
    args = [*scenario().split()[1:], new_thread(), "planner"]
    probe("uwf.agents.mock:main", *args)
    report = probe("uwf.agents.mock:main", *args)
    assert "uwf.agent_kit.runner" in report["modules"]  # the probe really ran the agent
    # the prompts are built only by an agent that prompts a model (or asks for a correction);
    # uwf's plain call is read without argparse (uwf.agent_kit.target), the LLM extract and
    # the artifacts' module only when there is an answer to extract or a file left to store
    unused = ["dataclasses", "uwf.agent_kit.prompts", "uwf.agent_kit.thread_prompt"]
    unused += ["argparse", "gettext", "shutil", "uwf.agent_kit.args", "uwf.agent_kit.extract"]
    unused += ["uwf.model.artifacts"]
    assert among(report["modules"], [*AGENT_HEAVY, *unused]) == []


PLAIN_CALLS = [
    ["T", "planner"],
    ["01ABC", "re viewer"],
    ["", "planner"],
    ["T"],
    ["T", "planner", "extra"],
    ["-h", "planner"],
    ["T", "--role"],
    ["--thread", "T", "--role", "planner"],
    ["--", "T", "planner"],
    [],
]


@pytest.mark.parametrize("argv", PLAIN_CALLS)
def test_the_plain_call_is_read_as_argparse_reads_it(argv: list[str], monkeypatch: Any) -> None:
    """``target.plain`` reads uwf's own call without argparse, and leaves every other command
    line to the kit's parser: where it answers, the parser gives the same target."""
    from uwf.agent_kit import args, target
    from uwf.util.errors import UsageError

    monkeypatch.setenv("UWF_EDGE_PROMPT", "Review it.")
    monkeypatch.delenv("UWF_EDGE_PROMPT_FILE", raising=False)
    quick = target.plain(argv)
    try:
        parsed: target.Target | None = args.kit(argv)
    except (UsageError, SystemExit):  # a usage error, or the help printed
        parsed = None
    if quick is not None:
        assert quick == parsed == target.Target(argv[0], argv[1], "Review it.")
    else:
        assert len(argv) != 2 or any(a.startswith("-") for a in argv)


@pytest.mark.parametrize(
    ("argv", "quick"),
    [
        (["--scenario", "s.yaml", "T", "planner"], True),
        (["--mock-data", "s.yaml", "T", "planner"], True),
        (["T", "planner"], None),  # read at once when $UWF_MOCK_SCENARIO names the scenario
        (["--scenario", "", "T", "planner"], False),
        (["--scenario", "-s.yaml", "T", "planner"], False),
        (["--scenario=s.yaml", "T", "planner"], False),
        (["T", "planner", "--scenario", "s.yaml"], False),
    ],
)
@pytest.mark.parametrize("env", ["", "env.yaml"])
def test_uwf_mock_reads_uwf_s_call_as_its_parser_does(
    argv: list[str], quick: bool | None, env: str, monkeypatch: Any
) -> None:
    """uwf-mock's ``[--scenario FILE] <thread-id> <role>`` without argparse: the same scenario
    and target as its parser; anything else (None) is left to the parser."""
    from uwf.agents import mock
    from uwf.util.errors import UsageError

    monkeypatch.setenv(mock.SCENARIO_ENV, env)
    monkeypatch.setenv("UWF_EDGE_PROMPT", "Plan it.")
    found = mock._plain(argv)
    assert (found is not None) == (bool(env) if quick is None else quick)
    parser = mock.make_parser()
    try:
        options, target = parser.parse(argv)
        parsed = (mock._agent(parser, options.scenario or env).scenario_path, target)
    except UsageError:
        assert found is None
        return
    assert found is None or found == parsed


def test_uwf_cmd_loads_only_what_it_needs_before_its_command(new_thread: Any) -> None:
    command = ["--", sys.executable, "-c", "pass"]  # prints nothing: the step then fails
    report = probe("uwf.agents.cmd:main", *command, new_thread(), "planner", spawn=True, code=1)
    assert "uwf.agent_kit.prompts" in report["modules"]  # it composed the prompt first
    assert among(report["modules"], [*AGENT_HEAVY, "dataclasses"]) == []


def test_an_answer_in_the_flat_form_is_read_without_yaml(new_thread: Any) -> None:
    """The agent kit reads an answer's frontmatter of one ``key: value`` per line without
    PyYAML (uwf.util.frontmatter, "the flat form"): importing it was most of an agent's
    start-up. ``uwf-cmd`` here, whose command prints the planner's answer; measured on its
    second run, as uwf-mock's above."""
    answer = '---\nstatus: _\nplan: "do it: now"\nsteps: ["one", "two"]\n---\nThe plan.\n'
    command = ["--", sys.executable, "-c", f"import sys; sys.stdout.write({answer!r})"]
    thread = new_thread()
    probe("uwf.agents.cmd:main", *command, thread, "planner")  # stores the schemas (jsonschema)
    report = probe("uwf.agents.cmd:main", *command, thread, "planner")
    assert "uwf.agent_kit.fastpath" in report["modules"]  # it read the answer
    assert among(report["modules"], [*AGENT_HEAVY, "dataclasses", "yaml"]) == []


def test_uwf_human_loads_only_what_it_needs_to_defer(new_thread: Any) -> None:
    report = probe("uwf.agents.human:main", new_thread(), "planner", code=75)  # no terminal
    assert among(report["modules"], [*AGENT_HEAVY, "dataclasses"]) == []


def test_uwf_hermes_loads_only_what_it_needs_before_hermes(
    new_thread: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to spawning ``hermes`` (a stand-in here). Its step waits for a model: dataclasses
    are allowed."""
    fake = tmp_path / "bin" / "hermes"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    report = probe("uwf.agents.hermes.cli:main", new_thread(), "planner", spawn=True, code=1)
    assert "uwf.agents.hermes.process" in report["modules"]
    assert among(report["modules"], AGENT_HEAVY) == []


def test_uwf_builtin_loads_only_what_it_needs_before_its_model(new_thread: Any, root: Path) -> None:
    """Up to its first model call (to a closed port here: the call fails). Its step waits for
    a model: httpx (the call) and dataclasses are allowed, and rich, which httpx imports for
    its own command line when rich is installed (Typer needs it)."""
    thread = new_thread()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    (root / "config.yaml").write_text(
        f"providers: {{local: {{baseUrl: 'http://127.0.0.1:{port}/v1'}}}}\n"
        "models: {m: {provider: local, name: m}}\ndefaultModel: m\n"
    )
    report = probe("uwf.agents.builtin.cli:main", thread, "planner", code=1)
    assert "httpx" in report["modules"]  # it got as far as the model call
    heavy = [h for h in AGENT_HEAVY if h not in ("httpx", "rich")]
    assert among(report["modules"], heavy) == []


def cli_module(cli: Path, path: Path) -> str:
    """The dotted name, under ``uwf.cli``, of a file of ``cli`` (``thread`` for
    ``thread/__init__.py``)."""
    parts = path.relative_to(cli).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def cli_path(cli: Path, module: str) -> Path:
    """The file of a dotted name under ``uwf.cli`` (``cli_module`` turned around)."""
    base = cli.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def registered_functions(cli: Path) -> set[tuple[str, str]]:
    """(module, function) of every function the CLI registers as a command or callback:
    decorated (``@app.command(…)``), passed (``app.command(…)(name)``, ``app.command(…)(
    module.name)``), named by its module (``app.lazy(name, "uwf.cli.module:function")``,
    ``add_alias(app, "uwf.cli.module:function", …)``) or named in ``COMMANDS``."""
    import ast

    found = {
        (target.partition(":")[0].removeprefix("uwf.cli."), target.partition(":")[2])
        for target, _help in COMMANDS.values()
    }

    def registers(node: ast.expr) -> bool:  # app.command(…) or app.callback(…)
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("command", "callback")
        )

    def named(node: ast.Call) -> str | None:  # app.lazy(…, "m:f") or add_alias(app, "m:f", …)
        lazy = isinstance(node.func, ast.Attribute) and node.func.attr == "lazy"
        alias = isinstance(node.func, ast.Name) and node.func.id == "add_alias"
        if (lazy or alias) and len(node.args) >= 2:
            arg = node.args[1]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                return arg.value
        return None

    for path in sorted(cli.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = cli_module(cli, path)
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        imported = {
            a.asname or a.name: f"{n.module.removeprefix('uwf.cli').lstrip('.')}.{a.name}".lstrip(
                "."
            )
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("uwf.cli")
            for a in n.names
        }
        for node in ast.walk(tree):
            target = named(node) if isinstance(node, ast.Call) else None
            if target is not None:
                module_name, _, function = target.partition(":")
                found.add((module_name.removeprefix("uwf.cli."), function))
            if isinstance(node, ast.FunctionDef) and any(map(registers, node.decorator_list)):
                found.add((module, node.name))
            if isinstance(node, ast.Call) and registers(node.func) and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Name) and arg.id in defined:
                    found.add((module, arg.id))
                elif (
                    isinstance(arg, ast.Attribute)
                    and isinstance(arg.value, ast.Name)
                    and arg.value.id in imported
                ):
                    found.add((imported[arg.value.id], arg.attr))
    return found


def test_cli_modules_keep_real_annotations() -> None:
    """Typer reads the annotations of every command it builds: postponed ones (``from
    __future__ import annotations``) would be evaluated from strings on every call. So a
    module that defines a command or a callback keeps real annotations."""
    import ast

    cli = Path(__file__).resolve().parent.parent / "src" / "uwf" / "cli"
    registered = registered_functions(cli)
    modules = {module for module, _function in registered}
    assert {"thread.lifecycle", "stepping", "thread.steering", "setup", "main"} <= modules
    postponed = []
    for module in sorted(modules):
        tree = ast.parse(cli_path(cli, module).read_text(encoding="utf-8"))
        if any(
            isinstance(n, ast.ImportFrom)
            and n.module == "__future__"
            and any(a.name == "annotations" for a in n.names)
            for n in tree.body
        ):
            postponed.append(module)
    assert postponed == []


def test_the_backend_face_imports_its_interface_on_first_use() -> None:
    """``uwf.backend`` names ``Backend`` without importing ``backend.base`` up front: a
    record module under it (``backend.failure``) costs no more than itself."""
    code = (
        "import sys, uwf.backend.failure; print('uwf.backend.base' in sys.modules); "
        "import uwf.backend, uwf.backend.base; "
        "print(uwf.backend.Backend is uwf.backend.base.Backend)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["False", "True"], proc.stderr
