"""Tables of a run, and docs/performance.md generated from them.

    python3 benchmarks/report.py          # regenerate docs/performance.md from the last run

``compare.py`` writes each run as ``benchmarks/last-run.json`` (every figure with its samples)
and ``benchmarks/last-run.md`` (its tables). This file turns a run into tables, and fills
``benchmarks/performance.template.md`` — the prose of docs/performance.md — with them:

    {{header}}            the run: date, machine, versions, sizes, load
    {{table:SECTION}}     the rows of a section (start, read, step, fork, store, disk, warm,
                          pg, pg-count, fleet): measure | uwf | LangGraph | Burr | uwf/LangGraph
                          | uwf/Burr (no ratio on a row whose sides do different work)
    {{fleet_steps}}       the steps of one fleet run (threads × steps)
    {{headline}}          the headline rows against each peer alone: lead / tie / trail
    {{startup}}           start-up as multiples of python -c pass and of the frozen Typer import
    {{targets}}           every standing target with its figure and pass/fail
    {{misses}}            the standing targets missed, one line each ("none" when all passed)
    {{next}}              issue 36's targets against each peer alone, pass/MISS
    {{llm}}               at what LLM latency each side's step time falls under 1% of a step
    {{fig:KEY:TOOL}}      one figure as the tables show it (e.g. {{fig:step@small:Burr}})
    {{ratio:KEY}}         uwf / the best peer on that row
    {{vs:KEY:PEER}}       uwf / that peer on that row

So every number in docs/performance.md comes from one run, and regenerating it is one
command. A placeholder naming a row the run did not measure becomes "n/a".
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from harness import Fig, aligned, markdown
from targets import behind, ratio_to

HERE = Path(__file__).resolve().parent
TOOLS = ("uwf", "LangGraph", "Burr")
PEERS = ("LangGraph", "Burr")
TIE = 0.05  # within 5% either way: a tie in the headline
# the headline: the rows a user of either peer would compare first
HEADLINE = (
    "show@small",
    "step@small",
    "step@large",
    "ext-step@small",
    "history@large-loose",
    "history@large",
    "list@large",
    "find-fork@half",
    "disk-loose-late-blocks",
    "disk-packed-late-blocks",
    "pg-show@small",
    "pg-list@small",
    "pg-step@small",
    "pg-cold-statements",
    "pg-worker-statements",
    "pg-worker-wal-flushes",
    "fleet-pg@1",
    "fleet-pg@8",
    "fleet-inproc@8",
    "warm-cpu@fs",
)
TEMPLATE = HERE / "performance.template.md"
DOCS = HERE.parent / "docs" / "performance.md"
RUN_JSON = HERE / "last-run.json"
RUN_MD = HERE / "last-run.md"


class Run:
    """One run's figures, rows (key, label, section), targets and description."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.meta: dict[str, Any] = data["meta"]
        self.rows: list[tuple[str, str, str]] = [tuple(r) for r in data["rows"]]
        self.figs = {
            k: {t: Fig.from_json(f) for t, f in v.items()} for k, v in data["figs"].items()
        }
        self.targets: list[tuple[str, str, str]] = [tuple(t) for t in data["targets"]]
        self.next: list[list[str]] = [list(t) for t in data.get("next", [])]
        self.no_ratio: set[str] = set(data.get("no_ratio", []))

    @classmethod
    def load(cls, path: Path) -> Run:
        return cls(json.loads(path.read_text()))

    # -- tables -------------------------------------------------------------------------
    def table(self, section: str | None = None) -> tuple[list[str], list[list[str]]]:
        header = ["measure", *TOOLS, *(f"uwf/{p}" for p in PEERS)]
        rows = []
        for key, label, where in self.rows:
            if section is not None and where != section:
                continue
            figs = self.figs[key]
            cells = [figs[t].text() if t in figs else "—" for t in TOOLS]
            rows.append([label, *cells, *(self.vs(key, p) for p in PEERS)])
        return header, rows

    def ratio(self, key: str) -> str:
        r = None if key in self.no_ratio else behind(self.figs, key)
        return "—" if r is None else f"{r:.2f}×"

    def vs(self, key: str, peer: str) -> str:
        r = None if key in self.no_ratio else ratio_to(self.figs, key, peer)
        return "—" if r is None else f"{r:.2f}×"

    def headline(self) -> tuple[list[str], list[list[str]]]:
        """The headline rows against each peer alone: uwf leads (below 1 - TIE), ties or
        trails (above 1 + TIE), with the ratio."""
        labels = {key: label for key, label, _ in self.rows}
        rows = []
        for key in HEADLINE:
            if key not in self.figs or key in self.no_ratio:
                continue
            cells = []
            for peer in PEERS:
                r = ratio_to(self.figs, key, peer)
                if r is None:
                    cells.append("—")
                    continue
                word = "lead" if r < 1 - TIE else ("trail" if r > 1 + TIE else "tie")
                cells.append(f"{word} {r:.2f}×")
            if any(c != "—" for c in cells):
                rows.append([labels[key], self.figs[key]["uwf"].text(), *cells])
        return ["measure", "uwf", *(f"vs {p} alone" for p in PEERS)], rows

    def startup(self) -> tuple[list[str], list[list[str]]]:
        header = ["command", "median", "× python -c pass", "× frozen Typer import"]
        base = self.figs.get("python", {}).get("uwf")
        typer = self.figs.get("typer-frozen", {}).get("uwf")
        rows = []
        for key, label in (
            ("typer", 'python -c "import typer"'),
            ("typer-frozen", 'python -c "import typer, gc; gc.freeze()"'),
            ("help", "uwf --help"),
            ("show@small", "uwf thread show"),
            ("step@small", "uwf thread step + its agent"),
        ):
            fig = self.figs.get(key, {}).get("uwf")
            if fig is not None and base is not None and typer is not None:
                rows.append(
                    [
                        label,
                        fig.text(),
                        f"{fig.value / base.value:.1f}×",
                        f"{fig.value / typer.value:.2f}×",
                    ]
                )
        return header, rows

    def target_table(self) -> tuple[list[str], list[list[str]]]:
        return ["target", "measured", "pass/fail"], [list(t) for t in self.targets]

    def misses(self) -> list[str]:
        return [f"{t} — {m}" for t, m, verdict in self.targets if verdict == "FAIL"]

    def next_table(self) -> tuple[list[str], list[list[str]]]:
        return ["row", "target", *TOOLS, "pass/miss"], self.next

    def llm(self) -> tuple[list[str], list[list[str]]]:
        """For each way a side runs a step, its time and the LLM latency above which that
        time is under 1% of the step (t ≤ 0.01 × (LLM + t)). Figures only: the ways differ
        (a process per step, a warm loop, an agent process or none), so no ratio."""
        header = ["side", "a step", "takes", "under 1% of a step once the LLM call takes"]
        rows = []
        for key, label in (
            ("warm@fs", "warm process, agent in process"),
            ("step@small", "cold process (uwf: thread step + its agent process)"),
            ("ext-step@small", "cold process, the agent an external program"),
            ("fleet-fs@1", "a worker, the agent an external program (filesystem)"),
            ("pg-warm", "PostgreSQL: warm process, agent in process"),
            ("fleet-pg@1", "PostgreSQL: a worker, the agent an external program"),
        ):
            for tool in TOOLS:
                fig = self.figs.get(key, {}).get(tool)
                if fig is None:
                    continue
                ms = 1000 / fig.value if fig.unit == "steps/s" else fig.value
                rows.append([tool, label, f"{ms:.1f} ms", f"≥ {99 * ms / 1000:.1f} s"])
        return header, rows

    def header_lines(self) -> list[str]:
        return list(self.meta.get("lines", []))

    # -- outputs ------------------------------------------------------------------------
    def last_run_md(self) -> str:
        header, rows = self.table()
        parts = [
            "# uwf vs LangGraph vs Burr — last run",
            "",
            f"Written by `bash benchmarks/run.sh{' --quick' if self.meta.get('quick') else ''}`; "
            "do not edit by hand. docs/performance.md is generated from the same run "
            "(`python3 benchmarks/report.py`).",
            "",
            *[f"- {line}" for line in self.header_lines()],
            "",
            markdown(header, rows),
            "",
            "## Against each peer alone",
            "",
            markdown(*self.headline()),
            "",
            "## Targets of the next round (issue 36)",
            "",
            markdown(*self.next_table()),
            "",
            "## uwf targets",
            "",
            markdown(*self.target_table()),
            "",
            "## Start-up",
            "",
            markdown(*self.startup()),
            "",
            "## At what LLM latency a step's own time stops mattering",
            "",
            markdown(*self.llm()),
            "",
        ]
        return "\n".join(parts)

    def printed(self) -> str:
        return "\n\n".join(
            [
                "\n".join(self.header_lines()),
                aligned(*self.table()),
                aligned(*self.headline()),
                "targets of the next round (issue 36), against each peer alone:\n"
                + aligned(*self.next_table()),
                aligned(*self.target_table()),
                aligned(*self.startup()),
                aligned(*self.llm()),
            ]
        )

    def fill(self, template: str) -> str:
        def one(match: re.Match[str]) -> str:
            kind, arg = match.group(1), match.group(2) or ""
            if kind == "header":
                return "\n".join(f"- {line}" for line in self.header_lines())
            if kind == "table":
                return markdown(*self.table(arg))
            if kind == "startup":
                return markdown(*self.startup())
            if kind == "targets":
                return markdown(*self.target_table())
            if kind == "llm":
                return markdown(*self.llm())
            if kind == "fleet_steps":
                steps = self.meta.get("sizes", {}).get("fleet_steps")
                return f"{steps:,}" if steps else "n/a"
            if kind == "headline":
                return markdown(*self.headline())
            if kind == "next":
                return markdown(*self.next_table())
            if kind == "vs":
                key, peer = arg.rsplit(":", 1)
                return self.vs(key, peer) if key in self.figs else "n/a"
            if kind == "misses":
                return "\n".join(f"- {m}" for m in self.misses()) or "- none: every target passed"
            if kind == "fig":
                key, tool = arg.rsplit(":", 1)
                fig = self.figs.get(key, {}).get(tool)
                return fig.text() if fig is not None else "n/a"
            if kind == "ratio":
                return self.ratio(arg) if arg in self.figs else "n/a"
            raise ValueError(f"unknown placeholder {match.group(0)}")

        return re.sub(r"\{\{(\w+)(?::([^}]*))?\}\}", one, template)


def write_run(
    data: dict[str, Any], json_path: Path = RUN_JSON, md_path: Path | None = RUN_MD
) -> Run:
    json_path.write_text(json.dumps(data, indent=1) + "\n")
    run = Run(data)
    if md_path is not None:
        md_path.write_text(run.last_run_md())
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate docs/performance.md from a run.")
    ap.add_argument("--run", default=str(RUN_JSON), help="the run (default: the last one)")
    ap.add_argument("--template", default=str(TEMPLATE))
    ap.add_argument("--out", default=str(DOCS))
    args = ap.parse_args(argv)
    run = Run.load(Path(args.run))
    Path(args.out).write_text(run.fill(Path(args.template).read_text()))
    print(f"wrote {args.out} from {args.run}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
