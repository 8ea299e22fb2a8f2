"""Artifacts (docs/format.md, "Artifacts"): the files an agent produced, stored as nodes and
listed in its step's detail as ``{path, hash, size}``.

For each step ``uwf thread step`` gives the agent a fresh, empty directory in
``$UWF_ARTIFACTS_DIR``; the agent kit stores every regular file left there once the agent is
done: UTF-8 text (without NUL bytes) as a Text node, anything else as a Blob node (base64).
Because the detail's schema marks ``hash`` as a ``cas_ref``, ``cas gc`` keeps artifacts
with their step and ``cas verify`` checks them like any node.
"""

from __future__ import annotations

import base64
import binascii
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwf.cas.store import Store
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash, describe, is_hash
from uwf.util.errors import InvalidInput, NotFound, UwfError
from uwf.util.tuples import NamedTuple

if TYPE_CHECKING:
    from uwf.util.outputs import ArtifactListed

ENV = "UWF_ARTIFACTS_DIR"


class Artifact(NamedTuple):
    path: str  # relative, "/"-separated
    hash: NodeHash  # a Text or Blob node
    size: int  # bytes

    def as_json(self) -> ArtifactListed:
        return {"path": self.path, "hash": self.hash, "size": self.size}


def check_path(path: str) -> str:
    """``path`` if it is a relative path that stays inside a directory, else InvalidInput."""
    parts = path.split("/")
    if (
        not path
        or "\0" in path
        or "\\" in path
        or any(p in ("", ".", "..") for p in parts)
        or os.path.isabs(path)
    ):
        raise InvalidInput(f"artifact path {describe(path, 100)} is not a relative path")
    return path


