"""A step's nodes as one pack, and the automatic packing after steps (docs/performance.md,
"The filesystem step"; docs/format.md, "Packs"): the fsyncs of a batch, what a killed batch
leaves and when gc takes it, the geometric merge started in the background, ``autoPack``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import crashkit
from backend_contract import ITEM
from rootfiles import open_store
from support import tiers
from uwf.backend.fs import autopack, packing
from uwf.backend.fs.files import pack_names
from uwf.backend.fs.locks import FsLocks
from uwf.backend.fs.nodes import FsStore
from uwf.cas import ops
from uwf.util.errors import Busy

BATCH_KILLS = crashkit.scaled(40, 200)


def ok(cli: Any, *args: str) -> Any:
    r = cli(*args)
    assert r.code == 0, (args, r.out, r.err)
    return r.json()


def batch(store: FsStore, s: str, start: int, n: int = 4) -> list[str]:
    return store.put_many(
        [(s, {"n": i, "tag": f"batch item {i}"}) for i in range(start, start + n)]
    )


def wait_for(condition: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# -- one batch, one pack ------------------------------------------------------------------


def test_a_batch_is_one_pack_made_durable_with_three_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cas = tmp_path / "store" / "cas"
    store = FsStore(cas)
    s = store.put_schema(ITEM)
    synced: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    loose = sorted((cas / "objects").glob("*/*"))  # the schema and the meta-schema
    hashes = batch(store, s, 0, 6)
    assert len(synced) == 3  # the records, the index, the directory
    assert len(pack_names(cas / "packs")) == 1
    assert sorted((cas / "objects").glob("*/*")) == loose
    fresh = FsStore(cas)
    assert [fresh.require(h).payload["n"] for h in hashes] == list(range(6))
    assert sorted(fresh.index(s)) == sorted(hashes)
    synced.clear()
    assert batch(store, s, 0, 6) == hashes  # put again: recorded in a pack of its own
    assert len(synced) == 3 and ops.verify(FsStore(cas))["ok"] is True


def test_a_step_writes_its_nodes_as_one_pack(
    cli: Any, root: Path, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    loose_before = sorted((root / "cas" / "objects").glob("*/*"))
    head = ok(cli, "thread", "step", thread, "--agent", scenario())["head"]
    assert sorted((root / "cas" / "objects").glob("*/*")) == loose_before
    assert len(pack_names(root / "cas" / "packs")) == 1
    store = open_store(root)
    step = store.require(head)
    assert store._find(head) is not None and store._find(step.payload["output"]) is not None
    assert ok(cli, "cas", "verify")["ok"] is True


# -- what a killed step leaves --------------------------------------------------------------


def test_a_killed_steps_pack_goes_only_after_the_grace_period(cli: Any, root: Path) -> None:
    ok(cli, "cas", "put-text", "a node to start the store")
    store = open_store(root)
    s = store.put_schema(ITEM)
    orphans = set(batch(store, s, 0, 5))  # an agent killed before uwf moved the head
    for k in range(packing.AUTO_PACKS):  # and enough other packs for the packing to merge it
        batch(store, s, 100 + 10 * k)
    assert autopack.main([str(store.dir), str(store.lock_dir)]) == 0
    assert len(pack_names(store.pack_dir)) == 1  # merged: packing collects nothing
    assert all(open_store(root).has(h) for h in orphans)
    time.sleep(0.003)
    assert ok(cli, "cas", "gc")["collected"] == 0  # young: the default grace keeps them
    assert all(open_store(root).has(h) for h in orphans)
    out = ok(cli, "cas", "gc", "--grace", "0")
    assert out["collected"] >= len(orphans)
    fresh = open_store(root)
    assert not any(fresh.has(h) for h in orphans)
    assert ok(cli, "cas", "verify")["ok"] is True


def test_leftovers_of_a_killed_batch_are_never_read_and_go_with_the_next_pack(
    tmp_path: Path,
) -> None:
    cas = tmp_path / "store" / "cas"
    store = FsStore(cas)
    s = store.put_schema(ITEM)
    kept = batch(store, s, 0)
    packs_dir = cas / "packs"
    (name,) = pack_names(packs_dir)
    # killed between its two renames: the index came, its records did not
    (packs_dir / "pack-0000000000001.idx").write_bytes((packs_dir / f"{name}.idx").read_bytes())
    (packs_dir / ".tmp-pack-9-cd.pack").write_bytes(b"half")  # killed before the renames
    fresh = FsStore(cas)
    assert [fresh.require(h).payload["n"] for h in kept] == [0, 1, 2, 3]
    assert fresh.check_storage() == [] and ops.verify(fresh)["ok"] is True
    FsStore(cas).pack()
    assert not [f for f in os.listdir(packs_dir) if f.startswith((".tmp-", "pack-0000"))]
    assert [FsStore(cas).require(h).payload["n"] for h in kept] == [0, 1, 2, 3]


WRITER = """
import sys
from pathlib import Path
from uwf.backend.fs.nodes import FsStore
store = FsStore(Path(sys.argv[1]))
s = store.put_schema({schema!r})
for k in range(int(sys.argv[2]), 10**9):
    nodes = [(s, {{"n": k, "tag": f"node {{i}} of batch {{k}}"}}) for i in range(4)]
    print(k, *store.put_many(nodes), flush=True)
