"""The PostgreSQL backend through the real CLI: choosing it, its schema and migrations, the
password kept out of every output, log and node, a missing extra, an unreachable server,
a killed connection, ``store copy`` both ways, and ``cas verify/reindex/gc``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import pgserver
from support import EXAMPLES, ONE_REJECTION
from uwf.backend import open_backend
from uwf.backend.postgres import PgBackend, schema
from uwf.util.ulid import ThreadId


def shown(url: str) -> str:
    return url.replace(f":{pgserver.PASSWORD}@", "@")


def run_thread(cli: Any, agent: str, *store: str) -> str:
    assert cli(*store, "workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    thread = cli(*store, "thread", "start", "solve-issue", "-p", "Fix the bug").json()["thread"]
    r = cli(*store, "thread", "step", thread, "-c", "10", "--agent", agent)
    assert r.code == 0, r.err
    return str(thread)


def everything_under(path: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(path.rglob("*")) if p.is_file())


def test_store_init_creates_the_schema_once(cli: Any, pg_fresh_url: str) -> None:
    pg_url = pg_fresh_url
    first = cli("--store", pg_url, "store", "init")
    assert first.code == 0, first.err
    assert first.json() == {"store": shown(pg_url), "schema": schema.VERSION, "from": 0}
    again = cli("--store", pg_url, "store", "init")
    assert again.json() == {
        "store": shown(pg_url),
        "schema": schema.VERSION,
        "from": schema.VERSION,
    }


def test_first_use_creates_the_schema_and_migrations_run_once(pg_fresh_url: str) -> None:
    pg_url = pg_fresh_url
    with open_backend(pg_url) as backend:
        assert backend.threads.active() == []  # the first statement created the schema
        assert isinstance(backend, PgBackend)
        assert schema.version(backend.db) == schema.VERSION
        later = [*schema.MIGRATIONS, "CREATE TABLE uwf_later (x integer)"]
        v = schema.VERSION
        assert schema.ensure(backend.db, later) == {"from": v, "to": v + 1}
        assert schema.ensure(backend.db, later) == {"from": v + 1, "to": v + 1}
        assert backend.db.one("SELECT count(*) FROM uwf_later") == (0,)
    with pytest.raises(Exception) as err, open_backend(pg_url) as newer:
        newer.threads.active()
    assert str(err.value) == (
        f"the store {shown(pg_url)} has schema version {schema.VERSION + 1}, newer than this "
        f"uwf knows ({schema.VERSION}): "
        "upgrade uwf"
    )


# What migration 12 -> 13 adds, taken away again: a store as uwf at schema 12 left it.
BACK_TO_12 = """
DROP TRIGGER uwf_threads_moved ON uwf_threads;
DROP FUNCTION uwf_head_moved(), uwf_claim(text, bigint, bigint, bigint, boolean, integer, text,
    bigint, text, text, text, text), uwf_release(text, bigint, boolean),
    uwf_land(text, text, text, bigint, text[], text[], text[], bigint[], text[], text, text),
    uwf_put_many(text[], text[], text[], bigint, bigint, boolean[]);
