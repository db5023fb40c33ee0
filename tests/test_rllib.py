"""RLlib PPO with action masking (agents/integrations/rllib.py, scripts/rllib_train.py).

Needs ray[rllib], which pins its own Gymnasium: these tests run in the rllib venv
(``.venv-rllib``). Skipped where ray is missing, unless ``COLDIRON_REQUIRE_RAY=1``
(CI's rllib step), where a missing ray fails them.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import read_audit, streams_of

if os.environ.get("COLDIRON_REQUIRE_RAY") == "1":
    import ray
else:
    ray = pytest.importorskip("ray")

from agents.evaluation.arena import evaluate, evaluate_agent, validation_decks
from agents.integrations.rllib import (
    ENV_OPTIONS_FILE,
    RLlibAgent,
    RLlibLoadError,
    build_config,
    load_rllib_agent,
    load_settings,
    make_env,
    save_env_options,
    set_training_env,
    settings_from_dict,
)
from agents.registry import make_agent
from coldiron_env.dealer import (
    DealStream,
    set_audit,
)
from coldiron_env.observation import ACTION_MASK_KEY, OBSERVATIONS_KEY

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_CONFIG = ROOT / "configs" / "rllib" / "ppo.yaml"
TINY_BATCH = 256
TINY_MINIBATCH = 64
TINY_ENVS = 4
ITERATIONS = 2
PLAYED_DEALS = 40


def test_shipped_config_is_valid() -> None:
    settings = load_settings(SHIPPED_CONFIG)
    assert settings.env["counting"] is True
    assert settings.ppo.minibatch_size <= settings.ppo.train_batch_size_per_learner


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"ppo": {"learning_rate": 0.1}}, "learning_rate"),
        ({"optimizer": {}}, "optimizer"),
        ({"ppo": {"num_epochs": 0}}, "ppo.num_epochs"),
        ({"ppo": {"lr": "fast"}}, "ppo.lr"),
        ({"model": {"fcnet_hiddens": []}}, "model.fcnet_hiddens"),
        ({"env_runners": {"vectorize": "async"}}, "vectorize"),
        ({"env": {"mask_in_observation": False}}, "mask_in_observation"),
        ({"env": {"illegal_action": "penalize"}}, "illegal_action"),
        ({"env": {"colour": "red"}}, "colour"),
        ({"ppo": {"train_batch_size_per_learner": 64, "minibatch_size": 128}}, "minibatch"),
        ({"env": {"suits_required": 2}}, "suits_required"),
        ({"curriculum": {"until_fraction": 0.5}}, "list of stages"),
        ({"curriculum": [{"until_fraction": 0.5, "suits_required": 4}]}, "suits_required"),
        ({"curriculum": [{"until_fraction": 0.5, "suits": 1}]}, r"curriculum\[0\]"),
        (
            {
                "curriculum": [
                    {"until_fraction": 0.5, "suits_required": 1},
                    {"until_fraction": 0.4, "suits_required": 2},
                ]
            },
            r"curriculum\[1\].until_fraction",
        ),
    ],
)
def test_bad_settings_are_named(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings_from_dict(data)


def test_only_the_flat_observation_is_accepted() -> None:
    with pytest.raises(ValueError, match="observation_mode must be 'flat'"):
        settings_from_dict({"env": {"observation_mode": "dict"}})


def test_curriculum_stages_end_in_the_real_game() -> None:
    settings = settings_from_dict(
        {
            "env": {"counting": True},
            "curriculum": [
                {"until_fraction": 0.2, "suits_required": 1},
                {"until_fraction": 0.5, "suits_required": 3},
            ],
        }
    )
    assert settings.env_at(0.0) == {"counting": True, "suits_required": 1}
    assert settings.env_at(0.2) == {"counting": True, "suits_required": 3}
    assert settings.env_at(0.5) == {"counting": True}
    assert settings.env_at(0.99) == settings.env


def test_env_creator_gives_the_masked_dict_observation() -> None:
    env = make_env({"counting": True})
    obs, info = env.reset(seed=3)
    assert set(obs) == {OBSERVATIONS_KEY, ACTION_MASK_KEY}
    assert env.observation_space.contains(obs)
    np.testing.assert_array_equal(obs[ACTION_MASK_KEY], info["action_mask"])
    env.close()


def test_env_creator_vector_mode_resets_on_the_next_step() -> None:
    venv: Any = make_env({"counting": True, "num_envs": 3})
    assert venv.num_envs == 3
    assert str(venv.metadata["autoreset_mode"]).endswith("NEXT_STEP")
    obs, info = venv.reset(seed=1)
    np.testing.assert_array_equal(obs[ACTION_MASK_KEY], info["action_mask"])
    venv.close()


def test_loading_a_directory_that_is_not_a_checkpoint_is_named(tmp_path: Path) -> None:
    with pytest.raises(RLlibLoadError, match="not an RLlib checkpoint"):
        load_rllib_agent(tmp_path)
    (tmp_path / "rllib_checkpoint.json").write_text("{}", encoding="utf-8")
    with pytest.raises(RLlibLoadError, match=ENV_OPTIONS_FILE):
        load_rllib_agent(tmp_path)


def assert_training_deals(folder: Path) -> None:
    """Every deck the audit saw came from the training stream (never an evaluation seed)."""
    records = read_audit(folder)
    assert records, "nothing was dealt"
    assert set(streams_of(records)) == {DealStream.TRAINING}


@pytest.mark.parametrize("num_envs", [None, 3])
def test_env_creator_deals_training_decks_whatever_the_seed(
    tmp_path: Path, num_envs: int | None
) -> None:
    """RLlib seeds its envs with small integers, evaluation seeds: the creator's envs deal
    from the training stream (read from the decks actually dealt)."""
    config: dict[str, Any] = {"counting": True}
    if num_envs is not None:
        config["num_envs"] = num_envs
    set_audit(tmp_path)
    try:
        env: Any = make_env(config)
        env.reset(seed=0)
        env.reset(seed=1)
        env.close()
    finally:
        set_audit(None)
    assert_training_deals(tmp_path)


@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A checkpoint of a tiny training: 1 env-runner process (which must import the env
    itself), ``illegal_action="raise"`` so that one unmasked action fails the run."""
    shipped = load_settings(SHIPPED_CONFIG)
    settings = dataclasses.replace(
        shipped,
        ppo=dataclasses.replace(
            shipped.ppo,
            train_batch_size_per_learner=TINY_BATCH,
            minibatch_size=TINY_MINIBATCH,
            num_epochs=1,
        ),
        env_runners=dataclasses.replace(shipped.env_runners, num_envs_per_env_runner=TINY_ENVS),
    )
    out = tmp_path_factory.mktemp("rllib") / "checkpoint"
    audit = tmp_path_factory.mktemp("rllib-audit")
    set_audit(audit)  # before Ray starts: its runner processes inherit the audit
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    try:
        algo = build_config(
            settings, num_env_runners=1, seed=0, illegal_action="raise"
        ).build_algo()
        steps = 0
        stage_envs = [{**settings.env, "suits_required": 1}, settings.env]
        for stage_env in stage_envs[:ITERATIONS]:
            # a curriculum stage, then the real game: rebuilt in the runner process
            (applied,) = set_training_env(algo, stage_env)
            assert applied == {**stage_env, "illegal_action": "raise"}
            result = algo.train()
            steps = int(result["env_runners"]["num_env_steps_sampled_lifetime"])
        algo.save_to_path(str(out.resolve()))
        save_env_options(out, settings.env)
        algo.stop()
    finally:
        ray.shutdown()
        set_audit(None)
    assert_training_deals(audit)  # the runner process dealt training decks only
    return out, steps