"""


@tiers("kills", 6, BATCH_KILLS)
def test_sigkill_of_batches_at_random_moments(tmp_path: Path, kills: int) -> None:
    """A batch killed at any moment is wholly readable or not there at all; every batch whose
    put returned is readable; what a killed one left goes with the next pack."""
    cas = tmp_path / "store" / "cas"
    code = textwrap.dedent(WRITER).format(schema=ITEM)
    written: dict[int, list[str]] = {}
    start = 0
    with crashkit.seeded("batch kills") as rng:
        for _ in range(kills):
            proc = subprocess.Popen(
                [sys.executable, "-c", code, str(cas), str(start)],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(rng.uniform(0.05, 0.4))
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate()
            for line in out.splitlines():
                k, *hashes = line.split()
                written[int(k)] = hashes
            start = max(written, default=start) + 2  # the killed batch's number is skipped
            store = FsStore(cas)
            for hashes in written.values():
                assert all(store.has(h) for h in hashes)
            s = store.put_schema(ITEM)
            found: dict[int, int] = {}
            for h in store.iter_hashes():
                node = store.require(h)
                if node.type == s:
                    found[node.payload["n"]] = found.get(node.payload["n"], 0) + 1
            assert set(found.values()) <= {4}  # a batch is there whole or not at all
            assert ops.verify(store)["ok"] is True
            if rng.random() < 0.3:
                store.pack()
    FsStore(cas).pack()
    assert not [f for f in os.listdir(cas / "packs") if f.startswith(".tmp-")]
    assert ops.verify(FsStore(cas))["ok"] is True


# -- the automatic packing -------------------------------------------------------------------


def test_packing_is_due_once_enough_small_packs_pile_up(tmp_path: Path) -> None:
    cas = tmp_path / "store" / "cas"
    store = FsStore(cas)
    s = store.put_schema(ITEM)
    everything: list[str] = []
    for k in range(packing.AUTO_PACKS - 1):
        everything += batch(store, s, 10 * k)
        assert not packing.due(store)
    everything += batch(store, s, 1000)
    assert packing.due(store)
    assert autopack.main([str(cas), str(store.lock_dir)]) == 0
    assert len(pack_names(cas / "packs")) == 1 and not packing.due(FsStore(cas))
    fresh = FsStore(cas)
    assert all(fresh.require(h) for h in everything) and ops.verify(fresh)["ok"] is True
    assert autopack.main([str(cas)]) == 2  # a usage error


def test_right_after_its_own_pack_a_process_counts_the_packs_it_just_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check after a step (``due``) lists no directory when this process has just
    written the step's pack (and listed the packs then); later, it lists them again, and
    sees a pack another process wrote."""
    cas = tmp_path / "store" / "cas"
    store, other = FsStore(cas), FsStore(cas)
    s = store.put_schema(ITEM)
    for k in range(packing.AUTO_PACKS - 2):
        batch(store, s, 10 * k)
    listings: list[Any] = []
    real = os.scandir

    def scandir(path: Any) -> Any:
        listings.append(path)
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    batch(store, s, 500)  # the 7th pack, listed with it
    listings.clear()
    assert not packing.due(store) and listings == []
    batch(other, s, 900)  # the 8th, by another process: seen once the listing is not recent
    monkeypatch.setattr(packing, "JUST_LISTED_NS", 0)
    assert packing.due(store) and listings == [cas / "packs"]


