"""lab/experiments/search_probes.py: the record grows agent by agent, its command makes
the whole record again, and a deal's result does not depend on how the deals are split."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agents.learning.sb3_agent import SB3Agent, policy_net
from agents.players.planner import PlannerAgent
from agents.players.policy_net import PolicyNet
from agents.registry import make_agent

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "lab/experiments/search_probes.py"
EPISODES = 40


def probes(*args: str) -> None:
    """The script as its command line runs it (its worker processes import it as __main__)."""
    subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, check=True, capture_output=True)


def test_the_record_command_makes_every_agent_again(tmp_path: Path) -> None:
    record = tmp_path / "probes.json"
    common = ["--seed", "7", "--episodes", str(EPISODES), "--json", str(record)]
    probes("--agent", "random", "--workers", "1", *common)
    probes("--agent", "heuristic", "--workers", "2", *common)
    first = json.loads(record.read_text())
    assert list(first["agents"]) == ["random", "heuristic"]
    assert first["agents"]["heuristic"]["paired"]["against"] == "random"
    assert first["agents"]["heuristic"]["won"] > 0  # the wins compared below are not all zero

    words = shlex.split(first["command"])
    assert words[0] == SCRIPT
    again = tmp_path / "again.json"
    words[words.index("--json") + 1] = str(again)
    words[words.index("--workers") + 1] = "1"  # another split of the deals
    probes(*words[1:])
    second = json.loads(again.read_text())
    assert list(second["agents"]) == list(first["agents"])
    for spec, entry in first["agents"].items():
        assert second["agents"][spec]["wins"] == entry["wins"], spec
        assert second["agents"][spec]["episodes"] == EPISODES


def test_git_dirty_leaves_out_only_the_record_being_filled(tmp_path: Path) -> None:
    from agents.gitinfo import git_dirty

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    for name in ("code.py", "record.json"):
        (tmp_path / name).write_text("0\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    record = tmp_path / "record.json"
    assert git_dirty(root=tmp_path) is False
    record.write_text("1\n")
    assert git_dirty(root=tmp_path) is True
    assert git_dirty(ignore=record, root=tmp_path) is False
    (tmp_path / "code.py").write_text("1\n")
    assert git_dirty(ignore=record, root=tmp_path) is True
    assert git_dirty(ignore=Path("/elsewhere/record.json"), root=tmp_path) is True


def test_the_rollouts_may_be_played_by_another_network() -> None:
    """``search:MODEL:OTHER:...``: MODEL proposes, the network OTHER plays the rollouts."""
    from lab.experiments.search_probes import make

    def rollout_net(spec: str) -> PolicyNet | None:
        planner = make(spec)
        assert isinstance(planner, PlannerAgent)
        assert planner.base is not None and planner.base.name == "distilled-30"
        return planner.rollout_policy

    def weights(net: PolicyNet | None) -> list[list[float]]:
        assert net is not None
        return [w.ravel().tolist() for w in net.weights]

    def shipped(name: str) -> PolicyNet:
        agent = make_agent(name)
        assert isinstance(agent, SB3Agent)
        return policy_net(agent)

    distilled, distilled_30 = shipped("distilled"), shipped("distilled-30")
    assert weights(distilled) != weights(distilled_30)  # the checks below can fail
    assert weights(rollout_net("search:distilled-30:distilled:64:18")) == weights(distilled)
    assert weights(rollout_net("search:distilled-30:network:64:18")) == weights(distilled_30)
    assert rollout_net("search:distilled-30:heuristic:64:18") is None
    with pytest.raises(ValueError, match="'random' is not a trained network"):
        make("search:distilled-30:random:64:18")
    with pytest.raises(ValueError, match="unknown agent 'nobody'"):
        make("search:distilled-30:nobody:64:18")


def test_a_named_field_overrides_what_the_spec_implies() -> None:
    """The spec sets the batch and ``min_samples`` from ``SAMPLES``; ``:min_samples=N`` wins."""
    from lab.experiments.search_probes import make

    def config(spec: str) -> tuple[int, int, int, float]:
        planner = make(spec)
        assert isinstance(planner, PlannerAgent)
        c = planner.config
        return c.samples, c.batch, c.min_samples, c.z

    assert config("search:distilled:network:1024:18") == (1024, 64, 64, 2.0)
    assert config("search:distilled:network:1024:18:z=1.0:min_samples=256") == (
        1024,
        64,
        256,
        1.0,
    )
    assert config("search:distilled:network:32:18") == (32, 32, 32, 2.0)
    free = make("search:distilled:network:1024:18:racks=None")
    assert isinstance(free, PlannerAgent) and free.config.racks is None  # planner-free's racks
    for bad in ("samples=2048", "plan_from_turn=16", "params=1", "zz=1.0"):  # not silently dropped
        with pytest.raises(ValueError, match=f"'{bad.partition('=')[0]}' is not one of"):
            make(f"search:distilled:network:1024:18:{bad}")
    with pytest.raises(ValueError, match="z='high' is not a number"):
        make("search:distilled:network:1024:18:z=high")


def test_the_two_step_search_with_an_inner_search_that_never_plans_is_the_one_step_one() -> None:
    """``lookahead:`` (lab/experiments/lookahead.py): when the inner search only plays its
    base policy, each rollout is the one-step search's, order for order: the grouping of the
    next states, the inner choices and the leaf rollouts are checked against the planner's
    own rollers (heuristic and network), on the same sampled orders."""
    import numpy as np

    from agents.players.heuristic import DEFAULT_PARAMS, decide
    from agents.players.planner import PlannerConfig, Roller, candidate_actions
    from agents.players.policy_net import NetRoller
    from coldiron_env.game import Game
    from coldiron_env.knowledge import Knowledge
    from lab.experiments.lookahead import LookaheadRoller, leaf_of
    from lab.experiments.search_probes import make

    rng = np.random.default_rng(3)
    game = Game(rng.permutation(54).tolist())
    while game.turn < 19:  # a late position, where the search plans
        game.step(decide(Knowledge.from_game(game)))
        assert game.outcome is None, "the deal must last to turn 19"
    kn = Knowledge.from_game(game)
    candidates = candidate_actions(kn, decide(kn), DEFAULT_PARAMS, 14)
    assert len(candidates) >= 3

    def wins(roller: object) -> dict[int, list[int]]:
        est = roller.estimate(kn, candidates, np.random.default_rng(11), 256)  # type: ignore[attr-defined]
        return est.wins  # type: ignore[no-any-return]

    never = PlannerAgent(PlannerConfig(plan_from_turn=99))  # plays the heuristic
    heuristic = LookaheadRoller(never, leaf_of(never))
    assert wins(heuristic) == wins(Roller(DEFAULT_PARAMS))
    assert heuristic.inner_searches > 0
    assert sum(map(sum, wins(heuristic).values())) > 0  # not all lost

    network = make("search:distilled:network:64:99")  # the network's choice at every decision
    assert isinstance(network, PlannerAgent) and network.rollout_policy is not None
    assert wins(LookaheadRoller(network, leaf_of(network))) == wins(
        NetRoller(network.rollout_policy)
    )


def test_the_value_calibration_reads_the_positions_the_network_played(tmp_path: Path) -> None:
    """lab/experiments/value_calibration.py: from turn 1 its positions are every decision
    of the network's games on those validation deals, and its games won theirs (counted here
    by the evaluator); every position is in one bin of the calibration table."""
    import torch

    from agents.evaluation.arena import agent_seeds, evaluate_agent, validation_decks
    from lab.experiments import value_calibration

    episodes, seed = 4, 9
    record = tmp_path / "calibration.json"
    threads = torch.get_num_threads()
    try:  # in this process (a subprocess would import torch again): it sets one thread
        value_calibration.main(
            [
                *("--model", "distilled", "--seed", str(seed), "--episodes", str(episodes)),
                *("--from-turn", "1", "--orders", "8", "--json", str(record)),
            ]
        )
    finally:
        torch.set_num_threads(threads)
    data = json.loads(record.read_text())
    played = evaluate_agent(
        make_agent("distilled"), validation_decks(seed, episodes), agent_seeds(seed, episodes)
    )
    assert data["positions"] == played.total_steps
    assert data["games_won"] == played.wins
    assert sum(row["positions"] for row in data["bins"]) == data["positions"]
    below = sum(row["positions"] for row in data["bins"] if row["value_from"] is None)
    assert below == data["values_below_0"]
    assert 0.0 <= data["mean_rollout_chance"] <= 1.0
    assert data["commit"] and data["command"].startswith("lab/experiments/value_calibration.py")


def test_truncated_rollouts_play_to_the_horizon_then_read_the_value() -> None:
    """``truncated:`` (lab/experiments/truncated.py): past the game's end the horizon is
    the network's own rollouts, order for order; at horizon 0 a value of 1 wins every rollout
    still going after the candidate and a value of 0 none, so only the games it ended count;
    and the value read is the model's value head."""
    import numpy as np
    import torch

    from agents.players.heuristic import DEFAULT_PARAMS, decide
    from agents.players.planner import candidate_actions
    from agents.players.policy_net import NetRoller
    from coldiron_env.game import Game
    from coldiron_env.knowledge import Knowledge
    from lab.experiments.search_probes import make
    from lab.experiments.truncated import TruncatedRoller, value_net

    rng = np.random.default_rng(3)
    game = Game(rng.permutation(54).tolist())
    while game.turn < 19:
        game.step(decide(Knowledge.from_game(game)))
        assert game.outcome is None, "the deal must last to turn 19"
    kn = Knowledge.from_game(game)
    candidates = candidate_actions(kn, decide(kn), DEFAULT_PARAMS, 14)
    planner = make("search:distilled:network:64:18")
    assert isinstance(planner, PlannerAgent) and planner.rollout_policy is not None
    net = planner.rollout_policy

    def wins(roller: object, samples: int = 256) -> dict[int, list[int]]:
        est = roller.estimate(kn, candidates, np.random.default_rng(11), samples)  # type: ignore[attr-defined]
        return est.wins  # type: ignore[no-any-return]

    def constant(v: float) -> object:
        return lambda obs: np.full(obs.shape[0], v)

    to_the_end = TruncatedRoller(net, constant(0.5), horizon=99)
    played = wins(to_the_end)
    assert played == wins(NetRoller(net)) and to_the_end.valued == 0
    assert sum(map(sum, played.values())) > 0
    ones = TruncatedRoller(net, constant(1.0), horizon=0)
    zeros = TruncatedRoller(net, constant(0.0), horizon=0)
    by_ones, by_zeros = wins(ones), wins(zeros)
    for action in candidates:
        assert all(a >= b for a, b in zip(by_ones[action], by_zeros[action], strict=True))
    assert ones.valued == zeros.valued > 0
    assert sum(map(sum, by_zeros.values())) < sum(map(sum, by_ones.values()))

    # each rollout checked on its own game: the candidate played on its sampled order
    orders = kn.sample_order_array(np.random.default_rng(11), 256)
    root = kn.position()
    ended: dict[tuple[int, int], bool] = {}
    for o, row in enumerate(orders.tolist()):
        for action in candidates:
            sampled = root.clone()
            sampled.deck[root.pos :] = row
            sampled.step(action)
            if sampled.outcome is not None:
                ended[o, action] = sampled.outcome == "won"
    assert ended, "some candidate must end a game at once (racks slay)"
    for got in (by_ones, by_zeros):
        assert all(got[a][o] == won for (o, a), won in ended.items())
    # one uniform per order, shared by the candidates: where every candidate's rollout was
    # scored by the value (won under a value of 1 without having ended: not cut as hopeless),
    # a constant value gives every candidate the same result
    valued = {(o, a) for a in candidates for o in range(256) if by_ones[a][o]} - set(ended)
    halves = wins(TruncatedRoller(net, constant(0.5), horizon=0))
    shared = [a for a in candidates if sum((o, a) in valued for o in range(256)) > 200]
    live = [o for o in range(256) if all((o, a) in valued for a in shared)]
    assert len(shared) >= 2 and len(live) > 100
    assert all(len({halves[a][o] for a in shared}) == 1 for o in live)
    assert 0 < sum(halves[shared[0]][o] for o in live) < len(live)

    agent = make_agent("distilled")
    assert isinstance(agent, SB3Agent)
    obs = np.stack([kn.observation("flat", net.recall, net.counting)])
    expected = agent.model.policy.predict_values(torch.as_tensor(obs)).item()
    assert value_net(agent, net)(obs)[0] == pytest.approx(expected, abs=1e-5)
    truncated = make("truncated:distilled:64:18:horizon=2:z=1.0")
    assert isinstance(truncated, PlannerAgent) and truncated.config.z == 1.0
    for bad, named in (
        ("truncated:distilled:64:18", "horizon=H"),
        ("truncated:distilled:64:18:horizon=abc", "horizon='abc'"),
        ("truncated:distilled:64:18:horizon=1.5", "horizon='1.5'"),
        ("truncated:distilled:network:64:18:horizon=2", "truncated:MODEL:SAMPLES"),
        ("truncated:distilled:64:horizon=2:z=1.0", "truncated:MODEL:SAMPLES"),
    ):
        with pytest.raises(ValueError, match=named):
            make(bad)


