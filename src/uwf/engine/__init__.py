"""Layer 4: workflows, the registry and threads — domain functions that take the storage root
and return plain data. Errors are raised as UwfError subclasses."""
