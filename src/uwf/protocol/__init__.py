"""Layer 2: the node schemas of uwf (PORT §4, REFERENCE §2.3) and the uwf view of the store."""
