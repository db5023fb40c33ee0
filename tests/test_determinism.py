"""Seeding: reset(seed=s) fixes the deal and so the trajectory; the global RNGs of
Python and NumPy have no influence (RLCard style); different seeds deal differently."""

from __future__ import annotations

import random
from typing import Any

import gymnasium
import numpy as np
import pytest
from helpers import legal, stack

from coldiron_env.env import ColdIronEnv

ENV_ID = "coldiron/ColdIron-v0"


def episode(env: Any, seed: int | None, policy_seed: int, disturb: bool = False) -> list[Any]:
    """The deal and the whole trajectory of a random legal game."""
    rng = np.random.default_rng(policy_seed)
    if disturb:
        random.seed(12345)
        np.random.seed(54321)  # noqa: NPY002 (disturbing the legacy global RNG on purpose)
    obs, info = env.reset(seed=seed)
    out: list[Any] = [list(env.unwrapped.game.deck), np.asarray(obs).tolist(), info["hand"]]
    while info["phase"] != "over":
        if disturb:
            random.random()
            np.random.rand(3)  # noqa: NPY002
            random.shuffle(list(range(10)))
        a = int(rng.choice(legal(info)))
        obs, reward, terminated, truncated, info = env.step(a)
        out.append(
            (a, np.asarray(obs).tolist(), float(reward), terminated, truncated, sorted(info.keys()))
        )
        out.append((info["hand"], info["drawn"], info["hurt"], info["turn"], info.get("outcome")))
    return out


@pytest.mark.parametrize("kwargs", [{}, {"bonus_always": True}, {"bonus_joker_grants_more": True}])
def test_same_seed_same_deal_and_trajectory(kwargs: dict[str, Any]) -> None:
    for seed in (0, 1, 7, 2**31 - 1):
        a = episode(ColdIronEnv(**kwargs), seed, seed)
        b = episode(ColdIronEnv(**kwargs), seed, seed)
        assert a == b, f"seed {seed}: trajectories differ"


def test_reseeding_the_same_env_reproduces() -> None:
    env = ColdIronEnv()
    first = episode(env, 5, 0)
    episode(env, None, 1)  # play another game in between
    episode(env, 99, 2)
    assert episode(env, 5, 0) == first


def test_unseeded_resets_follow_the_seeded_stream() -> None:
    def decks() -> list[list[int]]:
        env = ColdIronEnv()
        env.reset(seed=3)
        out = [list(env.game.deck)]
        for _ in range(70):  # more than one batch of shuffles
            env.reset()
            out.append(list(env.game.deck))
        return out

    a = decks()
    random.seed(1)
    np.random.seed(2)  # noqa: NPY002
    b = decks()
    assert a == b
    assert len({tuple(d) for d in a}) == len(a), "an unseeded reset repeated a deal"


def test_global_rngs_change_nothing() -> None:
    env = ColdIronEnv()
    clean = [episode(env, s, s) for s in range(5)]
    disturbed = [episode(ColdIronEnv(), s, s, disturb=True) for s in range(5)]
    assert clean == disturbed


def test_global_rngs_change_nothing_through_gymnasium_make() -> None:
    a = episode(gymnasium.make(ENV_ID), 11, 4)
    random.seed(0)
    np.random.seed(0)  # noqa: NPY002
    b = episode(gymnasium.make(ENV_ID), 11, 4, disturb=True)
    assert a == b


def test_different_seeds_different_deals() -> None:
    env = ColdIronEnv()
    deals = set()
    for seed in range(50):
        env.reset(seed=seed)
        deal = tuple(env.game.deck)
        assert sorted(deal) == list(range(54))
        deals.add(deal)
    assert len(deals) == 50


def test_deck_option_consumes_no_randomness() -> None:
    env1 = ColdIronEnv()
    env1.reset(seed=8)
    env1.reset(options={"deck": stack("5H")})
    env1.reset()
    env2 = ColdIronEnv()
    env2.reset(seed=8)
    env2.reset()
    assert env1.game.deck == env2.game.deck


def test_seeded_shuffles_look_uniform() -> None:
    # Where the first Joker lies and which card comes first: a coarse check that
    # the dealer shuffles the whole deck (not, say, only a part of it).
    env = ColdIronEnv()
    first_cards = np.zeros(54, dtype=np.int64)
    env.reset(seed=2024)
    for _ in range(2700):
        env.reset()
        first_cards[env.game.deck[0]] += 1
    # Jokers are relabelled 52 then 53 in deck order, so 53 can never come first.
    assert first_cards[53] == 0
    expected = 2700 / 54
    assert first_cards[:52].min() > expected * 0.4 and first_cards[:52].max() < expected * 1.8
    assert first_cards[52] > 2 * expected * 0.5  # either Joker first: twice as likely
