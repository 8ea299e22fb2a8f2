"""Evals: running a workflow on a set of tasks, judging and recording each run (docs/evals.md)."""
