"""Other frameworks' env runners deal training decks only: the wrappers of
agents/integrations/streams.py, checked on the decks actually dealt (the deal audit)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
from helpers import read_audit, streams_of

from agents.evaluation.arena import deal_decks, validation_decks
from agents.integrations.streams import TrainingDeals, TrainingDealsVector
from coldiron_env.dealer import (
    DealStream,
    set_audit,
)
from coldiron_env.vector import ColdIronVectorEnv

SEEDS = range(4)
"""Seeds a framework would pass (``seed + i``): evaluation seeds 0..3 unwrapped."""


def play(env: gym.Env, seed: int, games: int) -> None:
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=seed)
    for _ in range(games):
        done = False
        while not done:
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
            _, _, term, trunc, info = env.step(action)
            done = term or trunc
        _, info = env.reset()


def held_out_decks() -> set[tuple[int, ...]]:
    decks = {tuple(d) for s in SEEDS for d in deal_decks(s, 64).tolist()}
    return decks | {tuple(d) for s in SEEDS for d in validation_decks(s, 64).tolist()}


def audited(folder: Path) -> list[tuple[int | None, tuple[int, ...]]]:
    records = read_audit(folder)
    assert records, "nothing was dealt"
    return records


def test_a_wrapped_env_deals_training_decks_whatever_seed_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "wrapped").mkdir()
    set_audit(tmp_path / "wrapped")
    try:
        for s in SEEDS:
            play(TrainingDeals(gym.make("coldiron/ColdIron-v0"), index=s), s, 3)
    finally:
        set_audit(None)
    records = audited(tmp_path / "wrapped")
    assert set(streams_of(records)) == {DealStream.TRAINING}
    assert not {deck for _, deck in records} & held_out_decks()


def test_unwrapped_the_same_seeds_deal_evaluation_decks(tmp_path: Path) -> None:
    """The check can fail: without the wrapper, seed s deals evaluation seed s's deals."""
    (tmp_path / "bare").mkdir()
    set_audit(tmp_path / "bare")
    try:
        for s in SEEDS:
            play(gym.make("coldiron/ColdIron-v0"), s, 1)
    finally:
        set_audit(None)
    records = audited(tmp_path / "bare")
    assert {seed for seed, _ in records} <= set(SEEDS)
    assert {deck for _, deck in records} & held_out_decks()


def test_a_wrapped_vector_env_deals_training_decks(tmp_path: Path) -> None:
    (tmp_path / "vector").mkdir()
    set_audit(tmp_path / "vector")
    try:
        env = TrainingDealsVector(ColdIronVectorEnv(4, autoreset_mode="NEXT_STEP"))
        _, info = env.reset(seed=0)
        for _ in range(200):
            masks = info["action_mask"]
            _, _, _, _, info = env.step(np.array([int(np.flatnonzero(m)[0]) for m in masks]))
        env.reset(seed=[1, None, 2, 3])
    finally:
        set_audit(None)
    records = audited(tmp_path / "vector")
    assert len(records) > 4
    assert set(streams_of(records)) == {DealStream.TRAINING}
    assert not {deck for _, deck in records} & held_out_decks()
