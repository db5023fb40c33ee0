"""The rollout planner: plays legal games from what a player knows, reproducibly, never peeking."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

from agents.evaluation.arena import (
    agent_env_kwargs,
    agent_seeds,
    deal_decks,
    evaluate_agent,
    validation_decks,
)
from agents.players.heuristic import HeuristicAgent, decide
from agents.players.planner import (
    BUDGETS,
    HOPELESS,
    DecisionRecord,
    PlannerAgent,
    PlannerConfig,
    action_win_chances,
    candidate_actions,
    hopeless,
    paired,
    turn_decision,
)
from agents.registry import make_agent
from coldiron_env.actions import (
    IRON,
    LEGAL_ACTIONS,
    PHASE_OVER,
    PHASE_TURN,
    RACK_ACTIONS,
    RACK_TARGETS,
    REST,
    THREATEN,
)
from coldiron_env.cards import DECK_SIZE, FIRST_JOKER, deck_codes
from coldiron_env.env import ColdIronEnv
from coldiron_env.game import Game
from coldiron_env.knowledge import Knowledge
from coldiron_env.options import MAX_HURT

TINY = PlannerConfig(samples=8, batch=4, min_samples=4, plan_from_turn=18)
"""A tiny budget that still plans the last turns."""
EVERY_TURN = PlannerConfig(samples=8, batch=4, min_samples=4, plan_from_turn=1)
LATE_TURN = 19
"""A late turn: the searches over a network plan from turn 18."""


def heuristic_positions(count: int, seed: int = 3) -> list[Game]:
    """Positions reached by the heuristic (every decision point of a few deals)."""
    out: list[Game] = []
    for deck in deal_decks(seed, count).tolist():
        game = Game(deck)
        while game.phase != PHASE_OVER:
            out.append(game.clone())
            game.step(decide(Knowledge.from_game(game)))
    return out


def late_position(deck: list[int], turn: int) -> Game | None:
    """The heuristic's game on ``deck`` at the start of ``turn`` (None if it ended before)."""
    game = Game(deck)
    while game.phase != PHASE_OVER and not (game.turn >= turn and game.phase == PHASE_TURN):
        game.step(decide(Knowledge.from_game(game)))
    return None if game.phase == PHASE_OVER else game


def test_turn_decision_mirrors_the_heuristic() -> None:
    positions = [g for g in heuristic_positions(40) if g.phase == PHASE_TURN]
    assert len(positions) > 200
    checked = 0
    for game in positions:
        kn = Knowledge.from_game(game)
        fused = turn_decision(kn)
        if fused == HOPELESS:
            assert hopeless(kn)
        else:
            assert fused == decide(kn)
            checked += 1
    assert checked > 100


def test_game_from_knowledge_rebuilds_the_position() -> None:
    for game in heuristic_positions(5)[::3]:
        kn = Knowledge.from_game(game)
        rebuilt = kn.position()
        assert Knowledge.from_game(rebuilt) == kn
        # the cards held are not discarded (a recall observation reads the discard pile)
        assert (rebuilt.hand, rebuilt.discarded) == (game.hand, game.discarded)
        # With the real remaining cards in place, it plays exactly like the real game.
        rebuilt.deck[rebuilt.pos :] = game.deck[game.pos :]
        real = game.clone()
        while real.phase != PHASE_OVER:
            action = decide(Knowledge.from_game(real))
            real.step(action)
            rebuilt.step(action)
            assert (rebuilt.hand, rebuilt.hurt, rebuilt.turn, rebuilt.phase, rebuilt.outcome) == (
                real.hand,
                real.hurt,
                real.turn,
                real.phase,
                real.outcome,
            )


def test_incomplete_knowledge_is_refused() -> None:
    kn = Knowledge(deck_count=DECK_SIZE - 1)
    with pytest.raises(ValueError, match="incomplete"):
        kn.position()


def test_sampled_orders_are_permutations_of_the_unseen_cards() -> None:
    kn = Knowledge(seen=0b111, hand=0b11, deck_count=DECK_SIZE - 3)
    cards = kn.unseen_cards()
    orders = kn.sample_orders(np.random.default_rng(1), 30)
    for order in orders:
        assert sorted(order) == cards
        assert order.index(FIRST_JOKER) < order.index(FIRST_JOKER + 1)
    assert len({tuple(o) for o in orders}) == len(orders)


