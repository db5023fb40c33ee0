"""The experiment's search of the strict relaxed game (scripts/experiments/strict_bound.py):
with no Rest card lost it is the relaxed game, so it must give the bound's own search's
result deal by deal (two searches written apart: hash maps and a lost-card set against
arrays); with one card lost the search carries it, so it visits more states; the pruned
search (``W`` a supersolution cuts subtrees) finds the same maximum, and a window above
the warm start gives a bound within the window."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load_file

from agents.evaluation.arena import validation_decks
from agents.evaluation.bound import RACK_MASKS, DealFacts, ValueModel, deal_bound
from agents.gitinfo import REPO_ROOT
from coldiron_env.cards import DECK_SIZE, FIRST_COURT, NUM_NUMBERED

pytestmark = pytest.mark.slow
WINDOW = 0.05
RACK_TURN = 5


def test_the_strict_search_against_the_bounds_and_itself() -> None:
    strict = load_file(REPO_ROOT / "scripts" / "experiments" / "strict_bound.py", "strict_bound")
    model = ValueModel.need_game()
    for deck in validation_decks(914, 2):
        value, states = strict.strict_deal_bound(deck, 0)
        assert value == pytest.approx(deal_bound(deck, model), abs=1e-9)
        exact, more = strict.strict_deal_bound(deck, 1)
        assert more > states  # a lost card is carried in the search's state
        pruned, fewer = strict.strict_deal_bound(deck, 1, prune=True)
        assert pruned == pytest.approx(exact, abs=1e-9)  # the cuts keep the maximum
        assert fewer < more
        bound, _ = strict.strict_deal_bound(deck, 1, prune=True, window=WINDOW)
        assert exact - 1e-9 <= bound <= exact + WINDOW + 1e-9


def test_a_real_racks_penalty_has_mean_zero_over_the_next_card() -> None:
    """``--real``: a rack's numbered card is kept if it matches, else lost; the penalty's
    expectation must follow. Swapping the card at ``pos`` with each later card draws every
    unseen card once, with the same past, so the penalties' mean is exactly zero (checked
    by hand: a rack whose expectation keeps the wrong cards fails it)."""
    strict = load_file(REPO_ROOT / "scripts" / "experiments" / "strict_bound.py", "strict_bound")
    deck = np.asarray(validation_decks(915, 1)[0])
    distinct = False
    for pos, rack in ((6, 1), (15, 9)):
        gone = next(  # a numbered card an earlier rack lost
            1 << int(card)
            for card in deck[:pos]
            if card < FIRST_COURT and not (RACK_MASKS[rack - 1] >> int(card)) & 1
        )
        penalties = {}
        for real in (True, False):
            z = []
            for q in range(pos, DECK_SIZE):
                swapped = deck.copy()
                swapped[pos], swapped[q] = swapped[q], swapped[pos]
                state = strict._state(DealFacts.of(swapped), NUM_NUMBERED, False, real=real)
                z.append(strict._z(pos, RACK_TURN, 1, strict.XK_RACK, gone, rack, state))
            assert np.mean(z) == pytest.approx(0.0, abs=1e-12)
            penalties[real] = z
        distinct = distinct or not np.allclose(penalties[True], penalties[False])
    assert distinct  # the real game's racks are penalised as such
