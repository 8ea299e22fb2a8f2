"""A provider that answered 429 backs off fleet-wide (docs/format.md, "Limits").

When a model call of an agent (its own calls, the LLM extract, a summary) is refused with
HTTP 429, ``execute`` pauses every provider of config.yaml at that base URL for the seconds
of its ``Retry-After`` (else 60 s, at most an hour) through the backend; every stepper on
every machine sharing the store then holds the steps of agents that name that provider back
(busy, exit 4) until the pause ends, instead of sending more requests into the rate limit.
"""

from __future__ import annotations

from uwf.adapters.llm import RateLimited
from uwf.backend.base import LONGEST_PAUSE, Backend
from uwf.util.ulid import now_ms

DEFAULT_BACK_OFF = 60.0  # seconds, after a 429 without a Retry-After the adapter can read


def back_off(backend: Backend, refused: RateLimited) -> list[str]:
    """Pause the providers at ``refused.base_url``; their names (none when config.yaml names
    no provider there, or cannot be read)."""
    from uwf.config.config import load_config
    from uwf.util.errors import UwfError

    try:
        config = load_config(backend.root)
    except UwfError:
        return []
    seconds = DEFAULT_BACK_OFF if refused.retry_after is None else refused.retry_after
    until = now_ms() + int(min(seconds, LONGEST_PAUSE) * 1000)
    names = [
        name
        for name, provider in config.providers.items()
        if provider.base_url.rstrip("/") == refused.base_url.rstrip("/")
    ]
    for name in names:
        try:
            backend.limits.pause(f"providers/{name}", until)
        except UwfError:
            return names[: names.index(name)]  # the store is away: the step fails anyway
    return names
