"""Tables of a run, and docs/performance.md generated from them.

    python3 benchmarks/report.py          # regenerate docs/performance.md from the last run

``compare.py`` writes each run as ``benchmarks/last-run.json`` (every figure with its samples)
and ``benchmarks/last-run.md`` (its tables). This file turns a run into tables, and fills
``benchmarks/performance.template.md`` — the prose of docs/performance.md — with them:

    {{header}}            the run: date, machine, versions, sizes, load
    {{table:SECTION}}     the rows of a section (start, read, step, fork, store, disk, warm,
                          pg, fleet): measure | uwf | LangGraph | Burr | uwf/best-peer
    {{startup}}           start-up as multiples of python -c pass and of the frozen Typer import
    {{targets}}           every target with its figure and pass/fail
    {{misses}}            the targets missed, one line each ("none" when every one passed)
    {{llm}}               at what LLM latency uwf's extra time falls under 1% of a step
    {{fig:KEY:TOOL}}      one figure as the tables show it (e.g. {{fig:step@small:Burr}})
    {{ratio:KEY}}         uwf / the best peer on that row

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
from targets import behind, best_peer

HERE = Path(__file__).resolve().parent
TOOLS = ("uwf", "LangGraph", "Burr")
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

    @classmethod
    def load(cls, path: Path) -> Run:
        return cls(json.loads(path.read_text()))

    # -- tables -------------------------------------------------------------------------
    def table(self, section: str | None = None) -> tuple[list[str], list[list[str]]]:
        header = ["measure", *TOOLS, "uwf/best-peer"]
        rows = []
        for key, label, where in self.rows:
            if section is not None and where != section:
                continue
            figs = self.figs[key]
            cells = [figs[t].text() if t in figs else "—" for t in TOOLS]
            rows.append([label, *cells, self.ratio(key)])
        return header, rows

    def ratio(self, key: str) -> str:
        r = behind(self.figs, key)
        return "—" if r is None else f"{r:.2f}×"

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

    def llm(self) -> tuple[list[str], list[list[str]]]:
        """For each way uwf runs a step, its extra time over the best peer's warm step, and
        the LLM latency above which that extra time is under 1% of a step:
        extra ≤ 0.01 × (LLM + uwf's step)."""
        header = [
            "uwf step",
            "uwf",
            "best peer, warm",
            "extra",
            "under 1% of a step once the LLM call takes",
        ]
        rows = []
        for key, label, backend in (
            ("warm@fs", "warm process, agent in process (Python API)", "warm@fs"),
            ("fleet-fs@1", "uwf worker, agent a process (fleet of 1, filesystem)", "warm@fs"),
            ("step@small", "cold process: uwf thread step + its agent", "warm@fs"),
            ("pg-warm", "PostgreSQL: warm process, agent in process", "pg-warm"),
            ("fleet-pg@1", "PostgreSQL: uwf worker, agent a process (fleet of 1)", "pg-warm"),
        ):
            ours = self.figs.get(key, {}).get("uwf")
            peer = best_peer(self.figs, backend)
            if ours is None or peer is None:
                continue
            u = 1000 / ours.value if ours.unit == "steps/s" else ours.value
            p = peer[1].value
            extra = u - p
            needed = max(0.0, 100 * extra - u) / 1000
            rows.append(
                [
                    label,
                    f"{u:.1f} ms",
                    f"{p:.1f} ms ({peer[0]})",
                    f"{extra:.1f} ms",
                    f"≥ {needed:.1f} s",
                ]
            )
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
            "## uwf targets",
            "",
            markdown(*self.target_table()),
            "",
            "## Start-up",
            "",
            markdown(*self.startup()),
            "",
            "## At what LLM latency the difference stops mattering",
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
