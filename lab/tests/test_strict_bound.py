"""The strict relaxed game's search (lab/bound.py's, with a ``Keeping`` that loses cards, as
lab/experiments/strict_bound.py runs it): with no Rest card lost it is the relaxed game, so
it must give the bound's own result deal by deal; with one card lost the search carries
it, so it visits more states; the pruned
search (``W`` a supersolution cuts subtrees) finds the same maximum, and a window above
the warm start gives a bound within the window. ``--real``: a rack's penalty has mean zero
and never expects more than the strict game's (so the cuts stay valid); a higher warm start
keeps the bound within the window; runs resume from their checkpoint."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from helpers import load_file

from agents.atomic import atomic_write_json
from agents.evaluation.arena import validation_decks
from coldiron_env.actions import PHASE_TURN, RACK_RANK_FIRST, RACK_SUIT_FIRST, is_rack
from coldiron_env.cards import DECK_SIZE, FIRST_COURT, NUM_JOKERS, NUM_NUMBERED
from coldiron_env.game import Game
from coldiron_env.options import BONUS_DRAWS, MAX_HURT, STANDARD_TURNS
from lab import RECORDS, ROOT, bound  # noqa: F401
from lab.bound import ValueModel, deal_bound, search_state
from lab.need_game import NUM_COURTS
from lab.relaxed import (
    CTX_BONUS,
    CTX_TURN,
    DRAW_KINDS,
    DRAW_SAFE,
    DRAWS,
    NUM_CTX,
    NUM_XK,
    RACK_FIRST,
    RACK_MASKS,
    RELAXED,
    XK_RACK,
    DealFacts,
    Keeping,
    complete,
    count,
    ctx_of,
    draw_of,
)

pytestmark = pytest.mark.slow
WINDOW = 0.05
RACK_TURN = 5
RACK_HURT = 1
SUPERSOLUTION_SEED = 0
STATES_PER_DEAL = 150
LOST_SHARE = 0.5  # of the earlier numbered cards, lost to earlier racks
ZMEAN_SEED = 1
ZMEAN_STATES = 3
"""Random positions a deal where every kind of draw's penalty is checked for mean zero."""
LATE_TURN = 17
LATE_POS = 18
"""Late decision points (from this turn and deck position), where exhaustive searches are small."""
CUT_STATES = 6
TWIN_SEED = 962
REFERENCE_TURN = 22
"""Decision points from this turn on, where the reference engine's maximisation is small."""
REFERENCE_DEALS_SEED = 918
"""Validation seed of the deals whose late decision points the reference engine checks."""
REFERENCE_DEALS = 4
REFERENCE_STATES = 12
"""Late decision points tried a deal (some games end first; each kind is then forced)."""
REFERENCE_SEED = 963
"""Seeds the games that lead to the late points."""
PREFIX_THREATEN = 0.7
"""The games leading to the late points Threaten below this uniform draw, Rest below
:data:`PREFIX_REST` (their cards lost), and take any legal action but a rack above it:
mostly safe draws, so that games reach the late turns (the searches rack from there)."""
PREFIX_REST = 0.85


RACKS_DRAWN = (  # (position of the card drawn, rack): an Ace, a nine and a suit rack
    (6, RACK_RANK_FIRST),
    (15, RACK_RANK_FIRST + 8),
    (10, RACK_SUIT_FIRST + 3),
)


def _state(facts: DealFacts, keeping: Keeping = RELAXED, prune: bool = False) -> Any:
    """The search's state on a deal, with the need-known ``W``."""
    return search_state(facts, ValueModel.need_game(), keeping, prune)


STRICT = Keeping(cap=NUM_NUMBERED)


def test_the_strict_search_against_the_bounds_and_itself() -> None:
    strict = load_file(ROOT / "lab" / "experiments" / "strict_bound.py", "strict_bound")
    model = ValueModel.need_game()
    for deck in validation_decks(914, 2):
        value, states = strict.strict_deal_bound(deck, 0)
        assert value == pytest.approx(deal_bound(deck, model), abs=1e-9)
        exact, more = strict.strict_deal_bound(deck, 1)
        assert more > states  # a lost card is carried in the search's state
        pruned, fewer = strict.strict_deal_bound(deck, 1, prune=True)
        assert pruned == pytest.approx(exact, abs=1e-9)  # the cuts keep the maximum
        assert fewer < more
        within, _ = strict.strict_deal_bound(deck, 1, prune=True, window=WINDOW)
        assert exact - 1e-9 <= within <= exact + WINDOW + 1e-9


