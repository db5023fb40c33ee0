"""The CleanRL-style masked sampler (``docs/examples/cleanrl_masked_sampler.py``) over
``gymnasium.vector.SyncVectorEnv``, on Gymnasium 1.x (``.venv``) and 0.29.1 (CI's
``.venv-gym029``): every sampled action legal, episodes end, and the note that 0.29.1
returns ``info["action_mask"]`` as an object array needing ``np.stack`` holds."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import gymnasium as gym
import numpy as np
import pytest
from helpers import load_file

from coldiron_env.game import OUTCOMES, IllegalActionError

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "cleanrl_masked_sampler.py"
NUM_ACTIONS = 19  # the spec's Discrete(19)
NUM_ENVS = 4
STEPS = 300
GYMNASIUM_0 = int(gym.__version__.split(".")[0]) < 1
"""Gymnasium 0.x (0.29.1, CleanRL's pin): the vector info is not stacked."""


def load_example() -> ModuleType:
    return load_file(EXAMPLE, "cleanrl_masked_sampler")


@pytest.fixture(scope="module")
def ex() -> ModuleType:
    return load_example()


@pytest.mark.parametrize("mask_in_observation", [False, True])
def test_every_sampled_action_is_legal_and_episodes_end(
    ex: ModuleType, mask_in_observation: bool
) -> None:
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    result = ex.run(
        NUM_ENVS,
        STEPS,
        seed=1,
        mask_in_observation=mask_in_observation,
        on_step=lambda m, a: seen.append((m.copy(), a.copy())),
    )
    assert len(seen) == STEPS == result.steps
    masks = np.stack([m for m, _ in seen])
    actions = np.stack([a for _, a in seen])
    assert masks.shape == (STEPS, NUM_ENVS, NUM_ACTIONS) and masks.dtype == np.bool_
    assert np.take_along_axis(masks, actions[..., None], axis=-1).all()
    assert result.illegal == 0
    assert (~masks).any(axis=-1).mean() > 0.1  # the masks had illegal actions to avoid
    assert result.episodes > NUM_ENVS  # every env finished games and was reset
    assert set(result.outcomes) <= set(OUTCOMES) - {"illegal"}


def test_an_unmasked_action_raises_through_the_vector_env(ex: ModuleType) -> None:
    envs = ex.make_envs(2)
    envs.reset(seed=0)
    stop = 17  # Stop: illegal in the first turn's phase
    with pytest.raises(IllegalActionError):
        envs.step(np.array([stop, stop]))
    envs.close()


def test_info_mask_needs_np_stack_on_gymnasium_0_29_only(ex: ModuleType) -> None:
    envs = ex.make_envs(NUM_ENVS)
    _, info = envs.reset(seed=0)
    raw = info["action_mask"]
    if GYMNASIUM_0:
        # the naive code fails: an object array of per-env arrays
        assert raw.dtype == object and raw.shape == (NUM_ENVS,)
        with pytest.raises(ValueError, match="sequence"):
            raw.astype(bool)
        with pytest.raises(ValueError, match="sequence"):
            np.asarray(raw, dtype=np.int8)
    else:
        assert raw.dtype == np.int8 and raw.shape == (NUM_ENVS, NUM_ACTIONS)
    masks = ex.legal_masks(info)
    assert masks.dtype == np.bool_ and masks.shape == (NUM_ENVS, NUM_ACTIONS)
    for i, env in enumerate(envs.envs):
        np.testing.assert_array_equal(masks[i], env.unwrapped.action_masks().astype(bool))
    envs.close()


def test_the_dict_observation_is_stacked_on_every_version(ex: ModuleType) -> None:
    envs = ex.make_envs(NUM_ENVS, mask_in_observation=True)
    obs, info = envs.reset(seed=0)
    assert obs["action_mask"].dtype == np.int8
    assert obs["action_mask"].shape == (NUM_ENVS, NUM_ACTIONS)
    assert obs["observations"].shape == (NUM_ENVS, 48)
    mask_from_info = np.stack(info["action_mask"]) if GYMNASIUM_0 else info["action_mask"]
    np.testing.assert_array_equal(obs["action_mask"], mask_from_info)
    np.testing.assert_array_equal(ex.legal_masks(info, obs), mask_from_info.astype(bool))
    envs.close()


def test_sample_masked_is_uniform_over_the_legal_actions(ex: ModuleType) -> None:
    rng = np.random.default_rng(0)
    masks = np.zeros((2, NUM_ACTIONS), dtype=bool)
    masks[0, [17, 18]] = True
    masks[1, :17] = True
    counts = np.zeros((2, NUM_ACTIONS))
    draws = 4000
    for _ in range(draws):
        actions = ex.sample_masked(masks, rng)
        counts[np.arange(2), actions] += 1
    assert counts[~masks].sum() == 0
    np.testing.assert_allclose(counts[0, [17, 18]] / draws, [0.5, 0.5], atol=0.04)
    np.testing.assert_allclose(counts[1, :17] / draws, [1 / 17] * 17, atol=0.02)


def test_bad_input_is_refused_by_name(ex: ModuleType) -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="bool"):
        ex.sample_masked(np.ones((2, NUM_ACTIONS), dtype=np.int8), rng)
    with pytest.raises(ValueError, match="no legal action"):
        ex.sample_masked(np.zeros((1, NUM_ACTIONS), dtype=bool), rng)
    with pytest.raises(ValueError, match="num_envs"):
        ex.make_envs(0)
    with pytest.raises(ValueError, match="steps"):
        ex.run(1, 0)


def test_the_command_runs(ex: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert ex.main(["--num-envs", "2", "--steps", "50", "--mask-in-observation"]) == 0
    out = capsys.readouterr().out
    assert f"gymnasium {gym.__version__}" in out
    assert "100 actions, 0 illegal" in out