def test_candidates_start_with_the_heuristic_and_are_legal() -> None:
    for game in heuristic_positions(5):
        kn = Knowledge.from_game(game)
        base = decide(kn)
        candidates = candidate_actions(kn, base)
        assert candidates[0] == base
        assert len(set(candidates)) == len(candidates)
        assert all(a in LEGAL_ACTIONS[game.phase] for a in candidates)
        if game.phase == PHASE_TURN:  # an Iron that slays at once is never worth comparing
            assert (IRON in candidates) == (kn.hurt + 1 < MAX_HURT or base == IRON)
            at_five = copy.copy(kn)
            at_five.hurt = MAX_HURT - 1
            base = decide(at_five)
            assert (IRON in candidate_actions(at_five, base)) == (base == IRON)


def test_the_free_budget_offers_every_rack_with_an_unseen_target_unranked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``planner-free`` (the no-teacher recipe's search) compares every rack that can still
    hit, each set of unseen targets once, and never asks the heuristic to score them."""
    from agents.players import planner

    monkeypatch.setattr(planner, "rack_scores", lambda *_: pytest.fail("heuristic consulted"))
    assert BUDGETS["planner-free"].racks is None and BUDGETS["planner"].racks is not None
    for game in heuristic_positions(5):
        if game.phase != PHASE_TURN:
            continue
        kn = Knowledge.from_game(game)
        free = candidate_actions(kn, THREATEN, racks=None)
        racks = [a for a in free if RACK_TARGETS[a]]
        targets = [RACK_TARGETS[a] & kn.unseen for a in racks]
        assert all(targets) and len(set(targets)) == len(targets) == len(racks)
        hitting = {RACK_TARGETS[a] & kn.unseen for a in RACK_ACTIONS} - {0}
        assert set(targets) == hitting and racks == sorted(racks)  # all of them, action order


def test_paired_statistics() -> None:
    mean, se, net = paired([0, 0, 1, 0], [1, 0, 1, 1])
    assert mean == pytest.approx(0.5)
    assert net == 2
    assert se == pytest.approx(np.sqrt((0.5 - 0.25) / 4))
    assert paired([1, 0], [1, 0])[:2] == (0.0, 0.0)


def test_never_peeks_at_the_deck_order() -> None:
    """Decks equal up to the current position but different after: same decision, same estimates."""
    compared = 0
    for deck in deal_decks(11, 30).tolist():
        game = late_position(deck, 20)
        if game is None or hopeless(Knowledge.from_game(game)):
            continue
        other_deck = list(game.deck)
        rest = other_deck[game.pos :]
        rest.reverse()
        other_deck[game.pos :] = rest
        other = game.clone()
        other.deck = other_deck
        assert other.deck != game.deck
        records = []
        for g in (game, other):
            planner = PlannerAgent(EVERY_TURN)
            planner.decisions = []
            planner.reset(seed=42)
            action = planner.act_knowledge(Knowledge.from_game(g))
            records.append((action, planner.decisions))
        assert records[0][1], "the planner did not plan: the test would prove nothing"
        assert records[0] == records[1]
        compared += 1
        if compared >= 5:
            break
    assert compared >= 3


@pytest.mark.parametrize("name", ["strongest", "planner-trained"])
def test_a_search_over_a_network_never_peeks_played_in_the_env(name: str) -> None:
    """The searches over a network, on the env path (its base policy reads the observation, its
    rollouts are played by the network): a deal, then the same deal with the cards still unseen
    at a late decision shuffled. Every move up to that decision, and every search record, is
    the same (a reviewer's check, here for every decision kind met, iron phases included)."""
    agent = make_agent(name)
    env = ColdIronEnv(**agent_env_kwargs(agent, {}))  # the observation its network reads
    rng = np.random.default_rng(5)

    def play(deck: list[int], stop: int | None = None) -> tuple[list[tuple[int, ...]], list[Any]]:
        agent.reset(seed=99)
        agent.decisions = []  # type: ignore[attr-defined]
        obs, info = env.reset(options={"deck": deck_codes(deck)})
        log: list[tuple[int, ...]] = []
        done = False
        while not done and (stop is None or len(log) <= stop):
            action = agent.act(obs, info["action_mask"], info)
            log.append((action, DECK_SIZE - info["deck_count"], info["turn"], len(agent.decisions)))  # type: ignore[attr-defined]
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        return log, list(agent.decisions)  # type: ignore[attr-defined]

    compared = 0
    for deck in validation_decks(918, 8).tolist():
        log, records = play(deck)
        late = [k for k, (_, _, turn, _) in enumerate(log) if turn >= LATE_TURN and log[k][3]]
        if not late:
            continue
        k = late[len(late) // 2]
        pos = log[k][1]
        other = deck[:pos] + [int(c) for c in rng.permutation(deck[pos:])]
        if other == deck:
            continue
        log_b, records_b = play(other, stop=k)
        assert log_b[: k + 1] == log[: k + 1], name
        assert records_b[: log[k][3]] == records[: log[k][3]], name
        compared += 1
        if compared >= 2:
            break
    assert compared >= 2, "no late searched decision met: the test would prove nothing"


def test_deterministic_given_the_seed_and_legal() -> None:
    decks = deal_decks(5, 12)
    seeds = agent_seeds(5, 12)
    runs = []
    for _ in range(2):
        outcomes: list[tuple[str, list[int]]] = []

        def record(
            i: int,
            deck: list[int],
            outcome: str,
            turn: int,
            out: list[tuple[str, list[int]]] = outcomes,
        ) -> None:
            out.append((outcome, deck))

        planner = PlannerAgent(TINY)
        result = evaluate_agent(planner, decks, seeds, callback=record)
        assert result.outcomes["illegal"] == 0
        assert planner.planned > 0
        runs.append(outcomes)
    assert runs[0] == runs[1]


def test_env_path_matches_engine_path() -> None:
    decks = deal_decks(6, 4)
    seeds = agent_seeds(6, 4)
    engine = evaluate_agent(PlannerAgent(TINY), decks, seeds, use_engine=True)
    env = evaluate_agent(PlannerAgent(TINY), decks, seeds, use_engine=False)
    assert engine.outcomes == env.outcomes
    assert engine.total_turns == env.total_turns


def test_act_checks_the_mask() -> None:
    env = ColdIronEnv()
    obs, info = env.reset(options={"deck": deck_codes(deal_decks(1, 1)[0].tolist())})
    planner = PlannerAgent(TINY)
    planner.reset(seed=0)
    mask = np.zeros_like(info["action_mask"])
    with pytest.raises(ValueError, match="illegal under mask"):
        planner.act(obs, mask, info)


def test_against_heuristic_on_paired_deals() -> None:
    """30 paired deals, tiny budget: legal games, and not worse than the heuristic by much."""
    decks = deal_decks(0, 30)
    seeds = agent_seeds(0, 30)
    planner = PlannerAgent(PlannerConfig(samples=16, batch=8, min_samples=8, plan_from_turn=20))
    ours = evaluate_agent(planner, decks, seeds)
    theirs = evaluate_agent(HeuristicAgent(), decks, seeds)
    assert ours.episodes == theirs.episodes == 30
    assert ours.outcomes["illegal"] == 0
    assert planner.planned > 0
    assert ours.wins >= theirs.wins - 2


def test_action_win_chances_gives_a_probability_per_legal_action() -> None:
    game = Game(deal_decks(2, 1)[0].tolist())
    chances = action_win_chances(Knowledge.from_game(game), [], samples=60)
    assert set(chances) == set(LEGAL_ACTIONS[game.phase])
    assert all(0.0 <= p <= 1.0 for p in chances.values())
    # Racking for a rank at the start dies to a Joker or court now and then; the
    # heuristic's opening (the Iron) is near its known win rate (~18%).
    assert 0.05 <= chances[decide(Knowledge.from_game(game))] <= 0.4
    again = action_win_chances(Knowledge.from_game(game), [], samples=60)
    assert chances == again  # reproducible
    game.step(1)
    later = action_win_chances(Knowledge.from_game(game), [1], samples=10)
    assert set(later) == set(LEGAL_ACTIONS[game.phase])


def test_action_win_chances_edge_cases() -> None:
    game = Game(deal_decks(2, 1)[0].tolist())
    while game.phase != PHASE_OVER:
        game.step(decide(Knowledge.from_game(game)))
    assert action_win_chances(Knowledge.from_game(game), []) == {}
    with pytest.raises(ValueError, match="samples"):
        action_win_chances(Knowledge(), samples=0)


def test_config_validation_and_registry() -> None:
    with pytest.raises(ValueError, match="samples"):
        PlannerConfig(samples=0)
    with pytest.raises(ValueError, match="z"):
        PlannerConfig(z=0.0)
    for name in ("planner-small", "planner", "planner-large"):
        agent = make_agent(name)
        assert isinstance(agent, PlannerAgent)
        assert agent.name == name


def test_clone_copies_every_slot_and_shares_no_list() -> None:
    """Game.clone spells its slots out (the rollouts' hot path): none may be missed."""
    for game in heuristic_positions(3)[::7]:
        other = game.clone()
        for name in Game.__slots__:
            assert getattr(other, name) == getattr(game, name), name
        assert other.deck is not game.deck and other.drawn is not game.drawn
        if other.phase != PHASE_OVER:
            other.step(LEGAL_ACTIONS[other.phase][0])
            assert (other.pos, other.steps) != (game.pos, game.steps)


def _record(advantages: dict[int, tuple[float, float]], base: int = THREATEN) -> DecisionRecord:
    chances = dict.fromkeys([base, *advantages], 0.1)
    return DecisionRecord(20, 0, 1, base, base, 64, chances, advantages)


def test_chance_best_follows_the_paired_estimates() -> None:
    """One alternative: the normal chance that its paired mean is above zero; a tie keeps
    the base action; more alternatives share the mass by their estimates, always the same."""
    half = _record({REST: (0.0, 0.05)}).chance_best()
    assert half[REST] == pytest.approx(0.5) and half[THREATEN] == pytest.approx(0.5)
    two_se = _record({REST: (0.1, 0.05)}).chance_best()
    assert two_se[REST] == pytest.approx(0.97725, abs=1e-4)
    assert _record({REST: (0.0, 0.0)}).chance_best() == {THREATEN: 1.0, REST: 0.0}
    assert _record({REST: (-1.0, 0.0)}).chance_best()[THREATEN] == 1.0
    assert _record({REST: (1.0, 0.0), IRON: (0.2, 0.1)}).chance_best()[REST] == 1.0
    three = _record({REST: (0.10, 0.05), IRON: (0.05, 0.05)})
    chances = three.chance_best()
    assert sum(chances.values()) == pytest.approx(1.0)
    assert chances[REST] > chances[IRON] > chances[THREATEN] > 0
    assert three.chance_best() == chances
    assert _record({REST: (1.0, math.inf)}).chance_best(z=0.0)[THREATEN] == 1.0, "one order"
    handicapped = _record({REST: (0.1, 0.05)}).chance_best(z=2.0)
    assert handicapped[REST] == pytest.approx(0.5), "at the planner's threshold: even odds"


def test_recorded_estimates_give_the_choice_its_due() -> None:
    """On planned decisions of real games the records' chances sum to 1, cover only the
    candidates compared, and a switch to the only alternative left has at least the chance
    the planner's z asks."""
    planner = PlannerAgent(PlannerConfig(samples=256, batch=64, min_samples=64, z=1.0))
    planner.decisions = []
    evaluate_agent(planner, deal_decks(3, 40), agent_seeds(3, 40))
    records = planner.decisions
    checked = 0
    for r in records:
        chances = r.chance_best()
        assert set(chances) == set(r.win_chances) and sum(chances.values()) == pytest.approx(1)
        if r.choice != r.base and len(r.advantages) == 1:
            assert chances[r.choice] >= 0.5 * math.erfc(-1.0 / math.sqrt(2.0)) - 1e-9
            assert r.chance_best(z=planner.config.z)[r.choice] >= 0.5 - 1e-9
            checked += 1
    assert checked >= 3, "too few switches with one alternative left: little is checked"


def test_a_winning_iron_at_hurt_5_is_counted_so_no_winnable_position_is_hopeless() -> None:
    """Turn 24 at Hurt 3 needing the three Hearts on top: Iron, Iron (Hurt 5), and the third
    application's card is kept before its Hurt slays (R11) and wins (R7). The players' bound
    counts that card, so the position is not hopeless (three Irons win it); the counting
    observation's ``keep_bound`` (what the networks learnt) leaves it out."""
    from coldiron_env.analysis import max_keeps
    from coldiron_env.cards import CARD_CODES, parse_deck
    from coldiron_env.observation import COUNTING_FIELDS, COUNTING_KEY, KEEP_SCALE, MAX_NEED

    opening = ["JK", "JK", "KH", "AD", "2D", "3D", "AC", "2C", "3C", "AS", "2S", "3S"]
    opening += ["QH", "JH", "JD", "QD", "KD", "JC", "QC", "KC", "JS", "QS", "KS", "9D", "9C"]
    opening += ["AH", "2H", "3H"]
    deck = parse_deck(opening + [c for c in CARD_CODES[:52] if c not in opening])
    game = Game(list(deck))
    for action in [IRON, 17, IRON, 17, IRON] + [THREATEN] * 22:
        game.step(action)
    assert (game.turn, game.hurt, game.phase) == (24, 3, PHASE_TURN)
    kn = Knowledge.from_game(game)
    assert max_keeps(kn.turns_left, kn.hurt, kn.unseen_jokers, kn.deck_count) == 3

    shown = kn.observation("dict", counting=True)[COUNTING_KEY][0]
    field = {f.name: f for f in COUNTING_FIELDS}
    assert round(shown[field["need"].start] * MAX_NEED) == 3
    assert round(shown[field["keep_bound"].start] * KEEP_SCALE) == 2
    assert shown[field["hopeless"].start] == 1
    assert not hopeless(kn)
    for _ in range(3):
        game.step(IRON)
    assert game.outcome == "won"


class ScriptedRoller:
    """A roller whose rollouts are scripted: on each batch of orders the base action (the
    first candidate) never wins and an alternative wins on its first ``wins[a]`` orders."""

    def __init__(self, wins: dict[int, int]) -> None:
        self.wins = wins
        self.calls = 0

    def clear(self) -> None:
        """Nothing cached."""

    def estimate(
        self, kn: Knowledge, candidates: Any, rng: Any, samples: int, estimate: Any
    ) -> Any:
        from agents.players.rollouts import Estimate

        self.calls += 1
        estimate = estimate or Estimate.start(candidates)
        won = np.zeros((samples, len(candidates)), dtype=bool)
        for column, action in enumerate(candidates[1:], start=1):
            won[: self.wins.get(action, 0), column] = True
        estimate.add(won)
        return estimate


def _planned_position() -> tuple[Knowledge, list[int]]:
    """A turn decision worth planning: its knowledge and the candidates the planner compares."""
    for game in heuristic_positions(3):
        kn = Knowledge.from_game(game)
        if game.phase == PHASE_TURN and not hopeless(kn):
            candidates = candidate_actions(kn, decide(kn))
            if len(candidates) > 1:
                return kn, candidates
    raise AssertionError("no position to plan")


@pytest.mark.parametrize(("net", "switches"), [(2, False), (4, True)])
def test_the_planner_switches_only_with_enough_discordant_orders(net: int, switches: bool) -> None:
    """At a small z the paired test passes with 2 favourable orders of 16; ``min_discordant``
    (3) still holds the base action, and 4 make the switch."""
    kn, candidates = _planned_position()
    config = PlannerConfig(samples=16, batch=16, min_samples=16, z=0.5, min_discordant=3,
                           plan_from_turn=1)  # fmt: skip
    planner = PlannerAgent(config)
    planner._roller = ScriptedRoller({candidates[1]: net})  # type: ignore[assignment]
    assert planner.choose(kn) == (candidates[1] if switches else candidates[0])


def test_an_alternative_that_only_ties_is_dropped_after_min_samples() -> None:
    """An alternative never better than the base action stops costing rollouts once
    ``min_samples`` orders are in: the search ends there, not at ``samples``."""
    kn, candidates = _planned_position()
    config = PlannerConfig(samples=1024, batch=64, min_samples=128, plan_from_turn=1)
    planner = PlannerAgent(config)
    roller = ScriptedRoller({})  # every alternative ties the base action (no wins at all)
    planner._roller = roller  # type: ignore[assignment]
    assert planner.choose(kn) == candidates[0]
    assert roller.calls == config.min_samples // config.batch
