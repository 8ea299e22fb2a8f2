"""The CLI frame: exit codes, one-line errors, --format, --version, UWF_DEBUG."""

from __future__ import annotations

from typing import Any

import pytest

from uwf import __version__


def test_version(cli: Any) -> None:
    r = cli("--version")
    assert (r.code, r.out) == (0, f"uwf {__version__}\n")


def test_usage_errors_are_one_line_exit_2(cli_proc: Any) -> None:
    for args, message in [
        (["nope"], "error: No such command 'nope'."),
        (["thread", "start", "x"], "error: Missing option '--prompt' / '-p'."),
        (["cas", "get"], "error: Missing argument 'HASH'."),
        (["--format", "xml", "cas", "has", "X"], "error: Invalid value for '--format': "),
    ]:
        r = cli_proc(*args)
        assert r.code == 2, args
        assert len(r.err.splitlines()) == 1 and r.err.startswith(message), r.err
        assert "Traceback" not in r.err


def test_group_without_subcommand_prints_help(cli_proc: Any) -> None:
    r = cli_proc("thread")
    assert r.code == 2 and "Usage: uwf thread" in r.err


def test_format_before_and_after_the_command(cli: Any) -> None:
    h = cli("cas", "put-text", "x").json()["hash"]
    assert cli("--format", "yaml", "cas", "has", h).out == "exists: true\n"
    assert cli("cas", "has", h, "--format", "yaml").out == "exists: true\n"
    assert cli("cas", "has", h).out == '{"exists":true}\n'


def test_internal_errors_are_one_line_unless_debug(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uwf.engine.threads import listing as threads

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(threads, "list_threads", broken)
    r = cli("thread", "list")
    assert r.code == 70
    assert r.err == (
        "error: internal error: RuntimeError: simulated bug (UWF_DEBUG=1 shows the traceback)\n"
    )
    monkeypatch.setenv("UWF_DEBUG", "1")
    with pytest.raises(RuntimeError, match="simulated bug"):
        cli("thread", "list")
