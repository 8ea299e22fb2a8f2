"""uwf's targets, each judged from the figures of one run.

``judge``: the standing targets, (target, measured, pass/FAIL/n/a). ``judge_next``: the
targets of issue 36 (docs/performance.md, "Targets of the next round"), each against each
peer alone — (row, target, uwf, LangGraph, Burr, pass/MISS/n/a), a peer's cell its figure and
uwf's ratio to it. A target whose figures are missing (no peers, no PostgreSQL) is ``n/a``,
never a pass.
"""

from __future__ import annotations

from collections.abc import Callable

from harness import Fig

Figs = dict[str, dict[str, Fig]]
Target = tuple[str, str, bool | None]
PEERS = ("LangGraph", "Burr")

# Rows compared with the peers that are not the time (or disk) of one cold process per
# command, or not uwf's own work: left out of "uwf ≤ the best peer on every cold-process row"
# (statements per step show a design cost; uwf's own statements have a target of their own).
NOT_COLD = (
    "python",
    "help",
    "warm",
    "fleet",
    "pg-own",
    "pg-warm",
    "pg-cold",
    "pg-worker",
    "pg-fs-step",
    "instr",
)


def best_peer(figs: Figs, key: str) -> tuple[str, Fig] | None:
    found = [(t, figs[key][t]) for t in PEERS if t in figs.get(key, {})]
    if not found:
        return None
    higher_is_better = found[0][1].unit.endswith("/s")
    pick = max if higher_is_better else min
    return pick(found, key=lambda p: p[1].value)


def behind(figs: Figs, key: str) -> float | None:
    """uwf's figure over the best peer's, oriented so that above 1 means uwf is behind."""
    peer = best_peer(figs, key)
    ours = figs.get(key, {}).get("uwf")
    if peer is None or ours is None or peer[1].value <= 0:
        return None
    if ours.unit.endswith("/s"):
        return peer[1].value / ours.value if ours.value > 0 else None
    return ours.value / peer[1].value


def ratio_to(figs: Figs, key: str, peer: str) -> float | None:
    """uwf's figure over one peer's, oriented so that above 1 means uwf is behind."""
    ours, theirs = figs.get(key, {}).get("uwf"), figs.get(key, {}).get(peer)
    if ours is None or theirs is None or theirs.value <= 0 or ours.value <= 0:
        return None
    if ours.unit.endswith("/s"):
        return theirs.value / ours.value
    return ours.value / theirs.value


