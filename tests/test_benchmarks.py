"""The comparison benchmark (benchmarks/), uwf side only and at tiny sizes.

No timing is asserted: these tests check that the benchmark measures what it says. The
long threads it builds in-process must be exactly what real ``uwf thread step`` calls with
its agent write (same hashes); every side's answers come from one generator; a run must
produce every row of its sections with a uwf figure, every target, the run's JSON and tables,
and docs/performance.md must be what its template makes of a run. The peers (LangGraph,
Burr) are not installed here, so the runs use ``--no-peers``; the pieces the peers' side
uses (the fleet claim, the fleet window, the server counts) are tested on their own, and the
tables and targets on figures made up for the purpose. The PostgreSQL and fleet rows end to
end (a minute) are a stress test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.syspath_prepend(str(BENCH))
    import uwf_bench

    return uwf_bench


# -- the work ----------------------------------------------------------------------------------


def test_answers_are_seeded_distinct_and_fit_the_roles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import workload

    answers = [workload.answer("t", workload.role_at(n), n) for n in range(1, 201)]
    assert len(set(answers)) == 200  # a different answer at every step
    assert answers == [workload.answer("t", workload.role_at(n), n) for n in range(1, 201)]
    assert workload.answer("u", "developer", 2) != answers[1]  # keyed by the task too
    sizes = [len(a.encode()) for a in answers]
    assert min(sizes) >= 250 and max(sizes) <= 4000  # a few hundred to a few thousand bytes
    assert [workload.role_at(n) for n in (1, 2, 3, 4, 5)] == [
        "planner",
        "developer",
        "reviewer",
        "developer",
        "reviewer",
    ]
    from uwf.agent_kit.fastpath import split
    from uwf.util.frontmatter import load_mapping

    for n in (1, 2, 3):
        role = workload.role_at(n)
        block, body = split(workload.answer("t", role, n))
        assert block is not None and load_mapping(block) == workload.fields("t", role, n)
        assert body == workload.body("t", role, n)


def test_the_agent_program_answers_for_its_step() -> None:
    """agent.py, as the peers' nodes run it (BENCH_*) and as uwf-cmd runs it (its prompt)."""
    sys.path.insert(0, str(BENCH))
    import workload

    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "UWF_"))}
    peer = subprocess.run(
        [sys.executable, str(BENCH / "agent.py")],
        input="anything",
        env=env | {"BENCH_TASK": "t", "BENCH_ROLE": "reviewer", "BENCH_STEP": "7"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert peer.stdout == workload.answer("t", "reviewer", 7)
    prompt = "## Task\nt\n\n### Step 5: reviewer\nOutput: {}\n\n### Step 6: developer\n..."
    under_cmd = subprocess.run(
        [sys.executable, str(BENCH / "agent.py")],
        input=prompt,
        env=env | {"UWF_ROLE": "reviewer"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert under_cmd.stdout == workload.answer("t", "reviewer", 7)


def test_built_chain_is_what_real_steps_write(bench, root: Path, cli_proc) -> None:
    workflow = bench.setup_root(root)
    with bench.bulk_writes():
        builder = bench.ChainBuilder(root, workflow)
        built = builder.extend(builder.start("same task"), "same task", 5)

    started = cli_proc("thread", "start", "solve-issue", "-p", "same task")
    assert started.code == 0, started.err
    thread = started.json()["thread"]
    real = []
    for _ in range(5):
        out = cli_proc("thread", "step", thread)
        assert out.code == 0, out.err
        real.append(out.json()["head"])
    # planner, developer, reviewer (rejects), developer, reviewer: node for node the same
    assert real == built
    steps = cli_proc("thread", "steps", thread).json()["steps"][1:]
    assert [s["role"] for s in steps] == [
        "planner",
        "developer",
        "reviewer",
        "developer",
        "reviewer",
    ]
    assert len({json.dumps(s["output"]) for s in steps}) == 5  # a different answer each time


def test_built_thread_steps_on_with_the_real_cli(bench, root: Path, cli_proc) -> None:
    tr = bench.build_threads_root(root, small=3, mid=4, large=8)
    assert cli_proc("thread", "show", tr.threads["large"]).json()["steps"] == 8
    out = cli_proc("thread", "step", tr.threads["large"])
    assert out.code == 0, out.err
    assert out.json()["role"] == "reviewer"  # step 8 was a developer's
    assert cli_proc("cas", "verify").json()["ok"] is True
    found = cli_proc("thread", "steps", tr.threads["large"], "--at", "4").json()
    assert found["hash"] == tr.steps["large"][3]


def test_list_root_has_that_many_active_threads(bench, root: Path, cli_proc) -> None:
    bench.build_list_root(root, 7)
    listed = cli_proc("thread", "list").json()
    assert len(listed) == 7
    assert {t["status"] for t in listed} == {"idle"}
    assert {t["task"] for t in listed} == {f"benchmark task t{i:06d}" for i in range(1, 8)}


def test_filler_nodes_are_valid_nodes(bench, root: Path, cli_proc) -> None:
    cas = bench.setup_cas_root(root)
    bench.fill(root, 0, 300, workers=2)
    report = cli_proc("cas", "verify").json()
    assert report["ok"] is True
    assert report["scanned"] >= 300
    assert cli_proc("cas", "get", cas.text_hash).json()["payload"] == "the node we read"


def test_packed_filler_nodes_are_valid_nodes(bench, root: Path, cli_proc) -> None:
    cas = bench.setup_cas_root(root)
    before = cli_proc("cas", "verify").json()["scanned"]
    bench.fill_packed(root, 300)
    assert not list((root / "cas" / "objects").glob("*/*"))  # one pack holds everything
    assert len(list((root / "cas" / "packs").glob("*.idx"))) == 1
    assert cli_proc("cas", "verify").json() == {
        "scanned": before + 300,
        "ok": True,
        "damaged": [],
    }
    assert cli_proc("cas", "get", cas.text_hash).json()["payload"] == "the node we read"


def test_noisy_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import harness

    steady = harness.summarise([10.0, 12.0, 14.0])
    jumpy = harness.summarise([10.0, 11.0, 16.0])
    assert (steady.value, steady.noisy, steady.text()) == (12.0, False, "12.0 ms")
    assert (jumpy.value, jumpy.noisy, jumpy.text()) == (11.0, True, "11.0 ms (noisy)")


def test_each_peer_has_its_own_pinned_venv() -> None:
    """run.sh installs each peer into a venv of its own (Burr never sees LangGraph's
    packages), both under a constraints file pinning every package with an exact version."""
    run = (BENCH / "run.sh").read_text()
    assert run.count('-c "$CONSTRAINTS"') == 1 and "peers/constraints.txt" in run
    assert "peer_venv benchmarks/.venv-langgraph" in run
    assert "peer_venv benchmarks/.venv-burr" in run
    burr = run.split("BURR=(", 1)[1].split(")", 1)[0]
    assert "apache-burr==" in burr and "langgraph" not in burr and "psycopg[" not in burr
    assert '--peer "LangGraph=' in run and '--peer "Burr=' in run
    lines = [
        line
        for line in (BENCH / "peers" / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[\w.+]+", x) for x in lines)
    for direct in ("langgraph", "apache-burr", "langgraph-checkpoint-postgres", "psycopg2-binary"):
        assert any(x.lower().startswith(direct + "==") for x in lines), direct


def test_peer_arguments_and_freeze(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import argparse

    from bench import freeze, key_versions, peer_pythons

    args = argparse.Namespace(peer=["Burr=venv/bin/python", "LangGraph=/x/python"])
    assert peer_pythons(args) == {
        "Burr": Path("venv/bin/python").absolute(),
        "LangGraph": Path("/x/python"),
    }
    with pytest.raises(SystemExit, match="--peer takes NAME=PYTHON"):
        peer_pythons(argparse.Namespace(peer=["Temporal=/x"]))
    frozen = freeze(sys.executable)  # uwf's own environment, as a run records it
    assert any(line.lower().startswith("typer==") for line in frozen)
    assert set(key_versions("uwf", frozen)) >= {"typer", "xxhash"}


# -- the pieces of the PostgreSQL and fleet rows -------------------------------------------------


def test_fleet_claim_takes_each_thread_once_at_a_time(
    monkeypatch: pytest.MonkeyPatch, pg_url: str
) -> None:
    """The peers' claim (peers/common.py): the oldest thread with steps left that no other
    worker holds, its count moved in the step's commit; none left, None."""
    monkeypatch.syspath_prepend(str(BENCH / "peers"))
    import common

    threads = common.fleet_threads("c", 2)
    assert threads == ["c-0000", "c-0001"]
    common.setup_claims(pg_url, threads, 2)
    one, two = common.Claims(pg_url), common.Claims(pg_url)
    try:
        assert one.take() == ("c-0000", 0)
        assert two.take() == ("c-0001", 0)  # the first is held: skipped, not waited for
        one.done("c-0000")
        assert one.take() == ("c-0000", 1)
        one.release()  # a failed step: the count stays
        assert one.take() == ("c-0000", 1)
        one.done("c-0000")
        two.done("c-0001")
        assert one.take() == ("c-0001", 1)
        assert two.take() is None  # c-0000 is done, c-0001 held
        one.done("c-0001")
        assert one.take() is None
    finally:
        one.close()
        two.close()


WINDOW_WORKER = """
import json, os, sys, time
def say(item):
    print(json.dumps({**item, "t": time.monotonic()}), flush=True)
def wait(path):
    deadline = time.monotonic() + 30
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
me, d = os.environ["WHO"], os.environ["DIR"]
if me == "early":
    say({"ready": True}); say({"thread": "a", "step": 1}); say({"thread": "a", "step": 2})
    open(os.path.join(d, "two-landed"), "w").close()
    wait(os.path.join(d, "late-ready")); say({"thread": "a", "step": 3})
else:
    wait(os.path.join(d, "two-landed")); say({"ready": True})
    open(os.path.join(d, "late-ready"), "w").close(); say({"thread": "b", "step": 1})
say({"steps": 0})
"""


def test_fleet_window_opens_when_every_worker_is_ready(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Steps that land before the last worker is ready are left out of the window."""
    monkeypatch.syspath_prepend(str(BENCH))
    import fleet

    script = tmp_path / "worker.py"
    script.write_text(WINDOW_WORKER)
    procs = iter(("early", "late"))  # each worker its own part
    real = fleet.subprocess.Popen

    def popen(argv: list[str], **kw: object) -> object:
        env = dict(os.environ, WHO=next(procs), DIR=str(tmp_path))
        return real(argv, **{**kw, "env": env})  # type: ignore[call-overload]

    monkeypatch.setattr(fleet.subprocess, "Popen", popen)
    window = fleet.run_workers([sys.executable, str(script)], {}, tmp_path, 2)
    assert (window.steps, window.total) == (2, 4)  # a's 3rd and b's 1st; a's first two before
    assert window.seconds > 0 and window.rate == 2 / window.seconds


def test_durable_server_counts_statements_commits_and_flushes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The benchmark's server is durable (the tests' is not), and pgcount counts what a
    client did: its statements, its connection, its commits, each a WAL flush."""
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.syspath_prepend(str(REPO / "tests"))
    import pg_bench
    import pgcount

    from pgserver import connect

    server = pg_bench.start_server()
    assert server is not None
    try:
        found = pg_bench.settings(server)
        assert {k: found[k] for k in pg_bench.DURABLE} == pg_bench.DURABLE
        url = server.fresh()
        with connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (x int)")
        counter = pgcount.Counter(server.url())

        def client(commits: int) -> None:
            with connect(url, autocommit=True) as conn:
                for i in range(commits):
                    conn.execute("INSERT INTO t VALUES (%s)", (i,))
                conn.execute("SELECT count(*) FROM t")

        db = pgcount.database(url)
        got = counter.around(db, lambda: client(3))
        assert (got.statements, got.connections, got.write_commits) == (4, 1, 3)
        assert got.wal_flushes >= 3 and got.wal_bytes > 0
        per = pgcount.marginal(counter, db, client, 1, 4)  # the connection cancels out
        assert (per.statements, per.connections, per.write_commits) == (1, 0, 1)
        counter.close()
    finally:
        server.close()


# -- tables and targets ---------------------------------------------------------------------------


def made_up_run() -> dict[str, object]:
    """A run's JSON with figures made up for the purpose: uwf ahead of one peer, behind the
    other, a row with no ratio."""

    def fig(value: float, unit: str = "ms") -> dict[str, object]:
        return {"value": value, "unit": unit, "spread": 1.0, "samples": [value]}

    figs = {
        "python": {"uwf": fig(10), "LangGraph": fig(10), "Burr": fig(12)},
        "step@small": {"uwf": fig(100), "LangGraph": fig(400), "Burr": fig(80)},
        "step@large": {"uwf": fig(100), "LangGraph": fig(400), "Burr": fig(102)},
        "ext-step@small": {"uwf": fig(110), "LangGraph": fig(400), "Burr": fig(100)},
        "fleet-pg@1": {
            "uwf": fig(20, "steps/s"),
            "LangGraph": fig(10, "steps/s"),
            "Burr": fig(40, "steps/s"),
        },
        "pg-step@small": {"uwf": fig(150), "Burr": fig(90)},
        "pg-fs-step@small": {"uwf": fig(100)},
        "pg-cold-statements": {"uwf": fig(12, "count"), "Burr": fig(5, "count")},
        "warm-cpu@fs": {"uwf": fig(1.5), "Burr": fig(0.4)},
    }
    return {
        "meta": {"lines": ["made up"], "sizes": {"fleet_steps": 1000}},
        "rows": [[k, f"row {k}", "step"] for k in figs],
        "figs": figs,
        "targets": [],
        "no_ratio": ["python"],
        "next": [],
    }


def test_tables_give_each_peer_its_ratio_and_none_where_the_work_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import report

    run = report.Run(made_up_run())
    header, rows = run.table("step")
    assert header == ["measure", "uwf", "LangGraph", "Burr", "uwf/LangGraph", "uwf/Burr"]
    by = {r[0]: r for r in rows}
    assert by["row python"][4:] == ["—", "—"]  # the same interpreter, different work
    assert by["row step@small"][4:] == ["0.25×", "1.25×"]
    assert by["row fleet-pg@1"][4:] == ["0.50×", "2.00×"]  # rates: the peer's over uwf's
    assert by["row pg-step@small"][4:] == ["—", "1.67×"]
    header, rows = run.headline()
    assert header == ["measure", "uwf", "vs LangGraph alone", "vs Burr alone"]
    by = {r[0]: r for r in rows}
    assert by["row step@small"][2:] == ["lead 0.25×", "trail 1.25×"]
    assert by["row step@large"][2:] == ["lead 0.25×", "tie 0.98×"]
    assert "row python" not in by
    assert run.fill("{{vs:step@small:Burr}} {{fleet_steps}} {{vs:nothing:Burr}}") == (
        "1.25× 1,000 n/a"
    )


def test_next_rounds_targets_are_judged_against_each_peer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import report
    import targets

    figs = report.Run(made_up_run()).figs
    judged = {(r[0], r[1]): r for r in targets.judge_next(figs, {"large": 10_000})}

    def verdict(row: str) -> str:
        return next(r[5] for (name, _t), r in judged.items() if name == row)

    assert verdict("cold step, 10-step thread") == "MISS"  # 1.25× Burr
    assert verdict("cold step, 10,000-step thread") == "pass"  # 0.98× Burr
    assert verdict("external-agent step") == "pass"  # 1.10× the best peer: within 1.2×
    assert verdict("fleet, external agents, 1 worker") == "MISS"  # Burr's 40 steps/s
    assert verdict("fleet, external agents, 2 workers") == "n/a"  # not measured
    assert verdict("PostgreSQL cold step (durable server)") == "MISS (fs: 100.0 ms)"
    assert verdict("… its statements") == "MISS"  # 12 > 10
    assert verdict("warm step, CPU").startswith(("pass", "MISS"))
    row = next(r for (name, _t), r in judged.items() if name == "cold step, 10-step thread")
    assert row[2:5] == ("100.0 ms", "400.0 ms (0.25×)", "80.0 ms (1.25×)")


# -- a run -------------------------------------------------------------------------------------

SECTIONS = ("start", "read", "step", "disk", "fork", "store", "warm")  # and "instr" (valgrind)


def placeholders(text: str) -> list[tuple[str, str]]:
    return re.findall(r"\{\{(\w+)(?::([^}]*))?\}\}", text)


def named_rows(template: str) -> set[str]:
    """The row keys the template's {{fig:KEY:TOOL}}, {{vs:KEY:PEER}} and {{ratio:KEY}} name."""
    return {
        arg.rsplit(":", 1)[0] if kind in ("fig", "vs") else arg
        for kind, arg in placeholders(template)
        if kind in ("fig", "ratio", "vs")
    }


NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(×|ms|s|B|nodes/s)?")


def numbers(text: str) -> list[float]:
    """The numbers of ``text``, in ms where a time (``1 s`` is 1000)."""
    return [
        float(value.replace(",", "")) * (1000 if unit == "s" else 1)
        for value, unit in NUMBER.findall(text)
    ]


def check_verdict(label: str, measured: str, verdict: str) -> None:
    """A verdict follows from its figure: ``n/a`` exactly when it was not measured, else pass
    when the measured figures keep to the bound the label names (``≤ 100 ms``, ``≥ 20,000
    nodes/s``, ``within 1.2×``); a comparison with a peer (``… vs Burr …``) is judged by the
    run, not here."""
    assert (verdict == "n/a") == (measured in ("not measured", "peers not run")), label
    bound = re.search(r"(≤|≥|within) (\d[\d,.]*\s*(?:×|ms|s|B|nodes/s)?)", label)
    if verdict == "n/a" or bound is None or " vs " in measured:
        return
    limit = numbers(bound[2])[0]
    shown = numbers(measured.split("(")[0])  # "1.16× (331.1 / 286.0 ms)": the ratio
    assert shown, (label, measured)
    if limit in shown:  # rounded onto the bound: either verdict is right
        return
    kept = all(v >= limit for v in shown) if bound[1] == "≥" else all(v <= limit for v in shown)
    assert verdict == ("pass" if kept else "FAIL"), (label, measured, verdict)


@pytest.mark.stress
@pytest.mark.timeout(1200)
def test_a_run_has_every_row_target_and_table(tmp_path: Path) -> None:
    """A whole run at tiny sizes, uwf alone, without PostgreSQL (a minute or two)."""
    out_json, md = tmp_path / "run.json", tmp_path / "run.md"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "compare.py"),
            "--no-peers",
            "--no-postgres",  # its rows: test_postgres_and_fleet_rows
            "--no-instructions",  # valgrind: minutes
            *("--steps", "20", "--threads", "5", "--nodes-large", "50", "--repeat", "1"),
            *("--window", "2", "--workdir", str(tmp_path), "--json", str(out_json)),
            *("--md", str(md)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(out_json.read_text())
    keys = [key for key, _label, _section in run["rows"]]
    assert len(keys) == len(set(keys))
    sections = {section for _k, _l, section in run["rows"]}
    assert sections - {"instr"} == set(SECTIONS)
    for key in keys:  # every row has a uwf figure and no peer figure without peers
        assert set(run["figs"][key]) == {"uwf"}, key
    # the rows the targets and docs/performance.md name are there
    template = (BENCH / "performance.template.md").read_text()
    named = named_rows(template)
    local = {k for k in named if not k.startswith(("pg-", "fleet-", "instr-"))}
    assert local <= set(keys), sorted(local - set(keys))
    assert {arg for kind, arg in placeholders(template) if kind == "table"} == {
        *SECTIONS,
        "instr",
        "pg",
        "pg-count",
        "pg-own",
        "fleet",
    }
    verdicts = {label: verdict for label, _measured, verdict in run["targets"]}
    for label, measured, verdict in run["targets"]:
        check_verdict(label, measured, verdict)
    assert set(verdicts.values()) <= {"pass", "FAIL", "n/a"}
    skipped = ("best peer", "PostgreSQL", "instructions")  # --no-peers/-postgres/-instructions
    not_run = [label for label in verdicts if any(what in label for what in skipped)]
    assert not_run and all(verdicts[label] == "n/a" for label in not_run)
    assert all(verdicts[label] != "n/a" for label in verdicts if label not in not_run)
    for target in ("uwf thread show ≤ 1.25× the frozen Typer import", "uwf --help ≤ 1.15×"):
        label = next(x for x in verdicts if x.startswith(target))
        assert verdicts[label] in ("pass", "FAIL")
    nexts = {row[0]: row[5] for row in run["next"]}  # issue 36's targets
    assert nexts["cold step, 10-step thread"] == "n/a"  # against Burr: not run
    assert nexts["warm step, CPU"] in ("pass", "MISS")  # ≤ 2 ms: uwf alone
    assert all(v in ("pass", "MISS", "n/a") or v.startswith("MISS (") for v in nexts.values())
    assert {"python", "help", "fork-bytes"} <= set(run["no_ratio"])
    assert run["meta"]["freeze"]["uwf"] and run["meta"]["sizes"]["fleet_steps"] > 0
    text = md.read_text()
    assert "| measure | uwf | LangGraph | Burr | uwf/LangGraph | uwf/Burr |" in text
    assert "| target | measured | pass/fail |" in text
    assert "| row | target | uwf | LangGraph | Burr | pass/miss |" in text
    printed = proc.stdout
    assert "uwf/Burr" in printed and "pass/fail" in printed and "pass/miss" in printed
    assert not any(tmp_path.glob("uwf-compare-*")), "the work directory was not removed"

    # docs/performance.md from this run: every placeholder filled, nothing left over
    sys.path.insert(0, str(BENCH))
    import report

    filled = report.Run(run).fill(template)
    assert "{{" not in filled and "}}" not in filled


def test_a_short_run_fills_rows_targets_and_tables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The harness end to end on the start-up and step rows (the whole run is a stress
    test): rows timed interleaved and checked, the figures judged, the tables and the docs
    filled from them."""
    monkeypatch.syspath_prepend(str(BENCH))
    import report
    import rows_fs
    import targets

    b = bench_for(tmp_path, steps=20, threads=2, nodes_large=10)
    rows_fs.build(b)  # type: ignore[arg-type]
    rows_fs.startup(b)  # type: ignore[arg-type]
    rows_fs.steps(b)  # type: ignore[arg-type]
    figs, rows = b.figs, b.rows  # type: ignore[attr-defined]
    keys = [key for key, _label, _section in rows]
    assert keys[:6] == ["python", "typer", "typer-frozen", "help", "show@small", "show@large"]
    assert {"step@small", "step@large", "ext-step@small", "step-inproc@small"} <= set(keys)
    assert dict((k, s) for k, _l, s in rows)["show@large"] == "read"  # timed with start-up
    # step@small, ext-step@small and step-inproc@small each ran repeat + 1 = 2 steps
    assert b.counts["uwf"] == {"small": 10 + 3 * 2, "large": 20 + 2}  # type: ignore[attr-defined]
    sizes = {"large": 20, "small": 10, "threads_small": 2, "threads_large": 2}
    sizes |= {"nodes_small": 10, "nodes_large": 10, "fleet_steps": 4}
    data = {
        "meta": {"lines": ["a short run"], "sizes": sizes},
        "rows": rows,
        "figs": {k: {t: f.as_json() for t, f in v.items()} for k, v in figs.items()},
        "targets": targets.shown(targets.judge(figs, rows, sizes)),
        "next": [list(t) for t in targets.judge_next(figs, sizes)],
        "no_ratio": sorted(b.no_ratio),  # type: ignore[attr-defined]
    }
    run = report.Run(json.loads(json.dumps(data)))
    assert {"python", "help"} <= run.no_ratio
    header, table = run.table("step")
    assert header[-2:] == ["uwf/LangGraph", "uwf/Burr"] and len(table) >= 3
    assert all(row[1].endswith("ms") or "(noisy)" in row[1] for row in table)
    verdicts = {row[0]: row[5] for row in run.next}
    assert verdicts["cold step, 10-step thread"] == "n/a"  # no Burr here
    assert "| row | target | uwf | LangGraph | Burr | pass/miss |" in run.last_run_md()
    filled = run.fill((BENCH / "performance.template.md").read_text())
    assert "{{" not in filled and "}}" not in filled


def test_docs_are_the_template_filled_with_the_last_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/performance.md is generated (`python3 benchmarks/report.py`): regenerating it from
    benchmarks/last-run.json gives the file as it is."""
    monkeypatch.syspath_prepend(str(BENCH))
    import report

    run = report.Run.load(report.RUN_JSON)
    assert run.fill(report.TEMPLATE.read_text()) == report.DOCS.read_text()
    assert (BENCH / "last-run.md").read_text() == run.last_run_md()


def bench_for(tmp_path: Path, **sizes: object) -> object:
    """A Bench at tiny sizes, uwf alone."""
    import argparse

    from bench import Bench, Sizes

    args = argparse.Namespace(
        **{
            "quick": True,
            "steps": 20,
            "threads": 4,
            "nodes_large": 20,
            "window": 1,
            "repeat": 1,
            "fleet_threads": 2,
            "fleet_steps": 2,
            "fleet_runs": 1,
            "fleet_workers": "1,2",
            "no_peers": True,
            "peer": [],
            **sizes,
        }
    )
    work = tmp_path / "work"
    work.mkdir()
    return Bench(args, Sizes.from_args(args), work)


def test_a_uwf_fleet_runs_every_step_with_the_external_agent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fleet run of uwf workers on the filesystem, each step through uwf-cmd and the
    benchmark's agent program: every step of every thread lands with its answer."""
    monkeypatch.syspath_prepend(str(BENCH))
    import fleet

    b = bench_for(tmp_path, fleet_threads=3, fleet_steps=2)
    window = fleet.uwf_fleet(b, 1, None, "smoke", fleet.external_agent())  # type: ignore[arg-type]
    assert window.total == 6 and 0 < window.steps <= 6 and window.rate > 0


@pytest.mark.stress
@pytest.mark.timeout(1800)
def test_postgres_and_fleet_rows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The PostgreSQL rows measure uwf on a copy of the roots on a durable server, count what
    its steps cost the server, and the fleet rows count every step of every thread, on both
    backends (tiny sizes, no peers; a minute or more)."""
    monkeypatch.syspath_prepend(str(BENCH))
    import pg_bench
    import rows_fs

    b = bench_for(tmp_path)
    rows_fs.build(b)  # type: ignore[arg-type]
    b.s.warm_batches, b.s.warm_count, b.s.statements = 1, 2, 2  # type: ignore[attr-defined]
    pg_bench.run_all(b)  # type: ignore[arg-type]
    keys = [key for key, _label, _section in b.rows]  # type: ignore[attr-defined]
    counts = [
        f"pg-{kind}-{what}"
        for kind in ("cold", "worker")
        for what in ("statements", "connections", "write-commits", "wal-flushes", "wal-bytes")
    ]
    assert keys[:16] == [
        "pg-copy",
        "pg-show@small",
        "pg-show@large",
        "pg-list@small",
        "pg-step@small",
        "pg-fs-step@small",
        *counts,
    ]
    assert keys[16:18] == ["pg-step-unlimited@small", "pg-step-limited@small"]  # the limits
    assert {"pg-own-ms", "pg-own-statements", "pg-agent-statements", "pg-warm"} <= set(keys)
    assert [k for k in keys if k.startswith("fleet-")] == [
        "fleet-fs@1",
        "fleet-fs@2",
        "fleet-pg@1",
        "fleet-pg@2",
        "fleet-inproc@1",  # uwf's in-process agents (fleet.uwf_inprocess_agent): a row of its own
        "fleet-inproc@2",
    ]
    figs = b.figs  # type: ignore[attr-defined]
    assert figs["pg-cold-statements"]["uwf"].value > 0
    assert figs["pg-cold-write-commits"]["uwf"].value >= 1
    assert figs["pg-cold-wal-flushes"]["uwf"].value >= 1  # fsync on: commits are flushed
    assert figs["pg-worker-statements"]["uwf"].value > 0
    for key in keys:
        assert set(figs[key]) == {"uwf"}, key
    template = (BENCH / "performance.template.md").read_text()
    named = {k for k in named_rows(template) if k.startswith(("pg-", "fleet-"))}
    assert named - set(keys) <= {"fleet-pg@8", "fleet-inproc@8"}  # sizes the test leaves out
