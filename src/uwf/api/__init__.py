"""uwf as a Python library (docs/api.md): the layer between the CLI and the engine.

Its public face is the top-level package — ``import uwf``; ``uwf.open_store(...)`` — which
loads these modules on first use; this package imports nothing itself. The CLI calls the
engine functions these wrap (their JSON is the CLI's), never this layer: ``thread show``
imports no module more for it.
"""

# The package exports nothing here: the library's face is the lazy top level, ``uwf``.
__all__: list[str] = []
