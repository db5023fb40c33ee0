"""The bound of lab/bound.py is valid by construction; these tests check the
construction on data: with W = 0 it is the clairvoyant, along honest players' games the
penalties have mean zero, on every deal it is at least each player's own penalised result
(the clairvoyant can play their game), and the relaxed twin wins whenever the real game does.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load_file

from agents.evaluation.arena import validation_decks
from agents.players.roster import BUILTIN_AGENTS
from coldiron_env.game import Game
from coldiron_env.knowledge import Knowledge
from lab.bound import (
    CAPACITY_SIZE,
    NUM_PARAMS,
    ValueModel,
    deal_bound,
    twin_result,
)
from lab.bound_fit import FitSettings, fit_value_model
from lab.need_game import completion_curve
from lab.solver import solve_deck

SAFE_SHARE = 0.35
"""The rules' check plays Threaten, and Rest, this often: games reach midnight, not only death."""


def play(agent_name: str, deck: np.ndarray, seed: int) -> list[int]:
    """The actions a built-in player takes on ``deck`` (deciding from its Knowledge)."""
    agent = BUILTIN_AGENTS[agent_name]()
    agent.reset(seed=seed)
    game = Game([int(c) for c in deck])
    actions = []
    while game.outcome is None:
        action = int(agent.act_knowledge(Knowledge.from_game(game)))  # type: ignore[attr-defined]
        actions.append(action)
        game.step(action)
    return actions


@pytest.fixture(scope="module")
def fitted() -> ValueModel:
    """A W fitted quickly (two rounds on game results): the checks hold for any W."""
    return fit_value_model(
        FitSettings(rounds=2, deals=300, monte_carlo_rounds=2), log=lambda _: None
    )


def test_with_w_zero_the_bound_is_the_clairvoyant() -> None:
    """No penalty: 1 exactly where the real game's clairvoyant wins (the relaxed game wins
    whenever the real one does), and never more."""
    for deck in validation_decks(902, 20):
        assert deal_bound(deck, ValueModel.zero()) == float(solve_deck(deck.tolist()).winnable)


@pytest.fixture(scope="module")
def capacity() -> ValueModel:
    """The capacity form of W, fitted on a few hundred deals of the fitting stream."""
    from pathlib import Path

    from lab.bound_fit import fit_decks

    path = Path(__file__).resolve().parents[1] / "experiments" / "capacity_w.py"
    module = load_file(path, "capacity_w")

    q, _ = module.fit(fit_decks(400))
    return ValueModel(q.reshape(-1), name="capacity (test)")


def test_the_completion_curve_counts_every_subset() -> None:
    """P(m random unseen numbered cards complete the phrase), against an enumeration of
    every m-subset on hands with few unseen cards."""
    from itertools import combinations

    from coldiron_env.judge import HAS_RUN

    def complete(hand: int) -> bool:
        return all(HAS_RUN[(hand >> (10 * s)) & 1023] for s in range(4))

    rng = np.random.default_rng(7)
    for _ in range(6):
        unseen = rng.choice(40, size=9, replace=False)
        hand = sum(1 << c for c in range(40) if c not in set(unseen.tolist()))
        curve = np.zeros(41)
        assert completion_curve(hand, curve) == 9
        for m in range(10):
            subsets = list(combinations(unseen.tolist(), m))
            hits = sum(complete(hand | sum(1 << int(c) for c in sub)) for sub in subsets)
            assert curve[m] == pytest.approx(hits / len(subsets)), (m, curve[m])


