"""Shell completion: `uwf --install-completion` / `--show-completion`, and what a TAB offers.

Completion goes through the variables Typer's scripts set (`_UWF_COMPLETE=complete_<shell>`,
with `COMP_WORDS`/`COMP_CWORD` for bash and `_TYPER_COMPLETE_ARGS` for zsh and fish); bash also
runs for real: the script `uwf --show-completion` prints there is sourced and its function
called as bash calls it on a TAB.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support import BIN

# Typer's own switch for its tests: --install-completion then takes the shell as a value
SHELL_DETECTION_OFF = {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}


def env(**extra: str) -> dict[str, str]:
    out = dict(os.environ)
    out["PATH"] = f"{BIN}{os.pathsep}{out['PATH']}"
    out.update(extra)
    return out


def complete(shell: str, line: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """What ``uwf`` answers a ``shell`` asking to complete ``line`` (the cursor at its end)."""
    variables = {"_UWF_COMPLETE": f"complete_{shell}", **extra}
    if shell == "bash":
        words = line.split(" ")
        variables |= {"COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)}
    else:
        variables |= {"_TYPER_COMPLETE_ARGS": line}
    uwf = shutil.which("uwf", path=env()["PATH"])
    assert uwf is not None
    return subprocess.run(
        [uwf], capture_output=True, text=True, env=env(**variables), timeout=60, check=True
    )


def in_bash(script: str, **extra: str) -> str:
    bash = shutil.which("bash")
    assert bash is not None
    proc = subprocess.run(
        [bash, "-c", script], capture_output=True, text=True, env=env(**extra), timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def tabs(*lines: str) -> list[list[str]]:
    """What bash offers for a TAB at the end of each line, through the script uwf installs."""
    script = ['eval "$(uwf --show-completion)"']
    for line in lines:
        words = line.split(" ")
        quoted = " ".join(repr(w) for w in words)
        script.append(f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}")
        script.append('_uwf_completion uwf; printf "%s\\n" "${COMPREPLY[@]}" "--"')
    out = in_bash("\n".join(script)).split("--\n")
    return [[x for x in answer.splitlines() if x] for answer in out[: len(lines)]]


@pytest.fixture
def threads(cli: Any, new_thread: Any) -> list[str]:
    """Three active threads, oldest first, and a finished one."""
    made = [new_thread(f"task {n}") for n in range(4)]
    assert cli("thread", "kill", made[1]).code == 0
    return [made[0], made[2], made[3]]


def test_bash_for_real_commands_options_threads_workflows_and_agents(
    threads: list[str], root: Path, tmp_path: Path
) -> None:
    (root / "config.yaml").write_text(
        "agents:\n  mock: {command: uwf-mock}\n  claude: {command: uwf-cmd, args: [claude]}\n"
    )
    project = Path.cwd() / ".workflows"
    project.mkdir()
    (project / "2026-review.yaml").write_text("name: 2026-review\n")
    asked = {
        "uwf th": ["thread"],
        "uwf thread sto": ["stop"],
        "uwf thread step X --ba": ["--background"],
        "uwf thread show ": threads[::-1],  # the active ones, newest first
        f"uwf thread stop {threads[0][:-1]}": [threads[0]],
        "uwf thread start ": ["2026-review", "solve-issue"],
        "uwf workflow history so": ["solve-issue"],
        "uwf thread step X --agent ": ["mock", "claude"],
        "uwf thread step X --agent c": ["claude"],
    }
    assert dict(zip(asked, tabs(*asked), strict=True)) == asked


def test_completion_reads_no_node(threads: list[str], root: Path) -> None:
    """Thread ids and workflow names come from the thread table and the registry alone."""
    shutil.rmtree(root / "cas")
    assert complete("bash", "uwf thread show ").stdout.split() == threads[::-1]
    assert complete("bash", "uwf thread start s").stdout.split() == ["solve-issue"]


def test_zsh_and_fish_get_help_with_each_value(threads: list[str]) -> None:
    newest = threads[-1]
    zsh = complete("zsh", f"uwf thread show {newest[:20]}").stdout
    assert zsh == f"""_arguments '*: :(("{newest}":"task 3"))'\n"""
    fish = complete("fish", "uwf thread show ", _TYPER_COMPLETE_FISH_ACTION="get-args").stdout
    tasks = zip(threads[::-1], (3, 2, 0), strict=True)
    assert fish.splitlines() == [f"{t}\ttask {n}" for t, n in tasks]
    options = complete("fish", "uwf --", _TYPER_COMPLETE_FISH_ACTION="get-args").stdout
    assert "--install-completion\tInstall completion for the current shell." in options


def test_a_broken_config_or_root_completes_nothing(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "config.yaml").write_text("agents: [not, a, mapping]\n")
    (root / "threads.yaml").write_text(": not yaml {\n")
    assert complete("bash", "uwf thread step X --agent ").stdout == "\n"
    assert complete("bash", "uwf thread show ").stdout == "\n"


def test_show_completion_detects_bash(root: Path) -> None:
    script = in_bash("uwf --show-completion")
    assert "complete -o default -F _uwf_completion uwf" in script
    assert "_UWF_COMPLETE=complete_bash" in script


@pytest.mark.parametrize(
    ("shell", "files"),
    [
        ("bash", [".bashrc", ".bash_completions/uwf.sh"]),
        ("zsh", [".zshrc", ".zfunc/_uwf"]),
        ("fish", [".config/fish/completions/uwf.fish"]),
    ],
)
def test_install_completion_for_each_shell(
    cli_proc: Any, tmp_path: Path, shell: str, files: list[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = cli_proc("--install-completion", shell, env={"HOME": str(home), **SHELL_DETECTION_OFF})
    assert result.code == 0, result.err
    # (Typer names the shell "Shells.zsh" on this path, which only its test variable opens)
    assert result.out.splitlines()[0].endswith(f"completion installed in {home / files[-1]}")
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()) == sorted(files)
    assert f"_UWF_COMPLETE=complete_{shell}" in (home / files[-1]).read_text()


@pytest.mark.parametrize("shell", ["zsh", "fish", "bash"])
def test_show_completion_prints_the_script_of_the_shell_named(shell: str) -> None:
    """In bash, `--show-completion zsh` is zsh's script (the argument used to be ignored)."""
    script = in_bash(f"uwf --show-completion {shell}")
    assert f"_UWF_COMPLETE=complete_{shell}" in script
    assert script.startswith("#compdef uwf") is (shell == "zsh")


