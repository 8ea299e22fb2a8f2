"""Workflows: files read and checked, project discovery, and the commands on stored workflows."""

__all__: list[str] = []  # the subject's modules are its faces
