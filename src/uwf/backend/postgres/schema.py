"""The database schema of the PostgreSQL backend, versioned (docs/format.md, "The PostgreSQL
backend").

``MIGRATIONS[n]`` brings a store from version ``n`` to ``n + 1``; ``uwf_schema`` holds the
version a store is at. ``ensure`` runs on every first connection of a process: one query when
the store is current, the missing migrations (under an advisory lock, in one transaction)
when it is older, an error when it is newer than this uwf knows.

Before it migrates, ``ensure`` checks that the tables are those of the version the row says
(``MARKERS``: what each migration created): a row set back by hand or restored from another
database would run migrations over tables that already have them, and every command would
fail with the server's ``column … already exists``. Such a store is refused with one line
naming both versions and the repair (docs/reliability.md, "Repairing damaged state").
"""

from __future__ import annotations

from uwf.backend.postgres.db import Db
from uwf.util.errors import Damaged, UwfError

# Advisory lock keys of the fixed locks (thread step locks use 63-bit hashes of the id).
INIT_KEY = 0x75_77_66_00_01
GC_KEY = 0x75_77_66_00_02
SWEEP_KEY = 0x75_77_66_00_03
REGISTRY_KEY = 0x75_77_66_00_04

# The SQLSTATEs uwf's functions raise (class "U", no standard one uses it)
BUSY = "U0B01"  # uwf_claim: another session holds the step lock
COLLISION = "U0C01"  # uwf_land: a node stored under the hash has other content
NO_TYPE = "U0T01"  # uwf_land: a new node's type is not stored
UNDEFINED_TABLE = "42P01"

