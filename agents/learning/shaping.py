"""Potential-based reward shaping, for training only.

Ng, Harada & Russell (1999): adding ``F(s, s') = gamma * Phi(s') - Phi(s)`` to every reward,
``Phi = 0`` at terminal states, leaves the optimal policy of the discounted problem unchanged
(an episode's terms telescope to ``-Phi(s_0)``); it can only change how fast it is found.
The potential (:func:`run_window_potential`) is ``coefficient`` times the cards held of each
suit's best run window: progress towards the phrase. Measured alone it does not fix
exploration, so it is off by default. :class:`ShapingVecEnv` reads the hand from the
observation, so it wraps any SB3 ``VecEnv``; evaluation never uses it (true win rates).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from coldiron_env import observation as obs_layout
from coldiron_env.cards import NUM_RANKS, NUM_SUITS
from coldiron_env.judge import BEST_WINDOW

_RANK_WEIGHTS: Final = (1 << np.arange(NUM_RANKS)).astype(np.int64)
_BEST_WINDOW: Final = np.asarray(BEST_WINDOW, dtype=np.float64)


def hand_bits(obs: Any) -> np.ndarray:
    """The (n, 40) hand bits of a batch of flat or dict observations."""
    if isinstance(obs, dict):
        return np.asarray(obs["hand"]).reshape(-1, obs_layout.HAND.size) > 0.5
    flat = np.asarray(obs)
    return (
        flat[..., obs_layout.HAND.start : obs_layout.HAND.stop].reshape(-1, obs_layout.HAND.size)
        > 0.5
    )


def run_window_potential(obs: Any, coefficient: float) -> np.ndarray:
    """``coefficient`` x (cards held of each suit's best 3-rank window), per observation."""
    bits = hand_bits(obs).reshape(-1, NUM_SUITS, NUM_RANKS).astype(np.int64)
    fields = bits @ _RANK_WEIGHTS  # (n, 4) suit fields, bit r-1 = rank r
    out: np.ndarray = coefficient * _BEST_WINDOW[fields].sum(axis=1)
    return out


POTENTIALS: Final = {"run_windows": run_window_potential}


class ShapingVecEnv(VecEnvWrapper):
    """Adds ``gamma * Phi(s') - Phi(s)`` to each reward (``Phi(s') = 0`` when terminal), and
    the term to ``info["shaping"]``. Above the episode monitor (logged returns stay true),
    below any ``VecNormalize``."""

    def __init__(
        self, venv: VecEnv, gamma: float, coefficient: float, potential: str = "run_windows"
    ) -> None:
        super().__init__(venv)  # its settings validated by the config (shaping:)
        self._potential = POTENTIALS[potential]
        self.gamma = gamma
        self.coefficient = coefficient
        self._last = np.zeros(self.num_envs)

    def reset(self) -> Any:
        obs = self.venv.reset()
        self._last = self._potential(obs, self.coefficient)
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        # After a done, obs is the next episode's first observation (auto-reset):
        # the terminal state's potential is 0 by definition.
        phi = self._potential(obs, self.coefficient)
        shaping = self.gamma * np.where(dones, 0.0, phi) - self._last
        self._last = phi
        for info, term in zip(infos, shaping, strict=True):
            info["shaping"] = float(term)
        return obs, (rewards + shaping).astype(np.float32), dones, infos
