"""``uwf-mock``: scripted outputs for tests, benchmarks and the demo (PORT §7). No network.

    uwf-mock [--scenario FILE] <thread-id> <role>      (or $UWF_MOCK_SCENARIO)

The scenario maps each role to a list of entries used in visit order (the n-th visit of the
role in this thread's chain uses entry n; the last entry repeats). An entry is the raw agent
output (a string), or ``{output, exit, stderr, sleep}``. The output goes through the same
extract as any agent's.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.util import yamlio
from uwf.util.errors import InvalidInput, UsageError, UwfError

DETAIL = runner.detail_schema(
    "MockDetail", {"scenario": {"type": "string"}, "visit": {"type": "integer"}}
)


def load_scenario(path: str) -> dict[str, list[Any]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read scenario {path}: {exc}") from None
    data = yamlio.load(text, source=f"scenario {path}")
    roles = data.get("roles") if isinstance(data, dict) else None
    if not isinstance(roles, dict):
        raise InvalidInput(f"scenario {path} must be a mapping with a 'roles' mapping")
    out: dict[str, list[Any]] = {}
    for role, entries in roles.items():
        entries = entries if isinstance(entries, list) else [entries]
        for entry in entries:
            if not isinstance(entry, (str, dict)) or (
                isinstance(entry, dict) and not isinstance(entry.get("output", ""), str)
            ):
                raise InvalidInput(
                    f"scenario {path}: role {role}: an entry must be a string "
                    "or a mapping with a string 'output'"
                )
        if not entries:
            raise InvalidInput(f"scenario {path}: role {role} has no entries")
        out[str(role)] = entries
    return out


def _visit(ctx: AgentContext) -> int:
    """This role's visit number: one more than the one recorded in its last visit's detail
    (a bounded read), else counted over the whole chain."""
    last = ctx.last_visit
    if last is None:
        return 1
    detail = ctx.store.get(last["detail"]) if last["agent"] == MockAgent.label else None
    recorded = detail.payload.get("visit") if detail and isinstance(detail.payload, dict) else None
    if isinstance(recorded, int) and not isinstance(recorded, bool):
        return recorded + 1
    return ctx.visit


class MockAgent:
    label = "uwf-mock"

    def __init__(self, scenario_path: str) -> None:
        self.scenario_path = scenario_path

    def run(self, ctx: AgentContext) -> runner.RunResult:
        scenario = load_scenario(self.scenario_path)
        entries = scenario.get(ctx.role)
        if entries is None:
            raise UwfError(f"scenario {self.scenario_path} has no entries for role {ctx.role}")
        visit = _visit(ctx)
        entry = entries[min(visit, len(entries)) - 1]
        if isinstance(entry, str):
            entry = {"output": entry}
        if entry.get("sleep"):
            time.sleep(float(entry["sleep"]))
        if entry.get("stderr"):
            sys.stderr.write(str(entry["stderr"]).rstrip("\n") + "\n")
            sys.stderr.flush()
        code = int(entry.get("exit", 0) or 0)
        if code != 0:
            sys.exit(code)
        output = str(entry.get("output", ""))
        turns = runner.store_turns(ctx, [{"role": "assistant", "content": output}])
        detail_type = ctx.store.put_schema(DETAIL)
        detail = ctx.store.put(
            detail_type, {"scenario": self.scenario_path, "visit": visit, "turns": turns}
        )
        return runner.RunResult(output, detail)

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> None:
        return None  # a script cannot take corrections


def main() -> None:
    def make(args: list[str]) -> tuple[runner.Agent, list[str]]:
        scenario = os.environ.get("UWF_MOCK_SCENARIO", "")
        if args[:1] == ["--scenario"] and len(args) >= 2:
            scenario, args = args[1], args[2:]
        elif args and args[0].startswith("--scenario="):
            scenario, args = args[0].split("=", 1)[1], args[1:]
        if not scenario:
            raise UsageError("uwf-mock needs --scenario FILE or $UWF_MOCK_SCENARIO")
        return MockAgent(scenario), args

    runner.cli(make)


if __name__ == "__main__":
    main()
