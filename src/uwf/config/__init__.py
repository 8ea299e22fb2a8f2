"""Layer 3: config.yaml and .env (docs/format.md, "config.yaml and .env")."""

# The package exports nothing here: ``config`` and ``schema`` are the faces.
__all__: list[str] = []
