"""Packs of the filesystem store (docs/format.md, "Packs"): `uwf cas pack`, the format, readers
beside packing, damage, and what a killed pack leaves behind. The node store contract runs on
packed nodes in tests/test_cas_store.py (``TestPackedFsStore``); killing `cas pack` and
`cas gc` at random moments is in tests/test_crash.py."""

from __future__ import annotations

import itertools
import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
import xxhash

from backend_contract import ITEM
from rootfiles import damage_packed_record, open_store
from uwf.backend.fs import FsBackend, files, packing, packs, packwrite
from uwf.backend.fs.files import pack_names
from uwf.backend.fs.nodes import FsStore
from uwf.cas import codec, ops
from uwf.cas.schema import meta_hash
from uwf.util.base32 import encode64
from uwf.util.errors import CorruptNode


def ok(cli: Any, *args: str) -> Any:
    r = cli(*args)
    assert r.code == 0, (args, r.out, r.err)
    return r.json()


def loose(cas: Path) -> list[str]:
    return sorted(p.name for p in (cas / "objects").glob("*/*"))


def pack_files(cas: Path) -> list[str]:
    return sorted(os.listdir(cas / "packs")) if (cas / "packs").exists() else []


@pytest.fixture
def cas(tmp_path: Path) -> Path:
    return tmp_path / "store" / "cas"