# 12 -> 13: one durable commit per step (docs/format.md, "The PostgreSQL backend", "One commit
# per step"). Holder rows are UNLOGGED: they describe sessions, which a server crash ends, and
# are believed only while their session holds the lock, so they need no WAL, and a commit that
# wrote only them is flushed asynchronously. A head move or an archive notifies the channel
# ``uwf_<thread>`` (a step listening there learns at once that its thread moved, without
# polling the head). ``uwf_claim``: the step lock, the holder row, the listen, then the
# thread's row read under the lock (each statement of a function reads a fresh snapshot), in
# one round trip; ``uwf_release``: unlisten, drop a background run's row, unlock.
# ``uwf_land``: the step's nodes (inserted unless stored, each stored one compared), its
# head's compare-and-swap and, at the end, the archive, in one transaction.
# ``uwf_put_many``: ``uwf_put`` for many nodes in one statement.
STEP_FUNCTIONS = f"""
ALTER TABLE uwf_holders SET UNLOGGED;

CREATE FUNCTION uwf_head_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.head IS DISTINCT FROM OLD.head THEN
        PERFORM pg_notify('uwf_' || OLD.thread, '');
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER uwf_threads_moved AFTER UPDATE OF head OR DELETE ON uwf_threads
    FOR EACH ROW EXECUTE FUNCTION uwf_head_moved();

CREATE FUNCTION uwf_claim(p_thread text, p_key bigint, p_hi bigint, p_lo bigint,
                          p_wait boolean, p_pid integer, p_host text, p_since bigint,
                          p_role text, p_agent text, p_log text, p_worker text)
RETURNS SETOF uwf_threads LANGUAGE plpgsql AS $$
BEGIN
    IF p_wait THEN
        PERFORM pg_advisory_lock(p_key);
    ELSIF NOT pg_try_advisory_lock(p_key) THEN
        RAISE EXCEPTION 'thread % is busy', p_thread USING ERRCODE = '{BUSY}';
    END IF;
    INSERT INTO uwf_holders (thread, lock_hi, lock_lo, backend_pid, pid, host, since, role,
                             agent, log, worker, stop_requested)
        VALUES (p_thread, p_hi, p_lo, pg_backend_pid(), p_pid, p_host, p_since, p_role,
                p_agent, p_log, p_worker, false)
        ON CONFLICT (thread) DO UPDATE SET lock_hi = EXCLUDED.lock_hi,
            lock_lo = EXCLUDED.lock_lo, backend_pid = EXCLUDED.backend_pid,
            pid = EXCLUDED.pid, host = EXCLUDED.host, since = EXCLUDED.since,
            role = EXCLUDED.role, agent = EXCLUDED.agent, log = EXCLUDED.log,
            worker = EXCLUDED.worker, stop_requested = false;
    EXECUTE format('LISTEN %I', 'uwf_' || p_thread);
    RETURN QUERY SELECT * FROM uwf_threads WHERE thread = p_thread;
END
$$;

CREATE FUNCTION uwf_release(p_thread text, p_key bigint, p_forget boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('UNLISTEN %I', 'uwf_' || p_thread);
    IF p_forget THEN
        DELETE FROM uwf_holders WHERE thread = p_thread AND backend_pid = pg_backend_pid();
    END IF;
    RETURN pg_advisory_unlock(p_key);
END
$$;

CREATE FUNCTION uwf_land(p_thread text, p_expected text, p_new text, p_now bigint,
                         p_hashes text[], p_types text[], p_payloads text[], p_ts bigint[],
                         p_same text[], p_workflow text, p_status text)
RETURNS TABLE (status text, found text) LANGUAGE plpgsql AS $$
DECLARE
    created text[];
    bad text;
    ended record;
BEGIN
    PERFORM pg_advisory_xact_lock_shared({SWEEP_KEY});
    UPDATE uwf_threads t SET head = p_new, moved = p_now, wait_role = NULL,
        wait_since = NULL, wait_head = NULL, wait_reason = NULL, wait_children = NULL,
        fail_head = NULL, fail_error = NULL, fail_code = NULL, fail_at = NULL,
        fail_attempts = NULL, fail_since = NULL, fail_role = NULL, fail_agent = NULL,
        fail_host = NULL, fail_limit = NULL, fail_retry_at = NULL, fail_exhausted = false
        WHERE t.thread = p_thread AND t.head = p_expected
        AND (p_new = ANY(p_hashes) OR EXISTS (SELECT 1 FROM uwf_nodes n WHERE n.hash = p_new));
    IF NOT FOUND THEN  -- nothing written: the head found says why
        RETURN QUERY SELECT 'refused'::text,
            (SELECT t.head FROM uwf_threads t WHERE t.thread = p_thread);
        RETURN;
    END IF;
    WITH ins AS (
        INSERT INTO uwf_nodes (hash, type, payload, ts, last_put)
            SELECT x.h, x.t, x.p, x.ts, p_now
            FROM unnest(p_hashes, p_types, p_payloads, p_ts) AS x(h, t, p, ts)
            ON CONFLICT (hash) DO NOTHING RETURNING uwf_nodes.hash)
    SELECT coalesce(array_agg(ins.hash), '{{}}') INTO created FROM ins;
    SELECT x.h INTO bad FROM unnest(p_hashes, p_types, p_payloads) AS x(h, t, p)
        JOIN uwf_nodes n ON n.hash = x.h
        WHERE NOT x.h = ANY(created) AND NOT x.h = ANY(p_same)
        AND (n.type <> x.t OR n.payload <> x.p) LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION '%', bad USING ERRCODE = '{COLLISION}';
    END IF;
    SELECT x.t INTO bad FROM unnest(p_hashes, p_types) AS x(h, t)
        WHERE x.h = ANY(created) AND x.t <> x.h
        AND NOT EXISTS (SELECT 1 FROM uwf_nodes n WHERE n.hash = x.t) LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION '%', bad USING ERRCODE = '{NO_TYPE}';
    END IF;
    INSERT INTO uwf_type_index (type, hash)
        SELECT x.t, x.h FROM unnest(p_hashes, p_types) WITH ORDINALITY AS x(h, t, n)
        WHERE x.h = ANY(created) ORDER BY x.n ON CONFLICT DO NOTHING;
    IF NOT p_new = ANY(created) THEN
        UPDATE uwf_nodes n SET last_put = p_now WHERE n.hash = p_new AND n.last_put < p_now;
    END IF;
    IF p_status IS NULL THEN
        RETURN QUERY SELECT 'moved'::text, p_expected;
        RETURN;
    END IF;
    DELETE FROM uwf_threads t WHERE t.thread = p_thread
        RETURNING t.task, t.cwd, t.parent INTO ended;
    INSERT INTO uwf_history (thread, workflow, head, completed_at, status, task, cwd, parent)
        VALUES (p_thread, p_workflow, p_new, p_now, p_status, ended.task, ended.cwd,
                ended.parent);
    RETURN QUERY SELECT 'archived'::text, p_expected;
END
$$;

CREATE FUNCTION uwf_put_many(p_hashes text[], p_types text[], p_payloads text[], p_ts bigint,
                             p_now bigint, p_typed boolean[])
RETURNS TABLE (hash text, status text, stored_type text, stored_payload text)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_hashes, 1), 0) LOOP
        RETURN QUERY SELECT p_hashes[i], u.status, u.stored_type, u.stored_payload
            FROM uwf_put(p_hashes[i], p_types[i], p_payloads[i], p_ts, p_now, p_typed[i]) u;
    END LOOP;
END
$$;
"""

