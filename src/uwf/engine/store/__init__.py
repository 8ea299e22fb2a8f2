"""The store as a whole: ``uwf cas …``, garbage collection and ``uwf store copy``."""

__all__: list[str] = []  # the subject's modules are its faces
