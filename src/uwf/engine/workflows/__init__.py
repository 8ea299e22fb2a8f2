"""Workflows: files read and checked, project discovery, and the commands on stored workflows."""
