"""Evaluation: every agent on the same seeded deals, statistics, charts, the ladder."""
