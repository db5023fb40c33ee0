"""A trained network in NumPy scores as the model does, and its batched rollouts play it
move by move: agents/players/policy_net.py (the rollouts of the ``strongest`` player)."""

from __future__ import annotations

import sys
from functools import cache

import numpy as np
import pytest
import torch
from helpers import rule_variant_sets, variant_id

from agents.evaluation.arena import deal_decks
from agents.learning.sb3_agent import SB3Agent, policy_net
from agents.players.heuristic import decide
from agents.players.planner import PLANNER_DEFAULT, PlannerAgent, hopeless
from agents.players.policy_net import NetRoller, PolicyNet
from agents.players.rollouts import hopeless_games, tables
from agents.registry import make_agent
from coldiron_env.actions import ENV_MASKS, LEGAL_ACTIONS, PHASE_OVER, PHASE_TURN
from coldiron_env.batched import pack_rules
from coldiron_env.game import WON, Game, Games
from coldiron_env.knowledge import Knowledge
from coldiron_env.options import DEFAULT_RULES, RuleOptions

VARIANT_SETS = rule_variant_sets()
VARIANTS = [RuleOptions(**options) for options in VARIANT_SETS]


@cache
def shipped() -> tuple[SB3Agent, PolicyNet]:
    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    return agent, policy_net(agent)


def positions(rules: RuleOptions, deals: int, seed: int) -> list[Game]:
    """Every position of games half played by the heuristic, half at random."""
    rng = np.random.default_rng(seed)
    out: list[Game] = []
    for deck in deal_decks(seed, deals).tolist():
        game = Game(deck, rules)
        while game.phase != PHASE_OVER:
            out.append(game.clone())
            kn = Knowledge.from_game(game)
            legal = LEGAL_ACTIONS[game.phase]
            game.step(decide(kn) if rng.random() < 0.5 else int(rng.choice(legal)))
    return out


def batch(games: list[Game]) -> Games:
    """The positions as the batched state (each array from the games' attributes)."""
    out = Games.zeros(len(games))
    out.deal(slice(None), np.array([g.deck for g in games]), games[0].rules)
    for name in Games._fields[1:]:
        if name not in ("turns", "suits_required", "outcome"):  # the rules' (dealt), a code
            getattr(out, name)[:] = [getattr(g, name) for g in games]
    return out


def observations(games: list[Game], net: PolicyNet) -> tuple[np.ndarray, np.ndarray]:
    state = batch(games)
    return net.observe(state, DEFAULT_RULES), state.phase.copy()


