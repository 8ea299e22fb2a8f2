"""Layer 1: the content-addressed store (docs/format.md, "Nodes")."""
