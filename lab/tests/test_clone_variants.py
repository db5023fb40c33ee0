"""The cloning variants of lab/experiments/clone_variants.py: the recipe is the product's
cloning, an anchor keeps the policy near its own, a weight teaches the changed labels."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")
import torch

from agents.learning.config import config_from_dict
from agents.learning.imitation import behaviour_clone, collect_demonstrations
from agents.learning.sb3_agent import MaskedPolicy
from agents.learning.training import RunDir, build_model, build_vec_env
from agents.players.base import Agent
from coldiron_env.actions import BONUS, PHASE_BONUS, PHASE_IRON, REST, STOP, THREATEN
from coldiron_env.observation import decode
from lab.experiments import clone_variants as variants


class ScriptedTeacher(Agent):
    """Threaten every turn and take every bonus; stop ironing at once (deterministic)."""

    name = "scripted"

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        phase = decode(obs, 24).phase
        return BONUS if phase == PHASE_BONUS else STOP if phase == PHASE_IRON else THREATEN


def small_model(name: str) -> Any:
    hyperparameters = {"n_steps": 64, "batch_size": 64} if name == "maskable_ppo" else {}
    cfg = config_from_dict({
        "algorithm": {"name": name, "hyperparameters": hyperparameters},
        "training": {"total_timesteps": 1000, "n_envs": 1, "progress_bar": False},
        "policy": {"net_arch": [32]},
    })  # fmt: skip
    return build_model(cfg, build_vec_env("dummy", 1, {}), RunDir(Path("unused")))


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Any:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_an_anchor_keeps_the_policy_near_its_own_and_a_weight_teaches_the_changes() -> None:
    """As in a round of expert iteration: a network that plays like its teacher is shown
    labels of which a few differ from its choices. ``anchor`` moves its policy less;
    ``changed_weight`` makes it take up more of the differing labels; without either the
    variant is the product's cloning."""
    demos = collect_demonstrations(ScriptedTeacher(), {}, episodes=12, seed=100)
    torch.manual_seed(0)
    trained = small_model("maskable_ppo")
    behaviour_clone(trained, demos, epochs=30, batch_size=64, learning_rate=3e-3)
    late = np.array([decode(o, 24).turn >= 18 for o in demos.obs])
    switched = late & (demos.actions == THREATEN) & demos.masks[:, REST]
    assert switched.sum() > 20
    relabelled = copy.copy(demos)
    relabelled.actions = np.where(switched, REST, demos.actions)  # a teacher that rests late
    obs = torch.as_tensor(demos.obs)

    def params(model: Any) -> np.ndarray:
        return np.concatenate([p.detach().numpy().ravel() for p in model.policy.parameters()])

    def cloned(**options: float) -> tuple[Any, float, float]:
        model = copy.deepcopy(trained)
        with torch.no_grad():
            before = model.policy.get_distribution(obs).distribution.probs.clone()
        changed = MaskedPolicy(model).act(demos.obs, demos.masks) != relabelled.actions
        variants.weighted_clone(model, relabelled, epochs=10, batch_size=64, learning_rate=3e-3,
                                value_pretrain=False, seed=1, **options)  # fmt: skip
        with torch.no_grad():
            after = model.policy.get_distribution(obs).distribution.probs
        moved = float((before * (before.log() - after.log())).sum(dim=1).mean())
        now = MaskedPolicy(model).act(demos.obs, demos.masks)
        return model, moved, float((now[changed] == relabelled.actions[changed]).mean())

    plain, plain_moved, plain_learned = cloned()
    _, anchored_moved, _ = cloned(anchor=10.0)
    _, _, weighted_learned = cloned(changed_weight=10.0)
    assert anchored_moved < plain_moved
    assert weighted_learned > plain_learned
    product = copy.deepcopy(trained)
    behaviour_clone(product, relabelled, epochs=10, batch_size=64, learning_rate=3e-3,
                    value_pretrain=False, seed=1)  # fmt: skip
    assert np.array_equal(params(plain), params(product))
    with pytest.raises(ValueError, match="flat actor-critic"):
        variants.weighted_clone(small_model("dqn"), demos, epochs=1, batch_size=64,
                                learning_rate=1e-3, anchor=1.0)  # fmt: skip
