"""Layer 5: what every agent needs — arguments, context from the chain, prompts, the
two-layer extract, the StepNode write (docs/format.md, "The agent protocol")."""

# The package exports nothing here: an agent imports the module it needs (``uwf.kit_agent`` wraps
# the kit for Python agents).
__all__: list[str] = []
