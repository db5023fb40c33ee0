"""Held-out evaluation by construction: training, imitation and validation deals never come
from an evaluation seed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from agents.evaluation.arena import deal_decks
from coldiron_env.dealer import (
    EVALUATION_SEED_LIMIT,
    STREAM_INDEX_BITS,
    STREAM_SEED_BITS,
    DealStream,
    stream_seed,
)
from coldiron_env.env import ColdIronEnv

OTHER_STREAMS = [s for s in DealStream if s != DealStream.EVALUATION]


def test_every_stream_owns_a_range_of_seeds_apart_from_the_others() -> None:
    ranges = [(0, EVALUATION_SEED_LIMIT - 1)]
    last_seed, last_index = (1 << STREAM_SEED_BITS) - 1, (1 << STREAM_INDEX_BITS) - 1
    for stream in OTHER_STREAMS:
        ranges.append((stream_seed(stream, 0, 0), stream_seed(stream, last_seed, last_index)))
    ranges.sort()
    for (_, high), (low, _) in itertools.pairwise(ranges):
        assert high < low, ranges
    # and inside a stream, (seed, index) -> env seed is one-to-one
    seen = {stream_seed(DealStream.TRAINING, s, i) for s in range(20) for i in range(300)}
    assert len(seen) == 20 * 300


def test_training_deals_are_not_the_evaluation_deals() -> None:
    """Before streams, training env 0 with seed 0 dealt evaluation seed 0's decks."""
    evaluation = {tuple(row) for seed in range(3) for row in deal_decks(seed, 200).tolist()}
    env = ColdIronEnv()
    for stream in OTHER_STREAMS:
        for run_seed in range(3):
            env.reset(seed=stream_seed(stream, run_seed, 0))
            for _ in range(200):
                assert tuple(env.game.deck) not in evaluation, (stream, run_seed)
                env.reset()
    # the old way really collided: the guard above can fail
    env.reset(seed=0)
    assert tuple(env.game.deck) in evaluation


@pytest.mark.parametrize("bad", [-1, EVALUATION_SEED_LIMIT, stream_seed(DealStream.TRAINING, 0)])
def test_an_evaluation_seed_outside_its_range_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="evaluation seed"):
        deal_decks(bad, 5)


def test_stream_seeds_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="training seed"):
        stream_seed(DealStream.TRAINING, 1 << STREAM_SEED_BITS)
    with pytest.raises(ValueError, match="deal index"):
        stream_seed(DealStream.IMITATION, 0, 1 << STREAM_INDEX_BITS)
    with pytest.raises(ValueError, match="default_rng"):
        stream_seed(DealStream.EVALUATION, 0)


def test_a_run_uses_its_streams() -> None:
    from agents.learning.config import config_from_dict
    from agents.learning.training import eval_seeds

    cfg = config_from_dict(
        {
            "algorithm": {"name": "maskable_ppo"},
            "training": {"total_timesteps": 100},
            "evaluation": {"episodes": 4, "seed": 7},
        }
    )
    seeds = eval_seeds(cfg)
    assert seeds == [stream_seed(DealStream.VALIDATION, 7, k) for k in range(4)]
    assert min(seeds) >= EVALUATION_SEED_LIMIT
    assert np.unique(seeds).size == 4


def test_the_teacher_deals_from_the_imitation_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """(The decks actually dealt by training, imitation, DAgger, labelling and validation are
    checked in tests/test_held_out.py.)"""
    from agents.learning import imitation
    from agents.learning.config import config_from_dict

    cfg = config_from_dict(
        {
            "seed": 3,
            "algorithm": {"name": "maskable_ppo"},
            "training": {"total_timesteps": 100, "n_envs": 2},
            "imitation": {"enabled": True, "episodes": 1, "seed": 5},
        }
    )
    seen: dict[str, int] = {}

    def fake_collect(teacher: object, env_kwargs: object, episodes: int, seed: int,
                     gamma: float) -> object:  # fmt: skip
        seen["imitation"] = seed
        raise RuntimeError("stop here")

    monkeypatch.setattr(imitation, "collect_demonstrations", fake_collect)
    with pytest.raises(RuntimeError, match="stop here"):
        imitation.warm_start(object(), cfg)  # type: ignore[arg-type]
    assert seen["imitation"] == stream_seed(DealStream.IMITATION, 5, 0)


@pytest.mark.parametrize("stream", [DealStream.VALIDATION, DealStream.TRAINING])
def test_validation_decks_are_the_decks_the_env_deals_on_the_streams_seeds(
    stream: DealStream,
) -> None:
    """``evaluate.py --deals validation`` plays exactly the deals training evaluates on (and,
    given another stream, that stream's deals)."""
    from agents.evaluation.arena import validation_decks

    decks = validation_decks(200, 30, stream)
    env = ColdIronEnv()
    for k, deck in enumerate(decks):
        env.reset(seed=stream_seed(stream, 200, k))
        assert deck.tolist() == list(env.game.deck), k
    assert len({tuple(d) for d in decks}) == 30
    assert not {tuple(d) for d in decks} & {tuple(d) for d in deal_decks(200, 30)}
