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
random complete the phrase and ``r - 1`` do not (:func:`completion_curve`):

    W(position) = sum over r of P(r | H) * V(position, r)

``W`` is derived from the rules alone, nothing fitted. It is a supersolution of the
relaxed game (no action is expected to raise it: ``V`` satisfies Bellman's equation with
the maximum inside the expectation over ``r``), so the bound is at most the mean of
``W`` at the start, and the clairvoyant's penalised maximum can only lower it.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from coldiron_env.actions import BONUS
from coldiron_env.batched import compiled, compiled_uncached
from coldiron_env.cards import (
    DECK_SIZE,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_JOKERS,
    NUM_NUMBERED,
    NUM_RANKS,
    NUM_SUITS,
    SUIT_FIELD_MASK,
)
from coldiron_env.judge import HAS_RUN, NUM_FIELDS
from coldiron_env.options import BONUS_DRAWS, IRON_APPLICATIONS_PER_TURN, MAX_HURT, STANDARD_TURNS
from lab.relaxed import (
    CTX_BONUS,
    CTX_TURN,
    DRAW_ON,
    DRAWS,
    END_TURN,
    NUM_CTX,
    NUM_XK,
    SLAIN,
    XK_IRON,
    XK_IRON_BONUS,
    XK_RACK,
    XK_REST,
    XK_THREATEN,
    XK_THREATEN_BONUS,
    after_stop,
    card_step,
    draw_of,
)

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
def _v(V: F32, turn: int, m: int, r: int, c: int, j: int, h: int, ph: int) -> float:
    """A value of the table: 1 when the phrase is complete, 0 past midnight or when slain."""
    if r == 0:
        return 1.0
    if h >= MAX_HURT or turn > STANDARD_TURNS:
        return 0.0
    return float(V[turn, OFFSET[m] + r, c, j, h, ph])


@compiled
def phase_of(ctx: int) -> int:
    """The phase of the relaxed game's decision point ``ctx``."""
    if ctx < CTX_BONUS:
        return PH_IRON + ctx - CTX_TURN  # PH_TURN at the turn's start
    if ctx == CTX_BONUS:
        return PH_THREATEN_BONUS_OFFER
    return PH_IRON_BONUS_OFFER + ctx - CTX_BONUS - 1


def draw_phase(xk: int) -> int:
    """The phase of a bonus's draw ``xk`` about to be made."""
    if xk < XK_IRON_BONUS:
        return PH_THREATEN_BONUS_DRAW + xk - XK_THREATEN_BONUS
    return PH_IRON_BONUS_DRAW + xk - XK_IRON_BONUS


CARD_NUMBERED: Final = 0
CARD_COURT: Final = 1
CARD_JOKER: Final = 2
CARD_OF_TYPE: Final = (0, FIRST_COURT, FIRST_JOKER)
"""A card of each type, for the rules (which numbered card does not matter here)."""
STEP_HURT: Final = 0
STEP_TURNS: Final = 1
STEP_PHASE: Final = 2


def need_steps() -> I64:
    """``STEPS[xk, card type, hurt]``: where a card of that type drawn in the draw ``xk``
    at that Hurt leads in this game: the Hurt after it, the turns it moves on (0 or 1) and
    the phase (-1: it slays). These are the relaxed game's rules
    (:func:`lab.relaxed.card_step`), but that a rack's card leads to the rack's phase
    whether or not it ends the rack (relaxation 2: a valid ``W`` either way, and at least
    the value of the turn's end, so still a supersolution)."""
    out = np.zeros((NUM_XK, len(CARD_OF_TYPE), MAX_HURT, 3), dtype=np.int64)
    for action, ctx, drawn in DRAWS:  # the tables are built with the rules' Python
        xk = draw_of.py_func(action, ctx, drawn)
        for kind, card in enumerate(CARD_OF_TYPE):
            for hurt in range(MAX_HURT):
                after, follows = card_step.py_func(action, ctx, drawn, card, hurt)
                turns, phase = 0, PH_RACK
                if follows == SLAIN:
                    phase = -1
                elif xk == XK_RACK:
                    pass
                elif follows == DRAW_ON:
                    phase = draw_phase(draw_of.py_func(action, ctx, drawn + 1))
                elif follows == END_TURN:
                    turns, phase = 1, PH_TURN
                else:
                    phase = phase_of.py_func(follows)
                out[xk, kind, hurt] = (after, turns, phase)
    return out


STEPS: Final = need_steps()


