"""The comparison benchmark (benchmarks/compare.py), uwf side only and at tiny sizes.

No timing is asserted: these tests check that the benchmark measures what it says. The
long threads it builds in-process must be exactly what real ``uwf thread step`` calls with
``uwf-mock`` write (same hashes), and a run must print every row and every target. The peers
(LangGraph, Burr) are not installed here, so the runs use ``--no-peers``.
"""

from __future__ import annotations

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


def test_uwf_side_prints_every_row_and_target(tmp_path: Path) -> None:
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
    out = proc.stdout
    table = out.split("\n\n")
    main = next(block for block in table if block.startswith("measure "))
    targets = next(block for block in table if block.startswith("target "))
    assert main.splitlines()[0].split(" | ")[-1].strip() == "uwf/best-peer"
    labels = [line.split(" | ")[0].strip() for line in main.splitlines()[2:]]
    expected = [
        "uwf thread steps, 20-step thread, loose files (before cas pack)",
        "uwf cas pack: ",
        "interpreter start (python -c pass)",
        'Typer import (python -c "import typer")',
        "uwf --help",
        "latest state (uwf thread show), 10-step thread",
        "latest state (uwf thread show), 20-step thread",
        "uwf thread read (default quota), 10-step thread",
        "uwf thread read (default quota), 20-step thread",
        "full history (uwf thread steps), 2-step thread",
        "full history (uwf thread steps), 20-step thread",
        "thread list, 5 active threads",
        "thread list, 5 active threads",
        "uwf cas verify,",
        "uwf cas verify rate",
        "cold process, one step, 10-step thread (uwf: thread step + uwf-mock)",
        "cold process, one step, 20-step thread (uwf: thread step + uwf-mock)",
        "uwf thread fork at step 1 of 20",
        "find + fork at step 10 of 20",
        "uwf thread fork at step 20 of 20",
        "fork: bytes copied",
        "uwf cas get, 50 nodes in the store",
        "uwf workflow show, 50 nodes in the store",
        "uwf cas get, 50 nodes in the store",
        "uwf workflow show, 50 nodes in the store",
        "uwf cas get, 50 nodes in one pack",
        "uwf workflow show, 50 nodes in one pack",
        "uwf cas get, 50 nodes in one pack",
        "uwf workflow show, 50 nodes in one pack",
        "uwf: bytes per step as loose files, apparent size, steps 10..12",
        "uwf: bytes per step as loose files, blocks used, steps 10..12",
        "bytes per step once packed, apparent size, steps 10..12",
        "bytes per step once packed, blocks used, steps 10..12",
        "uwf: bytes per step as loose files, apparent size, steps 18..20",
        "uwf: bytes per step as loose files, blocks used, steps 18..20",
        "bytes per step once packed, apparent size, steps 18..20",
        "bytes per step once packed, blocks used, steps 18..20",
        "uwf: all files one real step adds, apparent",
        "uwf: all files one real step adds, blocks used",
    ]
    assert len(labels) == len(expected)
    for label, start in zip(labels, expected, strict=True):
        assert label.startswith(start), (label, start)
    for line in main.splitlines()[2:]:
        cells = [c.strip() for c in line.split(" | ")]
        assert cells[1] != "—", line  # every row has a uwf figure
        assert cells[2:] == ["—", "—", "—"], line  # and no peer figure without peers
    verdicts = [line.rsplit(" | ", 1)[1].strip() for line in targets.splitlines()[2:]]
    assert len(verdicts) == 24
    assert set(verdicts) <= {"pass", "FAIL", "n/a"}
    # the three comparisons with the peers' cold step, list and history vs the best peer, and
    # "uwf ≤ the best peer on every row"
    assert verdicts.count("n/a") == 6
    packed = next(line for line in targets.splitlines() if line.startswith("disk per step once"))
    assert [c.strip() for c in packed.split(" | ")][2] == "pass"
    fork = next(line for line in targets.splitlines() if line.startswith("fork copies 0 bytes"))
    assert [c.strip() for c in fork.split(" | ")][1:] == ["0 B", "pass"]
    text = md.read_text()
    assert "| measure | uwf | LangGraph | Burr | uwf/best-peer |" in text
    assert "| target | measured | pass/fail |" in text
    startup = text.split("## Start-up, as a multiple of a bare interpreter", 1)[1]
    for target in ("uwf thread show ≤ 1.25×", "uwf --help ≤ 1.15×"):
        line = next(x for x in targets.splitlines() if x.startswith(target))
        ratio, verdict = [c.strip() for c in line.split(" | ")][1:]
        assert ratio.endswith(" ms)") and "× (" in ratio and verdict in ("pass", "FAIL")
    ratios = [x for x in startup.splitlines() if x.rstrip(" |").endswith("×")]
    assert [r.split(" | ")[0] for r in ratios] == [
        '| python -c "import typer"',
        "| uwf --help",
        "| uwf thread show",
        "| uwf thread step + uwf-mock",
    ]
    assert all(r.rstrip(" |").endswith("×") for r in ratios)
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
