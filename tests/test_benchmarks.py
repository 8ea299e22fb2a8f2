"""The comparison benchmark (benchmarks/compare.py), uwf side only and at tiny sizes.

No timing is asserted: these tests check that the benchmark measures what it says. The
long threads it builds in-process must be exactly what real ``uwf thread step`` calls with
``uwf-mock`` write (same hashes), and a run must print every row and every target. The peers
(LangGraph, Burr) are not installed here, so the runs use ``--no-peers``.
"""

from __future__ import annotations

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


def test_built_chain_is_what_real_steps_write(bench, root: Path, tmp_path: Path, cli_proc) -> None:
    scenario = bench.write_scenario(tmp_path / "scenario.json")
    workflow = bench.setup_root(root, scenario)
    with bench.bulk_writes():
        builder = bench.ChainBuilder(root, workflow, scenario)
        built = builder.extend(builder.start("same task"), 5)

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
    roles = [r["role"] for r in cli_proc("thread", "steps", thread).json()["steps"][1:]]
    assert roles == ["planner", "developer", "reviewer", "developer", "reviewer"]


def test_built_thread_steps_on_with_the_real_cli(bench, root: Path, tmp_path: Path, cli_proc):
    scenario = bench.write_scenario(tmp_path / "scenario.json")
    tr = bench.build_threads_root(root, scenario, small=3, mid=4, large=8, window=2)
    assert cli_proc("thread", "show", tr.threads["large"]).json()["steps"] == 8
    out = cli_proc("thread", "step", tr.threads["large"])
    assert out.code == 0, out.err
    assert out.json()["role"] == "reviewer"  # step 8 was a developer's
    assert cli_proc("cas", "verify").json()["ok"] is True
    # engine bytes per step: the StepNode files of the window plus one 14-byte index line each
    chain = tr.steps["large"]

    def size(h: str) -> int:
        return (root / "cas" / "objects" / h[:2] / h).stat().st_size

    early, late = tr.engine_bytes["early"], tr.engine_bytes["late"]
    assert early.apparent == (size(chain[3]) + size(chain[4])) // 2 + 14
    assert late.apparent == (size(chain[6]) + size(chain[7])) // 2 + 14
    assert early.blocks >= early.apparent


def test_list_root_has_that_many_active_threads(bench, root: Path, tmp_path: Path, cli_proc):
    scenario = bench.write_scenario(tmp_path / "scenario.json")
    bench.build_list_root(root, scenario, 7)
    listed = cli_proc("thread", "list").json()
    assert len(listed) == 7
    assert {t["status"] for t in listed} == {"idle"}


def test_filler_nodes_are_valid_nodes(bench, root: Path, tmp_path: Path, cli_proc) -> None:
    scenario = bench.write_scenario(tmp_path / "scenario.json")
    cas = bench.setup_cas_root(root, scenario)
    bench.fill(root, 0, 300, workers=2)
    report = cli_proc("cas", "verify").json()
    assert report["ok"] is True
    assert report["scanned"] >= 300
    assert cli_proc("cas", "get", cas.text_hash).json()["payload"] == "the node we read"


def test_packed_filler_nodes_are_valid_nodes(bench, root: Path, tmp_path: Path, cli_proc):
    scenario = bench.write_scenario(tmp_path / "scenario.json")
    cas = bench.setup_cas_root(root, scenario)
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


FIGURE = re.compile(r"^(?P<value>[\d,]+(?:\.\d+)?) (?P<unit>ms|B|nodes/s|steps/s)( \(noisy\))?$")
NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(×|ms|s|B|nodes/s)?")


def cells(block: str) -> list[list[str]]:
    """The rows of a printed table (after its header and rule), cell by cell."""
    return [[c.strip() for c in line.split(" | ")] for line in block.splitlines()[2:]]


def figure(text: str) -> float:
    found = FIGURE.match(text)
    assert found, f"not a figure: {text!r}"
    return float(found["value"].replace(",", ""))


def numbers(text: str) -> list[float]:
    """The numbers of ``text``, in ms where a time (``1 s`` is 1000)."""
    return [
        float(value.replace(",", "")) * (1000 if unit == "s" else 1)
        for value, unit in NUMBER.findall(text)
    ]


