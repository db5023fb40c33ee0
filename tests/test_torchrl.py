"""TorchRL's ``GymEnv`` on Cold Iron with the mask in the observation
(``docs/examples/torchrl_masked_ppo.py``): masked random rollouts through the
``ActionMask`` transform, a masked PPO policy whose every action is legal, and a PPO
update that changes the networks. Skipped without torchrl (``pip install -e ".[torchrl]"``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import load_file

torch = pytest.importorskip("torch")
pytest.importorskip("torchrl")

from coldiron_env.game import IllegalActionError  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "torchrl_masked_ppo.py"
NUM_ACTIONS = 19  # the spec's Discrete(19)
ROLLOUT_STEPS = 300
TINY = {"frames": 512, "frames_per_batch": 256, "epochs": 2, "minibatch_size": 64, "hidden": (32,)}


def load_example() -> ModuleType:
    return load_file(EXAMPLE, "torchrl_masked_ppo")


@pytest.fixture(scope="module")
def ex() -> ModuleType:
    return load_example()


def legal_taken(batch: Any) -> Any:
    """Per step: whether the action taken was legal under the mask observed with it."""
    mask = batch.get("action_mask")
    action = batch.get("action")
    assert mask.dtype == torch.bool and mask.shape[-1] == NUM_ACTIONS
    assert action.shape == mask.shape[:-1]
    return mask.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)


def test_the_observation_reaches_tensordict_as_two_keys_with_a_bool_mask(ex: ModuleType) -> None:
    env = ex.make_env(seed=0, counting=False)
    td = env.reset()
    assert td.get("observations").shape == (48,)
    mask = td.get("action_mask")
    assert mask.dtype == torch.bool
    assert mask.tolist() == [True] * 17 + [False, False]  # the first turn: 0..16 legal
    env.close()


def test_masked_random_rollouts_take_only_legal_actions(ex: ModuleType) -> None:
    torch.manual_seed(0)
    env = ex.make_env(seed=0, counting=False)
    rollout = ex.random_rollout(env, ROLLOUT_STEPS)
    assert rollout.numel() == ROLLOUT_STEPS
    assert bool(legal_taken(rollout).all())
    assert ex.illegal_actions(rollout) == 0
    # the check has something to catch: many steps had illegal actions to avoid
    assert int((~rollout.get("action_mask")).any(-1).sum()) > ROLLOUT_STEPS // 10
    assert int(rollout.get(("next", "done")).sum()) > 0  # episodes ended and restarted
    env.close()


def test_without_the_action_mask_transform_random_actions_raise(ex: ModuleType) -> None:
    torch.manual_seed(0)
    env = ex.make_env(seed=0, counting=False, action_mask=False)
    with pytest.raises(IllegalActionError):
        ex.random_rollout(env, ROLLOUT_STEPS)
    env.close()


def test_illegal_actions_counts_actions_outside_the_mask(ex: ModuleType) -> None:
    from tensordict import TensorDict

    mask = torch.zeros(4, NUM_ACTIONS, dtype=torch.bool)
    mask[:, 17] = True
    batch = TensorDict({"action_mask": mask, "action": torch.tensor([17, 0, 17, 18])}, [4])
    assert ex.illegal_actions(batch) == 2


def test_masked_ppo_collects_legal_actions_and_updates_both_networks(ex: ModuleType) -> None:
    torch.manual_seed(0)
    config = ex.PPOConfig(**TINY, counting=False)
    env = ex.make_env(config.seed, counting=config.counting)
    actor, critic = ex.make_modules(env, config.hidden)
    before = {
        name: p.detach().clone()
        for name, p in [*actor.named_parameters(), *critic.named_parameters()]
    }
    batches: list[Any] = []
    log = ex.train(env, actor, critic, config, on_batch=lambda b, _: batches.append(b), log=None)
    env.close()

    assert len(batches) == config.frames // config.frames_per_batch
    assert sum(b.numel() for b in batches) == config.frames == log.frames
    for batch in batches:
        assert bool(legal_taken(batch).all())
        assert bool((~batch.get("action_mask")).any(-1).any())  # not every step all-legal
        log_prob = batch.get("action_log_prob")
        assert bool(torch.isfinite(log_prob).all())
    assert log.illegal == 0
    assert log.episodes > 0
    for stats in log.batches:
        assert all(math.isfinite(v) for v in stats.losses.values())
    after = dict([*actor.named_parameters(), *critic.named_parameters()])
    assert before.keys() == after.keys()
    changed = [name for name, p in after.items() if not torch.equal(before[name], p.detach())]
    actor_names = {name for name, _ in actor.named_parameters()}
    assert set(changed) & actor_names, "the PPO update left the actor unchanged"
    assert set(changed) - actor_names, "the PPO update left the critic unchanged"


def test_the_greedy_policy_plays_validation_deals_legally(ex: ModuleType) -> None:
    torch.manual_seed(0)
    env = ex.make_env(seed=0, counting=False)
    actor, _ = ex.make_modules(env, (16,))
    env.close()
    result = ex.validation_win_rate(actor, counting=False, episodes=16, seed=3)
    assert result["episodes"] == 16
    assert result["deals"] == "validation"
    assert result["outcomes"]["illegal"] == 0
    assert sum(result["outcomes"].values()) == 16


@pytest.mark.parametrize(
    ("change", "word"),
    [
        ({"frames": 0}, "frames"),
        ({"frames": 100, "frames_per_batch": 200}, "frames_per_batch"),
        ({"minibatch_size": 4096, "frames_per_batch": 256, "frames": 256}, "minibatch_size"),
        ({"gamma": 1.5}, "gamma"),
        ({"hidden": ()}, "hidden"),
        ({"train_suits": 5}, "train_suits"),
    ],
)
def test_bad_settings_are_refused_by_name(
    ex: ModuleType, change: dict[str, Any], word: str
) -> None:
    with pytest.raises(ValueError, match=word):
        ex.PPOConfig(**change)


@pytest.mark.slow
def test_the_command_writes_its_record(ex: ModuleType, tmp_path: Path) -> None:
    record = tmp_path / "run.json"
    argv = ["--frames", "256", "--frames-per-batch", "128", "--minibatch-size", "64"]
    argv += ["--epochs", "1", "--hidden", "16", "--no-counting", "--random-steps", "50"]
    argv += ["--eval-episodes", "8", "--eval-seed", "5", "--train-suits", "1"]
    argv += ["--json", str(record)]
    assert ex.main(argv) == 0
    data = json.loads(record.read_text())
    assert data["frames"] == 256
    assert data["illegal_actions"] == 0
    assert data["random_illegal_actions"] == 0
    assert data["validation"]["episodes"] == 8
    assert data["validation"]["seed"] == 5
    assert data["config"]["counting"] is False
    assert data["config"]["train_suits"] == 1
    assert len(data["training_episodes_per_batch"]) == 2
