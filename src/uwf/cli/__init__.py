"""The uwf command line: thin Typer apps, one module per command group."""
