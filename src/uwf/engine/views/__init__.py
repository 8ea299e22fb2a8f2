"""What people read: markdown views, the timeline, following threads, routing graphs."""

__all__: list[str] = []  # the subject's modules are its faces
