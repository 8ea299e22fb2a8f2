"""What the commands of this machine print: ``setup``, ``logs``, ``config set``.

One part of ``uwf.util.outputs`` (its docstring says what these types are for)."""

# No ``from __future__ import annotations``: Python 3.11 reads ``NotRequired`` only from
# annotations that are evaluated.
from typing import Any, NotRequired, TypedDict


class ModelCheck(TypedDict):
    """A one-token call to the configured model (``uwf setup``)."""

    ok: bool
    error: NotRequired[str]


class SetupDone(TypedDict):
    """``uwf setup`` with a provider and a model."""

    configPath: str
    envPath: str | None
    provider: str
    model: str
    defaultAgent: str
    validation: ModelCheck


class DefaultAgentSet(TypedDict):
    """``uwf setup --default-agent``."""

    configPath: str
    defaultAgent: str


class LogFile(TypedDict):
    """One file of ``log list``."""

    name: str
    size: int
    date: str


class LogEntry(TypedDict):
    """One entry of ``log show`` (docs/format.md, "The debug log"); an entry may carry more
    string fields than these."""

    ts: str
    pid: str
    tag: str
    msg: str
    thread: NotRequired[str]
    workflow: NotRequired[str]


class LogsCleaned(TypedDict):
    """``log clean``."""

    deleted: int


class ConfigSet(TypedDict):
    """``config set``: the key as problems name it, the value it now holds (null: removed)
    and the one it held before (null: unset), secrets masked."""

    key: str
    value: Any
    previous: Any
