"""Training deals for other frameworks' env runners: whatever seed a framework passes.

RLlib, rl-zoo3 and others seed their training envs with ``seed + i`` (or similar), the very
seeds ``scripts/evaluate.py --seed N`` deals its evaluation decks from. Wrapped in
:class:`TrainingDeals` (one env) or :class:`TrainingDealsVector` (the native vector env), an
env maps every seed it is given into the training stream
(``coldiron_env.dealer.stream_seed(DealStream.TRAINING, seed, index)``), so training never
deals an evaluation or validation deck, whoever seeds it (checked on the decks actually
dealt: tests/test_integration_streams.py). Needs only gymnasium and numpy.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from coldiron_env.dealer import DealStream, stream_seed


class TrainingDeals(gym.Wrapper[Any, Any, Any, Any]):
    """One env whose every ``reset(seed=s)`` deals from ``stream_seed(TRAINING, s, index)``;
    ``reset()`` without a seed goes on with the generator it has."""

    def __init__(self, env: gym.Env[Any, Any], index: int = 0) -> None:
        super().__init__(env)
        self.index = index

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            seed = stream_seed(DealStream.TRAINING, int(seed), self.index)
        return self.env.reset(seed=seed, options=options)


class TrainingDealsVector(gym.vector.VectorWrapper):
    """A vector env whose ``reset(seed=s)`` seeds game ``i`` with
    ``stream_seed(TRAINING, s, i)`` (a list of seeds: each mapped the same way)."""

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        if isinstance(seed, (int, np.integer)):  # each game seeded from it
            seed = [int(seed)] * self.env.num_envs
        chosen: Any = None  # the native vector env takes a list of seeds, one per game
        if seed is not None:
            chosen = [
                None if s is None else stream_seed(DealStream.TRAINING, int(s), i)
                for i, s in enumerate(seed)
            ]
        return self.env.reset(seed=chosen, options=options)
