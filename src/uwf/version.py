"""uwf's version, in a module of its own: ``uwf --version`` and the traces read it without
the lazy top level of the package (``uwf/__init__.py``)."""

__version__ = "0.1.0"
