"""Layer 2: the node schemas of uwf (docs/format.md, "uwf's schemas") and the uwf view of the
store."""

# The package exports nothing here: ``schemas`` is the face.
__all__: list[str] = []