def judge(
    figs: Figs,
    rows: list[tuple[str, str, str]],
    sizes: dict[str, int],
    no_ratio: frozenset[str] = frozenset(),
) -> list[Target]:
    out: list[Target] = []

    def has(*keys: str, tool: str = "uwf") -> bool:
        return all(tool in figs.get(k, {}) for k in keys)

    def v(key: str, tool: str = "uwf") -> float:
        return figs[key][tool].value

    def add(
        label: str, keys: tuple[str, ...], measured: Callable[[], str], ok: Callable[[], bool]
    ) -> None:
        if has(*keys):
            out.append((label, measured(), ok()))
        else:
            out.append((label, "not measured", None))

    def over(label: str, key: str, base: str, limit: float) -> None:
        add(
            f"{label} ≤ {limit}× {base_label(base)}",
            (key, base),
            lambda: f"{v(key) / v(base):.2f}× ({v(key):.1f} / {v(base):.1f} ms)",
            lambda: v(key) / v(base) <= limit,
        )

    def ceiling(label: str, key: str, limit: float) -> None:
        add(
            f"{label} ≤ {limit:g} ms",
            (key,),
            lambda: figs[key]["uwf"].text(),
            lambda: v(key) <= limit,
        )

    def within(label: str, big: str, small: str, limit: float = 1.2) -> None:
        add(
            f"{label} within {limit}×",
            (big, small),
            lambda: f"{v(big) / v(small):.2f}× ({v(big):.1f} / {v(small):.1f} ms)",
            lambda: v(big) / v(small) <= limit,
        )

    def vs_peer(label: str, key: str) -> None:
        peer = best_peer(figs, key)
        if peer is None or not has(key):
            out.append((f"{label} ≤ the best peer", "peers not run", None))
            return
        ratio = behind(figs, key)
        assert ratio is not None
        shown = f"{figs[key]['uwf'].text()} vs {peer[0]} {peer[1].text()} ({ratio:.2f}×)"
        out.append((f"{label} ≤ the best peer", shown, ratio <= 1))

    large, small = f"{sizes['large']:,}", f"{sizes['small']:,}"
    over("uwf thread show", "show@small", "typer-frozen", 1.25)
    add(
        "… the same, counted in instructions (callgrind: whatever else the machine does)",
        ("instr-show-ratio",),
        lambda: figs["instr-show-ratio"]["uwf"].text(),
        lambda: v("instr-show-ratio") <= 1.25,
    )
    over("uwf --help", "help", "typer-frozen", 1.15)
    ceiling(f"thread show, {large} steps", "show@large", 100)
    ceiling(f"thread read (default quota), {large} steps", "read@large", 100)
    ceiling(f"thread list, {sizes['threads_small']:,} threads", "list@small", 100)
    ceiling("thread step, both processes", "step@small", 250)
    within(f"thread show at {large} vs {small} steps", "show@large", "show@small")
    within(f"thread step at {large} vs {small} steps", "step@large", "step@small")
    within(f"thread read at {large} vs {small} steps", "read@large", "read@small")
    ceiling(f"thread steps over {large} steps", "history@large", 1000)
    forks = ("fork@1", "fork-known@half", "fork@end")
    if has(*forks):
        worst = max(forks, key=v)
        ceiling(f"fork anywhere in {large} steps (slowest of step 1, middle, head)", worst, 100)
    add(
        "fork copies 0 bytes",
        ("fork-bytes",),
        lambda: f"{v('fork-bytes'):,.0f} B",
        lambda: v("fork-bytes") == 0,
    )
    within(
        f"cas get at {sizes['nodes_large']:,} vs {sizes['nodes_small']:,} nodes",
        "casget@large",
        "casget@small",
    )
    within("… and in one pack", "casget-packed@large", "casget-packed@small")
    add(
        "cas verify ≥ 20,000 nodes/s",
        ("verify",),
        lambda: figs["verify"]["uwf"].text(),
        lambda: v("verify") >= 20_000,
    )
    if has("step@small", tool="Burr") and has("step@small"):
        burr = v("step@small", "Burr")
        add(
            "thread step ≤ 0.6× Burr's cold step",
            ("step@small",),
            lambda: f"{v('step@small'):.1f} vs {0.6 * burr:.1f} ms",
            lambda: v("step@small") <= 0.6 * burr,
        )
    vs_peer(f"find + fork by number at step {sizes['large'] // 2:,}", "find-fork@half")
    vs_peer(f"full history, {large} distinct answers", "history@large")
    vs_peer(f"thread list, {sizes['threads_large']:,} threads", "list@large")
    vs_peer("disk per step once packed, every byte, late window", "disk-packed-late-blocks")
    vs_peer("a step whose agent is an external program", "ext-step@small")
    vs_peer("PostgreSQL: cold step", "pg-step@small")
    vs_peer("full history before any pack (loose files)", "history@large-loose")
    cold_rows(figs, [r for r in rows if r[0] not in no_ratio], out)
    add(
        "PostgreSQL: uwf's own work per step beyond its agent ≤ 10 ms",
        ("pg-own-ms",),
        lambda: figs["pg-own-ms"]["uwf"].text(),
        lambda: v("pg-own-ms") <= 10,
    )
    add(
        "PostgreSQL: uwf's own statements per step beyond its agent ≤ 6",
        ("pg-own-statements",),
        lambda: f"{v('pg-own-statements'):.1f}",
        lambda: v("pg-own-statements") <= 6,
    )
    return out


def shown(judged: list[Target]) -> list[list[str]]:
    """The standing targets as a run records them: pass, FAIL or n/a."""
    return [
        [label, measured, "n/a" if ok is None else ("pass" if ok else "FAIL")]
        for label, measured, ok in judged
    ]


def cold_rows(figs: Figs, rows: list[tuple[str, str, str]], out: list[Target]) -> None:
    """uwf ≤ the best peer on every cold-process row (and the disk rows)."""
    compared, missed = 0, []
    for key, label, _section in rows:
        if key.startswith(NOT_COLD):
            continue
        ratio = behind(figs, key)
        if ratio is None:
            continue
        compared += 1
        if ratio > 1:
            missed.append(f"{label} ({ratio:.2f}×)")
    label = "uwf ≤ the best peer on every cold-process row with a peer"
    if not compared:
        out.append((label, "peers not run", None))
    else:
        shown = "; ".join(missed) if missed else f"all {compared} rows"
        out.append((label, shown, not missed))


