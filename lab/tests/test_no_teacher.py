"""lab/experiments/no_teacher.py: the bias search plays the network on the env's own deals, the
profile counts what a player does, the curves are read as the runs wrote them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from agents.evaluation.arena import validation_decks
from agents.players.baselines import ThreatenAgent
from agents.players.policy_net import PolicyNet
from coldiron_env.actions import ACTION_LABELS, ACTION_NAMES, NUM_ACTIONS
from coldiron_env.batched import CODE_WON
from coldiron_env.observation import flat_size
from lab.experiments import no_teacher

DEALS = 300


def tiny_net(seed: int = 0) -> PolicyNet:
    rng = np.random.default_rng(seed)
    weights = (rng.standard_normal((flat_size(False, True), NUM_ACTIONS)).astype(np.float32),)
    return PolicyNet(weights, (np.zeros(NUM_ACTIONS, np.float32),), "tanh", False, True)


def test_every_action_has_its_kind() -> None:
    """The kind of each action follows its label: a rank rack names a rank, a suit rack a
    suit, every other action its own kind."""
    for action, kind in enumerate(no_teacher.KINDS[k] for k in no_teacher.kind_of_action()):
        label = ACTION_LABELS[action]
        if label.startswith("Rack rank"):
            assert kind == "rack_rank"
        elif label.startswith("Rack suit"):
            assert kind == "rack_suit"
        else:
            assert kind == ACTION_NAMES[action]


def test_a_bias_that_always_threatens_plays_the_threaten_player_deal_by_deal() -> None:
    """A bias swamping the network's scores makes it the ``threaten`` player: the same wins
    on the same deals as that player through the env (the decks are the env's own)."""
    seeds = no_teacher.validation_seeds(DEALS, seed=3)
    bias = np.zeros((no_teacher.QUARTERS, len(no_teacher.KINDS)))
    bias[:, no_teacher.KINDS.index("threaten")] = 1e6
    bias[:, no_teacher.KINDS.index("bonus")] = 1e6  # threaten takes the bonus, as it does
    games = no_teacher.play_biased(tiny_net(), bias.ravel(), validation_decks(3, DEALS))
    env, agent, expected = gym.make("coldiron_env:coldiron/ColdIron-v0"), ThreatenAgent(), []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        over = False
        while not over:
            obs, _, over, _, info = env.step(agent.act(obs, info["action_mask"], info))
        expected.append(info["outcome"] == "won")
    assert 0 < sum(expected) < DEALS  # the comparison can fail
    assert (games.outcome == CODE_WON).tolist() == expected


def test_the_bias_acts_by_quarter_of_the_night() -> None:
    """Threatening all night, but Resting (a card drawn and thrown away) from turn 19, or from
    turn 13: the hands are the threaten player's as they were after turn 18, or turn 12."""
    decks = validation_decks(no_teacher.VALIDATION_SEED, DEALS)
    kind = no_teacher.KINDS.index
    tables = np.zeros((3, no_teacher.QUARTERS, len(no_teacher.KINDS)))
    tables[:, :, [kind("threaten"), kind("bonus")]] = 1e6
    tables[1, 3:, kind("rest")] = 2e6
    tables[2, 2:, kind("rest")] = 2e6
    net = tiny_net(1)
    hands = [no_teacher.play_biased(net, t.ravel(), decks).hand for t in tables]
    for bigger, smaller in itertools.pairwise(hands):
        assert np.array_equal(smaller & bigger, smaller)  # what Rest kept, Threaten kept too
        assert (smaller != bigger).mean() > 0.9


def test_the_profile_counts_what_the_player_does() -> None:
    record = no_teacher.profile("threaten", 40)
    assert sum(record["outcomes"].values()) == 40
    first = record["turns"][0]
    assert (first["games"], first["threaten"], first["mean_hurt"]) == (40, 1.0, 0.0)
    assert all(t["threaten"] == 1.0 for t in record["turns"] if t["games"])


def test_curves_are_read_as_the_runs_wrote_them(tmp_path: Path) -> None:
    run = tmp_path / "sb3"
    run.mkdir()
    (run / "evaluations.csv").write_text("timesteps,win_rate\n0,0.0\n2000896,0.059\n")
    rounds = [
        {"round": 0, "validation_win_rate": 0.1025},
        {"round": 1, "validation_win_rate": 0.105},
    ]
    (run / "expert_iteration.json").write_text(json.dumps({"rounds": rounds}))
    rllib = tmp_path / "rllib"
    rllib.mkdir()
    curve = [{"env_steps": 1007887, "win_rate": 0.0345}]
    (rllib / "record.json").write_text(json.dumps({"curve": curve}))
    leg = tmp_path / "distill"  # a distill leg: rounds only, after the 2 of run a
    leg.mkdir()
    (leg / "expert_iteration.json").write_text(json.dumps({"rounds": rounds[:1]}))
    record = no_teacher.collect([f"a={run}", f"b={rllib}", f"c={leg}@2"], heuristic_rate=0.17)
    assert record["runs"]["a"]["rl"] == [[0, 0.0], [2000896, 0.059]]
    assert record["runs"]["a"]["rounds"] == [[1, 0.1025], [2, 0.105]]
    assert record["runs"]["c"] == {
        "path": str(leg),
        "rl": [],
        "rounds": [[3, 0.1025]],
        "after_rounds": 2,
    }
    assert record["runs"]["b"]["rl"] == [[1007887, 0.0345]]
    with pytest.raises(SystemExit, match="ID=PATH"):
        no_teacher.collect([str(run)], 0.17)
    with pytest.raises(SystemExit, match="neither"):
        no_teacher.collect([f"c={tmp_path}"], 0.17)
    png = tmp_path / "curves.png"
    no_teacher.plot(record, png)
    assert png.stat().st_size > 1000


def test_the_grid_names_real_cells() -> None:
    """Every table of the grid sets cells that exist, and the first plays the network alone."""
    assert no_teacher.GRID[0][1] == {}
    for _, cells in no_teacher.GRID:
        for quarter, kind in cells:
            assert 0 <= quarter < no_teacher.QUARTERS and kind in no_teacher.KINDS
