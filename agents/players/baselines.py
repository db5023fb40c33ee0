"""Baseline players: ``random`` (uniform over legal actions) and ``threaten``.

Both also pick the same action from a :class:`~coldiron_env.knowledge.Knowledge` (``act_knowledge``:
same legal set, same random stream), so the evaluator drives them on the rules engine; a test checks
that both ways give identical games.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from agents.players.base import Agent
from coldiron_env.actions import BONUS, LEGAL_ACTIONS, PHASE_BONUS, PHASE_TURN, STOP, THREATEN
from coldiron_env.knowledge import Knowledge


class RandomAgent(Agent):
    """Uniformly random over the legal actions, from its own seeded generator.

    It wins essentially never: it racks into Jokers and dies.
    """

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)  # cheap to reseed every deal, unlike a NumPy Generator

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self._rng.seed(seed)

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        legal = np.flatnonzero(np.asarray(action_mask))
        if legal.size == 0:
            raise ValueError("no legal action: the action mask is all zero (is the episode over?)")
        return int(legal[self._rng.randrange(legal.size)])

    def act_knowledge(self, kn: Knowledge) -> int:
        """The action :meth:`act` would pick (same random stream)."""
        legal = LEGAL_ACTIONS[kn.phase]
        if not legal:
            raise ValueError("no legal action: the game is over")
        return legal[self._rng.randrange(len(legal))]


class ThreatenAgent(Agent):
    """Always Threaten; always take a Joker's bonus.

    It never applies the Iron, so it never reaches the ``iron`` phase; were it there, it would Stop.
    """

    name = "threaten"

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        mask = np.asarray(action_mask)
        for action in (THREATEN, BONUS, STOP):
            if mask[action]:
                return action
        raise ValueError(
            f"threaten agent: no legal action among Threaten, Bonus, Stop in mask {mask.tolist()}"
        )

    def act_knowledge(self, kn: Knowledge) -> int:
        """The action :meth:`act` would pick."""
        phase = kn.phase
        if phase == PHASE_TURN:
            return THREATEN
        if phase == PHASE_BONUS:
            return BONUS
        if LEGAL_ACTIONS[phase]:
            return STOP
        raise ValueError("no legal action: the game is over")