# The rules are the relaxed game's (STEPS, from lab/relaxed.py, is frozen in when these
# compile): compiled afresh in each process, never from numba's cache of this file alone.
@compiled_uncached
def after_value(
    V: F32,
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
    ``r`` numbered cards still needed after it (:data:`STEPS`)."""
    if card == CARD_NUMBERED:
        m += 1
    elif card == CARD_COURT:
        c += 1
    else:
        j += 1
    if r == 0:
        return 1.0
    phase = STEPS[xk, card, h, STEP_PHASE]
    if phase < 0:
        return 0.0
    turn += STEPS[xk, card, h, STEP_TURNS]
    return _v(V, turn, m, r, c, j, STEPS[xk, card, h, STEP_HURT], phase)


@compiled_uncached
def _draw_value(V: F32, turn: int, m: int, r: int, c: int, j: int, h: int, xk: int) -> float:
    """The expected value after the next card of a draw ``xk`` (a numbered card, a court or
    a Joker in proportion to the unseen counts), the need ``r`` known: a numbered card
    lowers it by one."""
    deck = DECK_SIZE - m - c - j
    total = (NUM_NUMBERED - m) * after_value(V, CARD_NUMBERED, r - 1, m, c, j, turn, h, xk)
    if c < NUM_COURTS:
        total += (NUM_COURTS - c) * after_value(V, CARD_COURT, r, m, c, j, turn, h, xk)
    if j < NUM_JOKERS:
        total += (NUM_JOKERS - j) * after_value(V, CARD_JOKER, r, m, c, j, turn, h, xk)
    return total / deck


@compiled_uncached
def solve_need_game(V: F32) -> None:
    """Fill ``V[turn, OFFSET[m] + r, c, j, hurt, phase]`` backwards from midnight."""
    draws = np.zeros(NUM_XK)
    for turn in range(STANDARD_TURNS, 0, -1):
        for n in range(DECK_SIZE, -1, -1):
            for j in range(min(NUM_JOKERS, n) + 1):
                for c in range(min(NUM_COURTS, n - j) + 1):
                    m = n - c - j
                    if m > NUM_NUMBERED:
                        continue
                    for h in range(MAX_HURT):
                        for r in range(1, NUM_NUMBERED - m + 1):
                            _solve_state(V, turn, m, r, c, j, h, draws)


def _offers() -> I64:
    """A row per bonus on offer (``CTX_BONUS`` and after): its phase, the phase Stop (decline)
    leads to (-1: the turn's end) and the phase of the bonus's first draw (take)."""
    rows = []
    for ctx in range(CTX_BONUS, NUM_CTX):
        follows = after_stop.py_func(ctx)
        decline = -1 if follows == END_TURN else phase_of.py_func(follows)
        rows.append((phase_of.py_func(ctx), decline, draw_phase(draw_of.py_func(BONUS, ctx, 0))))
    return np.array(rows, dtype=np.int64)


OFFERS: Final = _offers()
DRAW_PHASES: Final = np.array(
    [draw_phase(xk) if XK_THREATEN_BONUS <= xk < XK_RACK else -1 for xk in range(NUM_XK)],
    dtype=np.int64,
)
"""``DRAW_PHASES[xk]``: the phase of a bonus's draw ``xk`` about to be made (-1: no bonus's)."""


@compiled_uncached
def _solve_state(V: F32, turn: int, m: int, r: int, c: int, j: int, h: int, draws: F64) -> None:
    """Every phase of one state: each draw's expected value (:func:`_draw_value`, which reads
    later states only), then each phase's best choice."""
    base = OFFSET[m] + r
    for xk in range(NUM_XK):
        draws[xk] = _draw_value(V, turn, m, r, c, j, h, xk)
    end_turn = _v(V, turn + 1, m, r, c, j, h, PH_TURN)
    for a in range(1, IRON_APPLICATIONS_PER_TURN):  # after the a-th application: again, or stop
        V[turn, base, c, j, h, PH_IRON + a] = max(end_turn, draws[XK_IRON + a + 1])
    for xk in range(XK_THREATEN_BONUS, XK_RACK):  # a bonus's draw about to be made
        V[turn, base, c, j, h, DRAW_PHASES[xk]] = draws[xk]
    for k in range(OFFERS.shape[0]):  # a bonus on offer: decline (Stop), or take it
        stop = end_turn if OFFERS[k, 1] < 0 else float(V[turn, base, c, j, h, OFFERS[k, 1]])
        take = float(V[turn, base, c, j, h, OFFERS[k, 2]])
        V[turn, base, c, j, h, OFFERS[k, 0]] = max(stop, take)
    # a rack's next card (a court hurts, a Joker slays), then draw on or end the turn
    V[turn, base, c, j, h, PH_RACK] = max(end_turn, draws[XK_RACK])
    # the start of a turn
    threaten, rest, iron = (
        draws[XK_THREATEN],
        draws[XK_REST],
        draws[XK_IRON + 1],
    )
    V[turn, base, c, j, h, PH_TURN] = max(threaten, rest, iron, draws[XK_RACK])


