"""Connections to PostgreSQL: the one module that imports psycopg's connection machinery.

A ``Db`` holds one connection per thread (autocommit; ``transaction()`` for the statements
that must commit together), opens it lazily, opens a new one when the old one broke (a
database restart, a lost network), and turns every driver error into a ``UwfError`` whose
message never holds the password (docs/scale-out.md, "What each failure does").
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from uwf.util.errors import UwfError

if TYPE_CHECKING:
    import psycopg

INSTALL_HINT = "pip install 'uwf[postgres]'"
SCHEMES = ("postgresql://", "postgres://")


class StoreUnavailable(UwfError):
    """The database cannot be reached or refused the connection."""


def is_url(spec: str) -> bool:
    return spec.startswith(SCHEMES)


def shown(url: str) -> str:
    """The URL without its password (and without query options, which may hold one)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        user = f"{parts.username}@" if parts.username else ""
    except ValueError:
        return "postgresql://(unreadable URL)"
    if ":" in host:
        host = f"[{host}]"
    return f"postgresql://{user}{host}{port}{parts.path}"


def _secret(url: str) -> str | None:
    try:
        return urlsplit(url).password or None
    except ValueError:
        return None


def scrub(text: str, url: str) -> str:
    """``text`` with the URL's password (and the URL itself) taken out."""
    secret = _secret(url)
    text = text.replace(url, shown(url))
    if secret:
        text = text.replace(secret, "***")
    return text


def require() -> Any:
    """The psycopg module, or one clear error naming the extra that installs it."""
    try:
        import psycopg
    except ImportError:
        raise UwfError(f"PostgreSQL support is not installed: {INSTALL_HINT}") from None
    return psycopg


class Db:
    """Connections to one database, one per thread, and error translation."""

    def __init__(self, url: str, connect_timeout: int = 10) -> None:
        self.url = url
        self.shown = shown(url)
        self.connect_timeout = connect_timeout
        self._local = threading.local()
        self._all: list[psycopg.Connection[Any]] = []
        self._mutex = threading.Lock()
        self.on_connect: list[Any] = []  # callables run once on every new connection

    # -- connections --------------------------------------------------------------------
    def connect(self) -> psycopg.Connection[Any]:
        """A new autocommit connection (the caller owns it)."""
        driver = require()
        try:
            conn: psycopg.Connection[Any] = driver.connect(
                self.url,
                autocommit=True,
                connect_timeout=self.connect_timeout,
                application_name="uwf",
            )
        except driver.Error as exc:
            raise self.unavailable(exc) from None
        return conn

    def conn(self) -> psycopg.Connection[Any]:
        """This thread's connection, (re)opened when missing or broken."""
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        conn = self.connect()
        self._local.conn = conn
        with self._mutex:
            self._all.append(conn)
        for hook in self.on_connect:
            hook(self)
        return conn

    def close(self) -> None:
        with self._mutex:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()
        self._local = threading.local()

    # -- statements ---------------------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        with self.errors():
            return self.conn().execute(sql, params)

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self.errors():
            row: tuple[Any, ...] | None = self.execute(sql, params).fetchone()
            return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.errors():
            return list(self.execute(sql, params).fetchall())

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Statements in the block commit together, or not at all."""
        with self.errors(), self.conn().transaction():
            yield

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Driver errors as UwfErrors (connection problems: StoreUnavailable)."""
        psycopg = require()
        try:
            yield
        except psycopg.OperationalError as exc:
            raise self.unavailable(exc) from None
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UwfError(f"PostgreSQL error at {self.shown}: {scrub(first, self.url)}") from None

    def unavailable(self, exc: BaseException) -> StoreUnavailable:
        text = " ".join(str(exc).split()) or type(exc).__name__
        return StoreUnavailable(f"cannot reach the store {self.shown}: {scrub(text, self.url)}")
