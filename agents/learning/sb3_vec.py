"""An SB3 ``VecEnv`` over Cold Iron's batched vector env: one NumPy step for all games.

:class:`ColdIronSB3VecEnv` is the ``native`` kind of
:func:`agents.learning.training.build_vec_env` (with ``dummy`` and ``subproc``)::

    venv = StreamSeededVecEnv(build_vec_env("native", 8, {"recall": True}), DealStream.TRAINING)
    model = MaskablePPO("MlpPolicy", venv, seed=0)

All three kinds report episode statistics the same way (``info["episode"]``,
``info["is_success"]``), give sb3-contrib's ``get_action_masks`` the masks, and with the same
``seed`` deal the same decks (env ``i`` seeded ``seed + i``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecMonitor
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from coldiron_env.vector import ColdIronVectorEnv


class ColdIronSB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` API over :class:`ColdIronVectorEnv` (``SAME_STEP`` autoreset).

    The ``info`` of an env whose episode ended holds ``terminal_observation``,
    ``TimeLimit.truncated``, ``outcome`` and ``is_success``; the others get ``{}`` (the
    per-step figures stay in :attr:`vector_env`'s batched info). ``get_attr`` / ``set_attr``
    / ``env_method`` address the one vector env: a method is called once, its result split
    by env when it is an array with a row per env (``env_method("action_masks")``, which
    sb3-contrib's ``get_action_masks`` calls).
    """

    def __init__(self, num_envs: int, **env_kwargs: Any) -> None:
        self.vector_env = ColdIronVectorEnv(num_envs, **env_kwargs)
        super().__init__(
            num_envs, self.vector_env.single_observation_space, self.vector_env.single_action_space
        )
        self._actions: np.ndarray | None = None

    # ------------------------------------------------------------ VecEnv API
    def reset(self) -> VecEnvObs:
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        decks = [options.get("deck") for options in self._options]
        unknown = sorted({key for options in self._options for key in options} - {"deck"})
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; known: ['deck']")
        options = {"deck": decks} if any(d is not None for d in decks) else None
        obs, _ = self.vector_env.reset(seed=seeds, options=options)
        self.reset_infos = [{} for _ in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()
        return obs  # type: ignore[no-any-return]

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() called without step_async()")
        obs, rewards, terminated, truncated, info = self.vector_env.step(self._actions)
        self._actions = None
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        ended = np.flatnonzero(dones)
        if ended.size:  # per ended env: lists, not NumPy scalars (hundreds a step early on)
            final_obs = info["final_obs"][ended].tolist()
            cut = (truncated[ended] & ~terminated[ended]).tolist()
            outcome = info.get("outcome")  # absent when only truncations ended games
            told: list[str | None] = [None] * ended.size
            if outcome is not None:
                has = info["_outcome"][ended].tolist()
                names = outcome[ended].tolist()
                told = [str(n) if h else None for n, h in zip(names, has, strict=True)]
                success = info["is_success"][ended].tolist()
            for k, i in enumerate(ended.tolist()):
                env_info: dict[str, Any] = {
                    "terminal_observation": final_obs[k],
                    "TimeLimit.truncated": cut[k],
                }
                if told[k] is not None:
                    env_info["outcome"] = told[k]
                    env_info["is_success"] = success[k]
                infos[i] = env_info
        return obs, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        self.vector_env.close()

    def action_masks(self) -> np.ndarray:
        """Legal actions of every env, an (N, 19) bool array."""
        return self.vector_env.action_masks()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        value = getattr(self.vector_env, attr_name)  # AttributeError when missing
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        chosen = list(self._get_indices(indices))
        if sorted(chosen) != list(range(self.num_envs)):
            raise ValueError(
                f"set_attr({attr_name!r}) must address every env of the native vector env "
                f"(its attributes are shared); got indices {chosen}"
            )
        setattr(self.vector_env, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        chosen = list(self._get_indices(indices))
        result = getattr(self.vector_env, method_name)(*method_args, **method_kwargs)
        if isinstance(result, np.ndarray) and result.shape[:1] == (self.num_envs,):
            return [result[i] for i in chosen]
        return [result for _ in chosen]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper[Any, Any, Any, Any]], indices: VecEnvIndices = None
    ) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None for _ in range(self.num_envs)]


class FinishedOnlyVecMonitor(VecMonitor):
    """SB3's :class:`VecMonitor` whose step visits only the envs whose episode ended (SB3's
    loops over every env reading NumPy scalars one by one: early in training, when hundreds
    of games end a step, a large part of the env's time; docs/speed.md)."""

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.episode_returns += rewards
        self.episode_lengths += 1
        new_infos = list(infos)
        ended = np.flatnonzero(dones)
        if not ended.size:
            return obs, rewards, dones, new_infos
        elapsed = round(time.time() - self.t_start, 6)  # one clock reading a step
        returns, lengths = self.episode_returns[ended], self.episode_lengths[ended]
        self.episode_returns[ended] = 0
        self.episode_lengths[ended] = 0
        for i, episode_return, episode_length in zip(ended.tolist(), returns, lengths, strict=True):
            info = infos[i].copy()
            episode_info = {"r": episode_return, "l": episode_length, "t": elapsed}
            for key in self.info_keywords:
                episode_info[key] = info[key]
            info["episode"] = episode_info
            self.episode_count += 1
            if self.results_writer:
                self.results_writer.write_row(episode_info)
            new_infos[i] = info
        return obs, rewards, dones, new_infos
