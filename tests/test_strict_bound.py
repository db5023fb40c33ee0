"""The experiment's search of the strict relaxed game (scripts/experiments/strict_bound.py):
with no Rest card lost it is the relaxed game, so it must give the bound's own search's
result deal by deal (two searches written apart: hash maps and a lost-card set against
arrays); with one card lost the search carries it, so it visits more states; the pruned
search (``W`` a supersolution cuts subtrees) finds the same maximum, and a window above
the warm start gives a bound within the window."""

from __future__ import annotations

import pytest
from helpers import load_file

from agents.evaluation.arena import validation_decks
from agents.evaluation.bound import ValueModel, deal_bound
from agents.gitinfo import REPO_ROOT

pytestmark = pytest.mark.slow
WINDOW = 0.05


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
