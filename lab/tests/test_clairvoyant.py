"""Watching the clairvoyant solver (``lab/clairvoyant.py``): its line is played on the
product's Game and wins; a deal no order of play wins is said to be so."""

from __future__ import annotations

import pytest

from coldiron_env.cards import CARD_CODES, DECK_SIZE, NUM_SUITS, numbered_id
from lab import clairvoyant, solver

RUN_TOP = [numbered_id(s, r) for s in range(NUM_SUITS) for r in (1, 2, 3)]
WIN_DECK = [CARD_CODES[c] for c in RUN_TOP + [c for c in range(DECK_SIZE) if c not in RUN_TOP]]


def test_the_clairvoyant_is_watched_winning_a_deal_it_solves(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert clairvoyant.main(["--deck", " ".join(WIN_DECK)]) == 0
    shown = capsys.readouterr().out
    moves = shown.count("clairvoyant plays:")
    assert moves > 0 and f"wins this deal in {moves} moves" in shown
    assert shown.rstrip().endswith("Game over: won")


def test_a_deal_the_seed_deals_is_the_one_play_py_deals() -> None:
    """``--seed S`` deals stream S's first deal, as ``scripts/play.py --seed S`` does."""
    from coldiron_env.env import ColdIronEnv

    env = ColdIronEnv()
    env.reset(seed=11)
    assert clairvoyant.deck_of(11, None) == list(env.game.deck)
    assert clairvoyant.deck_of(12, None) != list(env.game.deck)


def test_a_deal_no_order_of_play_wins_is_said_to_be_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """None among 2,000 deals is unwinnable: the solver's verdict is forced here."""
    lost = solver.Solution(solver.UNWINNABLE, (), 7)
    monkeypatch.setattr(clairvoyant, "solve_deck", lambda *_args, **_kw: lost)
    assert clairvoyant.main(["--seed", "3"]) == 0
    shown = capsys.readouterr().out
    assert "no order of play wins this deal (7 positions searched)" in shown
    assert "plays:" not in shown
