"""Shell completion of uwf's arguments: thread ids, workflow names and agent aliases.

Typer calls these while a shell asks for completions (``$_UWF_COMPLETE`` set by the script
that ``uwf --install-completion`` installs; command names and options are completed by Typer
itself). Each reads only small state: the thread table or the registry through the backend,
the ``.workflows/`` directory, ``config.yaml`` — never the store. A completion that cannot be
computed (no storage root yet, a broken config) offers nothing rather than print an error
into the user's command line.
"""

from pathlib import Path


def threads(incomplete: str) -> list[tuple[str, str]]:
    """Active thread ids starting with ``incomplete``, newest first, with their task line."""
    from uwf.backend import open_backend

    try:
        records = open_backend().threads.active()
    except Exception:  # a completion never fails the shell (module doc)
        return []
    found = sorted((r for r in records if r.thread.startswith(incomplete)), key=lambda r: r.thread)
    return [(r.thread, r.info.task or "") for r in reversed(found)]


def workflows(incomplete: str) -> list[tuple[str, str]]:
    """Workflow names starting with ``incomplete``: the project's ``.workflows/`` files, then
    the registry's names (what ``uwf workflow list`` shows)."""
    from uwf.backend import open_backend
    from uwf.engine.workflows.stored import list_workflows

    try:
        listed = list_workflows(open_backend(), Path.cwd())
    except Exception:  # a completion never fails the shell (module doc)
        return []
    return [(w["name"], w["origin"]) for w in listed if w["name"].startswith(incomplete)]


def agents(incomplete: str) -> list[tuple[str, str]]:
    """Agent aliases of ``config.yaml`` starting with ``incomplete``, with their command."""
    from uwf.config.config import load_config
    from uwf.util.root import storage_root

    try:
        configured = load_config(storage_root()).agents
    except Exception:  # a completion never fails the shell (module doc)
        return []
    return [
        (name, " ".join([agent.command, *agent.args]))
        for name, agent in configured.items()
        if name.startswith(incomplete)
    ]
