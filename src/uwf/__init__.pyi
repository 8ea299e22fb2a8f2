"""What ``uwf`` exports, for type checkers (docs/api.md): the names ``uwf/__init__.py``
imports on first use (its ``__getattr__``), each from its module. A stub rather than imports
under ``TYPE_CHECKING`` in the package itself: the CLI imports the package (for
``__version__``) and must not appear, even to import-linter, to import what these name (the
agent kit among them). ``tests/test_api.py`` checks that this file and the lazy table name
the same things."""

from uwf.api.agents import (
    AgentCall,
    AgentContext,
    FunctionAgent,
    PythonAgent,
    agent,
    kit_agent,
)
from uwf.api.errors import (
    AgentFailed,
    Busy,
    Conflict,
    Deferred,
    HeldBack,
    Interrupted,
    InvalidInput,
    NotActive,
    NotFound,
    NothingToStep,
    Stopped,
    UsageError,
    UwfError,
    exit_code,
)
from uwf.api.store import Store, check_workflow, open_store
from uwf.api.types import (
    Child,
    Cost,
    Failure,
    Forked,
    Run,
    Start,
    Started,
    Step,
    StepResult,
    Steps,
    ThreadState,
    ThreadSummary,
    Usage,
    Waiting,
    WorkflowCheck,
    WorkflowInfo,
    WorkflowPut,
)

__version__: str

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
