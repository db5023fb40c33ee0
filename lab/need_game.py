"""The *need-known game*: a relaxation of Cold Iron small enough to solve exactly, whose
value gives the bound's ``W`` (lab/bound.py).

Three relaxations, each of which can only help the player:

1. **Every numbered card drawn is kept** (the bound's relaxed game): the hand is every
   numbered card seen, so the phrase completes at a deal's ``M*``-th numbered card,
   ``M*`` a property of the order of the numbered cards alone.
2. **A rack may end after any card** the player chooses (a court or a numbered card, the
   first card included), not only at a numbered card of the named rank or suit. A rack's
   court still costs 1 Hurt and its Joker still slays. Every rack of the real game is one
   of these stopping rules, so the player loses nothing, and which numbered card comes
   no longer matters to what happens.
3. **The player is told ``r = M* - m``**, how many more numbered cards complete the
   phrase (``m`` drawn so far). More information never hurts.

The order of the numbered cards is independent of where the numbered cards, courts and
Jokers fall, and after (2) nothing but ``r`` depends on it, so the game's state is the
counts drawn (numbered ``m``, courts ``c``, Jokers ``j``), the turn, the Hurt, the decision
point and ``r``: about 10^8 states, solved backwards in a few seconds
(:func:`solve_need_game`). Its value ``V(state, r)`` is at least the best honest win
chance of the relaxed game from any state whose remaining need is ``r``.

The bound's ``W`` is that value averaged over what a player knows of ``r``: with the hand
``H`` (``m`` numbered cards), ``P(r | H)`` is the chance that ``r`` more numbered cards at
random complete the phrase and ``r - 1`` do not (:func:`lab.bound.completion_curve`):

    W(position) = sum over r of P(r | H) * V(position, r)

``W`` is derived from the rules alone, nothing fitted. It is a supersolution of the
relaxed game (no action is expected to raise it: ``V`` satisfies Bellman's equation with
the maximum inside the expectation over ``r``), so the bound is at most the mean of
``W`` at the start, and the clairvoyant's penalised maximum can only lower it.
"""

from __future__ import annotations

import functools
from typing import Final

import numpy as np
import numpy.typing as npt

from coldiron_env.batched import compiled
from coldiron_env.cards import (
    DECK_SIZE,
    NUM_JOKERS,
    NUM_NUMBERED,
    NUM_RANKS,
    NUM_SUITS,
    SUIT_FIELD_MASK,
)
from coldiron_env.judge import HAS_RUN, NUM_FIELDS
from coldiron_env.options import BONUS_DRAWS, IRON_APPLICATIONS_PER_TURN, MAX_HURT, STANDARD_TURNS

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

NUM_COURTS: Final = DECK_SIZE - NUM_NUMBERED - NUM_JOKERS
"""12 courts."""

# decision points of the need-known game (a "phase")
PH_TURN: Final = 0
"""Start of a turn."""
PH_IRON: Final = 0
"""``PH_IRON + a`` (a = 1, 2): after the a-th Iron application, apply again or stop."""
PH_IRON_BONUS_OFFER: Final = PH_IRON + IRON_APPLICATIONS_PER_TURN
"""``+ (a - 1)``: a Joker's bonus on offer after the a-th Iron application."""
PH_IRON_BONUS_DRAW: Final = PH_IRON_BONUS_OFFER + IRON_APPLICATIONS_PER_TURN
"""``+ (a - 1) * 3 + (b - 1)``: an Iron bonus with ``b`` draws left, after application a."""
PH_THREATEN_BONUS_OFFER: Final = PH_IRON_BONUS_DRAW + IRON_APPLICATIONS_PER_TURN * BONUS_DRAWS
PH_THREATEN_BONUS_DRAW: Final = PH_THREATEN_BONUS_OFFER + 1
"""``+ (b - 1)``: a Threaten's bonus with ``b`` draws left."""
PH_RACK: Final = PH_THREATEN_BONUS_DRAW + BONUS_DRAWS
"""Inside a rack, after a card: draw on or end the turn (relaxation 2)."""
NUM_PHASES: Final = PH_RACK + 1

