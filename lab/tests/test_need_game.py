"""The need-known game (lab/need_game.py): its value gives the bound a ``W``
that no action is expected to raise, so the bound is at most ``W`` at the start.

The checks read the reference engine (``Game``) for where a game goes, and enumerate the
next card one by one rather than trusting the search's shortcut (a random unseen numbered
card lowers the need by one)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.evaluation.arena import validation_decks
from agents.players.roster import BUILTIN_AGENTS
from coldiron_env.actions import LEGAL_ACTIONS, PHASE_IRON, PHASE_TURN, STOP
from coldiron_env.cards import DECK_SIZE, FIRST_COURT, FIRST_JOKER, NUM_JOKERS, NUM_NUMBERED
from coldiron_env.game import BONUS_FROM_IRON, Game
from coldiron_env.knowledge import Knowledge
from coldiron_env.options import MAX_HURT
from lab.bound import ValueModel, deal_bound
from lab.need_game import (
    CAPACITY_M,
    CARD_COURT,
    CARD_JOKER,
    CARD_NUMBERED,
    MR_SIZE,
    NUM_COURTS,
    OFFSET,
    PH_IRON,
    PH_IRON_BONUS_OFFER,
    PH_THREATEN_BONUS_OFFER,
    PH_TURN,
    after_value,
    completion_curve,
    expected_after_need,
    need_game_values,
    start_value,
)
from lab.relaxed import ctx_of, draw_of


def posterior(hand: int) -> np.ndarray:
    curve = np.zeros(CAPACITY_M)
    completion_curve(hand, curve)
    return np.diff(curve, prepend=0.0)


def test_the_value_falls_as_the_need_rises() -> None:
    """Needing more never helps (the strict bound's argument rests on it), and every value
    is a probability."""
    V = need_game_values()
    assert V.min() >= 0.0 and V.max() <= 1.0 + 1e-6
    for m in range(NUM_NUMBERED):
        lo, hi = OFFSET[m] + 1, OFFSET[m] + NUM_NUMBERED - m
        block = V[1:25, lo : hi + 1]
        assert np.all(np.diff(block, axis=1) <= 1e-6), m
    assert OFFSET[NUM_NUMBERED] + 1 == MR_SIZE


def test_no_deal_is_bounded_above_the_start_value() -> None:
    """A supersolution bounds the clairvoyant's penalised maximum by ``W`` at the start on
    every deal; the start value says something (below 1)."""
    w0 = start_value()
    assert 0.5 < w0 < 0.99
    model = ValueModel.need_game()
    values = [deal_bound(deck, model) for deck in validation_decks(911, 60)]
    assert max(values) <= w0 + 1e-6
    assert min(values) < w0 - 1e-3  # the penalties bite on some deals


def _phase(game: Game) -> int:
    if game.phase == PHASE_TURN:
        return PH_TURN
    if game.phase == PHASE_IRON:
        return PH_IRON + game.iron_count
    if game.bonus_source == BONUS_FROM_IRON:
        return PH_IRON_BONUS_OFFER + game.iron_count - 1
    return PH_THREATEN_BONUS_OFFER


def _positions(count: int) -> list[Game]:
    """Decision points of heuristic games, every phase among them."""
    agent = BUILTIN_AGENTS["heuristic"]()
    agent.reset(seed=0)
    out = []
    for deck in validation_decks(912, count):
        game = Game([int(c) for c in deck])
        while game.outcome is None:
            out.append(game.clone())
            game.step(int(agent.act_knowledge(Knowledge.from_game(game))))  # type: ignore[attr-defined]
    return out


def test_no_action_is_expected_to_raise_w() -> None:
    """At decision points of real games (relaxed hand: every numbered card drawn), for the
    first card of every legal action: the expectation over each unseen card, one by one,
    equals the search's shortcut and is at most ``W`` here."""
    V = need_game_values()
    positions = _positions(12)
    phases = {_phase(g) for g in positions}
    assert {PH_TURN, PH_IRON + 1, PH_THREATEN_BONUS_OFFER} <= phases
    checked = 0
    for game in positions:
        drawn = game.deck[: game.pos]
        hand = sum(1 << c for c in drawn if c < FIRST_COURT)
        m = sum(1 for c in drawn if c < FIRST_COURT)
        c = sum(1 for c in drawn if FIRST_COURT <= c < FIRST_JOKER)
        j = sum(1 for c in drawn if c >= FIRST_JOKER)
        post = posterior(hand)
        if post[0] > 0 or game.hurt >= MAX_HURT:
            continue
        here = sum(
            post[r] * V[game.turn, OFFSET[m] + r, c, j, game.hurt, _phase(game)]
            for r in range(1, CAPACITY_M)
        )
        deck = DECK_SIZE - m - c - j
        for action in LEGAL_ACTIONS[game.phase]:
            if action == STOP:
                continue  # ending the turn or declining a bonus draws no card
            xk = draw_of(action, ctx_of(game), 0)
            total = 0.0
            for x in range(NUM_NUMBERED):
                if (hand >> x) & 1 or x in drawn:
                    continue
                after = posterior(hand | (1 << x))
                total += sum(
                    after[r] * after_value(V, CARD_NUMBERED, r, m, c, j, game.turn, game.hurt, xk)
                    for r in range(CAPACITY_M)
                    if after[r] > 0
                )
            for kind, left in ((CARD_COURT, NUM_COURTS - c), (CARD_JOKER, NUM_JOKERS - j)):
                total += left * sum(
                    post[r] * after_value(V, kind, r, m, c, j, game.turn, game.hurt, xk)
                    for r in range(CAPACITY_M)
                    if post[r] > 0
                )
            explicit = total / deck
            shortcut = expected_after_need(V, post, m, c, j, game.turn, game.hurt, xk)
            assert explicit == pytest.approx(shortcut, abs=1e-9), (action, xk)
            assert explicit <= here + 1e-5, (action, game.turn, game.hurt, explicit, here)
            checked += 1
    assert checked > 1000
