"""A real PostgreSQL server for the tests, started from the server binaries on loopback.

One server per test session (per xdist worker), in a temp directory, on a free port, with a
password (so that the tests can check it never leaks). ``fsync`` is off for speed: safe against
a crash of the server (the restart test kills it), not of the machine. ``synchronous_commit``
stays on: off, a server crash loses commits it already acknowledged (a step would then be run
twice). ``PgServer(durable=True)`` (the benchmark's) keeps PostgreSQL's defaults instead —
``fsync``, ``full_page_writes`` and ``synchronous_commit`` on, the default
``shared_buffers`` — so that every commit costs what it costs on a real server. Each test that
needs a store gets the worker's one database, emptied (``PgServer.empty``: ~10 ms, where a new
database and its migrations took ~150 ms); a test that needs a database uwf never touched
takes a fresh one (``PgServer.fresh``). ``initdb`` refuses to run as root: as root, the server
runs as the unprivileged ``postgres`` user that Debian's package creates (``.ci/run`` installs
the package where it is missing). ``UWF_PG_BIN`` overrides where the binaries are.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

USER = "uwf"
PASSWORD = "s3cret-pw-9f2k"  # never printed, logged or stored by uwf: tests grep for it


class Conn:
    """A psycopg2 connection for the tests' own statements: ``execute`` returns the cursor
    (``fetchone``, ``fetchall``, ``rowcount``); as a context manager it commits (when not in
    autocommit) and closes."""

    def __init__(self, url: str, autocommit: bool = False) -> None:
        import psycopg2

        self.raw = psycopg2.connect(url)
        self.raw.autocommit = autocommit

    def execute(self, sql: str, params: Any = ()) -> Any:
        cur = self.raw.cursor()
        cur.execute(sql, tuple(params) if params else None)
        return cur

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        try:
            if not self.raw.autocommit and self.raw.closed == 0:
                if kind is None:
                    self.raw.commit()
                else:
                    self.raw.rollback()
        finally:
            self.close()


def connect(url: str, autocommit: bool = False) -> Conn:
    return Conn(url, autocommit)


def pg_bin() -> Path:
    env = os.environ.get("UWF_PG_BIN")
    if env:
        return Path(env)
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    def __init__(self, durable: bool = False) -> None:
        self.durable = durable
        self.bin = pg_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="uwf-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        self._names = itertools.count()
        self.proc: subprocess.Popen[bytes] | None = None

    def _cmd(self, *argv: str) -> list[str]:
        if self.as_root:
            return ["runuser", "-u", "postgres", "--", *argv]
        return list(argv)

    def init(self) -> None:
        os.chmod(self.dir, 0o755)
        pwfile = self.dir / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_root:
            shutil.chown(self.dir, "postgres")
            shutil.chown(pwfile, "postgres")
        subprocess.run(
            self._cmd(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                USER,
                "-E",
                "UTF8",
                "--locale=C",
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "--no-sync",
            ),
            check=True,
            capture_output=True,
        )
        fast = (
            "" if self.durable else "fsync = off\nfull_page_writes = off\nshared_buffers = 32MB\n"
        )
        with open(self.data / "postgresql.conf", "a") as fh:
            fh.write(
                f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.dir}'\n{fast}"
                "max_connections = 200\nlog_min_messages = fatal\n"
            )

    def start(self) -> None:
        with open(self.dir / "server.log", "ab") as log:  # the server keeps its own copy
            self.proc = subprocess.Popen(
                self._cmd(str(self.bin / "postgres"), "-D", str(self.data)),
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + 30
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                ready = subprocess.run(
                    [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                    capture_output=True,
                )
                if ready.returncode == 0:
                    return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (self.dir / "server.log").read_text(errors="replace")
                raise RuntimeError(f"PostgreSQL did not start: {log[-2000:]}")
            time.sleep(0.05)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: clean; ``immediate``: like a crash)."""
        subprocess.run(
            self._cmd(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"),
            capture_output=True,
        )
        if self.proc is not None:
            self.proc.wait(30)
            self.proc = None

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def url(self, db: str = "postgres", password: bool = True) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.port}/{db}"

    def admin(self, sql: str) -> None:
        with connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)

    def fresh(self) -> str:
        """The URL of a new, empty database."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE template0")
        return self.url(name)

    def empty(self, url: str) -> str:
        """``url``'s database as uwf leaves a new store: its tables emptied (sequences too) at the
        current schema, every other session ended first (a worker a test left behind, a lock
        holder). A database at another version or missing a table — a test that migrated,
        damaged or dropped it — is dropped and made anew. Returns the URL to use."""
        from uwf.backend.postgres import schema

        name = url.rsplit("/", 1)[1]
        self.admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )
        with connect(url, autocommit=True) as conn:
            tables = [
                str(row[0])
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
                )
            ]
            if not tables:
                return url  # never used: uwf migrates it on first open
            found = None
            if "uwf_schema" in tables:
                row = conn.execute("SELECT max(version) FROM uwf_schema").fetchone()
                found = row[0] if row else None
            if found == schema.VERSION and set(tables) == self._tables(conn):
                wiped = ", ".join(t for t in tables if t != "uwf_schema")
                conn.execute(f"TRUNCATE {wiped} RESTART IDENTITY")
                return url
        self.drop(url)
        self.admin(f"CREATE DATABASE {name} TEMPLATE template0")
        return url

    _known: set[str] | None = None

    def _tables(self, conn: object) -> set[str]:
        """The tables of a store at the current schema, read once from a store made for it."""
        if self._known is None:
            from uwf.backend import open_backend

            probe = self.fresh()
            with open_backend(probe) as backend:
                backend.threads.active()  # the first statement migrates the store
            with connect(probe, autocommit=True) as c:
                rows = c.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                self._known = {str(r[0]) for r in rows}
            self.drop(probe)
        return self._known

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with contextlib.suppress(Exception):
            self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def close(self) -> None:
        if self.proc is not None:
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def running() -> Iterator[PgServer]:
    server = PgServer()
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.close()
