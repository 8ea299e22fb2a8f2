"""The JSON Schema of ``<root>/config.yaml`` (docs/format.md, "config.yaml and .env"): the one
source of what a configuration may hold. ``uwf.config.config`` checks a document against it
(the fast validator on the way every command and agent takes; the problems, when there are
some, worded as every schema problem is: ``uwf.cas.wording``) and builds its ``Config`` from
what it accepts. ``tests/test_config.py`` checks that docs/format.md lists every key.

Every key is optional and ``null`` means unset. Unknown keys are left alone (a newer uwf's
setting must not break an older one). ``x-expected`` names what a key takes in the words of
the messages.
"""

from __future__ import annotations

from typing import Any

from uwf.cas.fastschema import EXPECTED
from uwf.protocol.parts import RETRY as NODE_RETRY


def _text(what: str) -> dict[str, Any]:
    """A string with something in it besides white space."""
    return {"type": "string", "pattern": r"\S", EXPECTED: what}


def _optional(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema``, or ``null`` (unset)."""
    return {**schema, "type": [schema["type"], "null"]}


def _entries(entry: dict[str, Any], what: str) -> dict[str, Any]:
    """A section of named entries (``providers``, ``models``, ``agents``); null is empty."""
    return {"type": ["object", "null"], EXPECTED: what, "additionalProperties": entry}


ALIAS = _text("an alias (a non-empty string)")
COMMAND = _text("a command")
#: A Python agent (docs/api.md, "Python agents"): ``package.module:attribute``, or the name of
#: an entry point of the ``uwf.agents`` group.
PYTHON = _text("a Python agent (package.module:function, or an entry point's name)")
POSITIVE = {"type": ["integer", "null"], "minimum": 1, EXPECTED: "a positive integer"}

SECONDS = {"type": ["number", "null"], "minimum": 0, EXPECTED: "a number of seconds (0 or more)"}


def retry_policy(*, nullable: bool) -> dict[str, Any]:
    """A retry policy with the words of its messages (docs/format.md, "Retries"): the keys
    and bounds of the Workflow node's (``uwf.protocol.parts.RETRY``), worded the same in
    config.yaml (``nullable``: null is unset, and unknown keys are left alone) and in a
    workflow file (``uwf.moderator.filecheck``)."""
    words = {"attempts": POSITIVE[EXPECTED], "backoff": SECONDS[EXPECTED]}
    words["maxBackoff"] = words["backoff"]

    def key(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        worded = {**spec, EXPECTED: words[name]}
        return {**worded, "type": [spec["type"], "null"]} if nullable else worded

    policy = {
        **NODE_RETRY,
        EXPECTED: "a mapping {attempts, backoff, maxBackoff}",
        "properties": {name: key(name, spec) for name, spec in NODE_RETRY["properties"].items()},
    }
    if nullable:
        policy["type"] = ["object", "null"]
        del policy["additionalProperties"]
    return policy


#: A retry policy in config.yaml: config-wide, per workflow or per role.
RETRY = retry_policy(nullable=True)

#: The fleet limits of one agent alias or provider (docs/format.md, "Limits").
LIMIT: dict[str, Any] = {
    "type": ["object", "null"],
    EXPECTED: "a mapping {concurrency, perMinute}",
    "properties": {"concurrency": POSITIVE, "perMinute": POSITIVE},
}

CONFIG: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "config.yaml",
    "type": ["object", "null"],
    EXPECTED: "a mapping of settings",
    "properties": {
        "providers": _entries(
            {
                "type": "object",
                EXPECTED: "a mapping {baseUrl, apiKeyEnv}",
                "required": ["baseUrl"],
                "properties": {
                    "baseUrl": _text("a URL"),
                    "apiKeyEnv": _optional(_text("the name of an environment variable")),
                },
            },
            "a mapping of provider name -> {baseUrl, apiKeyEnv}",
        ),
        "models": _entries(
            {
                "type": "object",
                EXPECTED: "a mapping {provider, name}",
                "required": ["provider", "name"],
                "properties": {
                    "provider": _text("a provider name"),
                    "name": _text("the provider's model id"),
                },
            },
            "a mapping of model alias -> {provider, name}",
        ),
        "agents": _entries(
            {
                "type": "object",
                EXPECTED: "a mapping {command, args} or {python, args}",
                "properties": {
                    "command": COMMAND,
                    "python": PYTHON,
                    "provider": _optional(_text("a provider name")),
                    "args": {
                        "type": ["array", "null"],
                        "items": {"type": "string"},
                        EXPECTED: "a list of strings",
                    },
                },
                # a process (command) or a Python agent run in uwf's process (python): fails
                # only when both are missing (their values are checked above; the annotation
                # words the problem); both at once is refused by uwf.config.config.problems
                "anyOf": [
                    {"required": ["command"], "properties": {"command": {EXPECTED: "a command"}}},
                    {"required": ["python"]},
                ],
            },
            "a mapping of agent alias -> {command, args} or {python, args}",
        ),
        "defaultAgent": _optional(ALIAS),
        "agentOverrides": _entries(
            {
                "type": "object",
                EXPECTED: "a mapping of role -> agent alias",
                "additionalProperties": ALIAS,
            },
            "a mapping of workflow name -> role -> agent alias",
        ),
        "defaultModel": _optional(ALIAS),
        "modelOverrides": _entries(ALIAS, "a mapping of purpose -> model alias"),
        "agentTimeout": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            EXPECTED: "a positive number of seconds",
        },
        "maxRounds": POSITIVE,
        "priorityAging": POSITIVE,
        "compactAfter": POSITIVE,
        "contextBudget": POSITIVE,
        "artifactMaxBytes": POSITIVE,
        "limits": {
            "type": ["object", "null"],
            EXPECTED: "a mapping {agents, providers}",
            "properties": {
                "agents": _entries(LIMIT, "a mapping of agent alias -> limits"),
                "providers": _entries(LIMIT, "a mapping of provider name -> limits"),
            },
        },
        "fanOut": {
            "type": ["object", "null"],
            EXPECTED: "a mapping {maxDepth, maxThreads}",
            "properties": {"maxDepth": POSITIVE, "maxThreads": POSITIVE},
        },
        "retry": RETRY,
        "retryOverrides": _entries(
            {
                "type": "object",
                EXPECTED: "a mapping {retry, roles}",
                "properties": {
                    "retry": RETRY,
                    "roles": _entries(RETRY, "a mapping of role -> retry policy"),
                },
            },
            "a mapping of workflow name -> {retry, roles}",
        ),
        "store": _optional(_text("a URL or a directory")),
        "secrets": {
            "type": ["array", "null"],
            EXPECTED: "a list of environment variable names",
            "items": {
                "type": "string",
                "pattern": "^[^=\\x00]+$",
                EXPECTED: "an environment variable name",
            },
        },
        "workflowPaths": {
            "type": ["array", "null"],
            EXPECTED: "a list of directories",
            "items": _text("a directory"),
        },
        "cliReference": {"type": ["boolean", "null"], EXPECTED: "true or false"},
        "autoPack": {"type": ["boolean", "null"], EXPECTED: "true or false"},
        "cliReferenceOverrides": _entries(
            {
                "type": "object",
                EXPECTED: "a mapping of role -> true or false",
                "additionalProperties": {"type": "boolean", EXPECTED: "true or false"},
            },
            "a mapping of workflow name -> role -> true or false",
        ),
    },
}

#: What every command checks of config.yaml: the store it opens (``configured_store``).
STORE_ONLY: dict[str, Any] = {
    "type": "object",
    "properties": {"store": CONFIG["properties"]["store"]},
}