@pytest.mark.parametrize("model", ["fitted", "random", "capacity", "need"])
def test_the_bound_is_at_least_every_players_penalised_result(
    model: str, fitted: ValueModel, capacity: ValueModel
) -> None:
    w = {
        "fitted": fitted,
        "capacity": capacity,
        "random": ValueModel(np.random.default_rng(1).normal(0, 1, NUM_PARAMS)),
        "need": ValueModel.need_game(),
    }[model]
    assert model != "capacity" or w.theta.size == CAPACITY_SIZE
    for k, deck in enumerate(validation_decks(903, 40)):
        bound = deal_bound(deck, w)
        for name in ("heuristic", "threaten", "random"):
            actions = play(name, deck, k)
            r, z, outcome = twin_result(deck, actions, w)
            assert bound >= r - z - 1e-9, (k, name, bound, r, z)
            assert r >= (outcome == "won"), "the relaxed twin wins whenever the real game does"


@pytest.mark.parametrize("model", ["fitted", "capacity", "need"])
def test_penalties_have_mean_zero_along_honest_games(
    model: str, fitted: ValueModel, capacity: ValueModel
) -> None:
    """Thousands of heuristic games: the mean of Z is zero within its 99.9% interval."""
    w = {"fitted": fitted, "capacity": capacity, "need": ValueModel.need_game()}[model]
    sums = []
    for k, deck in enumerate(validation_decks(904, 1500)):
        sums.append(twin_result(deck, play("heuristic", deck, k), w)[1])
    z = np.asarray(sums)
    se = z.std(ddof=1) / np.sqrt(len(z))
    assert abs(z.mean()) < 3.3 * se, (z.mean(), se)
    assert se > 0  # the penalties are not all zero: the check can fail


def reference_bound(deck: np.ndarray, w: ValueModel) -> float:
    """The clairvoyant's maximum again, independently: every legal action of the reference
    engine (``Game``) at every decision point, memoised, the relaxed win read off the cards
    drawn, the penalties of each draw as :func:`twin_result` charges them."""
    from coldiron_env.actions import LEGAL_ACTIONS
    from coldiron_env.cards import FIRST_COURT, FIRST_JOKER
    from lab.bound import penalties, search_state
    from lab.relaxed import DRAW_KINDS, DRAW_SAFE, DealFacts, ctx_of, draw_of

    facts = DealFacts.of(deck)
    z = penalties(search_state(facts, w))
    memo: dict[tuple[int, ...], float] = {}

    def value(game: Game) -> float:
        key = (game.pos, game.turn, game.hurt, game.phase, game.iron_count, game.bonus_source)
        if key in memo:
            return memo[key]
        best = -np.inf
        for action in LEGAL_ACTIONS[game.phase]:
            child = game.clone()
            pos, turn, hurt, ctx = child.pos, child.turn, child.hurt, ctx_of(child)
            child.step(action)
            total, won = 0.0, False
            for drawn, card in enumerate(child.drawn):
                xk = draw_of(action, ctx, drawn)
                total -= z(pos, turn, hurt, action, xk)
                pos += 1
                if facts.won[pos]:
                    won = True
                    break
                if DRAW_KINDS[xk] != DRAW_SAFE and FIRST_COURT <= card < FIRST_JOKER:
                    hurt += 1
            if won:
                best = max(best, total + 1.0)
            elif child.outcome is not None:
                best = max(best, total)
            else:
                best = max(best, total + value(child))
        memo[key] = best
        return best

    return value(Game([int(c) for c in deck]))


@pytest.mark.parametrize("model", ["random", "need"])
def test_the_search_is_the_reference_engines_maximum(model: str) -> None:
    """On a random W (every penalty nonzero) and the need-known W (whose penalties depend
    on which draw of a turn a card is), deal by deal, to rounding."""
    if model == "random":
        w = ValueModel(np.random.default_rng(2).normal(0, 1, NUM_PARAMS))
    else:
        w = ValueModel.need_game()
    for deck in validation_decks(905, 4):
        assert deal_bound(deck, w) == pytest.approx(reference_bound(deck, w), abs=1e-9)


