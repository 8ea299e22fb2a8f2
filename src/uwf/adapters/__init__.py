"""Adapters: one module per outside system uwf talks to.

``llm`` is the one OpenAI-compatible HTTP client (the only module that imports httpx);
``process`` spawns and supervises child processes (agents, wrapped commands). Each keeps the
outside system's quirks in one place and raises ``UwfError`` subclasses, never the library's
own exceptions.
"""

# The package exports nothing here: one module per outside system.
__all__: list[str] = []
