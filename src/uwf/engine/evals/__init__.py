"""Evals: running a workflow on a set of tasks, judging and recording each run (docs/evals.md)."""

__all__: list[str] = []  # the subject's modules are its faces
