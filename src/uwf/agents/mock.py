"""``uwf-mock``: scripted outputs for tests, benchmarks and the demo (docs/agents.md). No network.

    uwf-mock [--scenario FILE] <thread-id> <role>      (or $UWF_MOCK_SCENARIO)

The scenario maps each role to a list of entries used in visit order (the n-th visit of the
role in this thread's chain uses entry n; the last entry repeats). An entry is the raw agent
output (a string), or ``{output, exit, stderr, sleep}``, or ``{attempts: [...]}``: a list of
such entries for the runs of one visit. A failed run does not move the thread, so the visit
is the same when the step is run again; ``attempts`` lets that next run behave differently
(fail with a rate limit, then succeed). Runs are counted per thread, role and visit in
``<root>/cache/mock-attempts.json``; the last attempt repeats. The output goes through the
same extract as any agent's.

A scenario of uwf 0.8 — ``steps: [{role, output}, …]`` — is played in the thread's order
instead: its n-th step is the thread's n-th, for the role it names (another role is an
error, as is a step past its end). A run whose answer suspends (``$SUSPEND``) is a visit
too, although no step records it (docs/format.md, "Suspending and resuming"): it is marked
in ``<root>/cache/mock-suspends.json``, and the next run of the thread — ``thread resume``
— plays the entry after it. A suspension scripted as one of the ``attempts`` of a visit
stays a run of that visit: the next run is its next attempt.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.agent_kit.target import Target, plain
from uwf.model.cost import COST_FIELDS
from uwf.util.errors import InvalidInput, UwfError, report

if TYPE_CHECKING:
    import argparse

    from uwf.agent_kit import args
    from uwf.model.agentcall import AgentCall

LABEL = "uwf-mock"
ATTEMPTS_CACHE = "mock-attempts"  # <root>/cache/mock-attempts.json
SCENARIO_ENV = "UWF_MOCK_SCENARIO"
SUSPENDS_CACHE = "mock-suspends"  # <root>/cache/mock-suspends.json: visits that suspended
IN_ORDER = "*"  # the role part of a cache key of a steps scenario (one sequence per thread)

DETAIL = runner.detail_schema(
    "MockDetail",
    {"scenario": {"type": "string"}, "visit": {"type": "integer"}},
    # the run of an `attempts` entry; the cost: the LLM extract's tokens when it ran, and the
    # chain's total (no duration, so that the steps stay reproducible)
    optional={
        "attempt": {"type": "integer", "minimum": 1},
        "usage": COST_FIELDS["usage"],
        "total": COST_FIELDS["total"],
    },
)

DESCRIPTION = """\
Scripted answers for tests, demos and benchmarks; no network. The scenario (--scenario
FILE, else $UWF_MOCK_SCENARIO) maps each role to a list of entries, used in visit order
(the n-th visit of the role in the thread uses entry n; the last one repeats):

  roles:
    planner: ["---\\nstatus: _\\nplan: do it\\n---\\nThe plan."]
    reviewer:
      - {output: "---\\nstatus: rejected\\n---\\n", stderr: "looking…", sleep: 0.5}
      - attempts:                      # the runs of one visit: fail, then succeed
          - {exit: 1, stderr: "error: rate limited"}
          - "---\\nstatus: approved\\n---\\n"

An entry is the raw answer (a string), {output, exit, stderr, sleep}, or {attempts:
[entries]}, whose n-th entry is used by the n-th run of that visit (counted per thread,
role and visit in <root>/cache/mock-attempts.json; the last one repeats).

A scenario of uwf 0.8 is played in the thread's order: its n-th step is the thread's n-th,
for the role it names:

  steps:
    - {role: planner, output: "---\\n$status: ready\\n---\\nThe plan."}
    - {role: worker, output: "---\\n$status: done\\n---\\nDone."}

A run whose answer suspends ($SUSPEND) counts as a visit: the next run plays the next entry.
"""


def _check_entry(entry: Any, where: str, nested: bool = False) -> None:
    if isinstance(entry, str):
        return
    if isinstance(entry, dict) and "attempts" in entry and not nested:
        attempts = entry["attempts"]
        if set(entry) != {"attempts"} or not isinstance(attempts, list) or not attempts:
            raise InvalidInput(
                f"{where}: 'attempts' must be a non-empty list of entries, alone in its mapping"
            )
        for attempt in attempts:
            _check_entry(attempt, where, nested=True)
        return
    if not isinstance(entry, dict) or not isinstance(entry.get("output", ""), (str, dict)):
        raise InvalidInput(
            f"{where}: an entry must be a string or a mapping with an 'output' (the answer, "
            "or the output itself as a mapping)"
        )


def load_scenario(path: str) -> dict[str, list[Any]]:
    """A scenario by roles: each role's entries."""
    roles, steps = read_scenario(path)
    if steps is not None:
        raise InvalidInput(f"scenario {path} lists steps (uwf 0.8's form), not roles")
    return roles


