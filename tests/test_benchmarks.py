"""The comparison benchmark (benchmarks/), uwf side only and at tiny sizes.

No timing is asserted: these tests check that the benchmark measures what it says. The
long threads it builds in-process must be exactly what real ``uwf thread step`` calls with
its agent write (same hashes); every side's answers come from one generator; a run must
produce every row of its sections with a uwf figure, every target, the run's JSON and tables,
and docs/performance.md must be what its template makes of a run. The peers (LangGraph,
Burr) are not installed here, so the runs use ``--no-peers``.
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
    from uwf.agent_kit.frontmatter import split
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


def test_peers_are_pinned_whole() -> None:
    """run.sh installs the peers under a constraints file pinning every package of their
    venv, each with an exact version."""
    run = (BENCH / "run.sh").read_text()
    assert '-c "$CONSTRAINTS"' in run and "peers/constraints.txt" in run
    lines = [
        line
        for line in (BENCH / "peers" / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines and all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[\w.+]+", x) for x in lines)
    for direct in ("langgraph", "apache-burr", "langgraph-checkpoint-postgres", "psycopg2-binary"):
        assert any(x.lower().startswith(direct + "==") for x in lines), direct


# -- a run -------------------------------------------------------------------------------------

SECTIONS = ("start", "read", "step", "disk", "fork", "store", "warm")  # and "instr" (valgrind)


def placeholders(text: str) -> list[tuple[str, str]]:
    return re.findall(r"\{\{(\w+)(?::([^}]*))?\}\}", text)


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


def test_a_run_has_every_row_target_and_table(tmp_path: Path) -> None:
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
    named = {
        arg.rsplit(":", 1)[0] for kind, arg in placeholders(template) if kind in ("fig", "ratio")
    }
    local = {k for k in named if not k.startswith(("pg-", "fleet-", "instr-"))}
    assert local <= set(keys), sorted(local - set(keys))
    assert {arg for kind, arg in placeholders(template) if kind == "table"} == {
        *SECTIONS,
        "instr",
        "pg",
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
    text = md.read_text()
    assert "| measure | uwf | LangGraph | Burr | uwf/best-peer |" in text
    assert "| target | measured | pass/fail |" in text
    printed = proc.stdout
    assert "uwf/best-peer" in printed and "pass/fail" in printed
    assert not any(tmp_path.glob("uwf-compare-*")), "the work directory was not removed"

    # docs/performance.md from this run: every placeholder filled, nothing left over
    sys.path.insert(0, str(BENCH))
    import report

    filled = report.Run(run).fill(template)
    assert "{{" not in filled and "}}" not in filled


def test_docs_are_the_template_filled_with_the_last_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/performance.md is generated (`python3 benchmarks/report.py`): regenerating it from
    benchmarks/last-run.json gives the file as it is."""
    monkeypatch.syspath_prepend(str(BENCH))
    import report

    run = report.Run.load(report.RUN_JSON)
    assert run.fill(report.TEMPLATE.read_text()) == report.DOCS.read_text()
    assert (BENCH / "last-run.md").read_text() == run.last_run_md()


def test_postgres_and_fleet_rows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The PostgreSQL rows measure uwf on a copy of the roots, count the statements of its
    steps, and the fleet rows count every step of every thread, on both backends (tiny
    sizes, no peers; the benchmark's own server, with pg_stat_statements)."""
    monkeypatch.syspath_prepend(str(BENCH))
    import argparse

    import pg_bench
    import rows_fs
    from bench import Bench, Sizes

    args = argparse.Namespace(
        quick=True,
        steps=20,
        threads=4,
        nodes_large=20,
        window=1,
        repeat=1,
        fleet_threads=2,
        fleet_runs=1,
        no_peers=True,
        peer_python=None,
    )
    work = tmp_path / "work"
    work.mkdir()
    b = Bench(args, Sizes.from_args(args), work)
    rows_fs.build(b)
    b.s.warm_batches, b.s.warm_count, b.s.statements = 1, 2, 2
    pg_bench.run_all(b)
    keys = [key for key, _label, _section in b.rows]
    assert keys[:6] == [
        "pg-copy",
        "pg-show@small",
        "pg-show@large",
        "pg-list@small",
        "pg-step@small",
        "pg-statements",
    ]
    assert keys[6:8] == ["pg-step-unlimited@small", "pg-step-limited@small"]  # the limits
    assert {"pg-own-ms", "pg-own-statements", "pg-agent-statements", "pg-warm"} <= set(keys)
    assert [k for k in keys if k.startswith("fleet-")] == [
        f"fleet-{backend}@{n}" for n in (1, 2, 4, 8) for backend in ("fs", "pg")
    ]
    assert b.figs["pg-statements"]["uwf"].value > 0
    assert b.figs["pg-own-statements"]["uwf"].value > 0
    for key in keys:
        assert set(b.figs[key]) == {"uwf"}, key
    template = (BENCH / "performance.template.md").read_text()
    named = {
        arg.rsplit(":", 1)[0] for kind, arg in placeholders(template) if kind in ("fig", "ratio")
    }
    assert {k for k in named if k.startswith(("pg-", "fleet-"))} <= set(keys)
