"""uwf — a stateless, single-step workflow engine for teams of LLM agents.

The Python API (docs/api.md) is this package's top level: ``uwf.open_store``, ``Store``, the
records it returns, ``uwf.agent`` and the errors. It is lazy, as huggingface_hub's is: each
name is imported from its module on first use (a module ``__getattr__``), so ``import uwf``
costs next to nothing and a command pays only for what it uses. ``__all__`` lists what is
public and stable (docs/api.md, "What is stable"); type checkers read what each name is from
``__init__.pyi``.
"""

__version__ = "0.1.0"

#: Each public name and the module it lives in.
_WHERE = {
    **dict.fromkeys(("Store", "check_workflow", "open_store"), "uwf.api.store"),
    **dict.fromkeys(
        ("AgentCall", "AgentContext", "FunctionAgent", "PythonAgent", "agent", "kit_agent"),
        "uwf.api.agents",
    ),
    **dict.fromkeys(
        (
            "AgentFailed",
            "Busy",
            "Conflict",
            "Deferred",
            "HeldBack",
            "Interrupted",
            "InvalidInput",
            "NotActive",
            "NotFound",
            "NothingToStep",
            "Stopped",
            "UsageError",
            "UwfError",
            "exit_code",
        ),
        "uwf.api.errors",
    ),
    **dict.fromkeys(
        (
            "Child",
            "Cost",
            "Failure",
            "Forked",
            "Run",
            "Start",
            "Started",
            "Step",
            "StepResult",
            "Steps",
            "ThreadState",
            "ThreadSummary",
            "Usage",
            "Waiting",
            "WorkflowCheck",
            "WorkflowInfo",
            "WorkflowPut",
        ),
        "uwf.api.types",
    ),
}

__all__ = [
    "AgentCall",
    "AgentContext",
    "AgentFailed",
    "Busy",
    "Child",
    "Conflict",
    "Cost",
    "Deferred",
    "Failure",
    "Forked",
    "FunctionAgent",
    "HeldBack",
    "Interrupted",
    "InvalidInput",
    "NotActive",
    "NotFound",
    "NothingToStep",
    "PythonAgent",
    "Run",
    "Start",
    "Started",
    "Step",
    "StepResult",
    "Steps",
    "Stopped",
    "Store",
    "ThreadState",
    "ThreadSummary",
    "Usage",
    "UsageError",
    "UwfError",
    "Waiting",
    "WorkflowCheck",
    "WorkflowInfo",
    "WorkflowPut",
    "__version__",
    "agent",
    "check_workflow",
    "exit_code",
    "kit_agent",
    "open_store",
]


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'uwf' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain one
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
