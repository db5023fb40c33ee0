"""Simple players of the relaxed game (every numbered card drawn is kept): how often they win.

    .venv/bin/python scripts/experiments/relaxed_players.py --json docs/records/relaxed_players.json

A lower bound on the relaxed game's best honest value, hence on how low the bound of
agents/evaluation/bound.py can go (docs/bound.md). Validation deals of seed 907.
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


def play(deck: np.ndarray, policy: Policy, rack_by: str) -> bool:
    """One relaxed game: ``policy(hurt, turn)`` says threaten, iron, rest or rack; a rack
    names the suit (or rank) with the fewest unseen numbered cards, so it draws far."""
    pos, hurt, seen, drawn = 0, 0, 0, 0

    def draw() -> int:
        nonlocal pos, seen, drawn
        card = int(deck[pos])
        pos += 1
        drawn |= 1 << card
        if card < FIRST_COURT:
            seen |= 1 << card
        return card

    for turn in range(1, STANDARD_TURNS + 1):
        action = policy(hurt, turn)
        if action == "rack":
            unseen = [c for c in range(NUM_NUMBERED) if not (drawn >> c) & 1]
            key = (lambda c: c // NUM_RANKS) if rack_by == "suit" else (lambda c: c % NUM_RANKS)
            groups: dict[int, list[int]] = {}
            for c in unseen:
                groups.setdefault(key(c), []).append(c)
            targets = set(min(groups.values(), key=len)) if groups else set()
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
            card = draw()
            if complete(seen):
                return True
            if pos >= len(deck):
                return False
            if action == "iron":
                hurt += 1
                if hurt >= MAX_HURT:
                    return False
                if hurt >= IRON_STOP_HURT:
                    break
            if card >= FIRST_JOKER and action == "threaten":
                for _ in range(3):
                    draw()
                    if complete(seen):
                        return True
                    if pos >= len(deck):
                        return False
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
    }  # fmt: skip
    rows = []
    for name, (policy, rack_by) in players.items():
        wins = sum(play(d, policy, rack_by) for d in decks)
        low, high = wilson_interval(wins, len(decks))
        interval = f"[{100 * low:.2f}%, {100 * high:.2f}%]"
        rows.append([name, f"{100 * wins / len(decks):.2f}%", interval])
        print(rows[-1], flush=True)
    atomic_write_json(args.json, {
        "command": ".venv/bin/python scripts/experiments/relaxed_players.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "header": ["player of the relaxed game", "won", "95% interval"],
        "rows": rows,
        "source": f"{args.episodes} validation deals of seed 907, "
        "`scripts/experiments/relaxed_players.py`",
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
