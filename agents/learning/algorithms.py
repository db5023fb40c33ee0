"""The algorithm registry: config names -> Stable-Baselines3 / sb3-contrib classes.

Adding an algorithm is one entry in :data:`ALGORITHMS`. Classes are imported
lazily (``import agents.learning.algorithms`` does not import torch).

Each entry says whether the algorithm takes action masks itself (MaskablePPO:
masks enter its rollouts and its loss), whether it is off-policy (it then has a
replay buffer to checkpoint), whether its policy is recurrent (it then carries
LSTM state through an episode), the family of its policy network
(``actor_critic`` or ``q_value``: which ``policy:`` keys and which imitation loss
apply), and the SB3 policy names for flat and dict observations.
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
    """One registered algorithm.

    Attributes:
        name: the config name (``algorithm.name``).
        module: module holding the class.
        class_name: the class in ``module``.
        supports_masks: the algorithm uses action masks in training (MaskablePPO).
            The others are trained on the env's default rule (an illegal action
            ends the episode as a loss) and masked at play time by
            :mod:`agents.learning.sb3_agent`.
        off_policy: has a replay buffer (saved with checkpoints).
        recurrent: the policy keeps LSTM state within an episode.
        family: ``actor_critic`` (logits + value head) or ``q_value`` (Q-values).
        flat_policy: SB3 policy name for ``observation_mode: flat``.
        dict_policy: SB3 policy name for ``observation_mode: dict``.
    """

    name: str
    module: str
    class_name: str
    supports_masks: bool
    off_policy: bool
    recurrent: bool
    family: PolicyFamily
    flat_policy: str
    dict_policy: str

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
