"""Agents that play Cold Iron (baselines and trained policies)."""
