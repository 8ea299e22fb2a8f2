"""Layer 1: the content-addressed store (PORT §3)."""