MR_SIZE: Final = (NUM_NUMBERED + 1) * (NUM_NUMBERED + 2) // 2
"""Pairs (m, r) with ``r <= 40 - m``: numbered cards drawn and still needed."""
TURN_SLOTS: Final = STANDARD_TURNS + 2
"""Turns 1..24, and 25 (past midnight: every value 0)."""


# --------------------------------------------------------------------------- the need
CAPACITY_M: Final = NUM_NUMBERED + 1
"""Numbered cards still to be drawn (or needed): 0..40."""


def completion_table() -> F64:
    """``COMPLETIONS[held, j]``: how many ``j``-card subsets of a suit's ranks not in
    ``held`` complete a run with ``held`` (every rank not held is unseen in the relaxed
    game)."""
    out = np.zeros((NUM_FIELDS, NUM_RANKS + 1))
    for held in range(NUM_FIELDS):
        free = SUIT_FIELD_MASK & ~held
        sub = free
        while True:  # every subset of ``free``, the empty one last
            if HAS_RUN[held | sub]:
                out[held, bin(sub).count("1")] += 1
            if sub == 0:
                break
            sub = (sub - 1) & free
    return out


def binomial_table() -> F64:
    out = np.zeros((CAPACITY_M, CAPACITY_M))
    for n in range(CAPACITY_M):
        out[n, 0] = 1.0
        for k in range(1, n + 1):
            out[n, k] = out[n - 1, k - 1] + out[n - 1, k]
    return out


COMPLETIONS: Final = completion_table()
BINOMIAL: Final = binomial_table()