def test_the_two_step_search_is_built_as_its_spec_says_and_draws_apart() -> None:
    """``lookahead:``: the outer search takes SAMPLES and FROM_TURN, the inner one ``inner=K``
    orders wherever the outer rollouts lead; the inner search's orders never repeat the outer
    one's, reset with a seed or without; a bad ``inner`` is named."""
    from lab.experiments.lookahead import LookaheadPlanner
    from lab.experiments.search_probes import make

    agent = make("lookahead:distilled:heuristic:128:20:z=1.0:inner=32")
    assert isinstance(agent, LookaheadPlanner)
    outer, inner = agent.config, agent.inner.config
    assert (outer.samples, outer.plan_from_turn, outer.z) == (128, 20, 1.0)
    assert (inner.samples, inner.plan_from_turn, inner.z) == (32, 0, 1.0)
    assert agent.inner.rollout_policy is None and agent.base is not None
    for seed in (None, 5):
        agent.reset(seed)
        assert agent._rng.random(4).tolist() != agent.inner._rng.random(4).tolist()
    agent.reset(5)
    first = agent.inner._rng.random(4).tolist()
    agent.reset(5)
    assert agent.inner._rng.random(4).tolist() == first
    for bad in ("inner=abc", "inner=0", "inner="):
        with pytest.raises(ValueError, match="not a positive whole number"):
            make(f"lookahead:distilled:heuristic:128:20:{bad}")
    with pytest.raises(ValueError, match="expected one inner=K"):
        make("lookahead:distilled:heuristic:128:20")
