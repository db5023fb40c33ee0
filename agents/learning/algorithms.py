"""The algorithm registry: config names -> Stable-Baselines3 / sb3-contrib classes.

Adding an algorithm is one entry in :data:`ALGORITHMS`. Classes are imported lazily
(``import agents.learning.algorithms`` does not import torch).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

PolicyFamily = Literal["actor_critic", "q_value"]


@dataclass(frozen=True)
class AlgorithmSpec:
    """One registered algorithm: its config name, the class ``module.class_name``, and what
    the rest of the code asks of it."""

    name: str
    module: str
    class_name: str
    supports_masks: bool
    """Masks enter its rollouts and loss (MaskablePPO); the others learn that an illegal
    action ends the episode as a loss, and are masked at play time."""
    off_policy: bool
    """It has a replay buffer (saved with checkpoints)."""
    recurrent: bool
    """Its policy carries LSTM state through an episode."""
    family: PolicyFamily
    """``actor_critic`` (logits + value head) or ``q_value``: which ``policy:`` keys and which
    imitation loss apply."""
    flat_policy: str
    dict_policy: str
    """SB3's policy names for ``observation_mode: flat`` and ``dict``."""

    def load_class(self) -> type[BaseAlgorithm]:
        cls: type[BaseAlgorithm] = getattr(importlib.import_module(self.module), self.class_name)
        return cls

    def policy_name(self, observation_mode: str) -> str:
        return self.dict_policy if observation_mode == "dict" else self.flat_policy


ALGORITHMS: Final[dict[str, AlgorithmSpec]] = {
    spec.name: spec
    for spec in (
        AlgorithmSpec(
            "maskable_ppo", "sb3_contrib", "MaskablePPO", True, False, False,
            "actor_critic", "MlpPolicy", "MultiInputPolicy",
        ),
        AlgorithmSpec(
            "ppo", "stable_baselines3", "PPO", False, False, False,
            "actor_critic", "MlpPolicy", "MultiInputPolicy",
        ),
        AlgorithmSpec(
            "a2c", "stable_baselines3", "A2C", False, False, False,
            "actor_critic", "MlpPolicy", "MultiInputPolicy",
        ),
        AlgorithmSpec(
            "dqn", "stable_baselines3", "DQN", False, True, False,
            "q_value", "MlpPolicy", "MultiInputPolicy",
        ),
        AlgorithmSpec(
            "qrdqn", "sb3_contrib", "QRDQN", False, True, False,
            "q_value", "MlpPolicy", "MultiInputPolicy",
        ),
        AlgorithmSpec(
            "recurrent_ppo", "sb3_contrib", "RecurrentPPO", False, False, True,
            "actor_critic", "MlpLstmPolicy", "MultiInputLstmPolicy",
        ),
    )
}  # fmt: skip


def get_algorithm(name: str) -> AlgorithmSpec:
    """The registered algorithm ``name``; an unknown name is refused with the known ones."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}") from None


def algorithm_of(model: object) -> AlgorithmSpec:
    """The registered algorithm of a model instance (by class name)."""
    cls_name = type(model).__name__
    for spec in ALGORITHMS.values():
        if spec.class_name == cls_name:
            return spec
    raise ValueError(f"model class {cls_name} is not a registered algorithm")
