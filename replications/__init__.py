"""Replications of the papers' experiments (scripts, not library code): ``python -m replications.<name>``."""
