"""What lives only in this machine's storage root: ``uwf setup`` and the debug log."""

__all__: list[str] = []  # the subject's modules are its faces
