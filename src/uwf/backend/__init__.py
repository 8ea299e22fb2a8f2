"""The storage backends: everything uwf persists, behind one interface (``base.Backend``)."""
