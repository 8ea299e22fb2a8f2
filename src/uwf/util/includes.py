"""YAML files that ``!include`` others (docs/format.md, "Includes and folder workflows").

``!include FILE`` is replaced by the content of FILE: a ``.yaml``/``.yml`` file by its parsed
value (which may ``!include`` in turn), a ``.json`` file by its parsed value, any other file
by its text. FILE is a relative path, resolved against the directory of the file that names
it, and must stay inside the **root** — the workflow's own directory — once every symbolic
link is resolved: a workflow never reads a file outside its directory. A file that includes
itself (directly or through others) is refused, and so are more than ``MAX_INCLUDES``
inclusions or more than ``MAX_TOTAL_BYTES`` read in all. Every file read is listed, once,
with its text (``workflow show --source`` prints them).

YAML is parsed by ``uwf.util.yamlio`` (the safe loader with its limits), with one more tag.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from uwf.util import yamlio
from uwf.util.errors import InvalidInput, oneline
from uwf.util.tuples import NamedTuple

TAG = "!include"
MAX_INCLUDES = 100
MAX_TOTAL_BYTES = 4 << 20
YAML_EXTENSIONS = (".yaml", ".yml")


class Source(NamedTuple):
    """One file a workflow was read from: its path relative to the root (``/`` separators)
    and its text."""

    path: str
    text: str


class IncludeError(InvalidInput):
    """An ``!include`` that cannot be followed; the message names it and where it is."""


class Reader:
    """Reads one workflow's files: the entry file, then every file it includes."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))
        self.sources: list[Source] = []
        self._seen: set[str] = set()
        self._stack: list[str] = []
        self._includes = 0
        self._bytes = 0

    def load_yaml(self, text: str, path: Path, *, source: str, named: bool = True) -> Any:
        """The value of a YAML document read from ``path`` (inside the root); ``named``: the
        parser's messages name the file (the entry file's caller names it itself)."""
        real = os.path.realpath(path)
        self._stack.append(real)
        try:
            loader = functools.partial(_Loader, reader=self, directory=Path(real).parent)
            shown = path if named else None
            return yamlio.load(text, source=source, path=shown, loader=loader)
        finally:
            self._stack.pop()

    def record(self, path: Path, text: str) -> None:
        """List a file that was read (once, however often it is included)."""
        real = os.path.realpath(path)
        if real not in self._seen:
            self._seen.add(real)
            self.sources.append(Source(self.relative(real), text))

    def relative(self, real: str) -> str:
        return Path(os.path.relpath(real, self.root)).as_posix()

    def include(self, directory: Path, ref: Any, line: int) -> Any:
        """The value of ``!include ref`` found at ``line`` of a file in ``directory``."""
        where = f"{self.relative(self._stack[-1])}, line {line}"
        if not isinstance(ref, str) or not ref.strip():
            raise IncludeError(f"{TAG} needs a file name ({where})")
        shown = f"{TAG} {oneline(ref)} ({where})"
        if os.path.isabs(ref) or "\0" in ref:
            raise IncludeError(f"{shown}: must be a path relative to the file that includes it")
        target = Path(os.path.normpath(directory / ref))
        real = os.path.realpath(target)
        if os.path.commonpath([real, self.root]) != str(self.root):
            raise IncludeError(f"{shown}: is outside the workflow's directory {self.root}")
        if real in self._stack:
            raise IncludeError(f"{shown}: includes itself")
        self._includes += 1
        if self._includes > MAX_INCLUDES:
            raise IncludeError(f"{shown}: more than {MAX_INCLUDES} inclusions")
        text = self._read(Path(real), shown)
        self.record(Path(real), text)
        suffix = Path(real).suffix.lower()
        if suffix in YAML_EXTENSIONS:
            return self.load_yaml(text, Path(real), source=f"included file {self.relative(real)}")
        if suffix == ".json":
            try:
                return json.loads(text, parse_constant=_no_constant)
            except ValueError as exc:
                raise IncludeError(f"{shown}: invalid JSON: {exc}") from None
        return text

    def _read(self, path: Path, shown: str) -> str:
        try:
            if not path.is_file():
                problem = "not found" if not path.exists() else "is not a regular file"
                raise IncludeError(f"{shown}: {problem}")
            data = path.read_bytes()
        except OSError as exc:
            raise IncludeError(f"{shown}: cannot be read: {exc.strerror or exc}") from None
        self._bytes += len(data)
        if self._bytes > MAX_TOTAL_BYTES:
            raise IncludeError(
                f"{shown}: the included files hold more than {MAX_TOTAL_BYTES} bytes together"
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise IncludeError(f"{shown}: is not UTF-8 text") from None


def _no_constant(name: str) -> Any:
    """NaN and the infinities are not JSON (and no number uwf takes: ``uwf.util.yamlio``)."""
    raise ValueError(f"{name} is not a finite number")


def _construct(loader: _Loader, node: Any) -> Any:
    import yaml

    ref = loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None
    return loader.reader.include(loader.directory, ref, node.start_mark.line + 1)


class _Loader(yamlio.safe_loader()):  # type: ignore[misc]  # a class chosen at run time
    """The safe loader, plus ``!include`` resolved by its reader from its directory."""

    def __init__(self, stream: Any, *, reader: Reader, directory: Path) -> None:
        super().__init__(stream)
        self.reader = reader
        self.directory = directory


_Loader.add_constructor(TAG, _construct)
