"""The filesystem backend's mapping files — ``threads.yaml``, ``registry.yaml`` and the start
keys — read and written whole: a locked read-modify-write through a temp file, fsync and
``os.replace`` (``fsio.atomic_write``), so a reader never sees a half-written file and two
writers never lose each other's update (docs/format.md, "The filesystem backend").

uwf writes one ``"<key>": <JSON value>`` line per entry; reading takes a fast path over
exactly that shape and falls back to the safe YAML loader for hand-edited files. What an
entry means (a thread's record, a workflow's hash) is the caller's ``decode``
(``backend/fs/state.py``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from uwf.backend.fs.damage import STATE_LIMIT, damaged, read_state
from uwf.util import fsio, jsonfmt
from uwf.util.base32 import describe
from uwf.util.errors import InvalidInput

__all__ = ["KEYS_HEADER", "REGISTRY_HEADER", "THREADS_HEADER", "MappingFile"]

# compiled on first use (test_startup.py)
_LINE = r'^("(?:[^"\\]|\\.)*"): (["{].*)$'

THREADS_HEADER = (
    "# uwf active threads: thread id -> head hash,"
    " or {head, workflow, task, cwd, parent, priority, descendants, waiting, failure}"
)
REGISTRY_HEADER = "# uwf workflow registry: name -> workflow hash"
KEYS_HEADER = "# uwf start keys: <workflow name>/<key> -> thread id"


def _parse_mapping(data: bytes, path: Path) -> dict[str, Any]:
    """The top-level mapping of a state file: the fast paths, else the safe YAML loader.

    uwf's own shape is one ``"key": value`` line per entry, the value a JSON string or
    object: joined with commas inside braces, the lines are one JSON object, parsed in one
    call (10,000 threads: one ``json.loads`` instead of 20,000, and no regex per line).
    Taken only when every line starts with a quote and gives exactly one key (a line with
    two pairs, or a pair cut over two lines, fails that); otherwise line by line, then YAML.
    """
    lines = [
        line
        for line in data.decode("utf-8", "replace").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if all(line[0] == '"' for line in lines):
        try:
            joined = jsonfmt.loads("{" + ",".join(lines) + "}")
        except ValueError:
            joined = None
        if isinstance(joined, dict) and len(joined) == len(lines):
            return joined
    out: dict[str, Any] = {}
    for line in lines:
        m = re.match(_LINE, line)
        if m is None:
            break
        try:
            out[jsonfmt.loads(m.group(1))] = jsonfmt.loads(m.group(2))
        except ValueError:
            break
    else:
        return out
    try:
        from uwf.util import yamlio  # a hand-edited file only: uwf writes the fast shape

        loaded = yamlio.load(data, source=path.name, max_bytes=64 << 20, path=Path(path.name))
    except InvalidInput as exc:
        raise damaged(path, exc.message) from None
    if loaded is None:  # only comments: uwf's header, no entry
        return {}
    if not isinstance(loaded, dict):
        raise damaged(path, "it is not a mapping")
    return {str(k): v for k, v in loaded.items()}


def _render_mapping(mapping: dict[str, Any], header: str) -> bytes:
    lines = [header] + [f"{jsonfmt.dumps(k)}: {jsonfmt.dumps(v)}" for k, v in mapping.items()]
    return ("\n".join(lines) + "\n").encode()


class MappingFile:
    """A YAML mapping with locked read-modify-write; ``decode`` turns an entry into its value
    (None: the entry is not valid).

    A file uwf can tell is damaged is an error naming it, never read as fewer entries: an
    empty file (uwf always writes at least its header line: a crash or a hand emptied it), a
    file that does not parse (cut mid-line), a key that is not a ``key_name`` or a value
    that is not a valid ``value_name``. A missing file is a store that never had entries."""

    def __init__(
        self,
        path: Path,
        header: str,
        key_ok: Callable[[str], bool],
        decode: Callable[[str, Any], Any],
        names: tuple[str, str] = ("key", "value"),
    ) -> None:
        self.path = path
        self.header = header
        self.key_ok = key_ok
        self.decode = decode
        self.key_name, self.value_name = names
        # The bytes last read and what they decoded to: a long-lived process (a worker, a
        # loop of steps) reads the file a few times a step and parses it only when its
        # bytes changed (the values are immutable records; each read gets its own dict).
        self._last: tuple[bytes, dict[str, Any]] | None = None

    def read(self) -> dict[str, Any]:
        data = read_state(self.path, STATE_LIMIT)
        if data is None:
            return {}
        last = self._last
        if last is not None and last[0] == data:
            return dict(last[1])
        out = self._decode_all(data)
        self._last = (data, out)
        return dict(out)

    def _decode_all(self, data: bytes) -> dict[str, Any]:
        if not data.strip():
            raise damaged(self.path, "it is empty (uwf always writes at least its header line)")
        out = {}
        for key, raw in _parse_mapping(data, self.path).items():
            if not self.key_ok(key):
                raise damaged(self.path, f"{describe(key, 60)} is not a {self.key_name}")
            value = self.decode(key, raw)
            if value is None:
                if isinstance(raw, dict) and "head" in raw:  # a thread's record: its head
                    raw = raw["head"]
                shown = describe(raw if isinstance(raw, str) else jsonfmt.dumps(raw), 60)
                raise damaged(self.path, f"the {self.value_name} of {key} is not valid: {shown}")
            out[key] = value
        return out

    def write(self, mapping: dict[str, Any], encode: Callable[[Any], Any]) -> None:
        """Replace the file (the caller holds the lock)."""
        rendered = {k: encode(v) for k, v in mapping.items()}
        fsio.atomic_write(self.path, _render_mapping(rendered, self.header))

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with fsio.locked(self.path):
            yield
