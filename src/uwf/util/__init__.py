"""Layer 0: identifiers, errors, files, locks and formatting. Imports nothing from uwf."""

# The package exports nothing here: one module per concern.
__all__: list[str] = []
