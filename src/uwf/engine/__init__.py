"""The engine: domain functions that take a backend and return plain data, one subpackage per
subject (docs/architecture.md, "The engine, by subject"). Errors are raised as UwfError
subclasses. Nothing is imported here, so a command loads only the modules it uses."""

# The package exports nothing here: one subpackage per subject.
__all__: list[str] = []
