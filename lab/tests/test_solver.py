"""The clairvoyant solver: it searches the engine's own moves, and its verdicts are exact."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import rule_variant_sets

from coldiron_env.actions import RACK_ACTIONS, REST, STOP, THREATEN
from coldiron_env.analysis import iron_extra_keeps
from coldiron_env.cards import (
    DECK_SIZE,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_SUITS,
    numbered_id,
    parse_deck,
)
from coldiron_env.dealer import shuffled_decks
from coldiron_env.game import Game
from coldiron_env.options import RuleOptions
from lab.solver import (
    UNKNOWN,
    UNWINNABLE,
    WINNABLE,
    ClairvoyantSolver,
    replay,
    solve_deck,
)

RUN_TOP = [numbered_id(s, r) for s in range(NUM_SUITS) for r in (1, 2, 3)]
COURTS = list(range(FIRST_COURT, FIRST_JOKER))
JOKERS = [FIRST_JOKER, FIRST_JOKER + 1]


def deck_with_top(top: list[int]) -> list[int]:
    """``top`` first, then every other card in id order."""
    rest = [c for c in range(DECK_SIZE) if c not in top]
    return top + rest


# ------------------------------------------------------------- transition
VARIANTS = [
    *(RuleOptions(**options) for options in rule_variant_sets()),
    RuleOptions(turns=6, suits_required=2),
]


def state(game: Game) -> tuple[int, ...]:
    return (
        game.pos, game.hand, game.discarded, game.hurt, game.turn, game.phase,
        game.iron_count, game.bonus_source, game.outcome or "",
    )  # fmt: skip


@pytest.mark.parametrize("rules", VARIANTS)
def test_searched_moves_are_the_engines_own_with_racks_deduplicated(rules: RuleOptions) -> None:
    """On thousands of states, the moves the solver tries reach exactly the states
    Game.step reaches from every legal action: racks that stop at the same card
    collapse to one, and nothing else is dropped or added."""
    rng = random.Random(1234)
    decks = shuffled_decks(np.random.default_rng(99), 60).tolist()
    checked = 0
    outcomes: set[str] = set()
    for index, deck in enumerate(decks):
        if index % 2:  # Jokers near the top so that bonuses occur often
            deck.remove(FIRST_JOKER)
            deck.insert(rng.randrange(3), FIRST_JOKER)
        solver = ClairvoyantSolver(deck, rules)
        # Walk a winning line when there is one (reaches late states), else random.
        line = list(solver.solve(max_nodes=2_000).actions) if index % 4 < 2 else []
        game = Game(deck, rules)
        while not game.over:
            every: dict[int, tuple[int, ...]] = {}
            for action in game.legal_actions():
                child = game.clone()
                child.step(action)
                every[action] = state(child)
                checked += 1
                if child.over:
                    assert child.outcome is not None
                    outcomes.add(child.outcome)
            searched = solver.actions(game)
            assert len(set(searched)) == len(searched)
            assert set(searched) <= set(every)
            alive = [a for a in searched if a in RACK_ACTIONS and every[a][-1] in ("", "won")]
            assert len({every[a] for a in alive}) == len(alive), "two searched racks coincide"
            reached = {every[a] for a in searched}
            for action, child_state in every.items():
                lost_anyway = child_state[-1] not in ("", "won")
                assert child_state in reached or lost_anyway, (deck, action)
            if line:
                action = line.pop(0)
            else:
                legal = game.legal_actions()
                weights = [8 if a in (THREATEN, REST, STOP) else 3 for a in legal]
                action = rng.choices(legal, weights)[0]
            game.step(action)
    assert checked >= 3000
    assert {"won", "slain"} <= outcomes


# ------------------------------------------------------------- known decks
def test_twelve_run_cards_on_top_is_winnable_by_threatening() -> None:
    deck = deck_with_top(RUN_TOP)
    assert replay(deck, [THREATEN] * 12).won  # the premise
    solution = solve_deck(deck)
    assert solution.verdict == WINNABLE
    game = replay(deck, solution.actions)
    assert game.won
    assert len(solution.actions) <= 12


def test_win_that_needs_a_rack_is_found_and_replays() -> None:
    """Courts on top, then junk, then the phrase deep in the deck: threatening all
    24 turns cannot reach it, so the solver must rack (or iron) its way there."""
    junk = [c for c in range(FIRST_COURT) if c not in RUN_TOP]
    deck = COURTS[:5] + junk[:20] + RUN_TOP + COURTS[5:] + JOKERS + junk[20:]
    threaten_only = Game(deck)
    while not threaten_only.over:
        threaten_only.step(STOP if threaten_only.phase_name == "bonus" else THREATEN)
    assert not threaten_only.won
    solution = solve_deck(deck)
    assert solution.verdict == WINNABLE
    assert replay(deck, solution.actions).won
    assert any(a not in (THREATEN, STOP) for a in solution.actions)


def test_courts_wall_in_two_turns_is_unwinnable() -> None:
    """Provably lost: 12 courts on top and two turns. Without a rack at most six
    cards are drawn in two turns (three Iron applications each; Threaten and Rest
    draw one), all courts; a rack from position p <= 6 passes 12 - p >= 6 courts
    and is slain. So no numbered card is ever kept."""
    rules = RuleOptions(turns=2, suits_required=1)
    deck = COURTS + list(range(FIRST_COURT)) + JOKERS
    solution = solve_deck(deck, rules)
    assert solution.verdict == UNWINNABLE
    assert brute_force_winnable(deck, rules) is False


def test_one_turn_can_never_hold_the_phrase() -> None:
    """Provably lost on any deck: one turn keeps at most three Iron cards plus three
    per Joker bonus (a Joker drawn costs one of the draws): 1 + 3 + 3 = 7 < 12."""
    rules = RuleOptions(turns=1)
    for deck in shuffled_decks(np.random.default_rng(3), 5).tolist():
        assert solve_deck(deck, rules).verdict == UNWINNABLE
    # Even the friendliest deck.
    assert solve_deck(deck_with_top(RUN_TOP), rules).verdict == UNWINNABLE


def test_turn_two_phrase_on_top_is_winnable_by_iron() -> None:
    """Two turns are enough when the run cards lie on top: Iron x3 keeps three a turn."""
    rules = RuleOptions(turns=2, suits_required=2)
    deck = deck_with_top(RUN_TOP)
    solution = solve_deck(deck, rules)
    assert solution.verdict == WINNABLE
    assert replay(deck, solution.actions, rules).won


def test_solution_replays_on_random_deals() -> None:
    for deck in shuffled_decks(np.random.default_rng(5), 15).tolist():
        solution = solve_deck(deck)
        assert solution.verdict in (WINNABLE, UNWINNABLE)
        if solution.winnable:
            game = replay(deck, solution.actions)
            assert game.won
            assert game.steps == len(solution.actions)


def test_node_budget_gives_unknown() -> None:
    deck = shuffled_decks(np.random.default_rng(7), 1).tolist()[0]
    assert ClairvoyantSolver(deck).solve(max_nodes=1).verdict == UNKNOWN


def test_bad_deck_is_refused() -> None:
    with pytest.raises(ValueError, match="permutation"):
        ClairvoyantSolver([0] * DECK_SIZE)
    with pytest.raises(ValueError, match="deck position 0"):
        ClairvoyantSolver(parse_deck(["ZZ"] + ["AH"] * 53))


def test_iron_extra_keeps_table() -> None:
    # k applications keep k cards for k Hurt: k - 1 beyond a free one-card turn.
    assert [iron_extra_keeps(b) for b in range(7)] == [0, 0, 1, 2, 2, 3, 4]
    assert iron_extra_keeps(-2) == 0


# ------------------------------------------------------------- exactness
def brute_force_winnable(deck: list[int], rules: RuleOptions) -> bool:
    """Independent check: plain DFS over engine clones, exact-state memo, no pruning."""
    lost: set[tuple[int, ...]] = set()

    def key(g: Game) -> tuple[int, ...]:
        return (g.pos, g.hand, g.hurt, g.turn, g.phase, g.iron_count, g.bonus_source)

    def win(g: Game) -> bool:
        if g.over:
            return g.won
        k = key(g)
        if k in lost:
            return False
        for action in g.legal_actions():
            child = g.clone()
            child.step(action)
            if win(child):
                return True
        lost.add(k)
        return False

    return win(Game(deck, rules))


def test_verdicts_agree_with_brute_force_on_short_games() -> None:
    """Pruning (canonical hand, dominance memo, keep bound) never changes a verdict."""
    verdicts: list[bool] = []
    for turns, suits, count in ((3, 1, 10), (4, 1, 10), (5, 1, 6), (5, 2, 4)):
        rules = RuleOptions(turns=turns, suits_required=suits)
        seed = turns * 10 + suits
        for deck in shuffled_decks(np.random.default_rng(seed), count).tolist():
            solved = solve_deck(deck, rules)
            assert solved.verdict != UNKNOWN
            assert solved.winnable == brute_force_winnable(deck, rules), (turns, suits, deck)
            verdicts.append(solved.winnable)
    assert len(verdicts) == 30
    assert any(verdicts)
    assert not all(verdicts)  # both verdicts were checked