def _strict_module() -> Any:
    return load_file(ROOT / "lab" / "experiments" / "strict_bound.py", "strict_bound")


def _swapped(deck: np.ndarray, pos: int, q: int) -> np.ndarray:
    out = deck.copy()
    out[pos], out[q] = out[q], out[pos]
    return out


def test_every_draws_penalty_has_mean_zero_with_rest_cards_lost() -> None:
    """The strict game's own piece: a Rest's card is lost, and ``W`` reads the cards lost. At
    random positions, Hurt and sets of cards lost, for every kind of draw (a Rest's too),
    swapping the card at ``pos`` with each later card draws every unseen card once with the
    same past: the penalties' mean is zero. (A reviewer's mutation, the lost card's term
    halved in a Rest's expectation, left the other tests green; it fails this one.)"""
    rng = np.random.default_rng(ZMEAN_SEED)
    draws = {draw_of(action, ctx, drawn): action for action, ctx, drawn in reversed(DRAWS)}
    checked = 0
    for dealt in validation_decks(916, 2):
        deck = np.asarray(dealt)
        facts = DealFacts.of(deck)
        for _ in range(ZMEAN_STATES):
            pos = int(rng.integers(1, DECK_SIZE - 1))
            turn, hurt = int(rng.integers(1, STANDARD_TURNS + 1)), int(rng.integers(0, MAX_HURT))
            gone = sum(
                1 << int(c) for c in deck[:pos] if c < FIRST_COURT and rng.random() < LOST_SHARE
            )
            if complete(int(facts.hands[pos]) & ~gone):
                continue
            states = [
                _state(DealFacts.of(_swapped(deck, pos, q)), STRICT) for q in range(pos, DECK_SIZE)
            ]
            zs = [bound.penalties(S) for S in states]
            for xk, action in draws.items():
                z = [penalty(pos, turn, hurt, action, xk, gone) for penalty in zs]
                assert np.mean(z) == pytest.approx(0.0, abs=1e-12), (pos, turn, hurt, xk)
                checked += 1
    assert checked >= NUM_XK * ZMEAN_STATES  # the draws were checked, lost cards and all


def test_the_cut_search_is_exact_above_its_cut_and_a_bound_below_it_at_late_points() -> None:
    """What ``--prune`` rests on, at late decision points of every kind, with cards lost to
    Rests: the exhaustive maximum is at most ``W`` there (a supersolution), and the cut search
    returns it exactly when it is above the cut, and at least it (a valid bound) below."""
    rng = np.random.default_rng(ZMEAN_SEED)
    cut = exact_seen = 0
    for dealt in validation_decks(917, 2):
        deck = np.asarray(dealt)
        facts = DealFacts.of(deck)
        for _ in range(CUT_STATES):
            pos = int(rng.integers(LATE_POS, DECK_SIZE - 8))
            turn, hurt = (
                int(rng.integers(LATE_TURN, STANDARD_TURNS + 1)),
                int(rng.integers(0, MAX_HURT)),
            )
            ctx = int(rng.integers(0, NUM_CTX))
            gone = sum(
                1 << int(c) for c in deck[:pos] if c < FIRST_COURT and rng.random() < LOST_SHARE / 2
            )
            if complete(int(facts.hands[pos]) & ~gone):
                continue
            exact = bound._solve(pos, turn, hurt, ctx, gone, bound.NO_CUT, _state(facts, STRICT))
            upper = bound._upper(pos, turn, hurt, ctx, gone, _state(facts, STRICT, prune=True))
            assert exact <= upper + bound.UPPER_SLACK, (pos, turn, hurt, ctx)
            for alpha in (exact - 0.05, exact - 1e-6, exact + 1e-6, exact + 0.05):
                got = bound._solve(pos, turn, hurt, ctx, gone, alpha, _state(facts, STRICT, True))
                if got > alpha:
                    assert got == pytest.approx(exact, abs=1e-9), (pos, ctx, alpha)
                    exact_seen += 1
                else:
                    assert got >= exact - 1e-9, (pos, ctx, alpha)
                    cut += 1
    assert cut and exact_seen  # both sides of the cut were met


