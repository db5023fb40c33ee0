"""The planner's compiled rollouts give every rollout the Python rollouts' result.

agents/players/rollouts.py transcribes the heuristic's decision over plain integers and
plays it with the batched rules core; the planner uses it when numba is installed. Its
decisions are checked against :func:`decide` / :func:`turn_decision` on positions of
many games (rule variants and other thresholds included), and whole estimates (every
rollout's win or loss, on the same sampled orders) against :class:`Roller` in Python.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import rule_variant_sets, variant_id

from agents.evaluation.arena import deal_decks
from agents.players.heuristic import DEFAULT_PARAMS, HeuristicParams, decide
from agents.players.planner import (
    BUDGETS,
    HOPELESS,
    PlannerAgent,
    Roller,
    turn_decision,
)
from agents.players.rollouts import (
    candidate_games,
    heuristic_action,
    keep_bound,
    pack_params,
    tables,
)
from coldiron_env.actions import LEGAL_ACTIONS, PHASE_OVER, PHASE_TURN, STOP, THREATEN
from coldiron_env.analysis import max_keeps
from coldiron_env.batched import JOKER_KEEPS, NUMBA_AVAILABLE, pack_rules
from coldiron_env.cards import DECK_SIZE, NUM_JOKERS
from coldiron_env.env import ColdIronEnv
from coldiron_env.game import Game
from coldiron_env.knowledge import Knowledge
from coldiron_env.options import DEFAULT_RULES, MAX_HURT, RuleOptions

OTHER_PARAMS = HeuristicParams(
    iron_limit=4, rack_slack=0, rack_min_score=0.5, waste_weight=0.3, hurt_weight=0.2,
    bonus_max_risk=0.2, rest_at=3, rest_margin=1,
)  # fmt: skip
ZERO_RISK = replace(DEFAULT_PARAMS, bonus_max_risk=0.0)
"""Declines every Iron bonus with any risk: risk 0.0 sits exactly on the threshold."""
VARIANTS = [
    *(RuleOptions(**options) for options in rule_variant_sets()),
    RuleOptions(turns=16, suits_required=3),
    RuleOptions(turns=20, suits_required=2),
    RuleOptions(turns=12, suits_required=1),
]
VARIANT_IDS = [*(variant_id(v) for v in rule_variant_sets()), "3-suits", "2-suits", "1-suit"]


def positions(rules: RuleOptions, deals: int, seed: int, random_share: float = 0.5) -> list[Game]:
    """Every position of games played by the heuristic, with a share of random moves
    (so that high Hurt, Iron and bonus phases and hopeless games all occur)."""
    rng = np.random.default_rng(seed)
    out: list[Game] = []
    for deck in deal_decks(seed, deals).tolist():
        game = Game(deck, rules)
        while game.phase != PHASE_OVER:
            out.append(game.clone())
            legal = LEGAL_ACTIONS[game.phase]
            kn = Knowledge.from_game(game)
            game.step(decide(kn) if rng.random() >= random_share else int(rng.choice(legal)))
    return out


def expected(kn: Knowledge, params: HeuristicParams) -> int:
    if kn.phase == PHASE_TURN:
        return turn_decision(kn, params)
    return decide(kn, params)


def compiled_action(game: Game, params: HeuristicParams, python: bool = False) -> int:
    fn = heuristic_action.py_func if python else heuristic_action
    games = Knowledge.from_game(game).games(np.array([game.deck[game.pos :]]))
    return int(fn(games, 0, pack_rules(game.rules), tables(), pack_params(params)))


@pytest.mark.parametrize("rules", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize(
    "params", [DEFAULT_PARAMS, OTHER_PARAMS, ZERO_RISK], ids=["default", "other", "zero-risk"]
)
def test_the_compiled_heuristic_decides_as_the_python_one(
    rules: RuleOptions, params: HeuristicParams
) -> None:
    games = positions(rules, 150, seed=7)
    seen = {PHASE_TURN: 0, "hopeless": 0, "other phases": 0}
    for game in games:
        kn = Knowledge.from_game(game)
        want = expected(kn, params)
        assert compiled_action(game, params) == want, (game.turn, game.phase, game.hurt)
        if want == HOPELESS:
            seen["hopeless"] += 1
        elif game.phase == PHASE_TURN:
            seen[PHASE_TURN] += 1
        else:
            seen["other phases"] += 1
    assert seen[PHASE_TURN] > 10 and seen["other phases"] > 10, seen
    if rules.suits_required >= 3:  # with one or two suits no game here turns hopeless
        assert seen["hopeless"] > 10, seen


def test_the_python_transcription_decides_the_same() -> None:
    """The functions as plain Python (what runs without numba) decide the same."""
    for game in positions(DEFAULT_RULES, 8, seed=11)[:300]:
        kn = Knowledge.from_game(game)
        assert compiled_action(game, DEFAULT_PARAMS, python=True) == expected(kn, DEFAULT_PARAMS)


@pytest.mark.parametrize("rules", VARIANTS, ids=VARIANT_IDS)
def test_compiled_rollouts_win_and_lose_exactly_as_the_python_ones(rules: RuleOptions) -> None:
    late = [g for g in positions(rules, 40, seed=5, random_share=0.1) if g.turn >= rules.turns - 8]
    assert len(late) > 50
    wins = 0
    for index, game in enumerate(late[::3]):
        kn = Knowledge.from_game(game)
        candidates = list(LEGAL_ACTIONS[kn.phase])
        params = (DEFAULT_PARAMS, OTHER_PARAMS)[index % 2]
        results = []
        for compiled in (True, False):
            roller = Roller(params, compiled=compiled)
            rng = np.random.default_rng(index)
            results.append(roller.estimate(kn, candidates, rng, 16).wins)
        assert results[0] == results[1]
        wins += sum(sum(w) for w in results[0].values())
    assert wins > 20  # rollouts were won, not only lost


@pytest.mark.skipif(not NUMBA_AVAILABLE, reason="the planner uses compiled rollouts with numba")
def test_the_planner_plays_the_same_games_with_either_rollouts() -> None:
    config = replace(BUDGETS["planner-small"], samples=64, batch=32)
    records = []
    for compiled in (True, False):
        agent = PlannerAgent(config, compiled=compiled)
        agent.set_rules(DEFAULT_RULES)  # set_rules builds the rollouts again: same kind
        assert agent._roller.compiled is compiled
        agent.decisions = []
        played = []
        for seed in range(30):
            env = ColdIronEnv()
            obs, info = env.reset(seed=seed)
            agent.reset(seed)
            done = False
            while not done:
                action = agent.act(obs, info["action_mask"], info)
                played.append(action)
                obs, _, term, trunc, info = env.step(action)
                done = term or trunc
        records.append((played, agent.decisions, agent.switched))
    assert records[0] == records[1]
    assert records[0][2] > 0  # the search changed some decisions


def test_the_compiled_keep_bound_is_max_keeps() -> None:
    """Every start-of-turn keep bound the rules allow, against coldiron_env.analysis."""
    checked = 0
    for turns_left in range(1, 25):
        for hurt in range(MAX_HURT):
            for jokers in range(NUM_JOKERS + 1):
                for deck_count in range(1, DECK_SIZE + 1):
                    for rules in VARIANTS[: len(rule_variant_sets())]:
                        want = max_keeps(turns_left, hurt, jokers, deck_count, rules)
                        keeps = pack_rules(rules)[JOKER_KEEPS]
                        assert keep_bound(turns_left, hurt, jokers, deck_count, keeps) == want
                        checked += 1
    assert checked > 10_000


def test_rollouts_refuse_an_illegal_candidate() -> None:
    game = positions(DEFAULT_RULES, 1, seed=3)[0]  # the first turn: Stop is illegal
    kn = Knowledge.from_game(game)
    orders = kn.sample_order_array(np.random.default_rng(0), 2)
    with pytest.raises(ValueError, match="illegal in phase"):
        candidate_games(kn, orders, [THREATEN, STOP])
