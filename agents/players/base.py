"""The agent interface every player of Cold Iron implements.

An agent sees what a player may know: the observation and the legal-action
mask of each step (plus the step's ``info``, which carries only what the player
saw: the hand, the cards just drawn, the phase...). It may keep memory within an
episode; :meth:`Agent.reset` is called before every episode.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np


class Agent(ABC):
    """A player: ``act`` picks a legal action; ``reset`` starts a new episode.

    Attributes:
        name: the name agents are selected and reported by (``random``, ...).
    """

    name: str = "agent"

    def reset(self, seed: int | None = None) -> None:  # noqa: B027 (optional hook)
        """Forget the last episode; ``seed`` seeds any randomness of the agent."""

    @abstractmethod
    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        """A legal action index for this observation and mask (``mask[a]`` true = legal)."""