def test_a_real_racks_penalty_has_mean_zero_over_the_next_card() -> None:
    """``--real``: a rack's numbered card is kept if it matches, else lost; the penalty's
    expectation must follow. Swapping the card at ``pos`` with each later card draws every
    unseen card once, with the same past, so the penalties' mean is exactly zero (checked
    by hand: a rack whose expectation keeps the wrong cards, or ignores the rack, fails it)."""
    deck = np.asarray(validation_decks(915, 1)[0])
    distinct = False
    for pos, rack in RACKS_DRAWN:
        gone = next(  # a numbered card an earlier rack lost
            1 << int(card)
            for card in deck[:pos]
            if card < FIRST_COURT and not (RACK_MASKS[rack - RACK_FIRST] >> int(card)) & 1
        )
        penalties = {}
        for real in (True, False):
            z = []
            for q in range(pos, DECK_SIZE):
                swapped = deck.copy()
                swapped[pos], swapped[q] = swapped[q], swapped[pos]
                S = _state(DealFacts.of(swapped), Keeping(NUM_NUMBERED, real=real))
                z.append(bound._z(pos, RACK_TURN, RACK_HURT, rack, XK_RACK, gone, S))
            assert np.mean(z) == pytest.approx(0.0, abs=1e-12)
            penalties[real] = z
        distinct = distinct or not np.allclose(penalties[True], penalties[False])
    assert distinct  # the real game's racks are penalised as such


def test_a_real_rack_expects_no_more_than_a_strict_one() -> None:
    """Why ``W`` stays a supersolution in the real game, so ``--real --prune`` may cut where
    ``W`` is at most the best found: at every reachable rack draw (the hand not complete),
    whatever cards earlier racks lost, the expectation of ``W`` after the card is at most
    the strict game's, whose ``W`` the pruned search above is tested against (a lost card
    leaves the need at least the kept one, and the need-known value falls as it rises)."""
    rng = np.random.default_rng(SUPERSOLUTION_SEED)
    compared = lower = 0
    for dealt in validation_decks(916, 2):
        deck = np.asarray(dealt)
        facts = DealFacts.of(deck)
        real = _state(facts, Keeping(NUM_NUMBERED, real=True))
        strict_game = _state(facts, STRICT)
        for pos in rng.integers(1, DECK_SIZE - 1, size=STATES_PER_DEAL):
            gone = sum(
                1 << int(card)
                for card in deck[:pos]
                if card < FIRST_COURT and rng.random() < LOST_SHARE
            )
            if complete(int(facts.hands[pos]) & ~gone):
                continue  # won: no card is drawn
            turn = int(rng.integers(1, STANDARD_TURNS + 1))
            hurt = int(rng.integers(0, MAX_HURT))
            seen = (
                NUM_NUMBERED - count(int(facts.unseen[pos])),
                NUM_COURTS - int(facts.courts[pos]),
                NUM_JOKERS - int(facts.jokers[pos]),
            )
            for rack in range(RACK_FIRST, RACK_FIRST + len(RACK_MASKS)):
                args = (int(pos), turn, hurt, rack, XK_RACK, gone, *seen)
                in_real = bound._expected_need(*args, real)
                in_strict = bound._expected_need(*args, strict_game)
                assert in_real <= in_strict + 1e-12
                lower += in_real < in_strict - 1e-6
                compared += 1
    assert compared > STATES_PER_DEAL * len(RACK_MASKS)  # most states are not won
    assert lower > compared // 2  # the real game's racks lose cards, and it shows


def test_a_higher_warm_start_keeps_the_bound_within_the_window() -> None:
    """``--warm-lost``: the best game losing at most one numbered card is one of the games
    the pruned search searches, with the same penalties, so starting the cut from it
    leaves the result between the maximum and the maximum plus the window, as the
    default start does: the two results are within a window of each other."""
    strict = load_file(ROOT / "lab" / "experiments" / "strict_bound.py", "strict_bound")
    raised = 0
    for deck in validation_decks(914, 3)[1:]:  # on the third, losing a card pays
        warm, lowest = strict.warm_start(deck, 1, False), strict.warm_start(deck, 0, False)
        assert warm >= lowest  # a maximum over more games
        raised += warm > lowest + 1e-9
        root, _ = strict.strict_deal_bound(deck, NUM_NUMBERED, prune=True, warm=1.0)
        assert root == pytest.approx(strict.strict_start_value(), abs=1e-4)  # cut at the root
        default, _ = strict.strict_deal_bound(deck, NUM_NUMBERED, prune=True, window=WINDOW)
        higher, _ = strict.strict_deal_bound(
            deck, NUM_NUMBERED, prune=True, window=WINDOW, warm=warm
        )
        assert higher >= warm - 1e-9  # the maximum holds the warm start's game
        assert abs(higher - default) <= WINDOW + 1e-9
    assert raised  # a lost card's game is better somewhere: the start is higher there


