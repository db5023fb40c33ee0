"""Networks deciding together (lab/experiments/ensemble.py): the action is the best legal
one by the members' summed scores, and what is not a network ensemble is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch as th
from helpers import load_file

pytest.importorskip("sb3_contrib")

from agents.learning.sb3_agent import SB3Agent
from agents.registry import make_agent
from coldiron_env.env import ColdIronEnv

ROOT = Path(__file__).resolve().parents[2]
ensemble = load_file(ROOT / "lab" / "experiments" / "ensemble.py", "_script_ensemble")
MEMBERS = ("trained", "distilled")


def observed_states(games: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Observations and masks met along random games of the members' env."""
    agent = make_agent(MEMBERS[0])
    assert isinstance(agent, SB3Agent)
    env = ColdIronEnv(**agent.env_kwargs)
    rng = np.random.default_rng(0)
    obs_rows, mask_rows = [], []
    for game in range(games):
        obs, info = env.reset(seed=game)
        done = False
        while not done:
            mask = info["action_mask"]
            obs_rows.append(obs)
            mask_rows.append(mask)
            obs, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
            done = terminated or truncated
    return np.stack(obs_rows), np.stack(mask_rows)


def test_the_ensemble_plays_the_best_legal_action_of_the_summed_scores() -> None:
    obs, masks = observed_states()
    members: list[SB3Agent] = []
    for name in MEMBERS:
        member = make_agent(name)
        assert isinstance(member, SB3Agent)
        members.append(member)
    logits = [member.policy.scores(obs).numpy() for member in members]
    legal = masks.astype(bool)

    def softmax(x: np.ndarray) -> np.ndarray:
        x = np.where(legal, x, -np.inf)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        probabilities: np.ndarray = e / e.sum(axis=1, keepdims=True)
        return probabilities

    def log_softmax(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            logs: np.ndarray = np.log(softmax(x))
        return logs

    for mode, combine in (("prob", softmax), ("logit", log_softmax)):
        agent = ensemble.EnsembleAgent(f"{mode}:{','.join(MEMBERS)}")
        chosen = agent.batch_policy.act(obs, masks)
        total = np.where(legal, sum(combine(x) for x in logits), -np.inf)
        assert legal[np.arange(len(chosen)), chosen].all()
        assert np.array_equal(chosen, total.argmax(axis=1)), mode
        one_by_one = [agent.act(obs[i], masks[i]) for i in range(0, len(obs), 25)]
        assert one_by_one == chosen[::25].tolist(), "one game at a time plays as the batch"

    alone = ensemble.EnsembleAgent(f"prob:{MEMBERS[1]}").batch_policy.act(obs, masks)
    assert np.array_equal(alone, members[1].policy.act(obs, masks))
    together = ensemble.EnsembleAgent(f"prob:{','.join(MEMBERS)}").batch_policy.act(obs, masks)
    assert not np.array_equal(together, members[0].policy.act(obs, masks)), (
        "the ensemble plays exactly as its first member: the second had no say"
    )


@pytest.mark.parametrize(
    ("spec", "named"),
    [("vote:trained,distilled", "'vote:trained,distilled'"), ("prob:", "'prob:'"),
     ("prob:trained,heuristic", "'heuristic' is not a memoryless network")],
)  # fmt: skip
def test_a_bad_ensemble_is_refused_by_name(spec: str, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        ensemble.EnsembleAgent(spec)


def test_members_that_see_different_observations_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blind = make_agent("trained")
    assert isinstance(blind, SB3Agent)
    blind.env_kwargs = {**blind.env_kwargs, "counting": False}
    monkeypatch.setattr(
        ensemble, "make_agent", lambda name: blind if name == "blind" else make_agent(name)
    )
    with pytest.raises(ValueError, match=r"'blind' sees .* members must share one observation"):
        ensemble.EnsembleAgent("prob:distilled,blind")


class FixedScores:
    """A member whose action scores are the logs of given probabilities, whatever it sees."""

    def __init__(self, probabilities: list[float]) -> None:
        self.logits = th.log(th.tensor([probabilities], dtype=th.float32))

    def scores(self, obs: np.ndarray) -> th.Tensor:
        return self.logits.expand(len(obs), -1)


def test_probabilities_and_log_probabilities_choose_differently_where_they_should() -> None:
    # summed probabilities: 0.8, 0.5, 0.7 (action 0); summed logs: only action 1 has no
    # near-zero factor, the product of experts' choice. Action 3 is illegal: were it not
    # masked before the softmax, the first member's probabilities would all but vanish
    tiny = 1e-6
    members = [FixedScores([0.8, 0.2, tiny, 1000.0]), FixedScores([tiny, 0.3, 0.7, tiny])]
    masks = np.zeros((1, 4), dtype=bool)
    masks[0, :3] = True
    obs = np.zeros((1, 1), dtype=np.float32)
    assert ensemble.EnsemblePolicy(members, "prob").act(obs, masks).tolist() == [0]
    assert ensemble.EnsemblePolicy(members, "logit").act(obs, masks).tolist() == [1]


@pytest.mark.parametrize("mode", ensemble.MODES)
def test_a_mask_without_a_legal_action_is_refused(mode: str) -> None:
    """As a single network refuses it: no argmax over nothing but minus infinities."""
    members = [FixedScores([0.5, 0.5]), FixedScores([0.1, 0.9])]
    masks = np.array([[True, False], [False, False]])
    obs = np.zeros((2, 1), dtype=np.float32)
    with pytest.raises(ValueError, match="no legal action"):
        ensemble.EnsemblePolicy(members, mode).act(obs, masks)
    assert ensemble.EnsemblePolicy(members, mode).act(obs[:1], masks[:1]).tolist() == [0]