def check_verdict(label: str, measured: str, verdict: str) -> None:
    """A verdict follows from its figure: ``n/a`` exactly when a peer was not run, else
    pass when the measured figures keep to the bound the label names (``≤ 100 ms``,
    ``≥ 20,000 nodes/s``, ``within 1.2×``)."""
    assert (verdict == "n/a") == ("not run" in measured), (label, measured, verdict)
    bound = re.search(r"(≤|≥|within) (\d[\d,.]*\s*(?:×|ms|s|B|nodes/s)?)", label)
    if verdict == "n/a" or bound is None:
        return
    limit = numbers(bound[2])[0]
    shown = numbers(measured.split("(")[0])  # "1.16× (331.1 / 286.0 ms)": the ratio
    assert shown, (label, measured)
    if limit in shown:  # rounded onto the bound: either verdict is right
        return
    kept = all(v >= limit for v in shown) if bound[1] == "≥" else all(v <= limit for v in shown)
    assert verdict == ("pass" if kept else "FAIL"), (label, measured, verdict)


def test_uwf_side_prints_every_row_and_target(tmp_path: Path) -> None:
    """The tables' structure, not their labels: every row a uwf figure (and no peer figure
    without peers), every verdict following from its figure, the start-up table agreeing with
    the rows it is computed from, and the same tables in the markdown file."""
    md = tmp_path / "run.md"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "compare.py"),
            "--no-peers",
            "--no-postgres",  # its rows: test_postgres_and_fleet_rows
            *("--steps", "20", "--threads", "5", "--nodes-large", "50", "--repeat", "1"),
            *("--workdir", str(tmp_path), "--md", str(md)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    blocks = proc.stdout.split("\n\n")
    main = next(block for block in blocks if block.startswith("measure "))
    targets = next(block for block in blocks if block.startswith("target "))
    startup = next(block for block in blocks if block.startswith("uwf command "))
    header = [c.strip() for c in main.splitlines()[0].split(" | ")]
    assert header == ["measure", "uwf", "LangGraph", "Burr", "uwf/best-peer"]
    rows = cells(main)
    assert rows
    figures: dict[str, float] = {}
    for label, uwf, *peers in rows:
        assert label and peers == ["—", "—", "—"], label  # no peer figure without peers
        figures[label] = figure(uwf)  # every row has a uwf figure with its unit
    for label, measured, verdict in cells(targets):
        check_verdict(label, measured, verdict)
    # the start-up table is computed from rows of the main table: the same figures
    python = figures["interpreter start (python -c pass)"]
    typer = figures['Typer import (python -c "import typer")']
    started = cells(startup)
    assert [row[0] for row in started][:2] == ['python -c "import typer"', "uwf --help"]
    for command, median, over_python, over_typer in started:
        value = figure(median)
        assert value in figures.values(), command
        assert over_python == f"{value / python:.1f}×" and over_typer == f"{value / typer:.2f}×"
    text = md.read_text()
    assert "| measure | uwf | LangGraph | Burr | uwf/best-peer |" in text
    assert "| target | measured | pass/fail |" in text
    assert len([line for line in text.splitlines() if line.startswith("| ")]) == (
        len(rows) + len(cells(targets)) + len(started) + 3
    )
    assert not any(tmp_path.glob("uwf-compare-*")), "the work directory was not removed"


def test_postgres_and_fleet_rows(bench, tmp_path: Path, pg_server) -> None:
    """The PostgreSQL rows measure uwf on a verified copy of the roots, and the fleet rows
    count every step of every thread, on both backends (tiny sizes, no peers)."""
    from types import SimpleNamespace

    import pg_bench

    scenario = bench.write_scenario(tmp_path / "scenario.json")
    tr = bench.build_threads_root(tmp_path / "threads", scenario, small=3, mid=4, large=8, window=2)
    bench.build_list_root(tmp_path / "list", scenario, 4)
    rows: list[tuple[str, str, dict]] = []
    fake = SimpleNamespace(
        s=SimpleNamespace(small=3, large=8, threads_small=4),
        tr=tr,
        list_small=tmp_path / "list",
        work=tmp_path,
        cwd=tmp_path,
        scenario=scenario,
        pg_peers={},
        fleet_threads=2,
        say=lambda text: None,
        timed=lambda key, label, jobs: rows.append((key, label, jobs)),
        static=lambda key, label, figs: rows.append((key, label, figs)),
    )
    pg_bench.run_postgres(fake, pg_server)
    assert [r[0] for r in rows] == [
        "pg-copy",
        "pg-show@small",
        "pg-show@large",
        "pg-list@small",
        "pg-step@small",
    ]
    assert rows[0][2]["uwf"].unit == "nodes/s" and rows[0][2]["uwf"].value > 0
    for _key, _label, jobs in rows[1:]:
        job = jobs["uwf"]
        out = subprocess.run(job.argv, env=job.env, cwd=job.cwd, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert job.env["UWF_STORE"].startswith("postgresql://")
    for url in (None, pg_server.fresh()):
        fig = pg_bench.fleet_rate(fake, 2, url)  # raises unless 2 threads x 5 steps ran
        assert fig.unit == "steps/s" and fig.value > 0