@compiled
def completion_curve(hand: int, out: F64) -> int:
    """``out[m]``: the chance that ``m`` numbered cards drawn at random from the unseen ones
    complete the phrase with ``hand`` (relaxed: every numbered card not held is unseen);
    returns how many numbered cards are unseen."""
    poly = np.zeros(CAPACITY_M)
    poly[0] = 1.0
    degree = 0
    for s in range(NUM_SUITS):
        held = (hand >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        free = NUM_RANKS
        h = held
        while h:
            h &= h - 1
            free -= 1
        new = np.zeros(CAPACITY_M)
        for a in range(degree + 1):
            if poly[a] == 0.0:
                continue
            for b in range(free + 1):
                new[a + b] += poly[a] * COMPLETIONS[held, b]
        poly = new
        degree += free
    for m in range(degree + 1):
        out[m] = poly[m] / BINOMIAL[degree, m]
    for m in range(degree + 1, CAPACITY_M):
        out[m] = out[degree]
    return degree


def mr_offsets() -> I64:
    """``OFFSET[m]``: the first (m, r) slot of ``m`` numbered cards drawn."""
    out = np.zeros(NUM_NUMBERED + 1, dtype=np.int64)
    for m in range(1, NUM_NUMBERED + 1):
        out[m] = out[m - 1] + (NUM_NUMBERED + 2 - m)
    return out


OFFSET: Final = mr_offsets()


@compiled
def _v(V: F32, turn: int, m: int, r: int, c: int, j: int, h: int, ph: int, off: I64) -> float:
    """A value of the table: 1 when the phrase is complete, 0 past midnight or when slain."""
    if r == 0:
        return 1.0
    if h >= MAX_HURT or turn > STANDARD_TURNS:
        return 0.0
    return float(V[turn, off[m] + r, c, j, h, ph])


@compiled
def _after_iron(
    V: F32, turn: int, m: int, r: int, c: int, j: int, h: int, a: int, off: I64
) -> float:
    """The position once the a-th application (its bonus included) is over."""
    if a < IRON_APPLICATIONS_PER_TURN:
        return _v(V, turn, m, r, c, j, h, PH_IRON + a, off)
    return _v(V, turn + 1, m, r, c, j, h, PH_TURN, off)


@compiled
def _iron_application(
    V: F32, turn: int, m: int, r: int, c: int, j: int, h: int, a: int, off: I64
) -> float:
    """Expected value of the a-th Iron application: a card, then 1 Hurt."""
    deck = DECK_SIZE - m - c - j
    total = 0.0
    if r == 1:
        total += NUM_NUMBERED - m  # the numbered card completes the phrase: no Hurt
    else:
        total += (NUM_NUMBERED - m) * _after_iron(V, turn, m + 1, r - 1, c, j, h + 1, a, off)
    total += (NUM_COURTS - c) * _after_iron(V, turn, m, r, c + 1, j, h + 1, a, off)
    if j < NUM_JOKERS and h + 1 < MAX_HURT:
        offer = PH_IRON_BONUS_OFFER + a - 1
        total += (NUM_JOKERS - j) * _v(V, turn, m, r, c, j + 1, h + 1, offer, off)
    return total / deck


@compiled
def solve_need_game(V: F32, off: I64) -> None:
    """Fill ``V[turn, off[m] + r, c, j, hurt, phase]`` backwards from midnight."""
    for turn in range(STANDARD_TURNS, 0, -1):
        for n in range(DECK_SIZE, -1, -1):
            for j in range(min(NUM_JOKERS, n) + 1):
                for c in range(min(NUM_COURTS, n - j) + 1):
                    m = n - c - j
                    if m > NUM_NUMBERED:
                        continue
                    deck = DECK_SIZE - n
                    for h in range(MAX_HURT):
                        for r in range(1, NUM_NUMBERED - m + 1):
                            _solve_state(V, turn, m, r, c, j, h, deck, off)


@compiled
def _solve_state(
    V: F32, turn: int, m: int, r: int, c: int, j: int, h: int, deck: int, off: I64
) -> None:
    base = off[m] + r
    pn = NUM_NUMBERED - m
    pc = NUM_COURTS - c
    pj = NUM_JOKERS - j
    end_turn = _v(V, turn + 1, m, r, c, j, h, PH_TURN, off)
    # after the a-th application: again, or stop
    for a in range(1, IRON_APPLICATIONS_PER_TURN):
        again = _iron_application(V, turn, m, r, c, j, h, a + 1, off)
        V[turn, base, c, j, h, PH_IRON + a] = max(end_turn, again)
    # an Iron bonus with b draws left (courts hurt; a Joker does nothing more)
    for a in range(1, IRON_APPLICATIONS_PER_TURN + 1):
        for b in range(1, BONUS_DRAWS + 1):
            total = 0.0
            if b > 1:
                ph = iron_bonus_draw_c(a, b - 1)
                total += pn * (1.0 if r == 1 else _v(V, turn, m + 1, r - 1, c, j, h, ph, off))
                total += pc * _v(V, turn, m, r, c + 1, j, h + 1, ph, off)
                total += pj * _v(V, turn, m, r, c, j + 1, h, ph, off)
            else:
                total += pn * (
                    1.0 if r == 1 else _after_iron(V, turn, m + 1, r - 1, c, j, h, a, off)
                )
                total += pc * (
                    0.0
                    if h + 1 >= MAX_HURT
                    else _after_iron(V, turn, m, r, c + 1, j, h + 1, a, off)
                )
                total += pj * _after_iron(V, turn, m, r, c, j + 1, h, a, off)
            V[turn, base, c, j, h, iron_bonus_draw_c(a, b)] = total / deck
    for a in range(1, IRON_APPLICATIONS_PER_TURN + 1):
        decline = _after_iron(V, turn, m, r, c, j, h, a, off)
        take = float(V[turn, base, c, j, h, iron_bonus_draw_c(a, BONUS_DRAWS)])
        V[turn, base, c, j, h, PH_IRON_BONUS_OFFER + a - 1] = max(decline, take)
    # a Threaten's bonus with b draws left (nothing hurts)
    for b in range(1, BONUS_DRAWS + 1):
        ph = PH_THREATEN_BONUS_DRAW + b - 2 if b > 1 else -1
        if ph >= 0:
            total = pn * (1.0 if r == 1 else _v(V, turn, m + 1, r - 1, c, j, h, ph, off))
            total += pc * _v(V, turn, m, r, c + 1, j, h, ph, off)
            total += pj * _v(V, turn, m, r, c, j + 1, h, ph, off)
        else:
            total = pn * (1.0 if r == 1 else _v(V, turn + 1, m + 1, r - 1, c, j, h, PH_TURN, off))
            total += pc * _v(V, turn + 1, m, r, c + 1, j, h, PH_TURN, off)
            total += pj * _v(V, turn + 1, m, r, c, j + 1, h, PH_TURN, off)
        V[turn, base, c, j, h, PH_THREATEN_BONUS_DRAW + b - 1] = total / deck
    take = float(V[turn, base, c, j, h, PH_THREATEN_BONUS_DRAW + BONUS_DRAWS - 1])
    V[turn, base, c, j, h, PH_THREATEN_BONUS_OFFER] = max(end_turn, take)
    # a rack's next card (a court hurts, a Joker slays), then draw on or end the turn
    rack = pn * (1.0 if r == 1 else _v(V, turn, m + 1, r - 1, c, j, h, PH_RACK, off))
    rack += pc * _v(V, turn, m, r, c + 1, j, h + 1, PH_RACK, off)
    rack /= deck
    V[turn, base, c, j, h, PH_RACK] = max(end_turn, rack)
    # the start of a turn
    threaten = pn * (1.0 if r == 1 else _v(V, turn + 1, m + 1, r - 1, c, j, h, PH_TURN, off))
    threaten += pc * _v(V, turn + 1, m, r, c + 1, j, h, PH_TURN, off)
    threaten += pj * _v(V, turn, m, r, c, j + 1, h, PH_THREATEN_BONUS_OFFER, off)
    threaten /= deck
    rest_h = max(h - 1, 0)
    rest = pn * (1.0 if r == 1 else _v(V, turn + 1, m + 1, r - 1, c, j, rest_h, PH_TURN, off))
    rest += pc * _v(V, turn + 1, m, r, c + 1, j, rest_h, PH_TURN, off)
    rest += pj * _v(V, turn + 1, m, r, c, j + 1, rest_h, PH_TURN, off)
    rest /= deck
    iron = _iron_application(V, turn, m, r, c, j, h, 1, off)
    V[turn, base, c, j, h, PH_TURN] = max(threaten, rest, iron, rack)


@compiled
def iron_bonus_draw_c(a: int, b: int) -> int:
    return PH_IRON_BONUS_DRAW + (a - 1) * BONUS_DRAWS + (b - 1)


@functools.cache
def need_game_values() -> F32:
    """The solved table (built once per process: about 420 MB, a few seconds)."""
    V = np.zeros(
        (TURN_SLOTS, MR_SIZE, NUM_COURTS + 1, NUM_JOKERS + 1, MAX_HURT, NUM_PHASES),
        dtype=np.float32,
    )
    solve_need_game(V, OFFSET)
    return V


# --------------------------------------------------------------------------- W's penalties
# What kind of draw a card is drawn in (the bound's search knows): the position just after
# the card depends on it.
XK_THREATEN: Final = 0
XK_REST: Final = 1
XK_IRON: Final = 1
"""``XK_IRON + a`` (a = 1..3): the a-th Iron application's card."""
XK_THREATEN_BONUS: Final = XK_IRON + IRON_APPLICATIONS_PER_TURN + 1
"""``+ (b - 1)``: a Threaten's bonus card with ``b`` draws left before it."""
XK_IRON_BONUS: Final = XK_THREATEN_BONUS + BONUS_DRAWS
"""``+ (a - 1) * 3 + (b - 1)``: an Iron bonus card, after application a, ``b`` draws left."""
XK_RACK: Final = XK_IRON_BONUS + IRON_APPLICATIONS_PER_TURN * BONUS_DRAWS
"""A rack's card: the position after it is the rack's decision point of the need-known
game whether or not the card ends the rack (a valid ``W`` either way, and at least the
value of the turn's end, so still a supersolution)."""
NUM_XK: Final = XK_RACK + 1

CARD_NUMBERED: Final = 0
CARD_COURT: Final = 1
CARD_JOKER: Final = 2


@compiled
def after_value(
    V: F32,
    off: I64,
    card: int,
    r: int,
    m: int,
    c: int,
    j: int,
    turn: int,
    h: int,
    xk: int,
) -> float:
    """The need-known value just after a card of type ``card`` is drawn in a draw ``xk``
    from the position (``m``, ``c``, ``j`` drawn, ``turn``, Hurt ``h``) before it, with
    ``r`` numbered cards still needed after it."""
    if card == CARD_NUMBERED:
        m += 1
    elif card == CARD_COURT:
        c += 1
    else:
        j += 1
    if r == 0:
        return 1.0
    if xk == XK_THREATEN:
        if card == CARD_JOKER:
            return _v(V, turn, m, r, c, j, h, PH_THREATEN_BONUS_OFFER, off)
        return _v(V, turn + 1, m, r, c, j, h, PH_TURN, off)
    if xk == XK_REST:
        return _v(V, turn + 1, m, r, c, j, max(h - 1, 0), PH_TURN, off)
    if xk < XK_THREATEN_BONUS:
        a = xk - XK_IRON
        if card == CARD_JOKER:
            return _v(V, turn, m, r, c, j, h + 1, PH_IRON_BONUS_OFFER + a - 1, off)
        return _after_iron(V, turn, m, r, c, j, h + 1, a, off)
    if xk < XK_IRON_BONUS:
        b = xk - XK_THREATEN_BONUS + 1
        if b > 1:
            return _v(V, turn, m, r, c, j, h, PH_THREATEN_BONUS_DRAW + b - 2, off)
        return _v(V, turn + 1, m, r, c, j, h, PH_TURN, off)
    if xk < XK_RACK:
        q = xk - XK_IRON_BONUS
        a = q // BONUS_DRAWS + 1
        b = q % BONUS_DRAWS + 1
        if card == CARD_COURT:
            h += 1
        if b > 1:
            return _v(V, turn, m, r, c, j, h, iron_bonus_draw_c(a, b - 1), off)
        return _after_iron(V, turn, m, r, c, j, h, a, off)
    if card == CARD_JOKER:
        return 0.0  # a rack's Joker slays
    if card == CARD_COURT:
        h += 1
    return _v(V, turn, m, r, c, j, h, PH_RACK, off)


@compiled
def realized_after(
    V: F32, off: I64, post_after: F64, card: int, m: int, c: int, j: int, turn: int, h: int, xk: int
) -> float:
    """``W`` just after the card drawn: ``post_after`` is ``P(r | the hand after it)``."""
    total = 0.0
    for r in range(post_after.shape[0]):
        p = post_after[r]
        if p > 0.0:
            total += p * after_value(V, off, card, r, m, c, j, turn, h, xk)
    return total


@compiled
def expected_after_need(
    V: F32, off: I64, post: F64, m: int, c: int, j: int, turn: int, h: int, xk: int
) -> float:
    """``E[W(after the next card)]``: the card is numbered, a court or a Joker in
    proportion to the unseen counts. The position after a numbered card does not depend on
    which, and given the hand the need after a random unseen numbered card is the need now
    less one, so no sum over the cards is needed: ``post`` is ``P(r | hand)``."""
    deck = DECK_SIZE - m - c - j
    courts = NUM_COURTS - c
    jokers = NUM_JOKERS - j
    total = 0.0
    for r in range(1, post.shape[0]):
        p = post[r]
        if p > 0.0:
            total += (
                (NUM_NUMBERED - m)
                * p
                * after_value(V, off, CARD_NUMBERED, r - 1, m, c, j, turn, h, xk)
            )
            if courts > 0:
                total += courts * p * after_value(V, off, CARD_COURT, r, m, c, j, turn, h, xk)
            if jokers > 0:
                total += jokers * p * after_value(V, off, CARD_JOKER, r, m, c, j, turn, h, xk)
    return total / deck


def start_value() -> float:
    """``W`` at the start of every deal: the need-known value averaged over the need of
    the empty hand (the bound is at most this on every deal)."""
    curve = np.zeros(CAPACITY_M)
    completion_curve(0, curve)
    post = np.diff(curve, prepend=0.0)
    V = need_game_values()
    first = 1
    return float(
        sum(post[r] * V[first, OFFSET[0] + r, 0, 0, 0, PH_TURN] for r in range(1, CAPACITY_M))
    )