@pytest.mark.slow
def test_tiny_masked_training_takes_steps(trained_checkpoint: tuple[Path, int]) -> None:
    _, steps = trained_checkpoint
    assert steps >= ITERATIONS * TINY_BATCH


@pytest.mark.slow
def test_checkpoint_plays_legal_games_in_the_arena(trained_checkpoint: tuple[Path, int]) -> None:
    path, _ = trained_checkpoint
    agent = make_agent(str(path))
    assert isinstance(agent, RLlibAgent)
    assert agent.env_kwargs == {"observation_mode": "flat", "recall": False, "counting": True}
    (result,) = evaluate([("rllib", agent)], PLAYED_DEALS, 0, validation=True)
    assert result.episodes == PLAYED_DEALS
    assert result.outcomes.get("illegal", 0) == 0
    assert result.mean_steps > 1


@pytest.mark.slow
def test_batched_and_single_play_agree(trained_checkpoint: tuple[Path, int]) -> None:
    """The arena's lockstep play (batch_policy) and one-env play (act) give the same games."""
    agent = load_rllib_agent(trained_checkpoint[0])
    decks = validation_decks(1, PLAYED_DEALS)
    seeds = list(range(PLAYED_DEALS))
    games: list[list[tuple[list[int], str]]] = []
    for use_batch in (True, False):
        played: list[tuple[list[int], str]] = []
        evaluate_agent(
            agent,
            decks,
            seeds,
            use_batch=use_batch,
            callback=lambda _i, deck, outcome, _t, out=played: out.append((deck, outcome)),
        )
        games.append(played)
    assert games[0] == games[1]
