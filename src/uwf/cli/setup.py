"""`uwf setup`."""

from __future__ import annotations


def setup() -> None:
    """Configure a provider, a model and the default agent."""
