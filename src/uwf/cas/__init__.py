"""Layer 1: the content-addressed store (docs/format.md, "Nodes")."""

# The package exports nothing here: one module per part of the store.
__all__: list[str] = []