def test_a_run_resumes_from_its_checkpoint_or_a_shorter_record(tmp_path: Path) -> None:
    """Long runs lose nothing: a run extended to more deals, or cut off after some, takes
    the deals already solved with the same settings (marked here, to see that they are
    taken) and solves only the rest; a checkpoint of other settings, or a record of more
    deals than asked for, is refused, not overwritten."""
    strict = load_file(ROOT / "lab" / "experiments" / "strict_bound.py", "strict_bound")
    fast = ["--forbid", "--lost", "0", "--real", "--seed", "917"]

    def run(episodes: int, name: str) -> dict[str, Any]:
        out = tmp_path / name
        strict.main([*fast, "--episodes", str(episodes), "--json", str(out)])
        assert not out.with_name(out.name + ".partial").exists()  # gone when the run ends
        return cast(dict[str, Any], json.loads(out.read_text()))

    whole = run(4, "whole.json")
    short = run(2, "grown.json")
    short["per_deal"][0] += 1.0  # marked
    atomic_write_json(tmp_path / "grown.json", short)
    grown = run(4, "grown.json")
    assert grown["per_deal"] == [short["per_deal"][0], *whole["per_deal"][1:]]
    with pytest.raises(SystemExit):  # the record's 4 deals would be cut to 2
        run(2, "grown.json")
    args = argparse.Namespace(
        seed=917, deals="validation", lost=0, forbid=True, prune=False, real=True, warm_lost=0
    )
    marked = whole["per_deal"][0] + 1.0
    for field, other in (("lost", 1), ("seed", 918), ("real", False), (None, None)):
        settings = strict._settings(args)
        if field is not None:
            settings[field] = other
        name = f"cut-{field}.json"  # a run cut off after one deal leaves its checkpoint
        atomic_write_json(
            tmp_path / f"{name}.partial",
            {"settings": settings, "results": [[marked, 0, 0.0, 0.0]]},
        )
        if field is not None:
            with pytest.raises(SystemExit):  # another run's checkpoint: kept, not reused
                run(4, name)
            assert (tmp_path / f"{name}.partial").exists()
        else:
            assert run(4, name)["per_deal"] == [marked, *whole["per_deal"][1:]]


def _twin(deck: np.ndarray, actions: list[int], S: Any) -> tuple[int, int, float]:
    """A real game's twin in the strict game: ``actions`` replayed on the reference engine, the
    twin keeping every numbered card drawn but a Rest's (lost, as ``W`` is told), with the
    strict search's penalties. ``(position the twin won at or 0, the real game's, Z)``."""
    from coldiron_env.actions import REST
    from coldiron_env.cards import FIRST_JOKER
    from coldiron_env.game import WON, Game

    game = Game([int(c) for c in deck])
    hand = gone = twin_at = 0
    total = 0.0
    z = bound.penalties(S)
    for action in actions:
        pos, turn, hurt, ctx = game.pos, game.turn, game.hurt, ctx_of(game)
        game.step(action)
        for drawn, card in enumerate(game.drawn):
            if twin_at:
                break
            xk = draw_of(action, ctx, drawn)
            total += z(pos, turn, hurt, action, xk, gone)
            pos += 1
            if card < FIRST_COURT and action == REST:
                gone |= 1 << int(card)
            elif card < FIRST_COURT:
                hand |= 1 << int(card)
                twin_at = pos if complete(hand) else 0
            elif DRAW_KINDS[xk] != DRAW_SAFE and card < FIRST_JOKER:
                hurt += 1
        if game.outcome is not None:
            break
    return twin_at, (game.pos if game.outcome == WON else 0), total


