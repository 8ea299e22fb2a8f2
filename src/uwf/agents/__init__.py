"""Layer 6: the shipped agents (uwf-mock, uwf-cmd, uwf-hermes, uwf-builtin). Each is its own
console script; the engine spawns them and never imports them."""

# The package exports nothing here: each agent is its own console script.
__all__: list[str] = []