def items(store: FsStore, n: int, start: int = 0, big: bool = False) -> tuple[str, list[str]]:
    """``n`` nodes of the ITEM schema; ``big``: each over half a block, so that each packed
    node has a block of its own (damage is per block: test_damage_is_per_block)."""
    s = store.put_schema(ITEM)
    pad = "x" * (packs.BLOCK // 2 + 1) if big else ""
    return s, [store.put(s, {"n": i, "tag": f"item {i}{pad}"}) for i in range(start, start + n)]


# -- the command -------------------------------------------------------------------------


def test_cas_pack_moves_every_loose_node_and_threads_read_the_same(
    cli: Any, root: Path, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    agent = scenario()
    for _ in range(3):
        ok(cli, "thread", "step", thread, "--agent", agent)
    cas = root / "cas"
    assert len(pack_names(cas / "packs")) == 3  # each step's nodes: one pack
    views = [ok(cli, "thread", *args, thread) for args in (["show"], ["steps"])]
    read = cli("thread", "read", thread).out
    before = set(open_store(root).iter_hashes())
    was_loose = loose(cas)  # the workflow, its schemas, the StartNode
    report = ok(cli, "cas", "pack")
    assert report["packed"] == len(was_loose) and report["loose"] == 0 and report["packs"] == 1
    assert loose(cas) == []
    (name,) = {f.rsplit(".", 1)[0] for f in pack_files(cas)}
    assert pack_files(cas) == [f"{name}.idx", f"{name}.pack"]
    assert report["bytes"] == sum(os.stat(cas / "packs" / f).st_size for f in pack_files(cas))
    assert [ok(cli, "thread", *args, thread) for args in (["show"], ["steps"])] == views
    assert cli("thread", "read", thread).out == read
    assert set(open_store(root).iter_hashes()) == before
    assert ok(cli, "cas", "verify") == {"scanned": len(before), "ok": True, "damaged": []}
    assert ok(cli, "cas", "pack") == {**report, "packed": 0}  # nothing loose: nothing to do

    head = ok(cli, "thread", "step", thread, "--agent", agent)["head"]  # a pack of its own
    assert head not in loose(cas) and len(pack_names(cas / "packs")) == 2
    again = ok(cli, "cas", "pack")  # far smaller than the other: left as it is
    assert again["packs"] == 2 and again["loose"] == 0 and again["packed"] == 0
    assert ok(cli, "thread", "show", thread)["head"] == head
    assert ok(cli, "cas", "verify")["ok"] is True


def test_cas_pack_of_an_empty_store_creates_nothing(cli: Any, root: Path) -> None:
    assert ok(cli, "cas", "pack") == {"packed": 0, "loose": 0, "packs": 0, "bytes": 0}
    assert not root.exists()


def test_cas_pack_never_runs_beside_gc(cli: Any, root: Path) -> None:
    ok(cli, "cas", "put-text", "x")
    with FsBackend(root).locks.gc():
        r = cli("cas", "pack")
    assert (r.code, r.err) == (1, "error: cas gc or cas pack is already running\n")
    assert loose(root / "cas") == sorted(open_store(root).iter_hashes())


# -- the format --------------------------------------------------------------------------


def test_the_files_are_as_docs_format_md_says(cas: Path) -> None:
    store = FsStore(cas)
    _, hashes = items(store, 40)
    originals = {h: (cas / "objects" / h[:2] / h).read_bytes() for h in store.iter_hashes()}
    store.pack()
    (name,) = pack_names(cas / "packs")
    data = (cas / "packs" / f"{name}.pack").read_bytes()
    idx = (cas / "packs" / f"{name}.idx").read_bytes()
    assert name == "pack-" + encode64(xxhash.xxh64_intdigest(data))
    assert data[:8] == b"UWFPACK2"
    (dict_len,) = struct.unpack_from(">I", data, 8)
    zdict = data[12 : 12 + dict_len]
    assert 0 < dict_len <= 16 << 10  # 42 nodes: a dictionary of sample records
    assert idx[:8] == b"UWFIDX02"
    (count,) = struct.unpack_from(">I", idx, 8)
    assert count == len(originals) == 42
    fan = struct.unpack_from(">512I", idx, 12)
    names_at = 12 + 512 * 4
    names = [idx[names_at + 13 * i : names_at + 13 * (i + 1)].decode() for i in range(count)]
    assert names == sorted(originals)
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    for b in range(512):
        assert fan[b] == sum(
            1 for n in names if 32 * alphabet.index(n[0]) + alphabet.index(n[1]) <= b
        )
    entries_at = names_at + 13 * count
    blocks: dict[int, bytes] = {}
    for i, h in enumerate(names):
        offset, length, inner, size, last_put, check = struct.unpack_from(
            ">QIIIQQ", idx, entries_at + 36 * i
        )
        if offset not in blocks:  # one raw DEFLATE stream per block, with the dictionary
            inflate = zlib.decompressobj(-15, zdict)
            blocks[offset] = inflate.decompress(data[offset : offset + length])
            assert inflate.eof and not inflate.unused_data
            assert len(blocks[offset]) <= packs.BLOCK
        assert blocks[offset][inner : inner + size] == originals[h]
        assert last_put > 0
        assert check == xxhash.xxh64_intdigest(h.encode() + originals[h])
    # the blocks follow the dictionary one after another, and hold every node once
    at = 12 + dict_len
    for offset in sorted(blocks):
        assert offset == at
        at += next(
            struct.unpack_from(">QI", idx, entries_at + 36 * i)[1]
            for i in range(count)
            if struct.unpack_from(">Q", idx, entries_at + 36 * i)[0] == offset
        )
    assert at == len(data)
    assert sum(len(b) for b in blocks.values()) == sum(len(o) for o in originals.values())
    pack_sum, idx_sum = struct.unpack_from(">QQ", idx, len(idx) - 16)
    assert pack_sum == xxhash.xxh64_intdigest(data)
    assert idx_sum == xxhash.xxh64_intdigest(idx[:-8])
    assert len(idx) == entries_at + 36 * count + 16
    assert [store.require(h).payload["n"] for h in hashes] == list(range(40))


def test_packs_of_the_first_version_are_read(cas: Path) -> None:
    """Version 1 (one DEFLATE stream per node, 28-byte entries) is still read: stores packed
    before version 2 keep working, and the next merge rewrites them."""
    store = FsStore(cas)
    _, hashes = items(store, 20)
    zdict = b'{"type":"'
    records, names, entries, offset = bytearray(), [], [], 12 + len(zdict)
    for h in sorted(store.iter_hashes()):
        raw = (cas / "objects" / h[:2] / h).read_bytes()
        deflate = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict)
        record = deflate.compress(raw) + deflate.flush()
        names.append(h)
        entries.append((offset, len(record), 1, xxhash.xxh64_intdigest(h.encode() + raw)))
        records += record
        offset += len(record)
    data = b"UWFPACK1" + struct.pack(">I", len(zdict)) + zdict + bytes(records)
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    fan = [
        sum(1 for n in names if 32 * alphabet.index(n[0]) + alphabet.index(n[1]) <= b)
        for b in range(512)
    ]
    body = b"UWFIDX01" + struct.pack(">I", len(names)) + struct.pack(">512I", *fan)
    body += "".join(names).encode() + b"".join(struct.pack(">QIQQ", *e) for e in entries)
    body += struct.pack(">Q", xxhash.xxh64_intdigest(data))
    body += struct.pack(">Q", xxhash.xxh64_intdigest(body))
    name = "pack-" + encode64(xxhash.xxh64_intdigest(data))
    (cas / "packs").mkdir()
    (cas / "packs" / f"{name}.pack").write_bytes(data)
    (cas / "packs" / f"{name}.idx").write_bytes(body)
    for h in names:
        (cas / "objects" / h[:2] / h).unlink()
    reader = FsStore(cas)
    assert [reader.require(h).payload["n"] for h in hashes] == list(range(20))
    assert ops.verify(reader) == {"scanned": len(names), "ok": True, "damaged": []}
    items(reader, 1, start=20)  # a node loose: the merge rewrites them all as version 2
    reader.pack(everything=True)
    (new,) = pack_names(cas / "packs")
    assert (cas / "packs" / f"{new}.pack").read_bytes()[:8] == b"UWFPACK2"
    assert [FsStore(cas).require(h).payload["n"] for h in hashes] == list(range(20))


def test_a_small_pack_has_no_dictionary(cas: Path) -> None:
    store = FsStore(cas)
    items(store, 3)
    store.pack()
    (name,) = pack_names(cas / "packs")
    assert (cas / "packs" / f"{name}.pack").read_bytes()[8:12] == b"\0\0\0\0"
    assert FsStore(cas).require(meta_hash()).type == meta_hash()


@pytest.mark.parametrize(
    ("counts", "loose", "chosen"),
    [
        ([], 0, []),
        ([("a", 100)], 0, []),  # one pack alone is never written again
        ([("a", 100)], 3, []),  # loose nodes only: the pack is far larger
        ([("a", 100)], 60, ["a"]),  # at most twice what is chosen: merged
        ([("big", 1000), ("s1", 5), ("s2", 5), ("s3", 6)], 0, ["s1", "s2", "s3"]),
        ([("big", 30), ("s1", 5), ("s2", 5), ("s3", 6)], 0, ["s1", "s2", "s3", "big"]),
        ([("a", 64), ("b", 32), ("c", 16), ("d", 8)], 0, []),  # a doubling progression
        ([("a", 64), ("b", 32), ("c", 9), ("d", 8)], 0, ["d", "c", "b", "a"]),  # 9 < 2 × 8 …
        ([("a", 99), ("b", 32), ("c", 9), ("d", 8)], 0, ["d", "c", "b"]),  # … 99 ≥ 2 × 49
        ([("a", 64), ("b", 32), ("c", 16), ("d", 8)], 9, ["d", "c", "b", "a"]),
    ],
)
def test_the_geometric_rule_picks_the_small_packs(
    counts: list[tuple[str, int]], loose: int, chosen: list[str]
) -> None:
    assert packing.choose(counts, loose) == chosen


def test_packs_stay_a_doubling_progression(cas: Path) -> None:
    """`cas pack` after every few nodes: the packs left always at least double in size from
    one to the next, so a store of n nodes has at most log2(n) of them; every node is read."""
    store = FsStore(cas)
    s, everything = items(store, 2)
    for k in range(40):
        everything += [store.put(s, {"n": 100 + 2 * k + i}) for i in range(2)]
        store.pack()
        counts = sorted(p.count for p in FsStore(cas).packs())
        assert all(b >= packing.FACTOR * a for a, b in itertools.pairwise(counts))
        assert len(counts) <= sum(counts).bit_length()
    fresh = FsStore(cas)
    assert [fresh.require(h).payload["n"] for h in everything] == [
        0,
        1,
        *range(100, 180),
    ]
    assert ops.verify(fresh)["ok"] is True
    assert loose(cas) == []
    assert store.pack(everything=True)["packs"] == 1


# -- readers beside packing --------------------------------------------------------------


def test_a_reader_finds_nodes_packed_after_it_listed_the_packs(cas: Path) -> None:
    writer = FsStore(cas)
    s, hashes = items(writer, 20)
    writer.pack()
    reader = FsStore(cas)  # another process: lists the packs once, on its first read
    assert reader.require(hashes[0]).payload["n"] == 0
    later = [writer.put(s, {"n": 10 + i}) for i in range(3)]
    writer.pack()  # a second pack (the first is far larger), and their loose files go
    assert [reader.require(h).payload["n"] for h in later] == [10, 11, 12]
    assert reader.has(later[0]) and sorted(reader.iter_hashes()) == sorted(writer.iter_hashes())
    writer.pack(everything=True)  # merges both and removes the packs the reader has mapped
    assert [reader.require(h).payload["n"] for h in hashes + later] == [*range(20), 10, 11, 12]
    assert len(reader.packs()) == 2  # still the old ones, mapped (their files are gone)
    newest = writer.put(s, {"n": 99})
    writer.pack()
    assert reader.require(newest).payload["n"] == 99  # a miss lists the packs again
    assert len(reader.packs()) == 2 and [p.name for p in reader.packs()] == [
        p.name for p in FsStore(cas).packs()
    ]


def test_a_put_after_the_loose_file_was_read_keeps_it(
    cas: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put refreshing a loose file while it is being packed keeps that file: its later last
    put would be lost with it (gc judges age by it)."""
    store = FsStore(cas)
    s, (a, b) = items(store, 2)
    write = packwrite.write_pack

    def put_meanwhile(*args: Any) -> Any:
        name = write(*args)
        FsStore(cas).put(s, {"n": 0, "tag": "item 0"})  # another writer re-puts a
        return name

    monkeypatch.setattr(packwrite, "write_pack", put_meanwhile)
    report = store.pack()
    assert report["packed"] == 4 and report["loose"] == 2  # a and its schema (refreshed)
    assert loose(cas) == sorted([a, s])
    fresh = FsStore(cas)
    info = fresh.info(a)
    assert (
        info is not None
        and info.last_put >= os.stat(cas / "objects" / a[:2] / a).st_mtime_ns // 10**6
    )
    assert fresh.require(b).payload["n"] == 1


# -- damage --------------------------------------------------------------------------------


def test_a_corrupt_loose_file_stays_loose(cas: Path) -> None:
    store = FsStore(cas)
    _, (good, bad) = items(store, 2)
    path = cas / "objects" / bad[:2] / bad
    path.chmod(0o644)
    path.write_text("{not json")
    report = store.pack()
    assert (report["packed"], report["loose"]) == (3, 1)
    assert loose(cas) == [bad]
    fresh = FsStore(cas)
    assert fresh.require(good).payload["n"] == 0
    assert ops.verify(fresh)["damaged"] == [
        {"hash": bad, "problem": f"corrupt node {bad}: not valid JSON"}
    ]


def test_a_damaged_record_is_corrupt_until_a_put_stores_a_good_copy(cas: Path) -> None:
    store = FsStore(cas)
    s, hashes = items(store, 30, big=True)
    victim = hashes[7]
    store.pack()
    damage_packed_record(cas, victim)
    reader = FsStore(cas)
    with pytest.raises(CorruptNode) as info:
        reader.get(victim)
    assert str(info.value).startswith(f"corrupt node {victim}: ")
    assert reader.require(hashes[8]).payload["n"] == 8
    report = ops.verify(reader)
    (name,) = pack_names(cas / "packs")
    assert report["ok"] is False
    assert report["damaged"][0] == {
        "pack": name,
        "problem": f"corrupt pack {name}: its records do not match their checksum",
    }
    assert [d.get("hash") for d in report["damaged"][1:]] == [victim]

    pad = "x" * (packs.BLOCK // 2 + 1)
    assert reader.put(s, {"n": 7, "tag": f"item 7{pad}"}) == victim  # a writer stores it again
    assert loose(cas) == sorted([victim, s])  # and its schema: a put refreshes the type
    assert FsStore(cas).require(victim).payload["n"] == 7  # the good loose copy is used
    FsStore(cas).pack(everything=True)  # gc's pack: the good copy replaces the damaged pack
    assert ops.verify(FsStore(cas)) == {"scanned": 32, "ok": True, "damaged": []}


def test_a_damaged_index_fails_every_read_and_verify_reports_it(cas: Path) -> None:
    store = FsStore(cas)
    _, hashes = items(store, 5)
    store.pack()
    (name,) = pack_names(cas / "packs")
    idx = cas / "packs" / f"{name}.idx"
    idx.write_bytes(idx.read_bytes()[:-1])
    with pytest.raises(CorruptNode) as info:
        FsStore(cas).get(hashes[0])
    assert str(info.value) == f"corrupt pack {name}: not a pack index of this format"
    assert ops.verify(FsStore(cas)) == {
        "scanned": 0,
        "ok": False,
        "damaged": [{"pack": name, "problem": str(info.value)}],
    }


def test_an_unsorted_index_is_reported(cas: Path) -> None:
    store = FsStore(cas)
    items(store, 3)
    store.pack()
    (name,) = pack_names(cas / "packs")
    idx = cas / "packs" / f"{name}.idx"
    data = bytearray(idx.read_bytes())
    at = 12 + 512 * 4
    data[at : at + 26] = data[at + 13 : at + 26] + data[at : at + 13]  # swap two names
    body = bytes(data[:-8])
    idx.write_bytes(body + struct.pack(">Q", xxhash.xxh64_intdigest(body)))
    assert FsStore(cas).check_storage() == [
        {"pack": name, "problem": f"corrupt pack {name}: its index is not sorted"}
    ]


def test_leftovers_of_a_killed_pack_go_with_the_next(cas: Path) -> None:
    store = FsStore(cas)
    _, hashes = items(store, 3)
    store.pack()
    (cas / "packs" / ".tmp-pack-1-ab.pack").write_bytes(b"half")
    (cas / "packs" / ".tmp-pack-1-ab.idx").write_bytes(b"half")
    # its .idx never came: the records of nodes that are all still found elsewhere
    (name,) = pack_names(cas / "packs")
    copy = (cas / "packs" / f"{name}.pack").read_bytes()
    (cas / "packs" / "pack-0000000000000.pack").write_bytes(copy)
    assert FsStore(cas).check_storage() == []  # a leftover, not damage
    fresh = FsStore(cas)
    assert [fresh.require(h).payload["n"] for h in hashes] == [0, 1, 2]
    FsStore(cas).pack()
    assert [f for f in pack_files(cas) if f.startswith((".tmp-", "pack-0000"))] == []


def test_damage_is_per_block(cas: Path) -> None:
    """Nodes packed together share a DEFLATE stream (a block): damage to it makes each of its
    nodes corrupt, and only those; verify names each."""
    store = FsStore(cas)
    _, hashes = items(store, 400)  # ~48 KB of JSON: more than one block
    store.pack()
    (name,) = pack_names(cas / "packs")
    pack = packs.Pack(cas / "packs", name)
    block = pack.entry(pack.find(hashes[0].encode())).offset
    mates = {h for h in pack.names() if pack.entry(pack.find(h.encode())).offset == block}
    pack.close()
    assert 1 < len(mates) < len(hashes)
    damage_packed_record(cas, hashes[0])
    reader = FsStore(cas)
    for n, h in enumerate(hashes):
        if h in mates:
            with pytest.raises(CorruptNode):
                reader.get(h)
        else:
            assert reader.require(h).payload["n"] == n
    report = ops.verify(FsStore(cas))
    nodes = [d for d in report["damaged"] if "hash" in d]
    assert {d["hash"] for d in nodes if d["problem"].startswith("corrupt")} == mates
    # and a node whose type (a schema) sat in that block is reported without its type
    for d in report["damaged"]:
        if "hash" in d and d["hash"] not in mates:
            assert d["problem"].startswith("its type ") and d["problem"].endswith(" is missing")


def test_a_merge_keeps_a_pack_whose_record_cannot_be_read(cas: Path) -> None:
    store = FsStore(cas)
    s, hashes = items(store, 30, big=True)
    store.pack()
    damage_packed_record(cas, hashes[3])
    later = store.put(s, {"n": 99})
    (damaged,) = pack_names(cas / "packs")
    FsStore(cas).pack(everything=True)  # as gc: one pack of everything it can read
    assert damaged in pack_names(cas / "packs") and len(pack_names(cas / "packs")) == 2
    fresh = FsStore(cas)
    assert [fresh.require(h).payload["n"] for h in [*hashes[4:], later]] == [*range(4, 30), 99]
    report = ops.verify(fresh)
    assert [d.get("hash") for d in report["damaged"] if "hash" in d] == [hashes[3]]


def test_a_good_copy_in_another_pack_is_used(cas: Path) -> None:
    store = FsStore(cas)
    s, hashes = items(store, 30, big=True)
    store.pack()
    damage_packed_record(cas, hashes[3])
    damage_packed_record(cas, hashes[5])  # (no good copy anywhere: its pack stays)
    pad = "x" * (packs.BLOCK // 2 + 1)
    assert store.put(s, {"n": 3, "tag": f"item 3{pad}"}) == hashes[3]  # a good loose copy
    FsStore(cas).pack(everything=True)  # packs the good copy; the damaged pack stays
    assert loose(cas) == [] and len(pack_names(cas / "packs")) == 2
    for order in (1, -1):  # whichever pack is read first
        reader = FsStore(cas)
        reader._packs = reader.packs()[::order]
        assert reader.require(hashes[3]).payload["n"] == 3
    with pytest.raises(CorruptNode):
        FsStore(cas).get(hashes[5])


def test_a_record_read_under_another_name_fails_its_check(cas: Path) -> None:
    """A record's check covers its name: an index whose entries were swapped (a writer bug,
    a damaged disk) never serves one node's JSON as another's."""
    store = FsStore(cas)
    _, (a, b) = items(store, 2)
    store.pack()
    (name,) = pack_names(cas / "packs")
    idx = cas / "packs" / f"{name}.idx"
    data = bytearray(idx.read_bytes())
    pack = packs.Pack(cas / "packs", name)
    i, j = pack.find(a.encode()), pack.find(b.encode())
    size = packs.ENTRY_BYTES - packs.NAME_LEN
    at_i, at_j = pack.entries_at + size * i, pack.entries_at + size * j
    pack.close()
    data[at_i : at_i + size], data[at_j : at_j + size] = (
        data[at_j : at_j + size],
        data[at_i : at_i + size],
    )
    idx.write_bytes(bytes(data))
    with pytest.raises(CorruptNode) as info:
        FsStore(cas).get(a)
    assert str(info.value) == f"corrupt node {a}: its record in {name} does not match its check"


def test_verify_rehashes_every_packed_copy(cas: Path) -> None:
    """Reads trust a record whose check matches (it was hashed when packed); cas verify
    re-hashes every copy anyway, so a pack written around that rule is still caught."""
    store = FsStore(cas)
    s, (a,) = items(store, 1)
    store.pack()
    wrong = FsStore(cas).require(a).as_json() | {"payload": {"n": 5, "tag": "item 0"}}
    forged = json.dumps(wrong, separators=(",", ":")).encode()
    packwrite.write_pack(cas / "packs", [packs.Source(a, lambda: forged, 0)], b"")
    reader = FsStore(cas)
    reader._packs = sorted(reader.packs(), key=lambda p: p.count)  # the forged pack first
    assert reader.require(a).payload["n"] == 5
    actual = codec.node_hash(s, wrong["payload"])
    problem = f"corrupt node {a}: content hashes to {actual}"
    with pytest.raises(CorruptNode) as info:
        reader.verified(a)
    assert str(info.value) == problem
    assert ops.verify(FsStore(cas))["damaged"] == [{"hash": a, "problem": problem}]


def test_a_packed_history_inflates_each_block_once(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``thread steps`` of a packed chain that spans many blocks: each block is inflated once
    (docs/performance.md, "Full history"), the steps read back are those written, listed as
    they were before the pack (loose files), and the walk keeps none of the nodes it read."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import uwf_bench

    from uwf.engine.threads.steplist import steps

    tr = uwf_bench.build_threads_root(root, small=1, mid=1, large=150)
    loose = steps(FsBackend(root), tr.threads["large"])
    backend = FsBackend(root)
    assert backend.nodes.pack()["loose"] == 0
    inflated: list[int] = []
    real = packs.Pack._inflate

    def counted(pack: packs.Pack, i: int, e: packs.Entry) -> bytes:
        if e.offset not in pack._blocks:
            inflated.append(e.offset)
        return real(pack, i, e)

    monkeypatch.setattr(packs.Pack, "_inflate", counted)
    reader = FsBackend(root)
    listed = steps(reader, tr.threads["large"])
    assert [s["hash"] for s in listed["steps"][1:]] == tr.steps["large"]
    assert listed == loose
    assert len(set(inflated)) > packs.BLOCKS_KEPT  # the chain spans more blocks than are kept
    assert len(inflated) == len(set(inflated))
    # the head and the start are kept (as any read keeps them); the 450 nodes walked are not
    assert len(reader.nodes.kept()) <= 2


def test_a_long_lived_writer_reads_only_the_packs_on_disk(cas: Path) -> None:
    """A worker writes a pack a step; packs merged away by another process (automatic
    packing) leave the list its reads walk when it writes its next one."""
    writer = FsStore(cas)
    s = writer.put_schema(ITEM)
    first = [
        writer.put_many([(s, {"n": i, "tag": "a"}), (s, {"n": i, "tag": "b"})]) for i in range(4)
    ]
    assert len(writer.packs()) == 4
    FsStore(cas).pack(everything=True)  # another process merges them into one
    (merged,) = pack_names(cas / "packs")
    writer.put_many([(s, {"n": 9, "tag": "a"}), (s, {"n": 9, "tag": "b"})])
    assert sorted(p.name for p in writer.packs()) == sorted(pack_names(cas / "packs"))
    assert merged in {p.name for p in writer.packs()} and len(writer.packs()) == 2
    assert all(writer.require(h).payload["n"] == i for i, pair in enumerate(first) for h in pair)


def test_a_packed_type_is_read_and_checked_once_to_record_its_puts(
    cas: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step's pack copies the packed schema of its nodes (their put recorded for gc):
    its record is read from its pack and checked once per process, not at every step."""
    writer = FsStore(cas)
    s = writer.put_schema(ITEM)
    writer.pack(everything=True)  # the schema only in a pack
    writer.put_many([(s, {"n": 1, "tag": "a"}), (s, {"n": 1, "tag": "b"})])
    decoded: list[str] = []
    real = files.decode

    def decode(h: str, data: bytes, **kwargs: Any) -> Any:
        decoded.append(h)
        return real(h, data, **kwargs)

    monkeypatch.setattr(files, "decode", decode)
    for n in (2, 3):
        writer.put_many([(s, {"n": n, "tag": "a"}), (s, {"n": n, "tag": "b"})])
    assert s not in decoded
    fresh = FsStore(cas)  # another process: the copies are good nodes, the schema among them
    copies = [p for p in fresh.packs() if p.find(s.encode()) >= 0]
    assert len(copies) == 4 and fresh.require(s).payload == writer.require(s).payload
    assert ops.verify(fresh)["ok"] is True