def test_show_completion_of_an_unknown_shell(cli_proc: Any) -> None:
    result = cli_proc("--show-completion", "tcsh")
    assert (result.code, result.out) == (2, "")
    assert result.err == "error: unknown shell: tcsh (one of: bash, zsh, fish, powershell, pwsh)\n"


def test_install_completion_detects_bash(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    out = in_bash("uwf --install-completion", HOME=str(home))
    assert out.startswith(f"bash completion installed in {home}/.bash_completions/uwf.sh")
    assert "source" in (home / ".bashrc").read_text()


def test_help_lists_the_completion_options_a_command_does_not_build_them(
    cli_proc: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uwf.cli.main import root_command

    out = cli_proc("--help").out
    assert "--install-completion" in out and "--show-completion" in out
    monkeypatch.delenv("_UWF_COMPLETE", raising=False)

    def names(argv: list[str]) -> list[str]:
        return [param.name for param in root_command(argv).params]

    assert names(["thread", "show", "X"]) == ["fmt", "store", "version"]
    completion = ["fmt", "store", "version", "install_completion", "show_completion"]
    assert names([]) == names(["--help"]) == names(["--format", "yaml", "thread"]) == completion
    monkeypatch.setenv("_UWF_COMPLETE", "complete_bash")
    assert names(["thread", "show", "X"]) == completion
