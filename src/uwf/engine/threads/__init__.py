"""A thread's life outside the step: start, show, list, fork, kill, steering, long threads."""
