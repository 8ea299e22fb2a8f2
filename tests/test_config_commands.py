"""`uwf config list/get/set` (docs/format.md, "config.yaml and .env"): uwf 0.8's commands on
this CLI's config.yaml — dotted keys checked against its schema, the whole file checked
before anything is written, atomic writes under the file's lock, secrets masked."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import yaml

from support import BIN, EXAMPLES


def config_file(root: Path) -> Path:
    return root / "config.yaml"


def state(snapshot: Any, root: Path) -> dict[str, bytes]:
    """The storage root's files but lock files (an empty lock file is not state)."""
    return {k: v for k, v in snapshot(root).items() if not k.endswith(".lock")}


def test_set_get_and_list_round_trip_through_the_file_every_command_reads(
    cli_proc: Any, root: Path, new_thread: Any
) -> None:
    scenario = EXAMPLES / "solve-issue.mock.yaml"
    sets = [
        ("agents.mock.command", "uwf-mock", "uwf-mock"),
        ("agents.mock.args", f'["--scenario", "{scenario}"]', ["--scenario", str(scenario)]),
        ("defaultAgent", "mock", "mock"),
        ("maxRounds", "7", 7),
        ("cliReference", "false", False),
        (
            'models."gpt-4.1"',
            '{"provider": "openai", "name": "gpt-4.1"}',
            {"provider": "openai", "name": "gpt-4.1"},
        ),
    ]
    for key, given, value in sets:
        done = cli_proc("config", "set", key, given)
        assert done.code == 0, done.err
        shown = key.replace('."gpt-4.1"', '["gpt-4.1"]')  # as problems name it
        assert done.json() == {"key": shown, "value": value, "previous": None}
        assert done.err == ""
    again = cli_proc("config", "set", "maxRounds", "8")
    assert again.json() == {"key": "maxRounds", "value": 8, "previous": 7}
    assert cli_proc("config", "get", "maxRounds").json() == 8
    assert cli_proc("config", "get", "agents.mock").json() == {
        "command": "uwf-mock",
        "args": ["--scenario", str(scenario)],
    }
    assert cli_proc("config", "get", "defaultModel").json() is None  # known, unset
    assert cli_proc("config", "get", 'models["gpt-4.1"].name').json() == "gpt-4.1"
    unquoted = cli_proc("config", "get", "models.gpt-4.1.name")  # models, gpt-4, 1, name
    assert unquoted.err_line == (
        'error: models.gpt-4.1: unknown key "1" (known keys: name, provider)'
    )
    written = yaml.safe_load(config_file(root).read_text())
    assert written["models"] == {"gpt-4.1": {"provider": "openai", "name": "gpt-4.1"}}
    assert cli_proc("config", "list").json() == written

    table = cli_proc("config", "list", "--format", "table").out.splitlines()
    assert table[0].split() == ["KEY", "VALUE"]
    assert [line.split(None, 1) for line in table[1:]] == [
        ["agents.mock.command", "uwf-mock"],
        ["agents.mock.args", f'["--scenario","{scenario}"]'],
        ["defaultAgent", "mock"],
        ["maxRounds", "8"],
        ["cliReference", "false"],
        ['models["gpt-4.1"].provider', "openai"],
        ['models["gpt-4.1"].name', "gpt-4.1"],
    ]

    removed = cli_proc("config", "set", "maxRounds", "null")  # null removes the setting
    assert removed.json() == {"key": "maxRounds", "value": None, "previous": 8}
    assert "maxRounds" not in yaml.safe_load(config_file(root).read_text())
    # what config set wrote is what a step reads: the default agent runs with its arguments
    thread = new_thread()
    stepped = cli_proc("thread", "step", thread)
    assert stepped.code == 0, stepped.err
    assert stepped.json()["role"] == "planner"


