"""Layer 3: config.yaml and .env (docs/format.md, "config.yaml and .env")."""