ALTER TABLE uwf_holders SET LOGGED;
UPDATE uwf_schema SET version = 12;
"""


def test_a_store_that_lived_at_schema_12_migrates_to_13_and_steps_on(
    cli_proc: Any, pg_url: str, scenario: Any
) -> None:
    """Schema 13 (one commit per step: docs/format.md, "The PostgreSQL backend") on a store
    with threads, nodes, an archive and a holder row: the first command of a new uwf migrates
    it, nothing is lost, the holders turn unlogged, and steps go on from the same heads."""
    from uwf.backend.postgres.db import Db

    agent = scenario(ONE_REJECTION)
    done = run_thread(cli_proc, agent, "--store", pg_url)  # completed: in the archive
    store = ("--store", pg_url)
    thread = cli_proc(*store, "thread", "start", "solve-issue", "-p", "Go on").json()["thread"]
    assert cli_proc(*store, "thread", "step", thread, "--agent", agent).code == 0
    with pgserver.connect(pg_url, autocommit=True) as conn:
        conn.execute(BACK_TO_12)
        held = {row[0] for row in conn.execute("SELECT thread FROM uwf_holders").fetchall()}
        assert held == {done, thread}  # finished foreground steps leave their (unbelieved) rows
    db = Db(pg_url)
    try:
        assert schema.tables_version(db) == 12  # the markers read it as 12
    finally:
        db.close()
    r = cli_proc(*store, "thread", "step", thread, "--agent", agent)  # migrates, then steps
    assert r.code == 0, r.err
    assert r.json()["thread"] == thread and r.json()["status"] == "active"
    with pgserver.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM uwf_schema").fetchall() == [(schema.VERSION,)]
        kind = conn.execute("SELECT relpersistence FROM pg_class WHERE relname = 'uwf_holders'")
        assert kind.fetchone() == ("u",)
        rows = conn.execute("SELECT thread FROM uwf_holders").fetchall()
        assert {row[0] for row in rows} == held  # kept through the migration
    shown_thread = cli_proc(*store, "thread", "show", thread).json()
    assert shown_thread["status"] == "idle" and shown_thread["steps"] == 2
    assert cli_proc(*store, "thread", "show", done).json()["status"] == "completed"
    finish = cli_proc(*store, "thread", "step", thread, "-c", "10", "--agent", agent)
    assert finish.code == 0, finish.err
    assert cli_proc(*store, "thread", "show", thread).json()["status"] == "completed"


def test_the_store_is_chosen_by_option_environment_or_config(
    cli: Any, root: Path, pg_url: str, scenario: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = scenario(ONE_REJECTION)
    thread = run_thread(cli, agent, "--store", pg_url)
    assert not (root / "threads.yaml").exists() and not (root / "cas").exists()
    assert cli("thread", "show", thread).code == 1  # the storage root knows nothing of it
    monkeypatch.setenv("UWF_STORE", pg_url)
    assert cli("thread", "show", thread).json()["status"] == "completed"
    monkeypatch.delenv("UWF_STORE")
    root.mkdir(exist_ok=True)
    (root / "config.yaml").write_text(f"store: {pg_url}\n")
    assert cli("thread", "show", thread).json()["status"] == "completed"
    other = root.parent / "elsewhere"
    assert cli("--store", str(other), "thread", "list").json() == []  # the option wins
    (root / "config.yaml").write_text("store: [not, a, url]\n")
    bad = cli("thread", "list")
    assert (bad.code, bad.err) == (
        1,
        "error: invalid config.yaml: store: expected a URL or a directory, got a list\n",
    )


def test_the_password_is_never_printed_logged_or_stored(
    cli_proc: Any, root: Path, pg_url: str, scenario: Any, agent_script: Any
) -> None:
    mock = scenario(ONE_REJECTION).split()
    seen = root.parent / "agent-env.json"
    spy = agent_script(
        f"import json\nopen({str(seen)!r}, 'w').write(json.dumps(dict(os.environ)))\n"
        f"os.execvp({mock[0]!r}, {mock!r} + sys.argv[1:])\n"
    )
    outputs = []
    for args in (
        ["workflow", "put", str(EXAMPLES / "solve-issue.yaml")],
        ["thread", "start", "solve-issue", "-p", "task"],
    ):
        r = cli_proc("--store", pg_url, *args)
        assert r.code == 0, r.err
        outputs.append(r.out + r.err)
    thread = json.loads(outputs[-1])["thread"]
    for args in (
        ["thread", "step", thread, "-c", "10", "--agent", spy],
        ["thread", "show", thread],
        ["thread", "read", thread],
        ["thread", "list", "--all"],
        ["store", "init"],
        ["cas", "verify"],
        ["thread", "step", thread],  # an error line names the store too
    ):
        r = cli_proc("--store", pg_url, *args)
        outputs.append(r.out + r.err)
    env = json.loads(seen.read_text())
    assert env["UWF_STORE"] == pg_url  # the agent opened the same store
    everything = "\n".join(outputs) + everything_under(root)
    assert "logs" in {p.name for p in root.iterdir()}
    with open_backend(pg_url) as backend:
        everything += "\n".join(
            n.payload.__repr__() for n in map(backend.nodes.get, backend.nodes.iter_hashes())
        )
    assert pgserver.PASSWORD not in everything
    assert shown(pg_url) in everything  # the store is named, without its password


def test_a_missing_extra_is_one_clear_error(pg_url: str, root: Path) -> None:
    code = (
        "import sys; sys.modules['psycopg2'] = None\n"
        "from uwf.cli.main import run\n"
        f"sys.exit(run(['--store', {pg_url!r}, 'thread', 'list']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == "error: PostgreSQL support is not installed: pip install 'uwf[postgres]'\n"


def test_the_driver_loads_without_pythons_ssl_and_works_beside_it(pg_url: str) -> None:
    """psycopg2 is loaded without Python's ``ssl`` (libpq initialises OpenSSL itself: a
    third of the driver's import); a process that imports ``ssl`` afterwards, or had it
    before, still uses the store, and ``import ssl`` works in the same process."""
    probe = (
        "import sys\n"
        "{before}"
        "from uwf.cli.main import run\n"
        f"code = run(['--store', {pg_url!r}, 'thread', 'list'])\n"
        "loaded = 'ssl' in sys.modules\n"
        "import ssl\n"
        f"again = run(['--store', {pg_url!r}, 'thread', 'list'])\n"
        "print(code, again, loaded, ssl.OPENSSL_VERSION.startswith('OpenSSL'), file=sys.stderr)\n"
    )
    for before, loaded in (("", "False"), ("import ssl\n", "True")):
        code = probe.format(before=before)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stderr.splitlines()[-1] == f"0 0 {loaded} True"
        assert json.loads(r.stdout.splitlines()[0]) == json.loads(r.stdout.splitlines()[1])


def test_an_unreachable_store_is_one_line_without_the_password(cli: Any, pg_server: Any) -> None:
    url = pg_server.url("nowhere").replace(str(pg_server.port), "1")
    r = cli("--store", url, "thread", "list")
    assert r.code == 1 and r.out == ""
    assert r.err.startswith(f"error: cannot reach the store {shown(url)}: ")
    assert len(r.err.splitlines()) == 1 and pgserver.PASSWORD not in r.err
    wrong = pg_server.url("postgres").replace(pgserver.PASSWORD, "wrong-password")
    r = cli("--store", wrong, "thread", "list")
    assert r.code == 1 and "password authentication failed" in r.err
    assert "wrong-password" not in r.err


def test_a_holder_whose_connection_is_killed_releases_the_lock(pg_url: str) -> None:
    """A lost network or a killed session releases the lock at once; the head's
    compare-and-swap still lets only one of the two holders record a step."""
    t = ThreadId("01M8A000000000000000000001")
    with open_backend(pg_url) as first, open_backend(pg_url) as second:
        with first.locks.step(t, wait=False):
            holder = second.locks.holder(t)
            assert holder is not None and holder.host is not None
            second.db.execute(
                "SELECT pg_terminate_backend(backend_pid) FROM uwf_holders WHERE thread = %s",
                (t,),
            )
            # pg_terminate_backend only signals the session: it ends a moment later
            deadline = time.monotonic() + 10
            while second.locks.running() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert second.locks.running() == set()
            with second.locks.step(t, wait=False):  # the lock is free for another holder
                assert second.locks.holder(t) is not None
        with first.locks.step(t, wait=False):  # the first holder recovers with a new session
            pass


def test_store_copy_both_ways_is_idempotent_and_verified(
    cli: Any, root: Path, tmp_path: Path, pg_url: str, scenario: Any
) -> None:
    agent = scenario(ONE_REJECTION)
    done = run_thread(cli, agent)
    started = cli("thread", "start", "solve-issue", "-p", "still running").json()["thread"]
    assert cli("thread", "step", started, "--agent", agent).code == 0
    copied = cli("store", "copy", str(root), pg_url)
    assert copied.code == 0, copied.err
    out = copied.json()
    assert out["verified"] is True and out["from"] == str(root) and out["to"] == shown(pg_url)
    assert out["nodes"]["copied"] > 10 and out["nodes"]["present"] == 0
    assert (out["threads"], out["history"], out["registry"]) == (
        {"copied": 1, "present": 0},
        {"copied": 1, "present": 0},
        {"copied": 1, "present": 0},
    )
    again = cli("store", "copy", str(root), pg_url).json()
    assert again["nodes"] == {"copied": 0, "present": out["nodes"]["copied"]}
    assert again["threads"]["copied"] == again["history"]["copied"] == 0
    for args in (["thread", "steps", done], ["thread", "show", started], ["workflow", "list"]):
        assert cli(*args).out == cli("--store", pg_url, *args).out
    with open_backend(root) as src, open_backend(pg_url) as dst:
        meta = [h for h in src.nodes.index(src.nodes.ensure_meta())]
        assert dst.nodes.index(meta[0]) == meta
    back = tmp_path / "back"
    assert cli("store", "copy", pg_url, str(back)).json()["verified"] is True
    assert (
        cli("--store", str(back), "thread", "steps", done).out == cli("thread", "steps", done).out
    )
    step = cli("--store", pg_url, "thread", "step", started, "-c", "10", "--agent", agent)
    assert step.code == 0, step.err
    differs = cli("store", "copy", str(root), pg_url)  # TO moved on since: left as it is
    assert differs.code == 1
    assert differs.err.splitlines()[-1] + "\n" == (
        "error: store copy: TO differs from FROM, left as it is: "
        f"{started} is archived in TO but active in FROM\n"
    )


def test_store_copy_finishes_after_a_crash(
    cli: Any, root: Path, pg_url: str, scenario: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = scenario(ONE_REJECTION)
    threads = [run_thread(cli, agent) for _ in range(2)]
    from uwf.backend.postgres import state
    from uwf.engine.store import copy as storecopy

    real = state.PgThreads.archive
    calls = []

    def crash_on_second(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        if len(calls) == 2:
            raise SystemExit("crash")  # mid-copy: one thread archived, the other active
        return real(self, *args, **kwargs)

    monkeypatch.setattr(state.PgThreads, "archive", crash_on_second)
    with pytest.raises(SystemExit), open_backend(root) as src, open_backend(pg_url) as dst:
        storecopy.copy_store(src, dst)
    monkeypatch.setattr(state.PgThreads, "archive", real)
    out = cli("store", "copy", str(root), pg_url).json()
    assert out["verified"] is True and out["history"] == {"copied": 1, "present": 1}
    for t in threads:
        assert cli("--store", pg_url, "thread", "show", t).json()["status"] == "completed"


def test_cas_verify_reindex_and_gc_on_postgres(cli: Any, pg_url: str, scenario: Any) -> None:
    store = ["--store", pg_url]
    run_thread(cli, scenario(ONE_REJECTION), *store)
    orphan = cli(*store, "cas", "put-text", "nobody links to me").json()["hash"]
    verify = cli(*store, "cas", "verify").json()
    assert verify["ok"] is True and verify["scanned"] > 10
    with open_backend(pg_url) as backend:
        text_type = backend.nodes.require(orphan).type
        index = backend.nodes.index(text_type)
        backend.nodes.write_index({})
        assert backend.nodes.index(text_type) == []
        assert cli(*store, "cas", "reindex").json()["nodes"] == verify["scanned"]
        assert backend.nodes.index(text_type) == index
    dry = cli(*store, "cas", "gc", "--grace", "0", "--dry-run").json()
    assert dry["collected"] >= 1 and dry["dryRun"] is True
    gc = cli(*store, "cas", "gc", "--grace", "0").json()
    assert gc["collected"] == dry["collected"]
    assert cli(*store, "cas", "has", orphan).json() == {"exists": False}
    assert cli(*store, "cas", "verify").json()["ok"] is True


def test_store_copy_leaves_a_registry_entry_that_differs_unless_asked(
    cli: Any, root: Path, pg_url: str, tmp_path: Path
) -> None:
    """A registry entry naming another version in TO is a conflict, like a thread that
    differs: reported and left as it is, unless --overwrite."""
    assert cli("workflow", "put", EXAMPLES / "solve-issue.yaml").code == 0
    ours = cli("workflow", "show", "solve-issue").json()["hash"]
    other = tmp_path / "solve-issue.yaml"
    text = (EXAMPLES / "solve-issue.yaml").read_text(encoding="utf-8")
    other.write_text(text.replace("Plan the work", "Plan the change"), encoding="utf-8")
    theirs = cli("--store", pg_url, "workflow", "put", other).json()["hash"]
    assert theirs != ours
    refused = cli("store", "copy", str(root), pg_url)
    assert (refused.code, refused.out) == (1, "")
    assert refused.err.splitlines()[-1] == (
        "error: store copy: TO differs from FROM, left as it is: registry entry solve-issue "
        f"is {theirs} in TO, {ours} in FROM"
    )
    assert cli("--store", pg_url, "workflow", "show", "solve-issue").json()["hash"] == theirs
    forced = cli("store", "copy", str(root), pg_url, "--overwrite")
    assert forced.code == 0, forced.err
    assert forced.json()["registry"] == {"copied": 1, "present": 0}
    assert forced.json()["verified"] is True
    assert cli("--store", pg_url, "workflow", "show", "solve-issue").json()["hash"] == ours


@pytest.mark.parametrize(
    "url",
    [
        "postgressql://uwf:secret@db/uwf",  # a typo
        "mysql://uwf@db/uwf",
        "postgresql+asyncpg://uwf@db/uwf",  # another driver's spelling
        "file:///tmp/store",
    ],
)
def test_a_store_url_uwf_cannot_open_is_an_error(cli_proc: Any, tmp_path: Path, url: str) -> None:
    """Not a directory named after the URL (a fleet with a typo used to idle forever)."""
    scheme = url.split("://")[0]
    for args, env in ((["--store", url], {}), ([], {"UWF_STORE": url})):
        r = cli_proc(*args, "workflow", "put", EXAMPLES / "solve-issue.yaml", env=env)
        assert (r.code, r.out) == (1, "")
        assert r.err == (
            f"error: cannot open the store {url.replace(':secret@', ':***@')}: unknown URL "
            f"scheme {scheme}:// (a store is a directory path, or a PostgreSQL URL: "
            "postgresql://, postgres://, postgresql+psycopg://, postgresql+psycopg2://)\n"
        )
    assert list(Path.cwd().iterdir()) == []  # nothing created where uwf runs


def test_sqlalchemy_spelling_of_the_url_is_accepted(cli: Any, pg_url: str) -> None:
    alias = pg_url.replace("postgresql://", "postgresql+psycopg://", 1)
    put = cli("--store", alias, "workflow", "put", EXAMPLES / "solve-issue.yaml")
    assert put.code == 0, put.err
    assert cli("--store", pg_url, "workflow", "list").json()[0]["name"] == "solve-issue"
    assert cli("--store", alias, "store", "init").json()["store"] == shown(pg_url)