def test_a_refused_set_writes_nothing(cli_proc: Any, root: Path, snapshot: Any) -> None:
    root.mkdir()
    config_file(root).write_text("defaultAgent: mock\nagents: {mock: {command: uwf-mock}}\n")
    before = state(snapshot, root)
    refusals = [
        (["agnets.mock.command", "x"], 1, 'error: agnets: unknown key "agnets" (known keys: '),
        (["agents.mock.comand", "x"], 1, 'error: agents.mock.comand: unknown key "comand"'),
        (["maxRounds", "0"], 1, "error: cannot set maxRounds: maxRounds: expected a positive "),
        (["agents.mock.args", "uwf-mock --x"], 1, "error: cannot set agents.mock.args: "),
        (["defaultAgent", '""'], 1, "error: cannot set defaultAgent: defaultAgent: expected an"),
        (["workflowPaths", '["~/flows", 3]'], 1, "error: cannot set workflowPaths: "),
        (["defaultAgent.x", "y"], 1, "error: defaultAgent.x: defaultAgent is an alias"),
        (["a..b", "1"], 2, 'error: invalid config key "a..b": expected names joined by dots'),
    ]
    for args, code, first in refusals:
        refused = cli_proc("config", "set", *args)
        assert (refused.code, refused.out) == (code, ""), (args, refused.err)
        assert refused.err_line.startswith(first), (args, refused.err)
        assert len(refused.err.splitlines()) == 1
        assert state(snapshot, root) == before
    negative = cli_proc("config", "set", "agentTimeout", "-5")  # a number, not an option
    assert negative.err_line == (
        "error: cannot set agentTimeout: agentTimeout: expected a positive number of seconds, "
        "got -5 (config.yaml unchanged)"
    )
    config_file(root).write_text("maxRounds: 0\ncompactAfter: -1\n")  # broken by hand
    both = cli_proc("config", "set", "defaultAgent", "mock")
    assert both.code == 1
    assert both.err.splitlines() == [
        "error: cannot set defaultAgent: config.yaml would have 2 problems (it is unchanged)",
        "  - maxRounds: expected a positive integer, got 0",
        "  - compactAfter: expected a positive integer, got -1",
    ]
    fixed = cli_proc("config", "set", "maxRounds", "3")  # one left: the other still blocks
    assert fixed.err_line.startswith("error: cannot set maxRounds: compactAfter: expected")
    assert cli_proc("config", "set", "compactAfter", "null").code == 1  # maxRounds still 0
    config_file(root).write_text("retry: [unclosed\n")
    unreadable = cli_proc("config", "list")
    assert unreadable.code == 1
    assert unreadable.err_line.startswith("error: invalid config.yaml: invalid YAML: ")
    assert unreadable.err_line.endswith(f"(fix or remove {root}/config.yaml)")


def test_secrets_are_masked_in_what_config_prints(cli_proc: Any, root: Path) -> None:
    root.mkdir()
    (root / ".env").write_text("DEPLOY_TOKEN=tok-0123456789abcdef\n")
    url = "postgresql://uwf:pa55word-xyz@db.example:5432/uwf"
    done = cli_proc("config", "set", "store", url)
    assert done.code == 0, done.err
    assert done.json()["value"] == "postgresql://uwf:***@db.example:5432/uwf"
    # a value that holds a known secret (here an .env entry) is masked wherever it is printed
    note = cli_proc("config", "set", "agents.deploy.command", "deploy --token tok-0123456789abcdef")
    assert note.json()["value"] == "deploy --token ***"
    for printed in (
        cli_proc("config", "get", "store").out,
        cli_proc("config", "get", "agents").out,
        cli_proc("config", "list").out,
        cli_proc("config", "list", "--format", "yaml").out,
        cli_proc("config", "list", "--format", "table").out,
    ):
        assert "pa55word-xyz" not in printed and "tok-0123456789abcdef" not in printed
        assert "***" in printed
    text = config_file(root).read_text()  # the file itself holds the real values
    assert url in text and "tok-0123456789abcdef" in text


def test_the_file_keeps_its_mode_and_a_comment_is_warned_about(cli_proc: Any, root: Path) -> None:
    root.mkdir()
    config_file(root).write_text("# my settings\ndefaultAgent: mock\n")
    config_file(root).chmod(0o600)
    done = cli_proc("config", "set", "maxRounds", "4")
    assert done.code == 0
    assert done.err == (
        "warning: config.yaml's comments are not kept: config set rewrites the file\n"
    )
    assert stat.S_IMODE(os.stat(config_file(root)).st_mode) == 0o600
    assert yaml.safe_load(config_file(root).read_text()) == {"defaultAgent": "mock", "maxRounds": 4}
    assert cli_proc("config", "set", "maxRounds", "5").err == ""  # no comment left to lose
    leftovers = [p.name for p in root.iterdir() if p.name.startswith(".tmp")]
    assert leftovers == []


def test_concurrent_sets_all_land(root: Path) -> None:
    """Each set is one read-modify-write under config.yaml's lock: none is lost."""
    root.mkdir()
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    procs = [
        subprocess.Popen(
            [str(BIN / "uwf"), "config", "set", f"limits.agents.a{n}.concurrency", str(n + 1)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for n in range(6)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    limits = yaml.safe_load(config_file(root).read_text())["limits"]["agents"]
    assert limits == {f"a{n}": {"concurrency": n + 1} for n in range(6)}


def test_help_names_the_three_commands(cli: Any) -> None:
    shown = cli("config", "--help")
    assert shown.code == 0
    for name in ("list", "get", "set"):
        assert f"  {name} " in shown.out
