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
from coldiron_env.cards import FIRST_COURT, FIRST_JOKER, NUM_NUMBERED, NUM_RANKS, NUM_SUITS
from coldiron_env.judge import HAS_RUN
from coldiron_env.options import MAX_HURT, STANDARD_TURNS

Policy = Callable[[int, int], str]
IRON_STOP_HURT = 4


def complete(seen: int) -> bool:
    return all(HAS_RUN[(seen >> (NUM_RANKS * s)) & 1023] for s in range(NUM_SUITS))


def play(deck: np.ndarray, policy: Policy, rack_by: str, rest_keeps: bool = True) -> bool:
    """One relaxed game: ``policy(hurt, turn)`` says threaten, iron, rest or rack; a rack
    names the suit (or rank) with the fewest unseen numbered cards, so it draws far. Every
    Joker's bonus is taken. ``rest_keeps=False``: a Rest's card is lost (the strict game)."""
    pos, hurt, seen, drawn = 0, 0, 0, 0

    def draw(keep: bool = True) -> int:
        nonlocal pos, seen, drawn
        card = int(deck[pos])
        pos += 1
        drawn |= 1 << card
        if card < FIRST_COURT and keep:
            seen |= 1 << card
        return card

    for turn in range(1, STANDARD_TURNS + 1):
        action = policy(hurt, turn)
        if action == "rack":
            unseen = [c for c in range(NUM_NUMBERED) if not (drawn >> c) & 1]
            key: Callable[[int], int] = (
                (lambda c: c // NUM_RANKS) if rack_by == "suit" else (lambda c: c % NUM_RANKS)
            )
            groups: dict[int, list[int]] = {}
            for c in unseen:
                groups.setdefault(key(c), []).append(c)
            fewest: list[int] = min(groups.values(), key=len) if groups else []
            targets = set(fewest)
            while True:
                card = draw()
                if complete(seen):
                    return True
                if pos >= len(deck) or card >= FIRST_JOKER:
                    return False
                if card in targets:
                    break
                if card >= FIRST_COURT:
                    hurt += 1
                    if hurt >= MAX_HURT:
                        return False
            continue
        applications = 3 if action == "iron" else 1
        for _ in range(applications):
            card = draw(action != "rest" or rest_keeps)
            if complete(seen):
                return True
            if pos >= len(deck):
                return False
            if action == "iron":
                hurt += 1
                if hurt >= MAX_HURT:
                    return False
            if card >= FIRST_JOKER and action != "rest":
                for _ in range(3):
                    bonus = draw()
                    if complete(seen):
                        return True
                    if pos >= len(deck):
                        return False
                    if action == "iron" and FIRST_COURT <= bonus < FIRST_JOKER:
                        hurt += 1
                        if hurt >= MAX_HURT:
                            return False
            if action == "iron" and hurt >= IRON_STOP_HURT:
                break
        if action == "rest":
            hurt = max(hurt - 1, 0)
    return False


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
