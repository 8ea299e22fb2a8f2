"""The optional keys of a JSON object uwf writes or prints: a key is there when its value is
set, left out when it is not (docs/format.md, "Thread state": ``task``, ``cwd``, ``reason``,
``retryAt``, … are absent rather than null).

One rule, written once: ``present`` drops the values that are None. A record whose default is
not None (a priority of 0, ``exhausted`` False, an empty reason) says so where it calls it
(``self.priority or None``), so that what counts as "unset" stays beside the field.
"""

from __future__ import annotations

from typing import Any

__all__ = ["present"]


def present(**values: Any) -> dict[str, Any]:
    """``values`` without those that are None, in the order given."""
    return {key: value for key, value in values.items() if value is not None}
