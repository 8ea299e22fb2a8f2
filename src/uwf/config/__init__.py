"""Layer 3: config.yaml and .env (PORT §8)."""
