"""`uwf eval …`: run eval tasks, list their runs, report on them (docs/evals.md).

Thin wrappers over :mod:`uwf.engine.evals`: ``run`` prints one JSON line per run as it is
recorded (``thread step``'s habit), ``list`` and ``report`` one value each.
"""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from uwf.cli.columns import table
from uwf.cli.lazy import App
from uwf.cli.options import (
    AgentOpt,
    ListFormat,
    TableFormatOpt,
    backend,
    emit,
    emit_listing,
    emit_stream,
    list_page,
)
from uwf.util.errors import UsageError

# The command ``--local-workers`` runs (``-P``: nothing in the working directory can stand in
# for uwf's modules); ``engine.evals.fleet`` appends ``--thread`` and ``--agent``.
WORKER = (sys.executable, "-P", "-m", "uwf.cli.main", "worker")

app = App(
    help="""Measure workflows on tasks: run them, list the runs, report on them.

A task is a folder holding task.yaml (workflow, prompt, limits, judges) and an optional
fixture/ copied into a fresh working directory for each run. Each run is an ordinary thread,
stepped by `eval run` (or by `uwf worker`s: --fleet), then judged (built in: outcome, cost,
compliance; or a command of the task's) and recorded in the store as an EvalRun node, which
`cas gc` keeps.""",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("run")
def run(
    tasks: Annotated[
        list[str],
        typer.Argument(
            metavar="TASK-DIR...", help="Task folders (each holds task.yaml).", show_default=False
        ),
    ],
    agent: AgentOpt = None,
    workflow: Annotated[
        str | None,
        typer.Option(
            "--workflow",
            metavar="NAME|HASH",
            help="Run this workflow instead of each task's (a name, a hash or a file).",
            show_default=False,
        ),
    ] = None,
    count: Annotated[int, typer.Option("--count", "-c", help="Runs of each task (1 to 1000).")] = 1,
    keep_workdir: Annotated[
        bool,
        typer.Option(
            "--keep-workdir", help="Keep each run's working directory (its path is printed)."
        ),
    ] = False,
    fleet: Annotated[
        bool,
        typer.Option(
            "--fleet",
            help="Step nothing here: start every run's thread, let the fleet's `uwf worker`s "
            "step them, and wait until each has ended.",
        ),
    ] = False,
    local_workers: Annotated[
        int | None,
        typer.Option(
            "--local-workers",
            metavar="N",
            help="Start N `uwf worker`s for the runs, here, for the duration (implies --fleet; "
            "they step with --agent).",
            show_default=False,
        ),
    ] = None,
    wait_timeout: Annotated[
        float | None,
        typer.Option(
            "--wait-timeout",
            metavar="SECONDS",
            help="With --fleet: end the runs still going after SECONDS as timeout.",
            show_default=False,
        ),
    ] = None,
    allow_outside: Annotated[
        list[Path] | None,
        typer.Option(
            "--allow-outside",
            metavar="DIR",
            help="Let task folders name judge programs and workflow files under DIR too "
            "(repeatable); by default a task folder runs only its own files.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run each task COUNT times, judge each run and record it.

    Prints one {"run","task","batch","thread","outcome","score","judges"} line per run
    ("workdir" too with --keep-workdir): "run" is the EvalRun node's hash, "batch" names
    this `eval run` (for `eval diff`), "judges" maps each judge to its score (0 to 1),
    "score" is their weighted mean. "outcome" is completed, max_rounds (limits.maxSteps),
    timeout (limits.timeoutMinutes), failed (a step failed) or waiting (an agent asked for
    a person); a thread that did not end is killed. Every task folder is checked before
    the first run. A judge that fails scores 0 and never stops the eval; exits 0 once
    every run is recorded.

    A task folder is code: its command judges run as you, with your files (docs/evals.md,
    "Someone else's task folder"). A judge's program named by path and a workflow file must
    be the folder's own (links resolved) unless --allow-outside names their directory; its
    fixture/ is never followed through a link; judges get no credentials in their
    environment.

    With --fleet (or --local-workers N) the runs are stepped in parallel by `uwf worker`s
    (docs/evals.md, "Runs on a fleet"), which must see the working directories; the lines
    come as the runs end. A run ends as in-process: its first failed step ends it failed, a
    wait for a person ends it waiting, and limits.timeoutMinutes or --wait-timeout ends it
    as timeout.
    """
    from uwf.engine.evals.run import run_tasks

    options = None
    if wait_timeout is not None and not (fleet or local_workers is not None):
        raise UsageError("--wait-timeout needs --fleet or --local-workers")
    if fleet or local_workers is not None:
        from uwf.engine.evals.fleet import FleetOptions

        options = FleetOptions(
            local_workers=local_workers,
            worker=WORKER,
            wait_timeout=wait_timeout,
        )

    run_tasks(
        backend(),
        tasks,
        agent=agent,
        workflow=workflow,
        count=count,
        keep_workdir=keep_workdir,
        fleet=options,
        on_run=lambda line: emit_stream(line),
        allow_outside=allow_outside,
    )


@app.command("list")
def list_(
    task: Annotated[
        str | None,
        typer.Option("--task", metavar="T", help="Only the runs of this task.", show_default=False),
    ] = None,
    limit: Annotated[
        str | None,
        typer.Option(
            "--limit",
            metavar="N",
            help="Only the N most recent runs (still listed oldest first).",
            show_default=False,
        ),
    ] = None,
    fmt: TableFormatOpt = None,
) -> None:
    """List recorded eval runs, oldest first.

    Prints [{"run","task","batch","workflow","workflowName","agent","thread","outcome",
    "score","startedAt","durationMs"}] (--format table: aligned columns). "batch" names
    the `eval run` that made the run; "agent" is its --agent (null: config.yaml's).
    """
    from uwf.engine.evals.results import list_runs

    _, most = list_page("0", None, None, limit)
    listed = list_runs(backend(), task)
    if most:
        listed = listed[-most:]
    emit_listing(
        listed,
        fmt,
        lambda: (
            ["RUN", "TASK", "WORKFLOW", "AGENT", "OUTCOME", "SCORE", "THREAD"],
            [
                [
                    r["run"],
                    r["task"],
                    r["workflowName"],
                    r["agent"] or "-",
                    r["outcome"],
                    f"{r['score']:.2f}",
                    r["thread"],
                ]
                for r in listed
            ],
        ),
    )


@app.command("report")
def report(
    ident: Annotated[
        str,
        typer.Argument(
            metavar="RUN|TASK", help="An EvalRun hash, or a task name.", show_default=False
        ),
    ],
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Write the report as one self-contained HTML page to FILE ('-' for stdout; "
            "needs the ui extra).",
            show_default=False,
        ),
    ] = None,
    fmt: TableFormatOpt = None,
) -> None:
    """Report on one run, or on every run of a task.

    A run (an EvalRun hash) prints the node as recorded, with "run" its hash: the task,
    thread, workflow, agents, models, outcome, each judge's {name, weight, score, data,
    error?} and the weighted "score". A task prints {"task","groups"}: its runs grouped by
    workflow version and agent, each with "runs", "outcomes", and the score and each
    judge's score summed up as {"n","mean","stdev","min","max"}. --format table prints
    the same for a person. --html FILE writes it as one page, as `thread export` does (CSS
    inline, no script), and prints {"report","file","bytes"}.
    """
    if html is not None:
        _export(ident, html)
        return
    from uwf.engine.evals.results import report as make_report

    found = make_report(backend(), ident)
    if fmt is ListFormat.table:
        typer.echo(_table(found), nl=False)
        return
    emit_listing(found, fmt, lambda: (None, []))


def _export(ident: str, html: Path) -> None:
    from uwf.web import require

    require()
    from uwf.util import fsio
    from uwf.util.outputs import EvalExported
    from uwf.web.evals import report_page

    text = report_page(backend(), ident)
    if str(html) == "-":
        sys.stdout.write(text)
        return
    data = text.encode("utf-8")
    fsio.atomic_write(html, data)
    exported: EvalExported = {"report": ident, "file": str(html), "bytes": len(data)}
    emit(exported)


def _table(found: Any) -> str:
    if "groups" not in found:
        head = [
            ["run", found["run"]],
            ["task", found["task"]],
            ["workflow", f"{found['workflowName']} {found['workflow']}"],
            ["thread", found["thread"]],
            ["agents", ", ".join(found["agents"]) or "-"],
            ["outcome", found["outcome"]],
            ["score", f"{found['score']:.3f}"],
        ]
        judged = [
            [j["name"], f"{j['weight']:g}", f"{j['score']:.3f}", j.get("error") or _data(j["data"])]
            for j in found["judges"]
        ]
        return table(head) + "\n" + table(judged, ["JUDGE", "WEIGHT", "SCORE", "DATA"])
    rows = []
    for g in found["groups"]:
        cells = [
            f"{g['workflowName']} {g['workflow']}",
            g["agent"] or "-",
            g["runs"],
            _stat(g["score"]),
        ]
        cells += [f"{name} {_stat(s)}" for name, s in g["judges"].items()]
        rows.append(cells)
    width = max(len(r) for r in rows)
    header = ["WORKFLOW", "AGENT", "RUNS", "SCORE", *["JUDGE"] * (width - 4)]
    return table([r + [""] * (width - len(r)) for r in rows], header)


def _stat(s: Any) -> str:
    return f"{s['mean']:.3f}±{s['stdev']:.3f}"


def _data(data: object) -> str:
    from uwf.util import jsonfmt

    return jsonfmt.dumps(data)


SideArg = Annotated[
    str,
    typer.Argument(help="An EvalRun hash, or a batch (one `eval run`).", show_default=False),
]


@app.command("diff")
def diff(a: SideArg, b: SideArg, fmt: TableFormatOpt = None) -> None:
    """Compare two runs, or two batches of runs, task by task and judge by judge.

    A batch is every run of one `eval run` (the "batch" it prints): run the same tasks with
    --count N under two workflow versions, agents or models, then diff the two batches.
    Prints {"a","b","tasks","onlyA","onlyB"}: for each task both sides ran, its "score" and
    each judge's as {"a","b","delta","clear"} — each side's {"n","mean","stdev","min","max"},
    B's mean less A's, and whether |delta| is larger than both spreads together (with one
    run a side there is no spread to compare with). --format table: one line per task and
    score.
    """
    from uwf.engine.evals.diff import diff as make_diff

    found = make_diff(backend(), a, b)
    emit_listing(
        found,
        fmt,
        lambda: (
            ["TASK", "SCORE", "A", "B", "DELTA", "CLEAR"],
            [
                [
                    t["task"],
                    name,
                    _stat(c["a"]),
                    _stat(c["b"]),
                    f"{c['delta']:+.3f}",
                    "yes" if c["clear"] else "no",
                ]
                for t in found["tasks"]
                for name, c in [("(weighted)", t["score"]), *t["judges"].items()]
            ],
        ),
    )
