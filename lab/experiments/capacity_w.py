"""A capacity ``W`` for the bound: how many numbered cards a player still draws, by context.

    .venv/bin/python -m lab.experiments.capacity_w --deals 40000 \\
        --out docs/records/bound_w_capacity.json

In the relaxed game every numbered card drawn is kept, so a position's win chance is
``P(the phrase completes within the numbered cards still to be drawn)``. This writes the
value model ``W = sum over m of q[context, m] * P(m more numbered cards complete the
phrase)`` (``lab.bound.capacity_value``), with ``q[context, m]`` the share of
positions of that context (turns left, Hurt, Jokers unseen) from which a simple drawing
policy drew ``m`` more numbered cards before midnight, death or the deck's end (playing on
past a completed phrase). The deals are the fitting stream's (``bound_fit.fit_decks``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from coldiron_env.cards import FIRST_COURT, FIRST_JOKER, NUM_JOKERS, NUM_NUMBERED, NUM_RANKS
from coldiron_env.options import MAX_HURT, STANDARD_TURNS
from lab.bound import (
    CAPACITY_CTX,
    CAPACITY_JOKERS,
    ValueModel,
    capacity_index,
)
from lab.bound_fit import FIT_SEED, fit_decks
from lab.need_game import CAPACITY_M

RACK_HURT = 1
IRON_HURT = 2
REST_HURT = 4
BONUS_DRAWS = 3
MIN_SAMPLES = 30


def play(
    deck: np.ndarray,
    records: list[tuple[int, int]],
    first_turn: int = 1,
    first_hurt: int = 0,
    first_pos: int = 0,
) -> int:
    """One relaxed game of the drawing policy, never stopping at a win: rack the suit with
    the fewest unseen numbered cards while Hurt <= 1, three Irons while Hurt <= 2, Rest
    from Hurt 4, else Threaten (taking a Joker's bonus). Appends ``(context, numbered
    drawn so far)`` after every card; returns the numbered cards drawn in all."""
    pos, hurt, numbered, jokers, drawn = first_pos, first_hurt, 0, NUM_JOKERS, 0
    for card in deck[:first_pos]:
        drawn |= 1 << int(card)
        jokers -= int(card >= FIRST_JOKER)
    n = len(deck)

    def draw(turn: int, hurts: bool, rack: bool) -> int:
        """The next card; -1 when the game ends with it (slain or deck out)."""
        nonlocal pos, hurt, numbered, jokers, drawn
        card = int(deck[pos])
        pos += 1
        drawn |= 1 << card
        if card < FIRST_COURT:
            numbered += 1
        elif card < FIRST_JOKER:
            if hurts:
                hurt += 1
        else:
            jokers -= 1
        dead = hurt >= MAX_HURT or (rack and card >= FIRST_JOKER)
        if not dead:
            records.append((capacity_index(STANDARD_TURNS - turn + 1, hurt, jokers), numbered))
        return -1 if dead or pos >= n else card

    for turn in range(first_turn, STANDARD_TURNS + 1):
        if hurt <= RACK_HURT:
            unseen = [c for c in range(NUM_NUMBERED) if not (drawn >> c) & 1]
            if unseen:
                counts: dict[int, list[int]] = {}
                for c in unseen:
                    counts.setdefault(c // NUM_RANKS, []).append(c)
                fewest: list[int] = min(counts.values(), key=len)
                targets = set(fewest)
                while True:
                    card = draw(turn, True, True)
                    if card < 0:
                        return numbered
                    if card in targets:
                        break
                continue
        if hurt <= IRON_HURT:
            for _ in range(3):
                card = draw(turn, False, False)
                if card < 0:
                    return numbered
                hurt += 1
                if hurt >= MAX_HURT:
                    return numbered
                if card >= FIRST_JOKER:
                    for _ in range(BONUS_DRAWS):
                        if draw(turn, True, False) < 0:
                            return numbered
            continue
        card = draw(turn, False, False)
        if card < 0:
            return numbered
        if hurt >= REST_HURT:
            hurt -= 1
        elif card >= FIRST_JOKER:
            for _ in range(BONUS_DRAWS):
                if draw(turn, False, False) < 0:
                    return numbered
    return numbered


CARDS_PER_TURN = (1.0, 3.0)
"""Random starts: cards already drawn per turn already played, uniform in this range."""


def fit(decks: np.ndarray, seed: int = FIT_SEED) -> tuple[np.ndarray, dict[str, int]]:
    """``q`` from games of the drawing policy, half from the start, half from a random turn,
    Hurt and number of cards already drawn (so every context is visited)."""
    counts = np.zeros((CAPACITY_CTX, CAPACITY_M))
    rng = np.random.default_rng(seed)
    for k, deck in enumerate(decks):
        records: list[tuple[int, int]] = []
        if k % 2 == 0:
            total = play(deck, records)
        else:
            turn = int(rng.integers(1, STANDARD_TURNS + 1))
            hurt = int(rng.integers(0, MAX_HURT))
            per_turn = rng.uniform(*CARDS_PER_TURN)
            first = min(int(per_turn * (turn - 1)), len(deck) - 1)
            total = play(deck, records, turn, hurt, first)
        for ctx, so_far in records:
            counts[ctx, total - so_far] += 1
    seen = counts.sum(axis=1)
    q = np.zeros_like(counts)
    backed_off = 0
    # contexts with too few samples borrow their (turns left, Hurt) neighbours' counts
    by_turn_hurt = counts.reshape(-1, CAPACITY_JOKERS, CAPACITY_M).sum(axis=1)
    for ctx in range(CAPACITY_CTX):
        row = counts[ctx]
        if seen[ctx] < MIN_SAMPLES:
            row = by_turn_hurt[ctx // CAPACITY_JOKERS]
            backed_off += 1
        if row.sum() > 0:
            q[ctx] = row / row.sum()
    return q, {"contexts_seen": int((seen > 0).sum()), "backed_off": backed_off}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deals", type=int, default=20000)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    q, stats = fit(fit_decks(args.deals))
    model = ValueModel(
        q.reshape(-1),
        name="capacity: a drawing policy's numbered cards to come x the completion chance",
        meta={
            "command": ".venv/bin/python -m lab.experiments.capacity_w "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "deals": f"{args.deals} fitting deals (SEARCH stream, seed {FIT_SEED})",
            "seconds": round(time.perf_counter() - start, 1),
            **stats,
        },
    )
    model.save(args.out)
    print(f"wrote {args.out}: {stats}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
