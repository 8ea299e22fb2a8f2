"""The commands of long threads: ``thread compact`` (a summary recorded for the next step)
and ``step artifacts`` (the files a step produced). docs/format.md, "Compaction" and
"Artifacts", describe what they read and write.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from uwf.backend.base import Backend
from uwf.model import artifacts, chain, compact, window
from uwf.model.threads import require_active
from uwf.util import fsio
from uwf.util.base32 import describe
from uwf.util.errors import InvalidInput, NotFound, UwfError

if TYPE_CHECKING:
    from uwf.util.outputs import ArtifactExtracted, ArtifactListed, Compacted


def _summary_by_model(backend: Backend, head: chain.Step, budget: int) -> str:
    client = compact.model_client(backend.root)
    if client is None:
        raise InvalidInput(
            "no model is configured for summaries (set models.compact or defaultModel in "
            "config.yaml): write the summary yourself and pass it with --text FILE"
        )
    store = backend.nodes
    whole = window.read_window(store, head)
    previous = window.text_of(store, whole.summary)
    task = chain.start_of(store, head).prompt
    try:
        return compact.summarize(client, task, previous, whole.steps, whole.offset, budget)
    finally:
        client.close()


def compact_thread(backend: Backend, thread: str, text: str | None = None) -> Compacted:
    """Record a summary of everything up to the thread's head, for its next step to carry as
    ``compact``: ``text`` as given, else one written now by the configured model.

    ``{thread, head, summary, characters}``. The summary applies while the head stays where
    it is: the next step (by any agent on the agent kit) records it.
    """
    from uwf.config.config import load_config

    tid, head_hash = require_active(backend, thread)
    head = chain.load_head(backend.nodes, head_hash)
    if isinstance(head, chain.Start):
        raise InvalidInput(f"thread {tid} has no steps yet: there is nothing to summarise")
    if backend.locks.is_running(tid):
        raise UwfError(f"thread {tid} is running a step: record the summary once it is done")
    budget = load_config(backend.root).context_budget
    if text is None:
        text = _summary_by_model(backend, head, budget)
    elif not text.strip():
        raise InvalidInput("the summary is empty")
    elif len(text) > budget // 2:
        raise InvalidInput(
            f"the summary has {len(text)} characters; the context budget (contextBudget: "
            f"{budget}) leaves room for {budget // 2}"
        )
    summary, _ = compact.request(backend.nodes, tid, head_hash, text)
    return {"thread": tid, "head": head_hash, "summary": summary, "characters": len(text)}


def step_artifacts(backend: Backend, step_hash: str) -> list[ArtifactListed]:
    """The artifacts a step recorded: ``[{path, hash, size}]``, sorted by path."""
    step = chain.require_step(backend.nodes, step_hash)
    return [a.as_json() for a in artifacts.of_detail(backend.nodes, step.payload.get("detail"))]


def extract_artifacts(backend: Backend, step_hash: str, directory: Path) -> list[ArtifactExtracted]:
    """Write a step's artifacts under ``directory`` (created if missing) byte for byte.

    Every name is checked (``artifacts.check_names``: lengths, duplicates, a file that
    another would need as a directory), every artifact read and checked, and every target
    checked, before the first file is written; an existing file is never overwritten.
    Returns the list with each ``file``.
    """
    store = backend.nodes
    step = chain.require_step(store, step_hash)
    found = artifacts.of_detail(store, step.payload.get("detail"))
    artifacts.check_names([a.path for a in found])
    base = directory.resolve()
    planned: list[tuple[Path, bytes, ArtifactExtracted]] = []
    for artifact in found:
        target = base / artifact.path
        try:
            if target.exists() or target.is_symlink():
                raise InvalidInput(f"{target} exists; --extract never overwrites a file")
            if not target.parent.resolve().is_relative_to(base):
                raise InvalidInput(f"{target} is outside {base} (a symbolic link on the way)")
            for above in target.relative_to(base).parents:
                where = base / above
                if where.exists() and not where.is_dir():
                    raise InvalidInput(f"{where} exists and is not a directory")
        except OSError as exc:
            raise InvalidInput(f"cannot write {target}: {exc.strerror or exc}") from None
        data = artifacts.decode(store, artifact)
        planned.append((target, data, {**artifact.as_json(), "file": str(target)}))
    for target, data, _ in planned:
        fsio.atomic_write(target, data)
    return [record for _, _, record in planned]


def artifact_bytes(backend: Backend, step_hash: str, path: str) -> tuple[bytes, bool]:
    """The bytes of one artifact of a step, and whether it is stored as text."""
    store = backend.nodes
    step = chain.require_step(store, step_hash)
    for artifact in artifacts.of_detail(store, step.payload.get("detail")):
        if artifact.path == path:
            return artifacts.load(store, artifact)
    raise NotFound(f"step {step_hash} has no artifact {describe(path, 100)}")