def base_label(key: str) -> str:
    return {
        "typer-frozen": 'the frozen Typer import (python -c "import typer, gc; gc.freeze()")',
        "typer": 'python -c "import typer"',
    }[key]


# -- issue 36's targets, against each peer alone ------------------------------------------------

Next = tuple[str, str, str, str, str, str]  # row, target, uwf, LangGraph, Burr, verdict


def judge_next(figs: Figs, sizes: dict[str, int]) -> list[Next]:
    """Issue 36's targets (docs/performance.md, "Targets of the next round")."""
    out: list[Next] = []
    large = f"{sizes['large']:,}"

    def cell(key: str, tool: str) -> str:
        fig = figs.get(key, {}).get(tool)
        if fig is None:
            return "—"
        ratio = ratio_to(figs, key, tool) if tool != "uwf" else None
        return fig.text() + (f" ({ratio:.2f}×)" if ratio is not None else "")

    def row(name: str, target: str, key: str, verdict: bool | None) -> None:
        shown = "n/a" if verdict is None else ("pass" if verdict else "MISS")
        out.append(
            (name, target, cell(key, "uwf"), cell(key, "LangGraph"), cell(key, "Burr"), shown)
        )

    def vs(name: str, key: str, limit: float, peers: tuple[str, ...]) -> None:
        """uwf ≤ ``limit`` × each of ``peers`` (for rates: ≥ 1/limit × …)."""
        ratios = [ratio_to(figs, key, p) for p in peers]
        known = [r for r in ratios if r is not None]
        verdict = None if not known or len(known) < len(peers) else max(known) <= limit
        who = "Burr" if peers == ("Burr",) else "the best peer"
        rate = key.startswith("fleet-")  # rows in steps/s
        target = (
            f"steps/s ≥ {'' if limit == 1 else f'{1 / limit:g}× '}{who}'s"
            if rate
            else f"≤ {limit:.1f}× {who}"
        )
        row(name, target, key, verdict)

    def bound(name: str, key: str, limit: float, unit: str, higher: bool = False) -> None:
        fig = figs.get(key, {}).get("uwf")
        verdict = None if fig is None else (fig.value >= limit if higher else fig.value <= limit)
        row(name, f"{'≥' if higher else '≤'} {limit:g} {unit}".rstrip(), key, verdict)

    vs("cold step, 10-step thread", "step@small", 1.0, ("Burr",))
    vs(f"cold step, {large}-step thread", "step@large", 1.0, ("Burr",))
    vs("external-agent step", "ext-step@small", 1.2, PEERS)
    vs(f"full history, {large} steps, packed", "history@large", 1.0, ("Burr",))
    pg, fs = figs.get("pg-step@small", {}).get("uwf"), figs.get("pg-fs-step@small", {}).get("uwf")
    out.append(
        (
            "PostgreSQL cold step (durable server)",
            "≤ the filesystem cold step + 30 ms (timed interleaved)",
            cell("pg-step@small", "uwf"),
            cell("pg-step@small", "LangGraph"),
            cell("pg-step@small", "Burr"),
            "n/a"
            if pg is None or fs is None
            else ("pass" if pg.value <= fs.value + 30 else f"MISS (fs: {fs.text()})"),
        )
    )
    bound("… its statements", "pg-cold-statements", 10, "")
    bound("… its connections", "pg-cold-connections", 1, "")
    bound("… its WAL flushes", "pg-cold-wal-flushes", 1, "")
    bound("PostgreSQL worker step, agent's statements included", "pg-worker-statements", 8, "")
    bound("… its WAL flushes", "pg-worker-wal-flushes", 1, "")
    bound("… uwf's own work (warm worker, agent apart)", "pg-own-ms", 10, "ms")
    vs("PostgreSQL thread show", "pg-show@small", 1.0, ("Burr",))
    vs("PostgreSQL thread list", "pg-list@small", 1.0, ("Burr",))
    for workers in (1, 2, 4, 8):
        s = "s" if workers > 1 else ""
        vs(f"fleet, external agents, {workers} worker{s}", f"fleet-pg@{workers}", 1.0, PEERS)
    for workers in (1, 2, 4, 8):
        s = "s" if workers > 1 else ""
        vs(f"fleet, in-process agents, {workers} worker{s}", f"fleet-inproc@{workers}", 2.0, PEERS)
    bound("warm step, CPU", "warm-cpu@fs", 2, "ms")
    vs("… and against Burr", "warm-cpu@fs", 3.0, ("Burr",))
    vs("disk per step, loose (blocks)", "disk-loose-late-blocks", 2.0, ("Burr",))
    return out