def test_w_after_each_kind_of_card_counts_its_hurt_its_joker_and_its_keep() -> None:
    """``after_card`` against ``value`` case by case: a court drawn in a hurting draw adds a
    Hurt (and W is 0 when it slays), a safe draw's court does not, a rack's Joker slays, any
    other Joker is spent, a numbered card is kept. Independent of the bound's own search."""
    from coldiron_env.cards import FIRST_COURT, FIRST_JOKER
    from coldiron_env.options import MAX_HURT
    from lab.bound import after_card, value, w_args
    from lab.relaxed import DRAW_HURTING, DRAW_RACK, DRAW_SAFE

    model = w_args(ValueModel(np.random.default_rng(1).normal(0, 1, NUM_PARAMS)))
    hand, unseen, deck, courts, jokers, turns = 0b101, (1 << FIRST_COURT) - 1 - 0b101, 40, 9, 2, 9

    def w(hand: int, unseen: int, deck: int, courts: int, jokers: int, hurt: int) -> float:
        return float(value((hand, unseen, deck, courts, jokers, turns, hurt), model))

    def after(card: int, hurt: int, kind: int) -> float:
        at = (hand, unseen, deck, courts, jokers, turns, hurt)
        return float(after_card(card, at, kind, model))

    assert w(hand, unseen, deck - 1, courts - 1, jokers, 3) != w(
        hand, unseen, deck - 1, courts - 1, jokers, 2
    )
    for kind in (DRAW_HURTING, DRAW_RACK):
        assert after(FIRST_COURT, 2, kind) == w(hand, unseen, deck - 1, courts - 1, jokers, 3)
        assert after(FIRST_COURT, MAX_HURT - 1, kind) == 0.0  # the court's Hurt slays
    assert after(FIRST_COURT, 2, DRAW_SAFE) == w(hand, unseen, deck - 1, courts - 1, jokers, 2)
    assert after(FIRST_JOKER, 2, DRAW_RACK) == 0.0
    assert after(FIRST_JOKER, 2, DRAW_HURTING) == w(hand, unseen, deck - 1, courts, jokers - 1, 2)
    card = 3  # a numbered card still unseen: kept
    assert after(card, 2, DRAW_RACK) == w(
        hand | 1 << card, unseen & ~(1 << card), deck - 1, courts, jokers, 2
    )


def test_the_relaxed_rules_with_cold_irons_keeping_are_the_reference_engine() -> None:
    """The rules every search plays (lab/relaxed.py), with Cold Iron's own keeping (a Rest's
    card and a rack's unmatched cards lost), are the reference engine's: random legal
    actions, played by both on the same deals, leave the same hand, position, Hurt, turn
    and decision point, and end the same way. (The relaxed and strict games differ from it
    only by the cards they keep.)"""
    from coldiron_env.actions import REST, THREATEN
    from lab.relaxed import (
        P_CTX,
        P_HAND,
        P_HURT,
        P_TURN,
        PLAYING,
        REAL,
        WON,
        advance,
        ctx_of,
        start_position,
    )

    rng = np.random.default_rng(8)
    keeping = REAL.packed()
    ends = set()
    for deck in validation_decks(919, 300):
        cards = np.asarray(deck, dtype=np.int64)
        game, position, pos = Game([int(c) for c in deck]), start_position(cards), 0
        while game.outcome is None:
            legal, u = game.legal_actions(), rng.random()
            if u < SAFE_SHARE and THREATEN in legal:
                action = THREATEN
            elif u < 2 * SAFE_SHARE and REST in legal:
                action = REST
            else:
                action = int(rng.choice(legal))
            game.step(action)
            outcome, drawn = advance(cards, pos, position, action, keeping)
            pos += int(drawn)
            assert pos == game.pos, (action, pos, game.pos)
            if game.outcome is None:
                assert outcome == PLAYING
                assert int(position[P_HAND]) == game.hand
                assert (position[P_HURT], position[P_TURN]) == (game.hurt, game.turn)
                assert position[P_CTX] == ctx_of(game)
            else:
                assert (outcome == WON) == game.won, game.outcome
                ends.add(str(game.outcome))
    assert {"slain", "midnight"} <= ends, ends
