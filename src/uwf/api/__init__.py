"""uwf as a Python library (docs/api.md): the layer between the CLI and the engine.

Its public face is the top-level package — ``import uwf``; ``uwf.open_store(...)`` — which
loads these modules on first use. This package imports nothing itself, so that the CLI may use
one module of it (``backends``: opening a store by the CLI's rules) and pay for no other.
"""
