"""The agent interface every player of Cold Iron implements.

An agent sees what a player may know, and nothing more, in one of two forms:

* through the env: the observation and the legal-action mask of each step, plus the step's
  ``info`` (only what the player saw: the hand, the cards just drawn...): :meth:`Agent.act`;
* as a :class:`~coldiron_env.knowledge.Knowledge` (the hand, every card seen and the counters,
  never the deck's order): :meth:`KnowledgeActor.act_knowledge`, which hand-written players
  offer so the evaluator can drive them straight on the rules engine. No player is ever given
  the ``Game``.

An agent may keep memory within an episode; :meth:`Agent.reset` is called before every episode.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol, runtime_checkable

import numpy as np

from coldiron_env.knowledge import Knowledge
from coldiron_env.options import RuleOptions


class Agent(ABC):
    """A player: ``act`` picks a legal action; ``reset`` starts a new episode.

    Attributes:
        name: the name agents are selected and reported by (``random``, ...).
        searches: it looks ahead at each decision (the planners, MCTS): a ladder ranks it
            among the planners, on their share of the deals.
    """

    name: str = "agent"
    searches: bool = False

    def reset(self, seed: int | None = None) -> None:  # noqa: B027 (optional hook)
        """Forget the last episode; ``seed`` seeds any randomness of the agent."""

    @abstractmethod
    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        """A legal action index for this observation and mask (``mask[a]`` true = legal)."""

    def replay(
        self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None, action: int
    ) -> None:
        """See a step as :meth:`act` would, where ``action`` was played already (a saved game
        resumed). By default :meth:`act` is asked and its choice ignored."""
        self.act(obs, action_mask, info)


@runtime_checkable
class RuleAware(Protocol):
    """An agent that must be told the game's rules (turn count, phrase...) before playing:
    whoever seats it calls ``set_rules`` with the rules of the games it will play."""

    def set_rules(self, rules: RuleOptions) -> None: ...


@runtime_checkable
class KnowledgeActor(Protocol):
    """A player that decides from a :class:`Knowledge` (what a player knows) alone:
    ``act_knowledge`` picks the action :meth:`Agent.act` would pick in the same position
    (tested for every built-in player)."""

    def act_knowledge(self, kn: Knowledge) -> int: ...


class KnowledgePlayer(Agent):
    """A player that remembers every card it sees (:attr:`knowledge`) and decides from that
    alone: :meth:`act` observes the step, then asks :meth:`act_knowledge`.

    It needs each step's ``info`` (``info["drawn"]``) to remember discarded cards, or a
    ``recall=True`` observation; with neither it knows only its hand and plays worse.
    """

    def __init__(self) -> None:
        self.knowledge = Knowledge()

    def set_rules(self, rules: RuleOptions) -> None:
        """Play a game with these rules (the default is the game)."""
        self.knowledge.rules = rules

    def reset(self, seed: int | None = None) -> None:
        self.knowledge.reset()

    def replay(
        self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None, action: int
    ) -> None:
        self.knowledge.observe(obs, info)  # what it saw; nothing to decide

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        self.knowledge.observe(obs, info)
        action = self.act_knowledge(self.knowledge)
        if not action_mask[action]:
            raise ValueError(
                f"{self.name} chose action {action}, illegal under mask "
                f"{np.asarray(action_mask).tolist()} (was info from a different step passed?)"
            )
        return action

    @abstractmethod
    def act_knowledge(self, kn: Knowledge) -> int:
        """The action for what the player knows (as :meth:`act`)."""


def legal_rows(masks: Any) -> np.ndarray:
    """A batch of action masks as booleans, one row a game; ``ValueError`` when it is not a
    batch or a row has no legal action (what every batched policy's ``act`` refuses)."""
    legal = np.asarray(masks, dtype=bool)
    if legal.ndim != 2 or not legal.any(axis=1).all():
        raise ValueError("an action mask has no legal action (or is not a batch of masks)")
    return legal
