"""Steps whose agent runs on the agent kit in this process, on any backend.

``KitRunner(backend, make_agent)`` is a step runner (``uwf.engine.step.Runner``): the engine
plans and commits as always, and instead of spawning a process the runner calls
``uwf.agent_kit.runner.execute`` with the backend and the environment the engine built for the
agent (edge prompt, artifacts directory). So the memory backend, which no other process can
open, runs real agents (``uwf-builtin`` against the scripted model server, a test agent that
leaves artifacts) exactly like the filesystem backend does.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from uwf.adapters.process import Finished
from uwf.agent_kit import args, runner
from uwf.agent_kit.context import AgentContext
from uwf.backend.base import Backend
from uwf.backend.fs import FsBackend
from uwf.backend.memory import MemoryBackend
from uwf.engine.step import StepPlan

PASSED = ("UWF_EDGE_PROMPT", "UWF_ARTIFACTS_DIR")  # what execute reads from the environment


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in PASSED}
    try:
        for key in PASSED:
            if key in env:
                os.environ[key] = env[key]
            else:
                os.environ.pop(key, None)
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class KitRunner:
    def __init__(self, backend: Backend, make_agent: Callable[[], runner.Agent]) -> None:
        self.backend = backend
        self.make_agent = make_agent
        self.envs: list[dict[str, str]] = []

    def __call__(
        self, plan: StepPlan, env: dict[str, str], should_stop: Callable[[], bool]
    ) -> Finished:
        self.envs.append(env)
        assert plan.role is not None
        with environment(env):
            target = args.kit([plan.thread, plan.role])
            h = runner.execute(self.make_agent(), target, backend=self.backend)
        return Finished(0, h + "\n", "")


def open_backend(kind: str, root: Path) -> Backend:
    """``memory`` or ``fs``: the two backends every feature must work on."""
    return MemoryBackend(root) if kind == "memory" else FsBackend(root)


class FilesAgent:
    """An agent on the kit that leaves ``files`` (path -> bytes) in ``$UWF_ARTIFACTS_DIR`` and
    answers ``output``."""

    label = "test-files"

    def __init__(self, files: dict[str, bytes], output: str) -> None:
        self.files = files
        self.output = output

    def run(self, ctx: AgentContext) -> runner.RunResult:
        where = Path(os.environ["UWF_ARTIFACTS_DIR"])
        for path, data in self.files.items():
            (where / path).parent.mkdir(parents=True, exist_ok=True)
            (where / path).write_bytes(data)
        turns = runner.store_turns(ctx, [{"role": "assistant", "content": self.output}])
        detail_type = ctx.store.put_schema(runner.detail_schema("FilesDetail", {}))
        return runner.RunResult(self.output, ctx.store.put(detail_type, {"turns": turns}))

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> Any:
        return None
