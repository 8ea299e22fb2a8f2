"""A thread's life outside the step: start, show, list, fork, kill, steering, long threads."""

__all__: list[str] = []  # the subject's modules are its faces
