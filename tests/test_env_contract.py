"""The environment's API contract (pgx style: one contract, every configuration).

Parametrised over observation mode (flat, dict) x recall (off, on) x rule
variant (standard, bonus always, Joker grants more).
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import subprocess
import sys
import warnings
from typing import Any

import gymnasium
import numpy as np
import pytest
from helpers import (
    BONUS,
    IRON,
    JOKER,
    THREATEN,
    check_curriculum_refusals,
    flat_from_dict,
    legal,
    rule_variant_sets,
    stack,
    variant_id,
)

import coldiron_env
from coldiron_env import observation
from coldiron_env.env import ColdIronEnv

ENV_ID = "coldiron/ColdIron-v0"
VARIANTS: dict[str, dict[str, Any]] = {variant_id(v): v for v in rule_variant_sets()}
CONFIGS = (
    [
        pytest.param(
            {"observation_mode": mode, "recall": recall, **variant}, id=f"{mode}-{r}-{vid}"
        )
        for (mode, (recall, r), (vid, variant)) in itertools.product(
            ("flat", "dict"), ((False, "norecall"), (True, "recall")), VARIANTS.items()
        )
    ]
    + [
        pytest.param(
            {"observation_mode": mode, "counting": True, **variant}, id=f"{mode}-counting-{vid}"
        )
        for mode in ("flat", "dict")
        for vid, variant in VARIANTS.items()
    ]
    + [
        pytest.param(
            {"observation_mode": mode, "counting": True, "mask_in_observation": True},
            id=f"{mode}-counting-mask",
        )
        for mode in ("flat", "dict")
    ]
)
PHASES = ("turn", "iron", "bonus", "over")


def random_episode(env: Any, seed: int, policy_seed: int) -> list[tuple[Any, dict[str, Any]]]:
    """(obs, info) after reset and after every step of a random legal game; checks on
    the way that ``action_masks()`` equals ``info["action_mask"]`` as bools."""
    rng = np.random.default_rng(policy_seed)
    obs, info = env.reset(seed=seed)
    out = [(obs, info)]
    terminated = False
    while True:
        masks = env.unwrapped.action_masks()
        assert masks.dtype == np.bool_ and masks.shape == (19,)
        np.testing.assert_array_equal(masks, info["action_mask"].astype(bool))
        if terminated:
            break
        a = int(rng.choice(legal(info)))
        obs, _, terminated, truncated, info = env.step(a)
        assert truncated is False
        out.append((obs, info))
    return out


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_env_checkers_pass_without_warnings(kwargs: dict[str, Any]) -> None:
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gymnasium.make(ENV_ID, **kwargs).unwrapped)
        if importlib.util.find_spec("stable_baselines3") is not None:  # the training extra
            from stable_baselines3.common.env_checker import check_env as sb3_check_env

            sb3_check_env(gymnasium.make(ENV_ID, **kwargs).unwrapped)
    messages = [str(w.message) for w in caught]
    if kwargs.get("mask_in_observation") and kwargs.get("observation_mode") == "dict":
        # SB3 takes no nested Dict (the documented limit: SB3 users keep the mask in info)
        assert all(m.startswith("Nested observation spaces") for m in messages), messages
        return
    assert messages == []


@pytest.mark.parametrize("kwargs", CONFIGS)
def test_obs_in_space_and_masks_agree_every_step(kwargs: dict[str, Any]) -> None:
    env = ColdIronEnv(**kwargs)
    for seed in range(8):
        prev_mask = None
        for obs, info in random_episode(env, seed, seed + 100):
            assert env.observation_space.contains(obs), (seed, obs)
            mask = info["action_mask"]
            assert mask.dtype == np.int8 and mask.shape == (19,)
            assert prev_mask is None or not np.shares_memory(mask, prev_mask)
            prev_mask = mask
            assert info["phase"] in PHASES
        assert "outcome" in info and isinstance(info["is_success"], bool)


@pytest.mark.parametrize("mode", ["flat", "dict"])
def test_mask_in_observation_wraps_the_same_observation_with_the_mask(mode: str) -> None:
    from coldiron_env.observation import ACTION_MASK_KEY, OBSERVATIONS_KEY

    kwargs = {"observation_mode": mode, "recall": True, "counting": True}
    plain = ColdIronEnv(**kwargs)
    masked = ColdIronEnv(mask_in_observation=True, **kwargs)
    assert set(masked.observation_space.spaces) == {OBSERVATIONS_KEY, ACTION_MASK_KEY}
    assert masked.observation_space[OBSERVATIONS_KEY] == plain.observation_space
    mask_space = masked.observation_space[ACTION_MASK_KEY]
    assert mask_space.shape == (19,) and mask_space.dtype == np.int8
    for seed in range(6):
        theirs = random_episode(plain, seed, seed + 7)
        ours = random_episode(masked, seed, seed + 7)
        assert len(theirs) == len(ours)
        previous = None
        for (obs, info), (wrapped, winfo) in zip(theirs, ours, strict=True):
            assert set(wrapped) == {OBSERVATIONS_KEY, ACTION_MASK_KEY}
            inner = wrapped[OBSERVATIONS_KEY]
            if mode == "flat":
                np.testing.assert_array_equal(inner, obs)
            else:
                assert set(inner) == set(obs)
                for key in obs:
                    np.testing.assert_array_equal(inner[key], obs[key])
            np.testing.assert_array_equal(wrapped[ACTION_MASK_KEY], winfo["action_mask"])
            np.testing.assert_array_equal(winfo["action_mask"], info["action_mask"])
            assert previous is None or not np.shares_memory(wrapped[ACTION_MASK_KEY], previous)
            previous = wrapped[ACTION_MASK_KEY]


def test_mask_in_observation_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="mask_in_observation must be a bool"):
        ColdIronEnv(mask_in_observation="yes")  # type: ignore[arg-type]


def test_masks_are_fresh_arrays_not_views_of_state() -> None:
    env = ColdIronEnv()
    _, info = env.reset(seed=0)
    info["action_mask"][:] = 0
    env.action_masks()[:] = False
    _, info2 = env.reset(seed=0)
    assert info2["action_mask"].sum() == 17
    assert env.action_masks().sum() == 17


def test_registration_in_a_fresh_interpreter() -> None:
    code = (
        "import gymnasium, sys\n"
        "assert 'coldiron_env' not in sys.modules\n"
        "env = gymnasium.make('coldiron_env:coldiron/ColdIron-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "obs, r, term, trunc, info = env.step(0)\n"
        "import coldiron_env\n"
        "assert 'coldiron/ColdIron-v0' in gymnasium.registry\n"
        "print('OK', env.unwrapped.__class__.__name__, info['turn'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["OK", "ColdIronEnv", "2"] or proc.stdout.startswith(
        "OK ColdIronEnv"
    ), proc.stdout


def test_import_registers_the_id() -> None:
    assert coldiron_env.ENV_ID == ENV_ID
    assert ENV_ID in gymnasium.registry
    env = gymnasium.make(ENV_ID)
    assert isinstance(env.unwrapped, ColdIronEnv)


@pytest.mark.parametrize("mode", ["flat", "dict"])
def test_make_vec_sync(mode: str) -> None:
    """A masked sampler survives every episode end: the terminal step's mask marks every
    action (documented); under Gymnasium 1.x's NEXT_STEP autoreset the next step is the
    reset, and its mask too is never empty."""
    envs = gymnasium.make_vec(ENV_ID, num_envs=3, vectorization_mode="sync", observation_mode=mode)
    rng = np.random.default_rng(0)
    ends = 0
    try:
        obs, infos = envs.reset(seed=[1, 2, 3])  # type: ignore[arg-type]
        assert envs.observation_space.contains(obs)
        for _ in range(300):
            masks = np.stack([m.astype(bool) for m in infos["action_mask"]])
            assert masks.shape == (3, 19) and masks.any(axis=1).all(), "never an empty mask"
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])  # masked sampler
            obs, rewards, terms, truncs, infos = envs.step(actions)
            assert rewards.shape == (3,) and terms.shape == (3,)
            assert envs.observation_space.contains(obs)
            assert not truncs.any()
            for i in np.flatnonzero(terms):
                # Gymnasium 1.x (NEXT_STEP): the terminal step's own info; 0.29 resets in the
                # same step and keeps the terminal step's info in final_info.
                ended = infos["final_info"][i] if "final_info" in infos else None
                mask = infos["action_mask"][i] if ended is None else ended["action_mask"]
                assert mask.all(), "the terminal step marks every action"
            ends += int(terms.sum())
    finally:
        envs.close()
    assert ends >= 10, "the run should cross many episode ends"


# --------------------------------------------------------------------------- render
def test_render_ansi_shows_the_table() -> None:
    env = ColdIronEnv(render_mode="ansi")
    env.reset(options={"deck": stack("5H", "KD", JOKER)})
    text = env.render()
    assert isinstance(text, str)
    assert "6:00pm" in text and "54" in text
    env.step(THREATEN)
    text = env.render()
    assert isinstance(text, str)
    assert "6:15pm" in text
    assert re.search(r"\b53\b", text), "deck count missing"
    for suit in ("Hearts", "Diamonds", "Clubs", "Spades"):
        assert suit in text
    assert "Threaten" in text and "5H" in text, "last action and drawn cards missing"
    assert "threaten" in text.lower() and "rest" in text.lower(), "legal actions missing"
    env.step(IRON)
    text = env.render()
    assert isinstance(text, str)
    assert "Hurt" in text and re.search(r"\b1\s*/\s*6\b", text), "hurt bar missing"
    assert "KD" in text
    assert "17" in text and "stop" in text.lower(), "legal actions of the iron phase missing"
    env.step(IRON)  # Joker: bonus on offer
    text = env.render()
    assert isinstance(text, str)
    assert "JK" in text and "18" in text and "2/6" in text


def test_render_human_prints(capsys: pytest.CaptureFixture[str]) -> None:
    env = ColdIronEnv(render_mode="human")
    env.reset(options={"deck": stack("5H")})
    out = capsys.readouterr().out
    assert "6:00pm" in out
    assert env.render() is None
    env.step(THREATEN)
    out = capsys.readouterr().out
    assert "6:15pm" in out and "5H" in out


def test_render_ansi_at_the_end_names_the_outcome() -> None:
    env = ColdIronEnv(render_mode="ansi")
    env.reset(options={"deck": stack("5H", JOKER)})
    env.step(2 + 8)  # rack 9: 5H discarded, Joker slays
    text = env.render()
    assert isinstance(text, str) and "slain" in text


def test_render_names_a_penalized_illegal_action_until_the_next_legal_one() -> None:
    """Under ``penalize`` the text names the illegal action as the last one, drawing
    nothing, and says it was penalized (how many of the episode's allowance); a legal action
    after it, or a new deal, clears the note."""
    env = ColdIronEnv(render_mode="ansi", illegal_action="penalize", max_illegal_actions=3)
    env.reset(options={"deck": stack("5H", "KD")})
    env.step(THREATEN)
    assert "Last: Threaten; drew 5H" in str(env.render()) and "penalized" not in str(env.render())
    env.step(BONUS)  # illegal in the turn phase
    text = str(env.render())
    assert "Last: Take the bonus; drew nothing" in text
    assert "(that action was illegal: penalized, 1 of 3)" in text
    env.step(THREATEN)
    assert "penalized" not in str(env.render()) and "drew KD" in str(env.render())
    env.step(BONUS)
    env.reset(seed=1)
    assert "penalized" not in str(env.render())
    pictures = ColdIronEnv(render_mode="rgb_array", illegal_action="penalize")
    pictures.reset(options={"deck": stack("5H", "KD")})
    pictures.step(THREATEN)
    before = pictures.render()
    pictures.step(BONUS)  # the picture marks it too: not the same label as a plain Bonus
    marked = pictures.render()
    assert isinstance(before, np.ndarray) and isinstance(marked, np.ndarray)
    from coldiron_env.picture import draw_table

    assert not np.array_equal(marked, draw_table(pictures.game))
    assert np.array_equal(marked, draw_table(pictures.game, penalized=True))


# ---------------------------------------------------------------------- observation
def test_env_docstring_layout_table_matches_observation_module() -> None:
    doc = ColdIronEnv.__doc__ or ""
    doc_lines = {line.strip() for line in doc.splitlines()}
    table = observation.layout_table(recall=True)
    for line in table.splitlines():
        assert line.strip() in doc_lines, f"env docstring lacks layout row {line!r}"
    assert "{layout}" not in doc


@pytest.mark.parametrize("counting", [False, True])
@pytest.mark.parametrize("recall", [False, True])
def test_layout_fields_tile_the_flat_vector(recall: bool, counting: bool) -> None:
    env = ColdIronEnv(recall=recall, counting=counting)
    fields = observation.flat_fields(recall, counting)
    assert fields[0].start == 0
    for a, b in itertools.pairwise(fields):
        assert a.stop == b.start
    shape = env.observation_space.shape
    assert shape == (48 + 54 * recall + 153 * counting,)
    assert fields[-1].stop == observation.flat_size(recall, counting) == shape[0]


@pytest.mark.parametrize(("recall", "counting"), [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_flat_equals_flat_from_dict_and_decode_round_trips(
    recall: bool, counting: bool, variant: str
) -> None:
    kw = VARIANTS[variant]
    flat_env = ColdIronEnv(observation_mode="flat", recall=recall, counting=counting, **kw)
    dict_env = ColdIronEnv(observation_mode="dict", recall=recall, counting=counting, **kw)
    for seed in range(6):
        flat_run = random_episode(flat_env, seed, seed)
        dict_run = random_episode(dict_env, seed, seed)
        assert len(flat_run) == len(dict_run)
        # replay once more to read the engine state at every step
        rng = np.random.default_rng(seed)
        _, info = flat_env.reset(seed=seed)
        for (fobs, finfo), (dobs, dinfo) in zip(flat_run, dict_run, strict=True):
            assert finfo["hand"] == dinfo["hand"]
            np.testing.assert_allclose(fobs, flat_from_dict(dobs, 24), atol=1e-7)
            fview = observation.decode(fobs, 24)
            dview = observation.decode(dobs, 24)
            assert fview == dview
            game = flat_env.game
            assert fview.hand == game.hand
            assert (fview.hurt, fview.turn, fview.deck_count) == (
                game.hurt,
                game.turn,
                game.deck_count,
            )
            assert (fview.phase, fview.iron_count) == (game.phase, game.iron_count)
            assert fview.discarded == (game.discarded if recall else None)
            assert (fview.hurt, fview.turn, fview.deck_count) == (
                finfo["hurt"],
                finfo["turn"],
                finfo["deck_count"],
            )
            if info["phase"] != "over":
                a = int(rng.choice(legal(info)))
                _, _, _, _, info = flat_env.step(a)


def test_the_docs_show_the_observation_layout_of_the_one_module_that_knows_it() -> None:
    from pathlib import Path

    from coldiron_env.observation import layout_table

    page = (Path(__file__).resolve().parent.parent / "docs" / "environment.md").read_text()
    assert layout_table(recall=True, counting=True) in page


def test_a_curriculum_changes_the_rules_from_the_next_deal() -> None:
    """``set_env_kwargs``: the game in progress keeps its rules, the next deal has the new
    ones (tests/test_vector.py compares them with the vector env's, step by step)."""
    env = ColdIronEnv(counting=True)
    _, info = env.reset(seed=11)
    env.set_env_kwargs({"turns": 3, "suits_required": 1, "counting": True})
    assert env.rules.turns == 24
    while "outcome" not in info:
        _, _, _, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    _, info = env.reset()
    assert env.rules.turns == 3 and env.rules.suits_required == 1
    assert env.env_kwargs()["turns"] == 3 and env.max_episode_steps < 24
    check_curriculum_refusals(env)


@pytest.mark.parametrize("mask", [False, True])
def test_a_dict_curriculum_cannot_outgrow_its_turn_space(mask: bool) -> None:
    """Dict mode's ``turn`` is ``Discrete(turns + 1)`` as built: more turns are refused, fewer
    stay inside the space."""
    env = ColdIronEnv(observation_mode="dict", turns=6, mask_in_observation=mask)
    with pytest.raises(ValueError, match="turns=24 would leave the observation space"):
        env.set_env_kwargs({"turns": 24})
    env.set_env_kwargs({"turns": 4})
    obs, info = env.reset(seed=2)
    for _ in range(60):
        assert env.observation_space.contains(obs)
        if "outcome" in info:
            obs, info = env.reset()
        obs, _, _, _, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    ColdIronEnv(turns=6).set_env_kwargs({"turns": 24})  # flat mode: no ceiling