MIGRATIONS: list[str] = [
    # 0 -> 1: nodes, the type index, threads, history, registry, step-lock holders
    """
    CREATE TABLE uwf_nodes (
        hash text PRIMARY KEY,
        type text NOT NULL,
        payload text NOT NULL,
        ts bigint NOT NULL,
        last_put bigint NOT NULL
    );
    CREATE TABLE uwf_type_index (
        type text NOT NULL,
        hash text NOT NULL,
        seq bigserial NOT NULL,
        PRIMARY KEY (type, hash)
    );
    CREATE INDEX uwf_type_index_order ON uwf_type_index (type, seq);
    CREATE TABLE uwf_threads (
        thread text PRIMARY KEY,
        head text NOT NULL,
        workflow text,
        task text,
        wait_role text,
        wait_since bigint,
        wait_head text,
        wait_reason text,
        moved bigint NOT NULL
    );
    CREATE TABLE uwf_history (
        seq bigserial PRIMARY KEY,
        thread text NOT NULL,
        workflow text NOT NULL,
        head text NOT NULL,
        completed_at bigint NOT NULL,
        status text NOT NULL
    );
    CREATE INDEX uwf_history_thread ON uwf_history (thread, seq);
    CREATE TABLE uwf_registry (
        name text PRIMARY KEY,
        hash text NOT NULL,
        version integer NOT NULL,
        updated bigint NOT NULL
    );
    CREATE TABLE uwf_holders (
        thread text PRIMARY KEY,
        lock_hi bigint NOT NULL,
        lock_lo bigint NOT NULL,
        backend_pid integer NOT NULL,
        pid integer,
        host text,
        since bigint,
        role text,
        agent text
    );
    """,
    # 1 -> 2: the task line archived threads keep (listings read no node); background runs:
    # the log file a holder writes to, and the stop request made to the current holding
    # (reset by the next holder's upsert, gone with the row it is on)
    """
    ALTER TABLE uwf_history ADD COLUMN task text;
    ALTER TABLE uwf_holders
        ADD COLUMN log text,
        ADD COLUMN stop_requested boolean NOT NULL DEFAULT false;
    """,
    # 2 -> 3: a thread's last failure (docs/format.md, "Thread state"): the attempts that
    # failed at fail_head since the last step landed; a head move clears them
    """
    ALTER TABLE uwf_threads
        ADD COLUMN fail_head text,
        ADD COLUMN fail_error text,
        ADD COLUMN fail_code integer,
        ADD COLUMN fail_at bigint,
        ADD COLUMN fail_attempts integer,
        ADD COLUMN fail_since bigint,
        ADD COLUMN fail_role text,
        ADD COLUMN fail_agent text,
        ADD COLUMN fail_host text;
    """,
    # 3 -> 4: a thread's working directory (thread start --cwd), kept when it is archived
    """
    ALTER TABLE uwf_threads ADD COLUMN cwd text;
    ALTER TABLE uwf_history ADD COLUMN cwd text;
    """,
    # 4 -> 5: a node's put in one statement (nodes.PgStore._store): the writers' shared sweep
    # lock, the put of its type and of the node (refreshed when stored, else inserted with
    # its type-index line), and what is stored for the collision check
    f"""
    CREATE FUNCTION uwf_put(p_hash text, p_type text, p_payload text, p_ts bigint,
                            p_now bigint, p_typed boolean)
    RETURNS TABLE (status text, stored_type text, stored_payload text)
    LANGUAGE plpgsql AS $$
    DECLARE
        type_found boolean := true;
    BEGIN
        PERFORM pg_advisory_xact_lock_shared({SWEEP_KEY});
        IF p_type <> p_hash THEN
            UPDATE uwf_nodes SET last_put = greatest(last_put, p_now) WHERE hash = p_type;
            type_found := FOUND;
        END IF;
        UPDATE uwf_nodes SET last_put = greatest(last_put, p_now) WHERE hash = p_hash
            RETURNING uwf_nodes.type, uwf_nodes.payload INTO stored_type, stored_payload;
        IF FOUND THEN
            status := 'stored';
        ELSIF p_typed AND NOT type_found THEN
            status := 'no type';
        ELSE
            INSERT INTO uwf_nodes (hash, type, payload, ts, last_put)
                VALUES (p_hash, p_type, p_payload, p_ts, p_ts) ON CONFLICT (hash) DO NOTHING;
            IF FOUND THEN
                INSERT INTO uwf_type_index (type, hash) VALUES (p_type, p_hash)
                    ON CONFLICT DO NOTHING;
                status := 'created';
            ELSE
                SELECT n.type, n.payload INTO stored_type, stored_payload
                    FROM uwf_nodes n WHERE n.hash = p_hash;
                status := 'stored';
            END IF;
        END IF;
        RETURN NEXT;
    END
    $$;
    """,
    # 5 -> 6: fan-out (docs/format.md, "Fan-out and join"): a child's parent (kept in the
    # history too) and the children a parent waits for (ids, comma-separated, item order)
    """
    ALTER TABLE uwf_threads
        ADD COLUMN parent text,
        ADD COLUMN wait_children text;
    CREATE INDEX uwf_threads_parent ON uwf_threads (parent);
    ALTER TABLE uwf_history ADD COLUMN parent text;
    CREATE INDEX uwf_history_parent ON uwf_history (parent);
    """,
    # 6 -> 7: retries (docs/format.md, "Retries"): the attempts the policy allows, the next
    # allowed attempt and the dead-letter mark of the last failure
    """
    ALTER TABLE uwf_threads
        ADD COLUMN fail_limit integer,
        ADD COLUMN fail_retry_at bigint,
        ADD COLUMN fail_exhausted boolean NOT NULL DEFAULT false;
    """,
    # 7 -> 8: start keys (docs/format.md, "Start keys"): the thread a key named per workflow
    """
    CREATE TABLE uwf_start_keys (
        scope text NOT NULL,
        key text NOT NULL,
        thread text NOT NULL,
        created bigint NOT NULL,
        PRIMARY KEY (scope, key)
    );
    """,
    # 8 -> 9: fleet limits (docs/format.md, "Limits"): the steps begun in the last minute,
    # and the pauses of providers that answered 429
    """
    CREATE TABLE uwf_limit_starts (
        name text NOT NULL,
        at bigint NOT NULL
    );
    CREATE INDEX uwf_limit_starts_name ON uwf_limit_starts (name, at);
    CREATE TABLE uwf_limit_pauses (
        name text PRIMARY KEY,
        until bigint NOT NULL
    );
    """,
    # 9 -> 10: priorities (docs/format.md, "Priorities")
    """
    ALTER TABLE uwf_threads ADD COLUMN priority integer NOT NULL DEFAULT 0;
    """,
    # 10 -> 11: workers you can see (docs/format.md, "Workers"): the worker registry, and the
    # worker that holds a step lock
    """
    CREATE TABLE uwf_workers (
        id text PRIMARY KEY,
        host text NOT NULL,
        pid integer NOT NULL,
        started bigint NOT NULL,
        beat bigint NOT NULL,
        interval_ms integer NOT NULL,
        steps bigint NOT NULL,
        failed bigint NOT NULL,
        stopped bigint
    );
    ALTER TABLE uwf_holders ADD COLUMN worker text;
    """,
    # 11 -> 12: fan-out trees bounded (docs/format.md, "Fan-out and join"): the threads a
    # root's tree has started
    """
    ALTER TABLE uwf_threads ADD COLUMN descendants integer NOT NULL DEFAULT 0;
    """,
    STEP_FUNCTIONS,
]
VERSION = len(MIGRATIONS)