def test_real_games_have_strict_twins_that_win_no_later_and_score_below_the_bound() -> None:
    """End to end, on the reference engine: games of an honest player (``heuristic``), of a
    random one and of one that peeks at the next card (not honest, but a game the clairvoyant
    may play), replayed in the strict game (every Rest's card lost). The twin wins whenever
    the real game does, no later, and its ``R - Z`` is at most the deal's pruned bound."""
    from agents.players.roster import BUILTIN_AGENTS
    from coldiron_env.actions import BONUS, IRON, PHASE_BONUS, PHASE_IRON, REST, STOP, THREATEN
    from coldiron_env.game import Game
    from coldiron_env.knowledge import Knowledge

    strict = _strict_module()
    heuristic = BUILTIN_AGENTS["heuristic"]()
    heuristic.reset(seed=0)
    rng = np.random.default_rng(ZMEAN_SEED)

    def peek(game: Game) -> int:
        numbered = game.deck[game.pos] < FIRST_COURT
        if game.phase == PHASE_BONUS:
            return BONUS
        if game.phase == PHASE_IRON:
            return IRON if numbered and game.hurt < MAX_HURT - 1 else STOP
        if not numbered and game.hurt > 0:
            return REST
        return IRON if numbered and game.hurt < MAX_HURT - 2 else THREATEN

    players = {
        "heuristic": lambda g: int(heuristic.act_knowledge(Knowledge.from_game(g))),
        "random": lambda g: int(rng.choice(g.legal_actions())),
        "peek": peek,
    }
    real_wins = 0
    for dealt in validation_decks(TWIN_SEED, 2):
        deck = np.asarray(dealt)
        ceiling, _, _ = strict.pruned_bound(deck)
        state = _state(DealFacts.of(deck), STRICT)
        for name, choose in players.items():
            for _ in range(4 if name == "random" else 1):
                game, actions = Game([int(c) for c in deck]), []
                while game.outcome is None:
                    actions.append(choose(game))
                    game.step(actions[-1])
                twin_at, real_at, z = _twin(deck, actions, state)
                real_wins += bool(real_at)
                assert not real_at or 0 < twin_at <= real_at, (name, twin_at, real_at)
                assert float(twin_at > 0) - z <= ceiling + 1e-9, (name, z, ceiling)
    assert real_wins  # the twin's check was met by a won game


def _strict_reference(facts: DealFacts, start: Game, start_gone: int, S: Any) -> dict[int, float]:
    """Each legal action's value at ``start`` in the strict game (``R - Z`` of the best game
    that begins with it), independently of the search's moves: every legal action of the
    reference engine (``Game``: what each action draws, the Hurt, the turns, the phases), the
    twin keeping every numbered card drawn but a Rest's (lost), winning when its hand
    completes, with the search's penalties."""
    from coldiron_env.actions import LEGAL_ACTIONS, REST
    from coldiron_env.cards import FIRST_JOKER

    memo: dict[tuple[int, ...], float] = {}
    z = bound.penalties(S)

    def value(game: Game, gone: int) -> float:
        key = (game.pos, game.turn, game.hurt, game.phase, game.iron_count, game.bonus_source, gone)
        if key not in memo:
            memo[key] = max(action_values(game, gone).values())
        return memo[key]

    def action_values(game: Game, gone: int) -> dict[int, float]:
        out: dict[int, float] = {}
        for action in LEGAL_ACTIONS[game.phase]:
            child = game.clone()
            pos, turn, hurt, ctx = child.pos, child.turn, child.hurt, ctx_of(child)
            child.step(action)
            total, lost, won = 0.0, gone, False
            for drawn, card in enumerate(child.drawn):
                xk = draw_of(action, ctx, drawn)
                total -= z(pos, turn, hurt, action, xk, lost)
                pos += 1
                if card < FIRST_COURT and action == REST:
                    lost |= 1 << int(card)
                elif card < FIRST_COURT and complete(int(facts.hands[pos]) & ~lost):
                    won = True
                    break
                elif DRAW_KINDS[xk] != DRAW_SAFE and FIRST_COURT <= card < FIRST_JOKER:
                    hurt += 1
            if won:
                out[action] = total + 1.0
            elif child.outcome is not None:
                out[action] = total
            else:
                out[action] = total + value(child, lost)
        return out

    return action_values(start, start_gone)


def _search_action_values(game: Game, gone: int, S: Any) -> dict[int, float]:
    """Each legal action's value at ``game``'s decision point by the search's own moves
    (the calls its ``_solve`` makes for them), exact (no cut)."""
    pos, turn, hurt, ctx = game.pos, game.turn, game.hurt, ctx_of(game)
    return {
        action: bound._act(pos, turn, hurt, ctx, action, gone, bound.NO_CUT, S)
        for action in game.legal_actions()
    }


