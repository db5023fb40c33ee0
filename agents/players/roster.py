"""The built-in players by name: ``make_player("heuristic")``.

To add a built-in player, add one entry to :data:`BUILTIN_AGENTS`. Trained
models are loaded by name too, through :func:`agents.registry.make_agent`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Final

from agents.players.base import Agent
from agents.players.baselines import RandomAgent, ThreatenAgent
from agents.players.heuristic import HeuristicAgent
from agents.players.planner import BUDGETS, make_planner

AgentFactory = Callable[[], Agent]
MCTS_BUDGETS: Final = {"mcts": 100, "mcts-large": 1000}
"""OpenSpiel's MCTS with random rollouts (``agents.players.mcts``): simulations a decision."""


def make_mcts(name: str) -> Agent:
    """OpenSpiel's MCTS bot ``name``, imported only now: it needs open_spiel."""
    try:
        from agents.players.mcts import MCTSAgent  # noqa: PLC0415 (optional open_spiel)
    except ImportError as err:
        raise ValueError(
            f"the {name!r} player needs open_spiel (pip install -e '.[openspiel]'): {err}"
        ) from err
    return MCTSAgent(simulations=MCTS_BUDGETS[name], name=name)


BUILTIN_AGENTS: Final[dict[str, AgentFactory]] = {
    "random": RandomAgent,
    "threaten": ThreatenAgent,
    "heuristic": HeuristicAgent,
    # The rollout planner at its budgets: planner-small, planner, planner-large.
    **{name: partial(make_planner, name) for name in BUDGETS},
    # OpenSpiel's MCTS, random rollouts (the openspiel extra): mcts, mcts-large.
    **{name: partial(make_mcts, name) for name in MCTS_BUDGETS},
}
"""Built-in player names -> factories (each call makes a fresh agent)."""


def make_player(name: str) -> Agent:
    """A fresh built-in player; an unknown name is refused with the known ones."""
    factory = BUILTIN_AGENTS.get(name)
    if factory is None:
        raise ValueError(f"unknown built-in player {name!r}; known: {', '.join(BUILTIN_AGENTS)}")
    return factory()