def test_the_numpy_network_scores_and_chooses_as_the_model() -> None:
    agent, net = shipped()
    games = [g for g in positions(DEFAULT_RULES, 40, seed=3) if g.phase != PHASE_OVER]
    obs, phases = observations(games, net)
    scores = net.logits(obs.copy()).astype(np.float64)
    ours = scores - np.log(np.exp(scores - scores.max(1, keepdims=True)).sum(1, keepdims=True))
    ours -= scores.max(1, keepdims=True)  # log-probabilities: SB3's normalised logits
    with torch.no_grad():
        theirs = agent.policy.scores(obs).numpy()
    assert ours.shape == theirs.shape == (len(games), 19)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    masks = ENV_MASKS[phases]
    assert np.array_equal(net.act(obs, phases), agent.policy.act(obs, masks))
    for game in games[:: max(1, len(games) // 50)]:  # one position at a time, from a Knowledge
        kn = Knowledge.from_game(game)
        mask = ENV_MASKS[kn.phase][None].copy()
        assert net.act_knowledge(kn) == int(
            agent.policy.act(kn.observation(counting=True), mask)[0]
        )


def reference_rollout(net: PolicyNet, root: Game, order: list[int], first: int) -> bool:
    """One rollout on the engine: the candidate, then the network move by move from what a
    player knows; lost as soon as the game can no longer be won."""
    game = root.clone()
    game.deck[root.pos :] = order
    game.step(first)
    while game.phase != PHASE_OVER:
        kn = Knowledge.from_game(game)
        if kn.phase == PHASE_TURN and hopeless(kn):
            return False
        game.step(net.act_knowledge(kn))
    return game.outcome == WON


@pytest.mark.parametrize("rules", VARIANTS, ids=[variant_id(v) for v in VARIANT_SETS])
def test_network_rollouts_play_the_network_move_by_move(rules: RuleOptions) -> None:
    _, net = shipped()
    roller = NetRoller(net)
    games = positions(rules, 12, seed=5)
    rng = np.random.default_rng(0)
    checked = wins = 0
    for game in games[::7]:
        if game.phase == PHASE_OVER:
            continue
        kn = Knowledge.from_game(game)
        candidates = list(LEGAL_ACTIONS[kn.phase])[:4]
        state = rng.bit_generator.state
        estimate = roller.estimate(kn, candidates, rng, 6)
        replay = np.random.default_rng()
        replay.bit_generator.state = state
        orders = kn.sample_orders(replay, 6)
        root = kn.position()
        for action in candidates:
            expected = [reference_rollout(net, root, order, action) for order in orders]
            assert estimate.wins[action] == [int(w) for w in expected]
            checked += len(expected)
            wins += sum(expected)
    assert checked > 150 and wins > 0, "the check saw real rollouts, some of them won"


def test_hopeless_games_is_the_planners_test() -> None:
    games = positions(DEFAULT_RULES, 60, seed=7)
    live = np.array([g.phase != PHASE_OVER for g in games])
    got = hopeless_games(live, batch(games), pack_rules(DEFAULT_RULES), tables())
    want = [g.phase == PHASE_TURN and hopeless(Knowledge.from_game(g)) for g in games]
    assert got.tolist() == want
    assert 0 < sum(want) < len(want), "both kinds of position occur"


def test_the_planner_keeps_network_rollouts_under_other_rules() -> None:
    _, net = shipped()
    planner = PlannerAgent(PLANNER_DEFAULT, rollout_policy=net)
    rules = RuleOptions(turns=20, suits_required=3)
    planner.set_rules(rules)
    roller = planner._roller
    assert isinstance(roller, NetRoller) and roller.net is net
    assert planner.knowledge.rules == rules, "the rollouts play the rules the knowledge carries"
    assert not isinstance(PlannerAgent(PLANNER_DEFAULT)._roller, NetRoller)


def test_a_policy_net_refuses_what_it_cannot_run() -> None:
    _, net = shipped()
    with pytest.raises(ValueError, match="activation 'gelu'"):
        PolicyNet(net.weights, net.biases, "gelu", net.recall, net.counting)
    with pytest.raises(ValueError, match="inputs"):
        PolicyNet(net.weights, net.biases, "tanh", recall=True, counting=True)
    with pytest.raises(ValueError, match="one bias per weight"):
        PolicyNet(net.weights, net.biases[:-1], "tanh", net.recall, net.counting)


def test_one_blas_thread_limits_blas_inside_and_restores_it_after() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from agents.players.threads import one_blas_thread

    def blas_threads() -> list[int]:
        pools = threadpoolctl.threadpool_info()
        return [p["num_threads"] for p in pools if p["user_api"] == "blas"]

    before = blas_threads()
    if not before:
        pytest.skip("numpy has no BLAS threadpool that threadpoolctl can see")
    with one_blas_thread():
        assert blas_threads() == [1] * len(before)
    assert blas_threads() == before


def test_blas_controller_is_kept_until_a_module_is_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import types

    from agents.players import threads

    made: list[object] = []
    real = threadpoolctl.ThreadpoolController

    def counting() -> object:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", counting)
    threads._controller.cache_clear()
    for _ in range(3):
        with threads.one_blas_thread():
            pass
    assert len(made) == 1  # found once, then kept
    monkeypatch.setitem(sys.modules, "_coldiron_test_new_module", types.ModuleType("x"))
    with threads.one_blas_thread():
        pass
    assert len(made) == 2  # a module imported since: the libraries are found again