def read_scenario(path: str) -> tuple[dict[str, list[Any]], list[tuple[str, Any]] | None]:
    """A scenario: each role's entries, or (uwf 0.8's form) its steps in the thread's order,
    each (role, entry)."""
    from pathlib import Path

    from uwf.util import yamlio

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read scenario {path}: {exc}") from None
    data = yamlio.load(text, source=f"scenario {path}", path=path)
    if isinstance(data, dict) and "steps" in data and "roles" not in data:
        return {}, checked_steps(data["steps"], f"scenario {path}")
    roles = data.get("roles") if isinstance(data, dict) else None
    if not isinstance(roles, dict):
        raise InvalidInput(
            f"scenario {path} must be a mapping with a 'roles' mapping (or uwf 0.8's 'steps' list)"
        )
    return checked(roles, f"scenario {path}"), None


def checked(roles: Mapping[Any, Any], where: str) -> dict[str, list[Any]]:
    """A scenario's ``roles`` (role -> entries, or one entry), each entry checked."""
    out: dict[str, list[Any]] = {}
    for role, entries in roles.items():
        entries = list(entries) if isinstance(entries, (list, tuple)) else [entries]
        for entry in entries:
            _check_entry(entry, f"{where}: role {role}")
        if not entries:
            raise InvalidInput(f"{where}: role {role} has no entries")
        out[str(role)] = entries
    return out


def checked_steps(steps: Any, where: str) -> list[tuple[str, Any]]:
    """The steps of a scenario of uwf 0.8: ``[{role, output}, …]`` (an entry of the roles
    form, with the role it is for), each checked."""
    if not isinstance(steps, (list, tuple)) or not steps:
        raise InvalidInput(f"{where}: 'steps' must be a non-empty list of {{role, output}}")
    out = []
    for i, step in enumerate(steps):
        at = f"{where}: steps[{i}]"
        if not isinstance(step, Mapping) or not isinstance(step.get("role"), str):
            raise InvalidInput(f"{at}: a step must be a mapping with a string 'role'")
        entry = {key: value for key, value in step.items() if key != "role"}
        _check_entry(entry, at)
        out.append((step["role"], entry))
    return out


def _visit(ctx: AgentContext, label: str) -> int:
    """This role's visit number: one more than the one recorded in its last visit's detail
    (a bounded read), else counted over the whole chain."""
    last = ctx.last_visit
    if last is None:
        return 1
    detail = ctx.store.get(last["detail"]) if last["agent"] == label else None
    recorded = detail.payload.get("visit") if detail and isinstance(detail.payload, dict) else None
    if isinstance(recorded, int) and not isinstance(recorded, bool):
        return recorded + 1
    return ctx.visit


def role_visit(ctx: AgentContext, label: str) -> int:
    """This run's visit of its role, past the visits that suspended."""
    return _after_suspended(ctx, ctx.role, _visit(ctx, label))


def _step_number(ctx: AgentContext, label: str) -> int:
    """This step's number in a scenario played in the thread's order: one more than the one
    its previous step recorded (which counts the runs that suspended), else its depth."""
    from uwf.model import chain

    last: chain.Start | chain.Step | None = ctx.head_node
    if isinstance(last, chain.Start):  # a thread resuming an ended one goes on from its end
        last = chain.load_head(ctx.store, last.resumes) if last.resumes is not None else None
    ref = last.payload.get("detail") if isinstance(last, chain.Step) else None
    if isinstance(last, chain.Step) and last.payload.get("agent") == label and isinstance(ref, str):
        detail = ctx.store.get(ref)
        found = detail.payload.get("visit") if detail and isinstance(detail.payload, dict) else None
        if isinstance(found, int) and not isinstance(found, bool):
            return found + 1
    return ctx.depth + 1


def _after_suspended(ctx: AgentContext, who: str, visit: int) -> int:
    """``visit``, or past it while the visits there suspended (their answer said
    ``$SUSPEND``, so no step records them): a suspended step is a visit too."""
    from uwf.agent_kit import session_cache

    suspended = session_cache.counts(ctx.root, SUSPENDS_CACHE)
    while suspended.get(f"{ctx.thread}:{who}:{visit}"):
        visit += 1
    return visit


