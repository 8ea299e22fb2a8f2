"""The backend conformance classes (tests/backend_contract.py) run against every backend: the
memory and filesystem backends, and PostgreSQL on the server the tests start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backend_contract import BackendContract, SharedBackendContract
from uwf.backend.base import Backend
from uwf.backend.fs import FsBackend
from uwf.backend.memory import MemoryBackend


class TestMemoryBackend(BackendContract):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> Backend:
        return MemoryBackend(tmp_path)


class TestFsBackend(SharedBackendContract):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> Backend:
        return FsBackend(tmp_path / "store")

    @pytest.fixture
    def spec(self, tmp_path: Path) -> str:
        return str(tmp_path / "store")


class TestPostgresBackend(SharedBackendContract):
    # a foreground holder's row stays when it releases (unbelieved: its session holds no
    # lock); a background run's goes (docs/format.md, "The PostgreSQL backend")
    released_lock_leaves_something = True

    @pytest.fixture
    def backend(self, pg_url: str, tmp_path: Path) -> Iterator[Backend]:
        from uwf.backend import open_backend

        backend = open_backend(pg_url)
        yield backend
        backend.close()

    @pytest.fixture
    def spec(self, pg_url: str) -> str:
        return pg_url