#: What migration ``n`` (to version ``n + 1``) created, by which a store's tables tell their
#: version: ``("table", name)``, ``("column", "table.column")`` or ``("function", signature)``.
MARKERS: list[tuple[str, str]] = [
    ("table", "uwf_nodes"),
    ("column", "uwf_history.task"),
    ("column", "uwf_threads.fail_head"),
    ("column", "uwf_threads.cwd"),
    ("function", "uwf_put(text,text,text,bigint,bigint,boolean)"),
    ("column", "uwf_threads.parent"),
    ("column", "uwf_threads.fail_limit"),
    ("table", "uwf_start_keys"),
    ("table", "uwf_limit_starts"),
    ("column", "uwf_threads.priority"),
    ("table", "uwf_workers"),
    ("column", "uwf_threads.descendants"),
    ("function", "uwf_land(text,text,text,bigint,text[],text[],text[],bigint[],text[],text,text)"),
]


def version(db: Db) -> int:
    """The schema version of the store: 0 for a database uwf never used."""
    row = db.one_unless("SELECT version FROM uwf_schema", UNDEFINED_TABLE)  # one round trip
    return int(row[0]) if row is not None else 0


def ensure(db: Db, migrations: list[str] | None = None) -> dict[str, int]:
    """Bring the store to the newest version; ``{"from", "to"}`` (equal when current)."""
    steps = MIGRATIONS if migrations is None else migrations
    latest = len(steps)
    found = version(db)
    if found == latest:
        return {"from": found, "to": found}
    if found > latest:
        raise UwfError(
            f"the store {db.redacted_url} has schema version {found}, newer than this uwf knows "
            f"({latest}): upgrade uwf"
        )
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(%s)", (INIT_KEY,))
        db.execute("CREATE TABLE IF NOT EXISTS uwf_schema (version integer NOT NULL)")
        row = db.one("SELECT version FROM uwf_schema FOR UPDATE")
        current = int(row[0]) if row is not None else 0
        if migrations is None:
            _check_tables(db, current, row is not None)
        if row is None:
            db.execute("INSERT INTO uwf_schema (version) VALUES (0)")
        for step in steps[current:]:
            db.execute(step)
        db.execute("UPDATE uwf_schema SET version = %s", (latest,))
    return {"from": found, "to": latest}