def _play(ctx: AgentContext, entry: dict[str, Any]) -> str | dict[str, Any]:
    """Sleep, write stderr, exit as the entry says; the output when it does not exit. In
    uwf's process the sleep ends early when the step stops wanting the answer, and the exit
    is the step's outcome (``engine.step.inproc``)."""
    if entry.get("sleep"):
        ctx.sleep(float(entry["sleep"]))
    if entry.get("stderr"):
        ctx.stderr.write(str(entry["stderr"]).rstrip("\n") + "\n")
        ctx.stderr.flush()
    code = int(entry.get("exit", 0) or 0)
    if code != 0:
        sys.exit(code)
    output = entry.get("output", "")
    return output if isinstance(output, dict) else str(output)


class MockAgent:
    """``uwf-mock`` on the agent kit: the scenario file at ``scenario`` (read at each run),
    or its entries themselves — by role (``roles``) or, as uwf 0.8 wrote them, in the thread's
    order (``steps``: ``(role, entry)`` pairs or ``{role, output, …}`` mappings); that is
    ``uwf.testing.ScriptedAgent``. The detail records ``name`` as its scenario (the file's
    path by default)."""

    label = LABEL

    def __init__(
        self,
        scenario: str = "",
        *,
        roles: Mapping[str, Sequence[Any]] | None = None,
        steps: Sequence[Any] | None = None,
        name: str | None = None,
        label: str | None = None,
    ) -> None:
        if roles is not None and steps is not None:
            raise TypeError("MockAgent takes a script by roles or by steps, not both")
        self.scenario_path = scenario
        self.roles = checked(roles, "scenario") if roles is not None else None
        self.steps = checked_steps(_as_steps(steps), "scenario") if steps is not None else None
        self.name = name if name is not None else scenario
        if label is not None:
            self.label = label

    def scenario(self) -> tuple[dict[str, list[Any]], list[tuple[str, Any]] | None]:
        """Its entries by role, or its steps in the thread's order (``read_scenario``)."""
        if self.steps is not None:
            return {}, self.steps
        if self.roles is not None:
            return self.roles, None
        return read_scenario(self.scenario_path)

    def run(self, ctx: AgentContext) -> runner.RunResult:
        from uwf.agent_kit import session_cache

        who, visit, entry = self.pick(ctx)
        record: dict[str, Any] = {"scenario": self.name, "visit": visit}
        if isinstance(entry, dict) and "attempts" in entry:
            key = f"{ctx.thread}:{ctx.role}:{visit}"
            attempt = session_cache.bump(ctx.root, ATTEMPTS_CACHE, key)
            record["attempt"] = attempt
            entry = entry["attempts"][min(attempt, len(entry["attempts"])) - 1]
        played = _play(ctx, {"output": entry} if isinstance(entry, str) else entry)
        # a suspension is a visit of its own, unless the scenario scripts it as a run of one
        # visit (an ``attempts`` entry: the next run is that visit's next attempt); marked
        # before an output given as a mapping is stored, which is where it suspends
        if "attempt" not in record and _suspends(played, ctx.routing_key):
            session_cache.bump(ctx.root, SUSPENDS_CACHE, f"{ctx.thread}:{who}:{visit}")
        output_hash = None
        if isinstance(played, dict):  # the output itself: stored as given, no extract
            from uwf.agent_kit.inprocess import put_output

            output_hash, played = put_output(ctx, played)
        turns = runner.store_turns(ctx, [{"role": "assistant", "content": played}])
        total = runner.cost_fields(ctx, duration=False)
        detail = ctx.store.put(ctx.store.put_schema(DETAIL), {**record, **total, "turns": turns})
        return runner.RunResult(played, detail, output_hash=output_hash)

    def pick(self, ctx: AgentContext) -> tuple[str, int, Any]:
        """Whose visit this run is (the role, or the thread for a steps scenario), its
        number, and the scenario's entry for it (a role's last entry repeats). A subclass
        with generated answers overrides this (benchmarks/mock_agent.py)."""
        roles, steps = self.scenario()
        if steps is not None:
            visit = _after_suspended(ctx, IN_ORDER, _step_number(ctx, self.label))
            return IN_ORDER, visit, self._step(steps, visit, ctx.role)
        entries = roles.get(ctx.role)
        if entries is None:
            raise UwfError(f"scenario {self.name} has no entries for role {ctx.role}")
        visit = role_visit(ctx, self.label)
        return ctx.role, visit, entries[min(visit, len(entries)) - 1]

    def _step(self, steps: list[tuple[str, Any]], number: int, role: str) -> Any:
        """Step ``number`` of a scenario of uwf 0.8, which must be for ``role``."""
        if number > len(steps):
            raise UwfError(
                f"scenario {self.name} has no step {number} (it scripts {len(steps)}); "
                f"the thread runs {role} next"
            )
        scripted, entry = steps[number - 1]
        if scripted != role:
            raise UwfError(
                f"scenario {self.name}: step {number} is scripted for {scripted}, but "
                f"the workflow routed the thread to {role}"
            )
        return entry

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> None:
        return None  # a script cannot take corrections