def test_a_worker_packs_in_a_thread_of_its_own(tmp_path: Path) -> None:
    cas = tmp_path / "store" / "cas"
    store = FsStore(cas)
    s = store.put_schema(ITEM)
    everything = [h for k in range(packing.AUTO_PACKS) for h in batch(store, s, 10 * k)]
    assert store.pack_due()
    assert store.pack_in_background() == "thread"
    assert autopack._thread is not None
    autopack._thread.join(30)
    assert len(pack_names(cas / "packs")) == 1
    assert all(FsStore(cas).require(h) for h in everything)


def test_steps_start_the_packing_and_autopack_false_stops_them(
    cli: Any, root: Path, new_thread: Any, scenario: Any
) -> None:
    agent = scenario()
    threads = [new_thread(f"task {i}") for i in range(packing.AUTO_PACKS)]
    (root / "config.yaml").write_text("autoPack: false\n")
    for thread in threads:
        ok(cli, "thread", "step", thread, "--agent", agent)
    packs_dir = root / "cas" / "packs"
    assert len(pack_names(packs_dir)) == packing.AUTO_PACKS  # due, but turned off
    assert packing.due(open_store(root))
    (root / "config.yaml").write_text("autoPack: true\n")
    ok(cli, "thread", "step", threads[0], "--agent", agent)  # starts it, in a process
    wait_for(lambda: len(pack_names(packs_dir)) < packing.AUTO_PACKS, "the automatic packing")
    wait_for(lambda: not autopack._gc_running(root / "locks"), "the packing to end")
    assert len(pack_names(packs_dir)) == 1
    assert ok(cli, "cas", "verify")["ok"] is True
    steps = [ok(cli, "thread", "show", thread)["steps"] for thread in threads]
    assert steps == [2] + [1] * (packing.AUTO_PACKS - 1)


def test_autopack_must_be_true_or_false(cli: Any, root: Path, new_thread: Any) -> None:
    thread = new_thread()
    (root / "config.yaml").write_text("autoPack: often\n")
    r = cli("thread", "step", thread, "--agent", "uwf-mock")
    assert r.code == 1 and "autoPack" in r.err and "true or false" in r.err
    assert r.err.count("\n") == 1


def test_cas_gc_waits_for_the_automatic_packing_and_not_the_reverse(tmp_path: Path) -> None:
    locks = FsLocks(tmp_path / "locks")
    (tmp_path / "locks").mkdir()
    with locks.gc(background=True):
        with pytest.raises(Busy), locks.gc(background=True):
            pass  # a second automatic packing gives up at once
        got: list[float] = []
        waiter = threading.Thread(target=lambda: _hold(locks, got))
        waiter.start()
        time.sleep(0.2)
        assert not got  # `cas gc` waits for the automatic packing to end …
        released = time.monotonic()
    waiter.join(10)
    assert got and got[0] >= released  # … and runs once it did
    with locks.gc():
        with pytest.raises(Busy), locks.gc(background=True):
            pass  # the automatic packing never waits: it gives up
        with pytest.raises(Busy), locks.gc():
            pass  # nor does a second `cas gc`
        assert autopack._gc_running(tmp_path / "locks")
    assert not autopack._gc_running(tmp_path / "locks")


def _hold(locks: FsLocks, got: list[float]) -> None:
    with locks.gc():
        got.append(time.monotonic())


@pytest.fixture(autouse=True)
def _no_packing_left(tmp_path: Path) -> Any:
    yield
    thread = autopack._thread
    if thread is not None:
        thread.join(30)
    with contextlib.suppress(FileNotFoundError):
        for lock_dir in tmp_path.rglob("locks"):
            wait_for(lambda d=lock_dir: not autopack._gc_running(d), "the packing to end")
