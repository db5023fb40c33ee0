"""The strict relaxed game's honest players (lab/experiments/strict_players.py): its
turns agree with the reference engine (``Game``) wherever the strict game is the real one
and keep a superset of the real hand in a rack; its rollout player never reads the order of
the cards it has not seen."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from helpers import load_file

from agents.evaluation.arena import validation_decks
from coldiron_env import actions
from coldiron_env.actions import BONUS, IRON, PHASE_BONUS, PHASE_IRON, REST, STOP, THREATEN
from coldiron_env.cards import DECK_SIZE, FIRST_JOKER, NUM_RANKS, NUM_SUITS, SUIT_FIELD_MASK
from coldiron_env.game import Game
from coldiron_env.judge import HAS_RUN
from coldiron_env.options import STANDARD_TURNS
from lab import RECORDS, ROOT  # noqa: F401


def _complete(hand: int) -> bool:
    return all(HAS_RUN[(hand >> (NUM_RANKS * s)) & SUIT_FIELD_MASK] for s in range(NUM_SUITS))


def _jokers_seen(deck: np.ndarray, pos: int) -> int:
    return int(np.count_nonzero(deck[:pos] >= FIRST_JOKER))


@pytest.fixture(scope="module")
def strict() -> ModuleType:
    return load_file(ROOT / "lab" / "experiments" / "strict_players.py", "strict_players")


def _real_turn(game: Game, choice: int, sp: ModuleType, iron_stop: int) -> None:
    """Play the strict game's whole-turn ``choice`` in the reference engine, bonuses taken."""
    if choice == sp.C_THREATEN:
        game.step(THREATEN)
    elif choice == sp.C_REST:
        game.step(REST)
    elif choice >= sp.C_RACK_RANK_FIRST:
        game.step(actions.RACK_RANK_FIRST + choice - sp.C_RACK_RANK_FIRST)
    elif choice >= sp.C_RACK_SUIT_FIRST:
        game.step(actions.RACK_SUIT_FIRST + choice - sp.C_RACK_SUIT_FIRST)
    else:
        applications = choice - sp.C_IRON_FIRST + 1
        for applied in range(1, applications + 1):
            game.step(IRON)
            if not game.over and game.phase == PHASE_BONUS:
                game.step(BONUS)
            if game.over or game.phase != PHASE_IRON:
                return
            if applied == applications or game.hurt >= iron_stop:
                game.step(STOP)
                return
    if not game.over and game.phase == PHASE_BONUS:
        game.step(BONUS)


def test_turns_follow_the_reference_engine(strict: ModuleType) -> None:
    params = np.array(strict.DEFAULT_PARAMS, np.int64)
    rng = np.random.default_rng(5)
    racks = strict.C_RACK_SUIT_FIRST
    compared = rack_turns = 0
    for deck in validation_decks(915, 600):
        game = Game([int(c) for c in deck])
        state = np.zeros(4, np.int64)
        while True:
            choice = int(rng.integers(strict.NUM_CHOICES))
            extra = int(state[2]) & ~game.hand  # kept by the strict game's racks only
            _real_turn(game, choice, strict, int(params[strict.P_IRON_STOP]))
            result = strict.play_turn(deck, state, choice, params)
            compared += 1
            hand = int(state[2])
            if game.won:
                assert result == strict.WON  # the twin wins whenever the real game wins
            assert int(state[3]) == _jokers_seen(deck, int(state[0]))
            if result == strict.WON:  # perhaps mid-rack, where the real game draws on
                assert _complete(hand)
                assert int(state[0]) <= game.pos  # the same cards, up to the winning one
                if choice < racks or choice == strict.C_REST:
                    assert _complete(game.hand | extra)  # won on the real game's own cards
                break
            assert (hand & game.hand) == game.hand  # the strict hand holds the real one
            if choice < racks or choice == strict.C_REST:
                assert hand == game.hand | extra  # the real game's own cards, nothing more
            else:
                rack_turns += 1
            if result == strict.LOST:
                assert game.over and not game.won
                break
            if game.outcome == "midnight":  # turns are the caller's to count in the strict game
                break
            assert not game.over
            assert int(state[0]) == game.pos
            assert int(state[1]) == game.hurt
    assert compared > 1_000 and rack_turns > 100  # the comparison ran, racks included


def test_the_rollout_player_reads_only_what_it_has_seen(strict: ModuleType) -> None:
    params = np.array(strict.DEFAULT_PARAMS, np.int64)
    rng = np.random.default_rng(6)
    checked = 0
    for deck in validation_decks(916, 6):
        _, choices = strict.play_rollout(deck, 24, 3, params)
        starts = []  # the cards seen when each turn's choice was made
        state = np.zeros(4, np.int64)
        for choice in choices:
            starts.append(int(state[0]))
            strict.play_turn(deck, state, choice, params)
        seen = starts[len(starts) // 2]
        other = deck.copy()
        other[seen:] = rng.permutation(deck[seen:])  # the unseen cards in another order
        assert not np.array_equal(other, deck) or seen >= DECK_SIZE - 1
        _, others = strict.play_rollout(other, 24, 3, params)
        made = [c for c, s in zip(choices, starts, strict=True) if s <= seen]
        assert others[: len(made)] == made
        checked += len(made)
    assert checked > 6


def test_base_plays_whole_games_as_the_reference_engine(strict: ModuleType) -> None:
    params = np.array(strict.DEFAULT_PARAMS, np.int64)
    iron_stop = int(params[strict.P_IRON_STOP])
    won = real_won = midnight = 0
    for deck in validation_decks(917, 400):
        game = Game([int(c) for c in deck])
        state = np.zeros(4, np.int64)
        result, turns = strict.PLAYING, 0
        while result == strict.PLAYING and turns < STANDARD_TURNS:
            choice = int(strict._base_choice(deck.astype(np.int8), state, params, turns + 1))
            turns += 1
            if not game.over:
                _real_turn(game, choice, strict, iron_stop)
            result = strict.play_turn(deck, state, choice, params)
        assert strict.play_base(deck, params) == (result == strict.WON)  # the same 24 turns
        if game.won:
            assert result == strict.WON
        if result == strict.PLAYING:  # the strict game ran out of turns: so did the real one
            assert game.outcome == "midnight"
            midnight += 1
        won += result == strict.WON
        real_won += game.won
    assert won > real_won > 0 and midnight > 0  # wins on both sides, and games to midnight
