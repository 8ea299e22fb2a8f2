"""uwf — a stateless, single-step workflow engine for teams of LLM agents."""

__version__ = "0.1.0"
