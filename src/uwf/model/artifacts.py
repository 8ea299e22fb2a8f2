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
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from uwf.cas.store import Store
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash, describe, is_hash
from uwf.util.errors import InvalidInput, NotFound, UwfError

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


def _files(directory: Path) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every entry under ``directory`` that is not a directory, with its relative path."""
    stack = [(str(directory), "")]
    while stack:
        where, prefix = stack.pop()
        with os.scandir(where) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel + "/"))
                else:
                    yield rel, entry


def _read(entry: os.DirEntry[str], rel: str, max_bytes: int) -> bytes:
    size = entry.stat(follow_symlinks=False).st_size
    if size > max_bytes:
        raise UwfError(
            f"artifact {rel} is {size} bytes, over the limit of {max_bytes} bytes "
            "(artifactMaxBytes in config.yaml)"
        )
    try:
        fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
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
    warning for each entry left out (symbolic links, sockets…)."""
    found: list[Artifact] = []
    skipped: list[str] = []
    for rel, entry in _files(directory):
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            raise UwfError(f"artifact {describe(rel, 100)}: its name is not UTF-8") from None
        if not entry.is_file(follow_symlinks=False):
            skipped.append(f"artifact {rel} is not a regular file (a symbolic link?); not stored")
            continue
        data = _read(entry, rel, max_bytes)
        found.append(Artifact(rel, encode(store, data), len(data)))
    found.sort(key=lambda a: a.path)
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
    return store.put(node.type, {**node.payload, "artifacts": listed})
