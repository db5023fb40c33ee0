"""Simple players of the relaxed game (every numbered card drawn is kept): how often they win.

    .venv/bin/python -m lab.experiments.relaxed_players --json lab/records/relaxed_players.json

A lower bound on the relaxed game's best honest value, hence on how low the bound of
lab/bound.py can go (lab/docs/bound.md); and the same players in the strict
relaxed game, where a Rest's card is lost as in the real game. Validation deals of seed 907.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from agents.atomic import atomic_write_json
from agents.evaluation.arena import validation_decks
from agents.evaluation.stats import wilson_interval
from coldiron_env.actions import BONUS, IRON, RACK_RANK_FIRST, RACK_SUIT_FIRST, REST, STOP, THREATEN
from coldiron_env.cards import NUM_NUMBERED, NUM_RANKS
from lab.relaxed import (
    CTX_BONUS,
    CTX_TURN,
    P_CTX,
    P_HURT,
    P_TURN,
    P_UNSEEN,
    PLAYING,
    RELAXED,
    STRICT,
    WON,
    advance,
    start_position,
)

Policy = Callable[[int, int], str]
IRON_STOP_HURT = 4
ACTIONS = {"threaten": THREATEN, "iron": IRON, "rest": REST}


def rack_action(unseen: int, rack_by: str) -> int:
    """The rack of the suit (or rank) with the fewest unseen numbered cards (the first such
    group met going up the unseen cards)."""
    key: Callable[[int], int] = (
        (lambda c: c // NUM_RANKS) if rack_by == "suit" else (lambda c: c % NUM_RANKS)
    )
    groups: dict[int, list[int]] = {}
    for c in range(NUM_NUMBERED):
        if (unseen >> c) & 1:
            groups.setdefault(key(c), []).append(c)
    if not groups:  # every numbered card drawn: a rack that never ends
        return RACK_SUIT_FIRST
    group = min(groups, key=lambda g: len(groups[g]))
    return (RACK_SUIT_FIRST if rack_by == "suit" else RACK_RANK_FIRST) + group


def play(deck: np.ndarray, policy: Policy, rack_by: str, rest_keeps: bool = True) -> bool:
    """One relaxed game (the rules of :mod:`lab.relaxed`): ``policy(hurt, turn)`` says
    threaten, iron, rest or rack; a rack names the suit (or rank) with the fewest unseen
    numbered cards, so it draws far; the Iron is applied again until Hurt
    ``IRON_STOP_HURT``. Every Joker's bonus is taken. ``rest_keeps=False``: a Rest's card
    is lost (the strict game)."""
    cards = np.asarray(deck, dtype=np.int64)
    keeping = (RELAXED if rest_keeps else STRICT).packed()
    position = start_position(cards)
    pos, outcome = 0, PLAYING
    while outcome == PLAYING:
        ctx = int(position[P_CTX])
        if ctx >= CTX_BONUS:
            action = BONUS
        elif ctx > CTX_TURN:  # after an Iron application
            action = STOP if position[P_HURT] >= IRON_STOP_HURT else IRON
        else:
            choice = policy(int(position[P_HURT]), int(position[P_TURN]))
            action = ACTIONS.get(choice, -1)
            if choice == "rack":
                action = rack_action(int(position[P_UNSEEN]), rack_by)
        outcome, drawn = advance(cards, pos, position, action, keeping)
        pos += int(drawn)
    return bool(outcome == WON)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3000)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    decks = validation_decks(907, args.episodes)
    players: dict[str, tuple[Policy, str]] = {
        "Threaten every turn": (lambda h, t: "threaten", "suit"),
        "three Irons while Hurt <= 2, Rest from Hurt 4": (
            lambda h, t: "iron" if h <= 2 else ("rest" if h >= 4 else "threaten"), "suit"),
        "rack the rarest suit while Hurt <= 1, else as above": (
            lambda h, t: "rack" if h <= 1 else ("iron" if h <= 2 else ("rest" if h >= 4
                                                                        else "threaten")), "suit"),
        "rack the rarest rank at Hurt 0, else as above": (
            lambda h, t: "rack" if h == 0 else ("iron" if h <= 2 else ("rest" if h >= 4
                                                                       else "threaten")), "rank"),
        "Irons while Hurt <= 1 (to Hurt 4), else Rest": (
            lambda h, t: "iron" if h <= 1 else "rest", "suit"),
        "rack the rarest suit while Hurt <= 2, else Threaten": (
            lambda h, t: "rack" if h <= 2 else "threaten", "suit"),
    }  # fmt: skip
    rows = []
    for name, (policy, rack_by) in players.items():
        row = [name]
        for keeps in (True, False):
            wins = sum(play(d, policy, rack_by, keeps) for d in decks)
            low, high = wilson_interval(wins, len(decks))
            row.append(f"{100 * wins / len(decks):.2f}% [{100 * low:.2f}%, {100 * high:.2f}%]")
        rows.append(row)
        print(rows[-1], flush=True)
    atomic_write_json(args.json, {
        "command": ".venv/bin/python -m lab.experiments.relaxed_players "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "header": ["player", "relaxed game: won [95%]", "strict relaxed game (a Rest's card lost)"],
        "rows": rows,
        "source": f"{args.episodes} validation deals of seed 907, "
        "`lab/experiments/relaxed_players.py`",
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
