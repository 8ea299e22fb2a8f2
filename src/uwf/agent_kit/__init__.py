"""Layer 5: what every agent needs — arguments, context from the chain, prompts, the
two-layer extract, the StepNode write (docs/format.md, "The agent protocol")."""