def encode(store: Store, data: bytes) -> NodeHash:
    """Store ``data`` as a Text node when it is UTF-8 text without NUL bytes, else as a Blob."""
    h = schemas.ensure(store)
    if b"\0" not in data:
        try:
            return store.put(h.text, data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return store.put(h.blob, base64.b64encode(data).decode("ascii"))


def decode(store: Store, artifact: Artifact) -> bytes:
    """The bytes of an artifact, checked against its recorded size."""
    return load(store, artifact)[0]


def load(store: Store, artifact: Artifact) -> tuple[bytes, bool]:
    """The bytes of an artifact (checked against its recorded size) and whether it is text."""
    node = store.get(artifact.hash)
    if node is None:
        raise NotFound(f"artifact node not found: {artifact.hash} ({artifact.path})")
    h = schemas.hashes()
    if node.type == h.text and isinstance(node.payload, str):
        data = node.payload.encode("utf-8")
    elif node.type == h.blob and isinstance(node.payload, str):
        try:
            data = base64.b64decode(node.payload, validate=True)
        except (binascii.Error, ValueError):
            raise UwfError(
                f"artifact {artifact.path}: blob {artifact.hash} is not base64"
            ) from None
    else:
        raise UwfError(f"artifact {artifact.path}: node {artifact.hash} is not a Text or Blob node")
    if len(data) != artifact.size:
        raise UwfError(
            f"artifact {artifact.path}: node {artifact.hash} holds {len(data)} bytes, "
            f"its step records {artifact.size}"
        )
    return data, node.type == h.text


NAME_MAX = 255  # bytes of one path component on Linux filesystems
PATH_MAX = 4095  # bytes of a relative path (PATH_MAX less its NUL)


def check_names(paths: list[str]) -> None:
    """Refuse a list of artifact paths that could not be written back as files, as one
    directory: each must be a relative path (``check_path``) of at most ``PATH_MAX`` bytes
    whose components have at most ``NAME_MAX`` bytes, no path may repeat, and none may be a
    directory of another (``f`` and ``f/g``)."""
    seen: set[str] = set()
    for path in paths:
        check_path(path)
        size = len(path.encode("utf-8", "surrogateescape"))
        longest = max(len(p.encode("utf-8", "surrogateescape")) for p in path.split("/"))
        if size > PATH_MAX or longest > NAME_MAX:
            raise InvalidInput(
                f"artifact path {describe(path, 100)} is too long ({size} bytes, a name of "
                f"{longest}; the limits are {PATH_MAX} and {NAME_MAX})"
            )
        if path in seen:
            raise InvalidInput(f"artifact path {describe(path, 100)} is listed twice")
        seen.add(path)
    for path in paths:
        parts = path.split("/")
        for n in range(1, len(parts)):
            above = "/".join(parts[:n])
            if above in seen:
                raise InvalidInput(
                    f"artifact paths {describe(above, 100)} and {describe(path, 100)} collide: "
                    "one would be a file and a directory"
                )


def _open_dir(name: str, dir_fd: int | None = None) -> int:
    """A descriptor of the directory ``name``, never through a symbolic link."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    return os.open(name, flags, dir_fd=dir_fd)


def _files(dir_fd: int, prefix: str = "") -> Iterator[tuple[str, str, int, os.stat_result]]:
    """Every entry under the directory ``dir_fd`` that is not a directory: its relative path,
    its name, the descriptor of its directory and its ``lstat``. Directories are entered by
    descriptor with ``O_NOFOLLOW``, so an entry swapped for a symbolic link on the way is
    never followed out of the tree."""
    with os.scandir(dir_fd) as entries:
        listed = [(e.name, e.stat(follow_symlinks=False)) for e in entries]
    for name, st in listed:
        rel = prefix + name
        if stat.S_ISDIR(st.st_mode):
            try:
                fd = _open_dir(name, dir_fd)
            except OSError:  # replaced by a link or removed since: ``_read`` skips it
                yield rel, name, dir_fd, st
                continue
            try:
                yield from _files(fd, rel + "/")
            finally:
                os.close(fd)
        else:
            yield rel, name, dir_fd, st


def _read(name: str, dir_fd: int, rel: str, max_bytes: int) -> bytes | None:
    """The bytes of a regular file (None when it is not one: a link, a FIFO, a socket…)."""
    try:  # O_NONBLOCK: a FIFO put there must not hang the step; O_NOFOLLOW: nor a link
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise UwfError(f"cannot read artifact {rel}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > max_bytes:
            raise UwfError(
                f"artifact {rel} is {st.st_size} bytes, over the limit of {max_bytes} bytes "
                "(artifactMaxBytes in config.yaml)"
            )
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise UwfError(f"cannot read artifact {rel}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:  # it grew since
        raise UwfError(
            f"artifact {rel} is over the limit of {max_bytes} bytes "
            "(artifactMaxBytes in config.yaml)"
        )
    return data


def store_dir(store: Store, directory: Path, max_bytes: int) -> tuple[list[Artifact], list[str]]:
    """Store every regular file under ``directory``: the artifacts (sorted by path), and a
    warning for each entry left out (symbolic links, sockets…). The directory itself must be
    one: a symbolic link put in its place is refused, never followed."""
    try:
        top = _open_dir(str(directory))
    except OSError as exc:
        if directory.is_symlink():
            raise UwfError(
                f"${ENV} ({directory}) was replaced by a symbolic link; nothing is stored "
                "through it"
            ) from None
        raise UwfError(f"cannot read ${ENV} ({directory}): {exc.strerror or exc}") from None
    found: list[Artifact] = []
    skipped: list[str] = []
    try:
        for rel, name, dir_fd, _ in _files(top):
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                raise UwfError(f"artifact {describe(rel, 100)}: its name is not UTF-8") from None
            data = _read(name, dir_fd, rel, max_bytes)
            if data is None:
                skipped.append(
                    f"artifact {rel} is not a regular file (a symbolic link?); not stored"
                )
                continue
            found.append(Artifact(rel, encode(store, data), len(data)))
    finally:
        os.close(top)
    found.sort(key=lambda a: a.path)
    check_names([a.path for a in found])
    return found, skipped


def _entries(payload: Any) -> list[Any]:
    listed = payload.get("artifacts") if isinstance(payload, dict) else None
    return listed if isinstance(listed, list) else []


def of_detail(store: Store, detail: Any) -> list[Artifact]:
    """The artifacts a step's detail lists (entries of another shape are skipped)."""
    if not isinstance(detail, str) or not is_hash(detail):
        return []
    node = store.get(detail)
    return listed(node.payload if node is not None else None)


def listed(payload: Any) -> list[Artifact]:
    """The artifacts a detail payload lists (entries of another shape are skipped)."""
    out = []
    for item in _entries(payload):
        if (
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and is_hash(item.get("hash"))
            and isinstance(item.get("size"), int)
        ):
            out.append(Artifact(item["path"], NodeHash(item["hash"]), item["size"]))
    return out


def attach(store: Store, detail: str, artifacts: list[Artifact]) -> NodeHash:
    """The detail node again, with ``artifacts`` added to its ``artifacts`` field."""
    node = store.require(detail, "detail node")
    schema = store.get(node.type)
    props = (
        schema.payload.get("properties") if schema and isinstance(schema.payload, dict) else None
    )
    if (
        not isinstance(node.payload, dict)
        or not isinstance(props, dict)
        or "artifacts" not in props
    ):
        raise UwfError(
            f"the agent left files in ${ENV}, but its detail schema {node.type} has no "
            "artifacts field to list them (declare one: the agent kit's detail_schema does)"
        )
    new = {a.path for a in artifacts}
    kept = [a for a in _entries(node.payload) if not (isinstance(a, dict) and a.get("path") in new)]
    listed = kept + [a.as_json() for a in artifacts]
    check_names(
        [a["path"] for a in listed if isinstance(a, dict) and isinstance(a.get("path"), str)]
    )
    return NodeHash(store.put(node.type, {**node.payload, "artifacts": listed}))
