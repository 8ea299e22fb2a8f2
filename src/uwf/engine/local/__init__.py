"""What lives only in this machine's storage root: ``uwf setup`` and the debug log."""
