"""How well an honest player can do in the strict relaxed game: a floor under its bound.

    .venv/bin/python -m lab.experiments.strict_players --episodes 2000 --samples 1000 \
        --json lab/records/strict_players.json

The bound of lab/docs/bound.md is computed on the *strict relaxed game* (a rack keeps every
numbered card it draws; a Rest's card is lost as in the real game). Every honest player of
the real game has a twin there that wins whenever it wins, so the strict game's best honest
win rate ``V`` lies between the real game's and the bound; and no ``W``, however good,
can take an information-relaxation bound *on the strict game* below ``V``. So a strong
honest player of the strict game is a floor under every bound that game can give: if it
wins more than one half, the strict game cannot give the bound below one half that
issue 19 asks for.

Two honest players of the strict game, each a function of what it has seen only:

- ``base``: Rest from Hurt ``rest_at``; once ``rack_jokers`` Jokers are seen, rack the
  suit (or rank) with the fewest unseen numbered cards (the longest rack: every numbered
  card it passes is kept) while Hurt <= ``rack_while``; else the Iron while Hurt <=
  ``iron_while`` (applied up to three times, stopping at ``iron_stop``); else Threaten.
  Its parameters are chosen (``--tune-seed``) on validation deals of a seed of their own.
- ``rollout``: at every turn, each of 19 whole-turn choices (Threaten, Iron 1-3 times,
  rack each suit, rack each rank, Rest) is scored by ``--samples`` orders of the unseen
  cards (the same orders for every choice), each played out by ``base``; the best is
  played. The orders are drawn from the cards the player has not seen, so it is honest.

The deals are validation deals (seed 907 by default, as relaxed_players.py), never the
report seed's. Standard rules; a Joker's bonus is always taken.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from agents.atomic import atomic_write_json
from agents.evaluation.arena import validation_decks
from agents.evaluation.stats import wilson_interval
from coldiron_env.batched import compiled_uncached
from coldiron_env.cards import (
    DECK_SIZE,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_RANKS,
    NUM_SUITS,
)
from coldiron_env.judge import HAS_RUN
from coldiron_env.options import BONUS_DRAWS, IRON_APPLICATIONS_PER_TURN, MAX_HURT, STANDARD_TURNS

I8 = npt.NDArray[np.int8]
PERCENT: Final = 100

HAS_RUN_ARRAY: Final = np.array(HAS_RUN, dtype=np.bool_)
SUIT_MASK: Final = (1 << NUM_RANKS) - 1

# Whole-turn choices (the rollout player's candidates).
C_THREATEN: Final = 0
C_IRON_FIRST: Final = 1  # Iron applied 1, 2 or 3 times: C_IRON_FIRST + k - 1
C_RACK_SUIT_FIRST: Final = C_IRON_FIRST + IRON_APPLICATIONS_PER_TURN
C_RACK_RANK_FIRST: Final = C_RACK_SUIT_FIRST + NUM_SUITS
C_REST: Final = C_RACK_RANK_FIRST + NUM_RANKS
NUM_CHOICES: Final = C_REST + 1

# What a turn leaves: still playing, won, lost.
PLAYING: Final = 0
WON: Final = 1
LOST: Final = 2

# base's parameters, an int64 array (chosen on other validation seeds: --tune).
P_REST_AT: Final = 0  # Rest from this Hurt
P_IRON_WHILE: Final = 1  # Iron (three times, stopping at P_IRON_STOP) while Hurt <= this
P_RACK_WHILE: Final = 2  # rack while Hurt <= this ...
P_RACK_JOKERS: Final = 3  # ... once at least this many Jokers are seen
P_IRON_STOP: Final = 4  # no further application from this Hurt
P_RACK_BY_RANK: Final = 5  # 1: rack the rank with the fewest unseen numbered cards
P_LATE_TURN: Final = 6  # from this turn on, rack while Hurt <= P_RACK_WHILE_LATE instead
P_RACK_WHILE_LATE: Final = 7
DEFAULT_PARAMS: Final = (4, 2, 1, 0, 4, 0, 25, 1)
TUNING_GRID: Final = (  # base's parameters tried by --tune-seed, in the order of PARAM_NAMES
    (4, 5, MAX_HURT),  # MAX_HURT: never Rest
    (-1, 0, 1, 2),
    (0, 1, 2, 3),
    (0, 1),
    (4, 5),
    (0, 1),
    (14, 16, 18, 20, 22),
    (3, 4, 5),
)
PARAM_NAMES: Final = (
    "rest_at",
    "iron_while",
    "rack_while",
    "rack_jokers",
    "iron_stop",
    "rack_by_rank",
    "late_turn",
    "rack_while_late",
)


@compiled_uncached
def _complete(hand: np.int64, has_run: Any) -> bool:
    for s in range(NUM_SUITS):
        if not has_run[(hand >> (NUM_RANKS * s)) & SUIT_MASK]:
            return False
    return True


@compiled_uncached
def _matches(card: int, choice: int) -> bool:
    """``card`` (numbered) ends the rack ``choice``: of the named suit, or of the named rank."""
    if choice < C_RACK_RANK_FIRST:
        return card // NUM_RANKS == choice - C_RACK_SUIT_FIRST
    return card % NUM_RANKS == choice - C_RACK_RANK_FIRST


@compiled_uncached
def _turn(deck: Any, state: Any, choice: int, has_run: Any, params: Any) -> int:
    """Play one whole-turn ``choice`` of the strict game; ``state`` is
    ``[pos, hurt, hand, jokers seen]`` (int64), updated in place."""
    pos, hurt, hand = state[0], state[1], state[2]
    result = PLAYING
    if choice in (C_THREATEN, C_REST):
        card = deck[pos]
        pos += 1
        if choice == C_REST:
            hurt = max(hurt - 1, 0)
            if card >= FIRST_JOKER:
                state[3] += 1
        elif card < FIRST_COURT:
            hand |= np.int64(1) << card
        elif card >= FIRST_JOKER:
            state[3] += 1
            for _ in range(BONUS_DRAWS):
                if _complete(hand, has_run) or pos >= DECK_SIZE:
                    break
                bonus = deck[pos]
                pos += 1
                if bonus < FIRST_COURT:
                    hand |= np.int64(1) << bonus
                elif bonus >= FIRST_JOKER:
                    state[3] += 1
        if _complete(hand, has_run):
            result = WON
        elif pos >= DECK_SIZE:
            result = LOST
    elif choice < C_RACK_SUIT_FIRST:  # Iron, applied up to k times
        applications = choice - C_IRON_FIRST + 1
        for k in range(applications):
            if k > 0 and hurt >= params[P_IRON_STOP]:
                break
            card = deck[pos]
            pos += 1
            if card < FIRST_COURT:
                hand |= np.int64(1) << card
            if _complete(hand, has_run):
                result = WON
                break
            if pos >= DECK_SIZE:
                result = LOST
                break
            hurt += 1
            if hurt >= MAX_HURT:
                result = LOST
                break
            if card >= FIRST_JOKER:
                state[3] += 1
                for _ in range(BONUS_DRAWS):
                    bonus = deck[pos]
                    pos += 1
                    if bonus < FIRST_COURT:
                        hand |= np.int64(1) << bonus
                    elif bonus < FIRST_JOKER:
                        hurt += 1
                    else:
                        state[3] += 1
                    if _complete(hand, has_run):
                        result = WON
                        break
                    if pos >= DECK_SIZE or hurt >= MAX_HURT:
                        result = LOST
                        break
                if result != PLAYING:
                    break
    else:  # a rack: every numbered card drawn is kept (the strict game), until a match
        while True:
            card = deck[pos]
            pos += 1
            if card >= FIRST_JOKER:
                state[3] += 1
                result = LOST
                break
            if card < FIRST_COURT:
                hand |= np.int64(1) << card
                if _complete(hand, has_run):
                    result = WON
                    break
                if pos >= DECK_SIZE:
                    result = LOST
                    break
                if _matches(card, choice):
                    break
            else:
                if pos >= DECK_SIZE:
                    result = LOST
                    break
                hurt += 1
                if hurt >= MAX_HURT:
                    result = LOST
                    break
    state[0], state[1], state[2] = pos, hurt, hand
    return result


@compiled_uncached
def _base_choice(deck: Any, state: Any, params: Any, turn: int) -> int:
    """``base``'s whole-turn choice, from what it has seen (the cards before ``pos``)."""
    hurt = state[1]
    if hurt >= params[P_REST_AT]:
        return C_REST
    rack_while = params[P_RACK_WHILE_LATE] if turn >= params[P_LATE_TURN] else params[P_RACK_WHILE]
    if hurt <= rack_while and state[3] >= params[P_RACK_JOKERS]:
        by_rank = params[P_RACK_BY_RANK] == 1
        groups = NUM_RANKS if by_rank else NUM_SUITS
        unseen = np.zeros(NUM_RANKS, np.int64)
        for i in range(state[0], DECK_SIZE):
            if deck[i] < FIRST_COURT:  # counts only: the order is not used
                unseen[deck[i] % NUM_RANKS if by_rank else deck[i] // NUM_RANKS] += 1
        best, fewest = -1, 99
        for g in range(groups):
            if 0 < unseen[g] < fewest:
                best, fewest = g, unseen[g]
        if best >= 0:
            return (C_RACK_RANK_FIRST if by_rank else C_RACK_SUIT_FIRST) + best
    if hurt <= params[P_IRON_WHILE]:
        return C_IRON_FIRST + IRON_APPLICATIONS_PER_TURN - 1
    return C_THREATEN


@compiled_uncached
def _play_out(deck: Any, state: Any, turn: int, first: int, has_run: Any, params: Any) -> bool:
    """Play ``first`` at ``turn`` (or base's choice if negative), then base to the end."""
    for t in range(turn, STANDARD_TURNS + 1):
        choice = first if (t == turn and first >= 0) else _base_choice(deck, state, params, t)
        result = _turn(deck, state, choice, has_run, params)
        if result != PLAYING:
            return bool(result == WON)
    return False


@compiled_uncached
def _legal(choice: int, deck: Any, state: Any) -> bool:
    if choice < C_RACK_SUIT_FIRST or choice == C_REST:
        return True
    # A rack whose target is all seen draws to the end (it may still win here, every
    # numbered card being kept): left out, which can only weaken the players.
    for i in range(state[0], DECK_SIZE):
        if deck[i] < FIRST_COURT and _matches(deck[i], choice):
            return True
    return False


@compiled_uncached
def _play_rollout(
    deck: Any, samples: int, seed: int, has_run: Any, params: Any, choices: Any
) -> bool:
    """The rollout player on one deal: each turn, every choice scored on the same
    ``samples`` orders of the unseen cards (the unseen set, sorted, then shuffled: the
    deal's own order is never used), then played; ``choices[turn - 1]`` records it."""
    np.random.seed(seed)
    state = np.zeros(4, np.int64)
    scratch = np.empty(4, np.int64)
    sampled = deck.copy()
    orders = np.empty((samples, DECK_SIZE), np.int8)
    for turn in range(1, STANDARD_TURNS + 1):
        pos = state[0]
        for k in range(samples):
            orders[k, :] = deck
            tail = np.sort(orders[k, pos:])
            np.random.shuffle(tail)
            orders[k, pos:] = tail
        best, best_wins = C_THREATEN, -1
        for choice in range(NUM_CHOICES):
            if not _legal(choice, deck, state):
                continue
            wins = 0
            for k in range(samples):
                sampled[:] = orders[k]
                scratch[:] = state
                if _play_out(sampled, scratch, turn, choice, has_run, params):
                    wins += 1
            if wins > best_wins:
                best, best_wins = choice, wins
        choices[turn - 1] = best
        result = _turn(deck, state, best, has_run, params)
        if result != PLAYING:
            return bool(result == WON)
    return False


def play_base(deck: I8, params: npt.NDArray[np.int64]) -> bool:
    state = np.zeros(4, np.int64)
    return bool(_play_out(deck.astype(np.int8), state, 1, -1, HAS_RUN_ARRAY, params))


def play_rollout(
    deck: I8, samples: int, seed: int, params: npt.NDArray[np.int64]
) -> tuple[bool, list[int]]:
    """The rollout player's game on ``deck``: won, and its whole-turn choices in order."""
    choices = np.full(STANDARD_TURNS, -1, np.int64)
    won = bool(_play_rollout(deck.astype(np.int8), samples, seed, HAS_RUN_ARRAY, params, choices))
    return won, [int(c) for c in choices if c >= 0]


def _rollout_chunk(args: tuple[I8, int, int, npt.NDArray[np.int64]]) -> list[bool]:
    decks, samples, seed, params = args
    return [play_rollout(d, samples, seed + i, params)[0] for i, d in enumerate(decks)]


def play_turn(
    deck: I8, state: npt.NDArray[np.int64], choice: int, params: npt.NDArray[np.int64]
) -> int:
    """One whole-turn ``choice`` of the strict game (``PLAYING``, ``WON`` or ``LOST``)."""
    return int(_turn(deck.astype(np.int8), state, choice, HAS_RUN_ARRAY, params))


def _tune_chunk(args: tuple[I8, list[tuple[int, ...]]]) -> tuple[int, tuple[int, ...]]:
    decks, grid = args
    return max((sum(play_base(d, np.array(p, np.int64)) for d in decks), p) for p in grid)


def tune(seed: int, episodes: int, workers: int) -> tuple[int, ...]:
    """base's parameters with the most wins on ``episodes`` validation deals of ``seed``."""
    decks = validation_decks(seed, episodes)
    grid = list(itertools.product(*TUNING_GRID))
    jobs = [(decks, grid[k::workers]) for k in range(workers)]
    with ProcessPoolExecutor(workers) as pool:
        best = max(pool.map(_tune_chunk, jobs))
    print(f"tuned on {episodes} validation deals of seed {seed}: {best}", flush=True)
    return best[1]


def _row(name: str, wins: int, n: int, seconds: float) -> dict[str, Any]:
    low, high = wilson_interval(wins, n)
    return {
        "player": name,
        "deals": n,
        "won": wins,
        "win_rate": wins / n,
        "ci_low": low,
        "ci_high": high,
        "seconds": round(seconds, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--base-episodes", type=int, default=10000)
    parser.add_argument("--samples", type=int, default=96)
    parser.add_argument("--seed", type=int, default=907, help="validation seed of the deals")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--tune-seed", type=int, default=908, help="validation seed to tune base on"
    )
    parser.add_argument("--tune-episodes", type=int, default=2000)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.tune_seed == args.seed:
        parser.error("--tune-seed must differ from --seed: base is chosen on other deals")
    params = np.array(tune(args.tune_seed, args.tune_episodes, args.workers), np.int64)
    rows = []
    started = time.perf_counter()
    decks = validation_decks(args.seed, args.base_episodes)
    wins = sum(play_base(d, params) for d in decks)
    rows.append(_row("base", wins, len(decks), time.perf_counter() - started))
    print(rows[-1], flush=True)
    started = time.perf_counter()
    decks = decks[: args.episodes]
    chunks = np.array_split(np.arange(len(decks)), args.workers * 4)
    jobs = [(decks[c], args.samples, int(c[0]), params) for c in chunks if len(c)]
    with ProcessPoolExecutor(args.workers) as pool:
        results = [r for chunk in pool.map(_rollout_chunk, jobs) for r in chunk]
    rows.append(
        _row(f"rollout over base, {args.samples} orders", sum(results), len(results),
             time.perf_counter() - started)
    )  # fmt: skip
    print(rows[-1], flush=True)
    atomic_write_json(
        args.json,
        {
            "command": ".venv/bin/python -m lab.experiments.strict_players "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "header": ["honest player of the strict relaxed game", "deals", "won [95%]",
                       f"seconds on {args.workers} processes"],
            "rows": [
                [row["player"], f"{row['deals']:,}",
                 f"{PERCENT * row['win_rate']:.2f}% [{PERCENT * row['ci_low']:.2f}%, "
                 f"{PERCENT * row['ci_high']:.2f}%]", f"{row['seconds']:,.0f}"]
                for row in rows
            ],
            "source": f"validation deals of seed {args.seed}, base's parameters "
            f"{dict(zip(PARAM_NAMES, params.tolist(), strict=True))} chosen on "
            f"{args.tune_episodes:,} validation deals of seed {args.tune_seed}, "
            "`lab/experiments/strict_players.py`",
            "players": rows,
        },
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
