"""Traces through the real CLI to a real OTLP/HTTP receiver on loopback: the step's span, the
agent's span nested under it through TRACEPARENT, one span per LLM call with its model and
tokens; no OpenTelemetry import without the environment (docs/format.md, "Traces")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llm_server import DEFAULT_MODEL, LLMServer, llm_fixture, write_config  # noqa: F401
from otlp_receiver import OTLPReceiver, otlp_fixture  # noqa: F401

PLAN = "---\nstatus: _\nplan: say hello\nsteps: [write it]\n---\nThe plan."
OUTER_TRACE = "0af7651916cd43dd8448eb211c80319c"
OUTER_SPAN = "b7ad6b7169203331"


@pytest.fixture
def traced(otlp: OTLPReceiver) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint, "OTEL_SERVICE_NAME": "uwf-test"}


def test_a_step_its_agent_and_its_llm_call_are_nested_spans(
    cli_proc: Any, root: Path, llm: LLMServer, new_thread: Any, otlp: OTLPReceiver, traced: Any
) -> None:
    write_config(root, llm.base_url)
    thread = new_thread()
    llm.reply(
        {
            "content": PLAN,
            "usage": {"prompt_tokens": 33, "completion_tokens": 11, "total_tokens": 44},
        }
    )
    # a caller's own trace context (CI, a script) is the step's parent
    env = {**traced, "TRACEPARENT": f"00-{OUTER_TRACE}-{OUTER_SPAN}-01"}
    r = cli_proc("thread", "step", thread, "--agent", "uwf-builtin", env=env)
    assert r.code == 0, r.err
    head = r.json()["head"]

    (step,) = otlp.named("uwf.step")
    (agent,) = otlp.named("uwf.agent")
    (chat,) = otlp.named(f"chat {DEFAULT_MODEL}")
    assert {s.trace_id for s in (step, agent, chat)} == {OUTER_TRACE}
    assert step.parent_id == OUTER_SPAN
    assert agent.parent_id == step.span_id and chat.parent_id == agent.span_id
    assert step.service == agent.service == "uwf-test"

    workflow = cli_proc("thread", "show", thread).json()["workflow"]
    start = cli_proc("thread", "steps", thread).json()["steps"][0]["hash"]
    attrs = step.attributes
    assert attrs["uwf.thread"] == thread and attrs["uwf.workflow"] == workflow
    assert attrs["uwf.workflow.name"] == "solve-issue" and attrs["uwf.role"] == "planner"
    assert attrs["uwf.agent"] == "uwf-builtin"
    assert (attrs["uwf.head"], attrs["uwf.step"]) == (start, head)
    assert (attrs["uwf.status"], attrs["uwf.done"], attrs["uwf.exit_code"]) == ("active", False, 0)
    assert attrs["uwf.agent.exit_code"] == 0
    assert [name for name, _ in step.events] == ["spawn", "agent exited", "commit"]
    assert step.event("commit") == {"uwf.head": head, "uwf.status": "active"}
    assert step.event("agent exited")["duration_ms"] >= 0

    assert agent.attributes["uwf.role"] == "planner" and agent.attributes["uwf.step"] == head
    assert agent.event("extract") == {"method": "frontmatter", "corrections": 0}

    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == DEFAULT_MODEL
    assert chat.attributes["gen_ai.response.model"] == DEFAULT_MODEL
    assert chat.attributes["gen_ai.usage.input_tokens"] == 33
    assert chat.attributes["gen_ai.usage.output_tokens"] == 11
    assert chat.attributes["server.address"] == "127.0.0.1"


def test_failed_and_deferred_steps_carry_their_exit_codes(
    cli_proc: Any, new_thread: Any, scenario: Any, otlp: OTLPReceiver, traced: Any
) -> None:
    thread = new_thread()
    failing = scenario({"planner": [{"exit": 1, "stderr": "error: the model is down"}]})
    assert cli_proc("thread", "step", thread, "--agent", failing, env=traced).code == 5
    deferring = scenario({"planner": [{"exit": 75, "stderr": "error: rate limited"}]})
    assert cli_proc("thread", "step", thread, "--agent", deferring, env=traced).code == 6
    spans = otlp.named("uwf.step")
    assert [s.attributes["uwf.exit_code"] for s in spans] == [5, 6]
    assert [s.attributes["uwf.agent.exit_code"] for s in spans] == [1, 75]
    assert {s.status for s in spans} == {2}  # error
    assert len({s.trace_id for s in spans}) == 2  # no TRACEPARENT: each step is a trace


NO_IMPORT = """
import sys
from uwf.cli.main import run
code = run(["thread", "step", sys.argv[1], "--agent", sys.argv[2]])
loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry", "uwf.adapters.otel")))
print(code, loaded)
"""


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[str, str]:
    """(the last line it printed, its stderr)."""
    import os

    full = {**os.environ, **(env or {})}
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=full, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1], out.stderr


def test_without_the_environment_nothing_is_imported(new_thread: Any, scenario: Any) -> None:
    thread = new_thread()
    last, _ = run_python(NO_IMPORT, thread, scenario(), env={"OTEL_EXPORTER_OTLP_ENDPOINT": ""})
    assert last == "0 ['uwf.adapters.otel']"  # uwf's module, never the SDK


MISSING_SDK = """
import sys
sys.modules["opentelemetry.sdk"] = None  # as if uwf[otel] were not installed
from uwf.cli.main import run
print(run(["thread", "step", sys.argv[1], "--agent", sys.argv[2]]))
"""


def test_without_the_extra_one_warning_names_the_install(
    new_thread: Any, scenario: Any, otlp: OTLPReceiver, traced: Any
) -> None:
    thread = new_thread()
    last, err = run_python(MISSING_SDK, thread, scenario(inprocess=False), env=traced)
    assert last == "0"
    assert err.splitlines()[0] == (
        "warning: OTEL_EXPORTER_OTLP_ENDPOINT asks for traces, but the OpenTelemetry SDK is not "
        "installed: pip install 'uwf[otel]' (no traces are sent)"
    )
    assert otlp.named("uwf.step") == []  # uwf sent nothing (its agent, a process of its own
    (agent,) = otlp.named("uwf.agent")  # with the SDK, traced its step as a root span)
    assert agent.parent_id == ""