def _late_point(
    deck: np.ndarray, rng: np.random.Generator, want: int
) -> tuple[np.ndarray, Game, int] | None:
    """A game of ``deck`` played to a decision point from :data:`REFERENCE_TURN` on, with
    cards lost to Rests, then moved into the kind ``want``: 0 the start of a turn, 1 after
    an Iron application, 2 a Threaten's Joker bonus on offer, 3 an Iron's (a Joker still
    unseen swapped to the next position and courts to the bonus's draws after it: the past
    is unchanged). ``(deck, game, cards lost)``, or None where the game
    ended first."""
    from coldiron_env.actions import IRON, REST, THREATEN
    from coldiron_env.cards import FIRST_JOKER

    game, gone, actions = Game([int(c) for c in deck]), 0, []
    while game.outcome is None and not (game.turn >= REFERENCE_TURN and game.phase == PHASE_TURN):
        legal = game.legal_actions()
        u = rng.random()
        if THREATEN in legal and u < PREFIX_THREATEN:
            action = THREATEN
        elif REST in legal and u < PREFIX_REST:
            action = REST
        else:
            action = int(rng.choice([a for a in legal if not is_rack(a)]))
        pos = game.pos
        game.step(action)
        actions.append(action)
        if action == REST:
            gone |= sum(1 << int(c) for c in deck[pos : game.pos] if c < FIRST_COURT)
    if game.outcome is not None:
        return None
    if want >= 2:  # a Joker next and a court after it, the past unchanged
        jokers = [q for q in range(game.pos, DECK_SIZE) if deck[q] >= FIRST_JOKER]
        if not jokers:
            return None
        deck = _swapped(deck, game.pos, jokers[0])
        for k in range(1, BONUS_DRAWS + 1):  # the bonus's draws: courts (they hurt after Iron)
            courts = [
                q for q in range(game.pos + k, DECK_SIZE) if FIRST_COURT <= deck[q] < FIRST_JOKER
            ]
            if not courts:
                return None
            deck = _swapped(deck, game.pos + k, courts[0])
        game = Game([int(c) for c in deck])
        for action in actions:
            game.step(action)
        # a Hurt at which the bonus's courts matter (they hurt after the Iron, and slay at 6;
        # after a Threaten they must not): the engine's state set as the search's may be
        game.hurt = int(rng.integers(MAX_HURT - 3, MAX_HURT - (want == 3)))
    if want in (1, 3):
        game.step(IRON)
    elif want == 2:
        game.step(THREATEN)
    return None if game.outcome is not None else (deck, game, gone)


def test_the_strict_search_is_the_reference_engines_maximum_at_late_points() -> None:
    """The strict search's own moves (a Rest's card lost and its Hurt healed, the Iron, a
    Threaten's and an Iron's bonus, the racks, midnight) against the reference engine's, from
    late decision points of every kind in games with cards lost to Rests: every legal
    action's value, and so the exhaustive search's maximum, equals the reference's.
    (Mutations the other tests of this file let through fail it: a Rest that loses its card
    healing no Hurt; a Threaten's bonus whose court cards hurt.)"""
    rng = np.random.default_rng(REFERENCE_SEED)
    contexts: set[int] = set()
    lost_seen = 0
    for dealt in validation_decks(REFERENCE_DEALS_SEED, REFERENCE_DEALS):
        for k in range(REFERENCE_STATES):
            point = _late_point(np.asarray(dealt), rng, k % 4)
            if point is None:
                continue
            deck, game, gone = point
            facts = DealFacts.of(deck)
            if complete(int(facts.hands[game.pos]) & ~gone):
                continue
            ctx = ctx_of(game)
            want = _strict_reference(facts, game, gone, _state(facts, STRICT))
            got = _search_action_values(game, gone, _state(facts, STRICT))
            assert got.keys() == want.keys()
            for action, value in want.items():
                assert got[action] == pytest.approx(value, abs=1e-9), (game.pos, ctx, action)
            exact = bound._solve(
                game.pos, game.turn, game.hurt, ctx, gone, bound.NO_CUT, _state(facts, STRICT)
            )
            assert exact == pytest.approx(max(want.values()), abs=1e-9)
            contexts.add(ctx)
            lost_seen += gone != 0
    assert {CTX_TURN, CTX_TURN + 1, CTX_BONUS, CTX_BONUS + 1} <= contexts, contexts
    assert lost_seen >= REFERENCE_DEALS, lost_seen  # cards lost to Rests in the past
