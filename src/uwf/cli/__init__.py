"""The uwf command line: thin Typer apps, one module per command group."""

# The package exports nothing here: ``main`` is the entry point and ``COMMANDS`` its table.
__all__: list[str] = []