@functools.cache
def need_game_values() -> F32:
    """The solved table (built once per process: about 420 MB, a few seconds)."""
    V = np.zeros(
        (TURN_SLOTS, MR_SIZE, NUM_COURTS + 1, NUM_JOKERS + 1, MAX_HURT, NUM_PHASES),
        dtype=np.float32,
    )
    solve_need_game(V)
    return V


# --------------------------------------------------------------------------- W's penalties
@compiled_uncached
def realized_after(
    V: F32, post_after: F64, card: int, m: int, c: int, j: int, turn: int, h: int, xk: int
) -> float:
    """``W`` just after the card drawn: ``post_after`` is ``P(r | the hand after it)``."""
    total = 0.0
    for r in range(post_after.shape[0]):
        p = post_after[r]
        if p > 0.0:
            total += p * after_value(V, card, r, m, c, j, turn, h, xk)
    return total


@compiled_uncached
def expected_sum(
    V: F32, post: F64, m: int, c: int, j: int, turn: int, h: int, xk: int, kept: bool
) -> float:
    """The sum over the unseen cards of ``W`` just after each: ``E[W(after the next card)]``
    times the cards unseen. The card is numbered, a court or a Joker in proportion to the
    unseen counts; the position after a numbered card does not depend on which, and given
    the hand the need after a random unseen numbered card is the need now less one, so no
    sum over the cards is needed: ``post`` is ``P(r | hand)``. With ``kept`` False the
    numbered cards' term is left out, for the caller to sum card by card (a lost card's
    need is not the need less one)."""
    courts = NUM_COURTS - c
    jokers = NUM_JOKERS - j
    total = 0.0
    for r in range(post.shape[0]):
        p = post[r]
        if p > 0.0:
            if kept and r >= 1:
                total += (
                    (NUM_NUMBERED - m)
                    * p
                    * after_value(V, CARD_NUMBERED, r - 1, m, c, j, turn, h, xk)
                )
            if courts > 0:
                total += courts * p * after_value(V, CARD_COURT, r, m, c, j, turn, h, xk)
            if jokers > 0:
                total += jokers * p * after_value(V, CARD_JOKER, r, m, c, j, turn, h, xk)
    return total


@compiled_uncached
def expected_after_need(
    V: F32, post: F64, m: int, c: int, j: int, turn: int, h: int, xk: int
) -> float:
    """``E[W(after the next card)]``, every numbered card kept (:func:`expected_sum`)."""
    return expected_sum(V, post, m, c, j, turn, h, xk, True) / (DECK_SIZE - m - c - j)


# --------------------------------------------------------------------------- P(r | what is seen)
@compiled
def _fill_completions(has_run: Any, out: F32) -> None:
    for held in range(NUM_FIELDS):
        free = SUIT_FIELD_MASK & ~held
        unseen = free
        while True:  # every subset of the ranks not held, as the unseen set
            sub = unseen
            while True:  # every subset of the unseen ranks, the empty one last
                if has_run[held | sub]:
                    count = 0
                    s = sub
                    while s:
                        s &= s - 1
                        count += 1
                    out[held, unseen, count] += 1.0
                if sub == 0:
                    break
                sub = (sub - 1) & unseen
            if unseen == 0:
                break
            unseen = (unseen - 1) & free


@functools.cache
def completions_with_unseen() -> F32:
    """``C[held, unseen, j]``: how many ``j``-card subsets of a suit's ``unseen`` ranks
    complete a run with ``held`` (about 46 MB, built once per process)."""
    out = np.zeros((NUM_FIELDS, NUM_FIELDS, NUM_RANKS + 1), dtype=np.float32)
    _fill_completions(np.array(HAS_RUN, dtype=np.bool_), out)
    return out


@compiled
def need_posterior(hand: int, unseen: int, C: F32, out: F64) -> None:
    """``out[r]``: the chance that exactly ``r`` more numbered cards, drawn at random from
    ``unseen``, complete the phrase with ``hand`` (the strict game's: the cards lost are
    neither held nor unseen)."""
    poly = np.zeros(CAPACITY_M)
    poly[0] = 1.0
    degree = 0
    for s in range(NUM_SUITS):
        held = (hand >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        un = (unseen >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        free = 0
        u = un
        while u:
            u &= u - 1
            free += 1
        new = np.zeros(CAPACITY_M)
        for a in range(degree + 1):
            if poly[a] == 0.0:
                continue
            for b in range(free + 1):
                new[a + b] += poly[a] * C[held, un, b]
        poly = new
        degree += free
    previous = 0.0
    for m in range(CAPACITY_M):
        top = min(m, degree)
        now = poly[top] / BINOMIAL[degree, top]
        out[m] = now - previous
        previous = now


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
