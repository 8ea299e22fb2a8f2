"""`uwf thread …`: the group, and its commands in the order `uwf thread --help` lists them.

One module per kind of command: ``lifecycle`` (start, show, list, steps, compact, fork),
``views`` (read, step-details, graph, watch, export), ``steering`` (answer, resume, poke,
priority), ``bulk`` (kill, stop, retry, rerun: one thread, or in bulk); step, and its
background runs, from ``uwf.cli.stepping``. The modules define functions only; this module
registers them, so one table says what the group holds.
"""

from uwf.cli import stepping
from uwf.cli.lazy import App
from uwf.cli.options import add_alias
from uwf.cli.thread import bulk, lifecycle, steering, views

__all__ = ["app"]

app = App(
    help="Start, step, inspect, fork and kill threads.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

app.command()(lifecycle.start)
app.command("step")(stepping.step)
add_alias(app, stepping.step, "thread exec", "thread step")
app.command("stop")(bulk.stop)
app.command()(lifecycle.show)
app.command("list")(lifecycle.list_)
app.command("steps")(lifecycle.steps)
app.command()(views.read)
app.command()(lifecycle.compact)
app.command("fork")(lifecycle.fork)
app.command("step-details")(views.step_details)
app.command("kill")(bulk.kill)
add_alias(app, bulk.kill, "thread cancel", "thread kill")
app.command("graph")(views.graph)
app.command("watch")(views.watch)
app.command("export")(views.export)
app.command("rerun")(bulk.rerun)
app.command("answer")(steering.answer)
app.command("resume")(steering.resume)
app.command("poke")(steering.poke)
app.command("retry")(bulk.retry)
app.command("priority")(steering.priority)
