"""The built-in players by name: ``make_player("heuristic")``.

To add a built-in player, add one entry to :data:`BUILTIN_AGENTS`. Trained models, and players other
code registers (OpenSpiel's ``mcts``), are made by name through :func:`agents.registry.make_agent`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Final

from agents.players.base import Agent
from agents.players.baselines import RandomAgent, ThreatenAgent
from agents.players.heuristic import HeuristicAgent
from agents.players.planner import BUDGETS, PlannerAgent

AgentFactory = Callable[[], Agent]


BUILTIN_AGENTS: Final[dict[str, AgentFactory]] = {
    "random": RandomAgent,
    "threaten": ThreatenAgent,
    "heuristic": HeuristicAgent,
    # The planner at its budgets, but planner-free (a search over a network in expert iteration:
    # as a player it would keep heuristic as its base): planner-small, planner, planner-large.
    **{n: partial(PlannerAgent, c, name=n) for n, c in BUDGETS.items() if c.racks is not None},
}  # built-in player names -> factories (each call makes a fresh agent)


def make_player(name: str) -> Agent:
    """A fresh built-in player; an unknown name is refused with the known ones."""
    factory = BUILTIN_AGENTS.get(name)
    if factory is None:
        raise ValueError(f"unknown built-in player {name!r}; known: {', '.join(BUILTIN_AGENTS)}")
    return factory()
