"""Layer 3: the moderator — a pure function of (graph, last role, last output)."""

from uwf.moderator.evaluate import END, START, UNIT, Decision, check_template, evaluate, render
from uwf.protocol.workflow import Graph

__all__ = ["END", "START", "UNIT", "Decision", "Graph", "check_template", "evaluate", "render"]
