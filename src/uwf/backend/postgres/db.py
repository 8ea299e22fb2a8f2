"""Connections to PostgreSQL: the one module that imports the driver (psycopg2).

A ``Db`` holds one connection per thread (autocommit; ``transaction()`` for the statements
that must commit together), opens it lazily, opens a new one when the old one broke (a
database restart, a lost network), and turns every driver error into a ``UwfError`` whose
message never holds the password (docs/scale-out.md, "What each failure does").

The driver is psycopg2 (``pip install 'uwf[postgres]'``): its import costs a fifth of
psycopg 3's, which pulls asyncio, importlib.metadata and ssl into every process that opens
the store (docs/performance.md, "PostgreSQL"). Parameters are quoted by the driver with
libpq's escaping, never pasted into SQL by uwf.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from uwf.util.errors import UwfError

if TYPE_CHECKING:
    import psycopg2.extensions

INSTALL_HINT = "pip install 'uwf[postgres]'"
SCHEMES = ("postgresql://", "postgres://")


class StoreUnavailable(UwfError):
    """The database cannot be reached or refused the connection."""


def is_url(spec: str) -> bool:
    return spec.startswith(SCHEMES)


def redacted_url(url: str) -> str:
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
    text = text.replace(url, redacted_url(url))
    if secret:
        text = text.replace(secret, "***")
    return text


class _SslLeftToLibpq:
    """A finder that refuses ``import ssl`` in one thread while psycopg2 loads (``require``).

    psycopg2's extension imports Python's ``ssl`` only to install OpenSSL's thread-locking
    callbacks before libpq does, which OpenSSL 1.1 and later no longer use; when the import
    fails it lets libpq initialise OpenSSL itself, as for any C program (psycopg2's own
    fallback). Python's ``ssl`` is then never loaded by a step on PostgreSQL, a third of the
    driver's import (docs/performance.md, "PostgreSQL"); connections, with TLS or without,
    are libpq's either way. Only the importing thread is refused, only while it imports the
    driver, and only when no one has imported ``ssl`` yet."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name == "ssl" and threading.get_ident() == self.thread:
            raise ImportError("ssl is left to libpq")
        return None


def require() -> Any:
    """The psycopg2 module, or one clear error naming the extra that installs it."""
    if "psycopg2" not in sys.modules and "ssl" not in sys.modules:
        finder = _SslLeftToLibpq()
        sys.meta_path.insert(0, finder)
        try:
            with contextlib.suppress(ImportError):  # then imported below, with ssl
                import psycopg2
        finally:
            sys.meta_path.remove(finder)
    try:
        import psycopg2
    except ImportError:
        raise UwfError(f"PostgreSQL support is not installed: {INSTALL_HINT}") from None
    return psycopg2


@functools.cache
def _factory() -> Any:
    """The driver's connection class, with room for what uwf keeps per session: the step
    locks it holds (``held``) and whether it listens for head moves (``listening``)."""
    import psycopg2.extensions

    class Conn(psycopg2.extensions.connection):
        held: set[int]
        listening: bool

    return Conn


def run(conn: Any, sql: str, params: Sequence[Any] = ()) -> psycopg2.extensions.cursor:
    """Execute one statement on ``conn``; its cursor (``fetchone``, ``fetchall``,
    ``rowcount``). Without parameters nothing is interpolated (a ``%`` stays a ``%``)."""
    cur: psycopg2.extensions.cursor = conn.cursor()
    cur.execute(sql, tuple(params) if params else None)
    return cur


def usable(conn: Any) -> bool:
    """Whether ``conn`` is open and not known to be broken."""
    return conn is not None and not conn.closed


class Db:
    """Connections to one database, one per thread, and error translation."""

    def __init__(self, url: str, connect_timeout: int = 10) -> None:
        self.url = url
        self.redacted_url = redacted_url(url)
        self.connect_timeout = connect_timeout
        self._local = threading.local()
        self._all: list[Any] = []
        self._mutex = threading.Lock()
        self.on_connect: list[Any] = []  # callables run once on every new connection

    # -- connections --------------------------------------------------------------------
    def connect(self) -> Any:
        """A new autocommit connection (the caller owns it)."""
        driver = require()
        try:
            conn = driver.connect(
                self.url,
                connection_factory=_factory(),
                connect_timeout=self.connect_timeout,
                application_name="uwf",
            )
            conn.autocommit = True
        except driver.Error as exc:
            raise self.unavailable(exc) from None
        conn.held = set()
        conn.listening = False
        return conn

    def conn(self) -> Any:
        """This thread's connection, (re)opened when missing or broken."""
        conn = getattr(self._local, "conn", None)
        if usable(conn):
            return conn
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        conn = self.connect()
        self._local.conn = conn
        self._local.depth = 0
        with self._mutex:
            self._all.append(conn)
        for hook in self.on_connect:
            hook(self)
        return conn

    def current(self) -> Any:
        """This thread's connection as it is (None before the first statement)."""
        return getattr(self._local, "conn", None)

    def close(self) -> None:
        with self._mutex:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()
        self._local = threading.local()

    # -- statements ---------------------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg2.extensions.cursor:
        with self.errors():
            return run(self.conn(), sql, params)

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self.errors():
            row: tuple[Any, ...] | None = run(self.conn(), sql, params).fetchone()
            return row

    def one_unless(self, sql: str, code: str) -> tuple[Any, ...] | None:
        """``one``, or None when the server refuses it with SQLSTATE ``code`` (e.g. a table
        that does not exist yet)."""
        driver = require()
        with self.errors():
            try:
                row: tuple[Any, ...] | None = run(self.conn(), sql).fetchone()
            except driver.Error as exc:
                if getattr(exc, "pgcode", None) != code:
                    raise
                return None
            return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.errors():
            return list(run(self.conn(), sql, params).fetchall())

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Statements in the block commit together, or not at all (a block inside another
        is a savepoint of it)."""
        with self.errors():
            conn = self.conn()
            depth = getattr(self._local, "depth", 0)
            name = f"uwf_{depth}"
            run(conn, "BEGIN" if depth == 0 else f"SAVEPOINT {name}")
            self._local.depth = depth + 1
            try:
                yield
            except BaseException:
                self._local.depth = depth
                if usable(conn):
                    with contextlib.suppress(Exception):
                        run(conn, "ROLLBACK" if depth == 0 else f"ROLLBACK TO SAVEPOINT {name}")
                raise
            self._local.depth = depth
            run(conn, "COMMIT" if depth == 0 else f"RELEASE SAVEPOINT {name}")

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Driver errors as UwfErrors (connection problems: StoreUnavailable)."""
        driver = require()
        try:
            yield
        except (driver.OperationalError, driver.InterfaceError) as exc:
            raise self.unavailable(exc) from None
        except driver.Error as exc:
            raise self.failed(exc) from None

    def failed(self, exc: BaseException) -> UwfError:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        return UwfError(f"PostgreSQL error at {self.redacted_url}: {scrub(first, self.url)}")

    def unavailable(self, exc: BaseException) -> StoreUnavailable:
        text = " ".join(str(exc).split()) or type(exc).__name__
        return StoreUnavailable(
            f"cannot reach the store {self.redacted_url}: {scrub(text, self.url)}"
        )
