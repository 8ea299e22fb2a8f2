"""The store as a whole: ``uwf cas …``, garbage collection and ``uwf store copy``."""
