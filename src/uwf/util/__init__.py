"""Layer 0: identifiers, errors, files, locks and formatting. Imports nothing from uwf."""