def tables_version(db: Db) -> int:
    """The version the store's tables are at, by ``MARKERS``: the last migration whose
    table, column or function exists (0: none of uwf's)."""
    checks = []
    params: list[str] = []
    for kind, name in MARKERS:
        if kind == "table":
            checks.append("to_regclass(%s) IS NOT NULL")
            params.append(name)
        elif kind == "function":
            checks.append("to_regprocedure(%s) IS NOT NULL")
            params.append(name)
        else:
            table, column = name.split(".")
            checks.append(
                "EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = %s AND column_name = %s)"
            )
            params.extend((table, column))
    row = db.one(f"SELECT {', '.join(checks)}", params)
    found = list(row) if row is not None else []
    return max((n + 1 for n, present in enumerate(found) if present), default=0)


def _check_tables(db: Db, said: int, has_row: bool) -> None:
    """Refuse to migrate tables that are not at the version ``uwf_schema`` says."""
    actual = tables_version(db)
    if actual == said:
        return
    where = f"uwf_schema says {said}" if has_row else "uwf_schema has no row (version 0)"
    raise Damaged(
        f"the store {db.redacted_url} is damaged: {where}, but its tables are at schema version "
        f"{actual}; uwf_schema was changed by hand or restored apart from the tables, and "
        f"migrating from {said} would fail or change the tables twice: set it right with "
        f"UPDATE uwf_schema SET version = {actual} (uwf then migrates the rest); see "
        'docs/reliability.md, "Repairing damaged state"'
    )
