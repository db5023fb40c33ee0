"""A masked random sampler over ``gymnasium.vector.SyncVectorEnv``, CleanRL style, that
runs on Gymnasium 0.29.1 (CleanRL's pin) and on 1.x.

Run it::

    .venv/bin/python docs/examples/cleanrl_masked_sampler.py --num-envs 8 --steps 2000

**The one difference that matters.** On Gymnasium 1.x, ``SyncVectorEnv`` stacks
``info["action_mask"]`` into one ``(num_envs, 19)`` int8 array. On 0.29.1 it returns an
*object* array of ``num_envs`` separate ``(19,)`` arrays: ``mask.astype(bool)``,
``np.asarray(mask, dtype=bool)`` and ``torch.tensor(mask)`` all fail on it, and
``np.stack(mask)`` makes the ``(num_envs, 19)`` array (:func:`legal_masks`). With
``mask_in_observation=True`` the mask is in the ``Dict`` observation instead, which both
versions stack: ``obs["action_mask"]`` is ``(num_envs, 19)`` int8 either way.

**Autoreset.** 0.29.1 resets an ended env within the same step (its last ``info`` is in
``info["final_info"][i]``, the returned mask is the new game's); 1.x resets it on the
next step (that step's action is ignored, and the mask returned with the ending marks
every action legal). A sampler that draws from the mask it was just given is right under
both; :func:`ended_outcomes` reads each ended game's outcome either way.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import gymnasium as gym
import numpy as np

import coldiron_env  # registers coldiron/ColdIron-v0
from coldiron_env.dealer import DealStream, stream_seed
from coldiron_env.observation import ACTION_MASK_KEY

ENV_ID: Final = "coldiron/ColdIron-v0"
FINAL_INFO_KEY: Final = "final_info"
"""Gymnasium 0.29.1: the ended envs' last ``info`` (an object array, None elsewhere)."""
OUTCOME_KEY: Final = "outcome"


def make_env(**env_kwargs: Any) -> Callable[[], gym.Env[Any, Any]]:
    """A thunk for ``SyncVectorEnv`` (CleanRL's ``make_env``); illegal actions raise."""

    def thunk() -> gym.Env[Any, Any]:
        return gym.make(ENV_ID, illegal_action="raise", **env_kwargs)

    return thunk


def make_envs(num_envs: int, **env_kwargs: Any) -> gym.vector.SyncVectorEnv:
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs <= 0:
        raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
    return gym.vector.SyncVectorEnv([make_env(**env_kwargs) for _ in range(num_envs)])


def legal_masks(info: dict[str, Any], obs: Any = None) -> np.ndarray:
    """The ``(num_envs, 19)`` bool mask of legal actions: from a ``Dict`` observation's
    ``action_mask`` when there is one, else from ``info["action_mask"]``, which Gymnasium
    0.29.1's ``SyncVectorEnv`` returns as an object array of per-env arrays
    (``np.stack`` makes it one array; 1.x has already stacked it)."""
    if isinstance(obs, dict) and ACTION_MASK_KEY in obs:
        return np.asarray(obs[ACTION_MASK_KEY]).astype(bool)
    mask = info[ACTION_MASK_KEY]
    if mask.dtype == object:  # Gymnasium 0.29.1
        mask = np.stack(mask)
    return np.asarray(mask).astype(bool)


def sample_masked(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row, uniform over that row's legal actions (every row has one)."""
    if masks.ndim != 2 or masks.dtype != np.bool_:
        raise ValueError(f"masks must be a 2-D bool array, got {masks.dtype} {masks.shape}")
    if not masks.any(axis=1).all():
        raise ValueError("a row of the mask has no legal action")
    scores = np.where(masks, rng.random(masks.shape), -1.0)
    return scores.argmax(axis=1)  # type: ignore[no-any-return]


def ended_outcomes(info: dict[str, Any], ended: np.ndarray) -> list[str]:
    """The outcome (``won``, ``slain``...) of each game that ended this step."""
    final = info.get(FINAL_INFO_KEY)
    out = []
    for i in np.flatnonzero(ended).tolist():
        if final is not None:  # Gymnasium 0.29.1: the ended game's info, kept aside
            out.append(str(final[i][OUTCOME_KEY]))
        else:  # Gymnasium 1.x: the ending step's info is the game's own
            out.append(str(info[OUTCOME_KEY][i]))
    return out


@dataclass
class SamplerResult:
    steps: int = 0
    """Vector steps taken (each steps every env)."""
    actions: int = 0
    illegal: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def episodes(self) -> int:
        return sum(self.outcomes.values())


StepCallback = Callable[[np.ndarray, np.ndarray], None]
"""``callback(masks, actions)`` before each vector step."""


def run(
    num_envs: int,
    steps: int,
    seed: int = 0,
    *,
    mask_in_observation: bool = False,
    on_step: StepCallback | None = None,
    **env_kwargs: Any,
) -> SamplerResult:
    """``steps`` vector steps of uniformly random legal actions in ``num_envs`` games
    (training deals of ``seed``)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    envs = make_envs(num_envs, mask_in_observation=mask_in_observation, **env_kwargs)
    rng = np.random.default_rng(seed)
    obs, info = envs.reset(seed=stream_seed(DealStream.TRAINING, seed))
    result = SamplerResult()
    for _ in range(steps):
        masks = legal_masks(info, obs)
        actions = sample_masked(masks, rng)
        if on_step is not None:
            on_step(masks, actions)
        result.illegal += int((~masks[np.arange(num_envs), actions]).sum())
        obs, _, terminated, truncated, info = envs.step(actions)
        result.steps += 1
        result.actions += num_envs
        result.outcomes.update(ended_outcomes(info, terminated | truncated))
    envs.close()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--mask-in-observation", action="store_true", help="read the mask from a Dict obs"
    )
    args = parser.parse_args(argv)
    try:
        result = run(
            args.num_envs, args.steps, args.seed, mask_in_observation=args.mask_in_observation
        )
    except ValueError as err:
        raise SystemExit(f"bad setting: {err}") from err
    print(
        f"gymnasium {gym.__version__}, numpy {np.__version__}, coldiron "
        f"{coldiron_env.__version__}: {result.actions} actions, {result.illegal} illegal, "
        f"{result.episodes} episodes ended: {dict(sorted(result.outcomes.items()))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
