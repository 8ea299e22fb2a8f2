"""`uwf thread …`: the group, and its commands in the order `uwf thread --help` lists them.

One module per kind of command: ``lifecycle`` (start, show, list, steps, compact, fork),
``views`` (read, step-details, graph, watch, export), ``steering`` (answer, resume, poke,
priority), ``bulk`` (kill, stop, retry, rerun: one thread, or in bulk); step, and its
background runs, from ``uwf.cli.stepping``. The modules define functions only; this module
registers them, so one table says what the group holds.

Each command is named by its "module:function" and imported only when it is built
(``App.lazy``, cli/lazy.py): ``uwf thread show`` imports ``lifecycle`` and what it uses,
never ``stepping``'s or ``bulk``'s imports (docs/performance.md, "Start-up").
"""

from uwf.cli.lazy import App
from uwf.cli.options import add_alias

__all__ = ["app"]

app = App(
    help="Start, step, inspect, fork and kill threads.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

app.lazy("start", "uwf.cli.thread.lifecycle:start")
app.lazy("step", "uwf.cli.stepping:step")
add_alias(app, "uwf.cli.stepping:step", "thread exec", "thread step")
app.lazy("stop", "uwf.cli.thread.bulk:stop")
app.lazy("show", "uwf.cli.thread.lifecycle:show")
app.lazy("list", "uwf.cli.thread.lifecycle:list_")
app.lazy("steps", "uwf.cli.thread.lifecycle:steps")
app.lazy("read", "uwf.cli.thread.views:read")
app.lazy("compact", "uwf.cli.thread.lifecycle:compact")
app.lazy("fork", "uwf.cli.thread.lifecycle:fork")
app.lazy("step-details", "uwf.cli.thread.views:step_details")
app.lazy("kill", "uwf.cli.thread.bulk:kill")
add_alias(app, "uwf.cli.thread.bulk:kill", "thread cancel", "thread kill")
app.lazy("graph", "uwf.cli.thread.views:graph")
app.lazy("watch", "uwf.cli.thread.views:watch")
app.lazy("export", "uwf.cli.thread.views:export")
app.lazy("rerun", "uwf.cli.thread.bulk:rerun")
app.lazy("answer", "uwf.cli.thread.steering:answer")
app.lazy("resume", "uwf.cli.thread.steering:resume")
app.lazy("poke", "uwf.cli.thread.steering:poke")
app.lazy("retry", "uwf.cli.thread.bulk:retry")
app.lazy("priority", "uwf.cli.thread.steering:priority")