def _as_steps(steps: Sequence[Any]) -> list[Any]:
    """Steps given in Python: ``(role, entry)`` pairs as ``{role, output}`` mappings (an
    entry that is a mapping keeps its keys beside the role)."""
    out: list[Any] = []
    for step in steps:
        if isinstance(step, tuple) and len(step) == 2:
            role, entry = step
            out.append(
                {"role": role, **(entry if isinstance(entry, Mapping) else {"output": entry})}
            )
        else:
            out.append(step)
    return out


def _suspends(played: str | dict[str, Any], key: str) -> bool:
    """Whether an answer, or an output given as a mapping, suspends its step (``$SUSPEND`` in
    its routing field ``key``)."""
    from uwf.agent_kit import fastpath
    from uwf.moderator.evaluate import SUSPEND

    if isinstance(played, dict):
        return played.get(key) == SUSPEND
    return fastpath.suspension(played, key) is not None


def make_parser() -> args.Parser:
    from uwf.agent_kit import args

    parser = args.parser(LABEL, DESCRIPTION)
    parser.add_argument(
        "--scenario",
        "--mock-data",  # uwf 0.8's uwf-mock
        metavar="FILE",
        help="the scenario (default: $UWF_MOCK_SCENARIO; --mock-data: uwf 0.8's name)",
    )
    return parser


def _agent(parser: args.Parser, scenario: str | None) -> MockAgent:
    if not scenario:
        from uwf.agent_kit import args

        args.fail(parser, "uwf-mock needs --scenario FILE or $UWF_MOCK_SCENARIO")
    return MockAgent(scenario)


_made: dict[tuple[str, ...], MockAgent] = {}


def inprocess(call: AgentCall) -> str:
    """``uwf-mock`` as a Python agent, run in uwf's process (docs/api.md, "Python agents"):
    ``agents: {mock: {python: uwf-mock, args: [--scenario, FILE]}}`` in config.yaml. The
    same arguments, the same StepNode and detail as the command, no process."""
    from uwf.agent_kit.inprocess import run

    key = (*call.args, call.env.get(SCENARIO_ENV, ""))
    agent = _made.get(key)
    if agent is None:
        parser = make_parser()
        options = parser.parse_args(list(call.args))
        agent = _made[key] = _agent(parser, options.scenario or call.env.get(SCENARIO_ENV))
    return run(agent, call)


SCENARIO_FLAGS = ("--scenario", "--mock-data")


def _plain(argv: Sequence[str]) -> tuple[str, Target] | None:
    """The scenario and target of the calls uwf makes — ``[--scenario FILE] <thread-id>
    <role>``, the scenario else from ``$UWF_MOCK_SCENARIO`` — read without argparse
    (``target.plain``); None for any other command line, or without a scenario (the parser
    reads those, and says what is wrong)."""
    if len(argv) == 4 and argv[0] in SCENARIO_FLAGS and not argv[1].startswith("-"):
        scenario, rest = argv[1], argv[2:]
    else:
        scenario, rest = os.environ.get(SCENARIO_ENV, ""), argv
    target = plain(rest) if scenario else None
    return (scenario, target) if target is not None else None


def main(argv: Sequence[str] | None = None) -> None:
    given = sys.argv[1:] if argv is None else argv
    try:
        found = _plain(given)
    except UwfError as exc:
        sys.exit(report(exc))
    if found is not None:
        runner.main(MockAgent(found[0]), found[1])
        return
    parser = make_parser()

    def make(options: argparse.Namespace) -> runner.Agent:
        return _agent(parser, options.scenario or os.environ.get(SCENARIO_ENV, ""))

    runner.cli(parser, make, given)


if __name__ == "__main__":
    main()
