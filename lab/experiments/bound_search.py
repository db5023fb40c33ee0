"""Experiment (not part of the package): the cost of an information-relaxation bound.

    .venv/bin/python -m lab.experiments.bound_search --deals 3 --budget 5000000 \
        --json lab/records/bound_cost.json

Measures, on a few deals of a validation stream, how many states the relaxed
clairvoyant's search below explores and how long it takes, with penalties on (a simple
per-suit ``W``) and off (``h = 0``, which the search stops at the first win). It is the
evidence for lab/docs/bound.md: the search is exact and valid, and too large for the
full game at this project's budget.

An upper bound on every honest player's win rate, by information relaxation.

Brown, Smith & Sun, *Information relaxations and duality in stochastic dynamic programs*
(Operations Research 58(4), 2010). On a deal whose whole order is known, a clairvoyant
maximises ``R - Z`` over every game it could play, where ``R`` is 1 for a win and ``Z`` is
the sum of a penalty at every card drawn:

    z = h(after the card) - E[ h(after the card) | what the player knew before it ]

with the expectation over the next card, uniform over the unseen cards. For any function
``h`` of what a player knows (and of the action under way), fixed before the deals it is
evaluated on, ``E[z | knowledge] = 0`` along the game of any player who sees only what a
player sees, so the mean over deals of the clairvoyant's maximum is at least every such
player's win rate. With ``h = 0`` it is the clairvoyant's win rate (100% here).

**The penalty function** (:class:`ValueTables`): ``h = W(knowledge) + W(before) * psi``
where ``W = C[deck, courts left, Jokers left] * prod over suits of P[held ranks, unseen
ranks]`` (a product of per-suit prospects and the deck's make-up) and ``psi`` is a weight per
kind of draw for a court or a Joker drawn (a court in a rack costs Hurt, a Joker in a rack
slays, a Joker on a Threaten grants bonus draws). ``W`` reads the hand only through its
live run windows, and neither ``W`` nor ``psi`` reads the turn or the Hurt: see below.

**The clairvoyant's problem** (:func:`relaxed_max`) is solved per deal by a memoised depth-
first search over the player's decisions, card by card (the rules of :mod:`lab.relaxed`,
cards kept or lost as in Cold Iron: :data:`lab.relaxed.REAL`), with two relaxations that
can only raise its maximum (so the bound stays valid): the clairvoyant may quit at any decision (a
loss, no further penalties), and a state's value is bounded by that of a state with the
same position, canonical hand and phase but an earlier-or-equal turn and lower-or-equal
Hurt. That bound holds because the penalties do not depend on the turn or the Hurt: the
better state can play the same actions, draw the same cards, pay the same penalties, win
whenever the worse one wins, and quit where the worse one dies or reaches midnight. It is
what makes the search fit in memory: exact search over every (turn, Hurt) visits over 94
million states on a single deal (measured), where this one keeps one entry per position,
hand, phase and Hurt with the earliest turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import numpy as np
import numpy.typing as npt

from coldiron_env.actions import IRON, REST, STOP, THREATEN
from coldiron_env.analysis import IMPOSSIBLE, NUM_COURTS, suit_tables
from coldiron_env.batched import compiled
from coldiron_env.cards import (
    DECK_SIZE,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_JOKERS,
    NUM_RANKS,
    NUM_SUITS,
    SUIT_FIELD_MASK,
)
from coldiron_env.judge import NUM_FIELDS
from coldiron_env.options import BONUS_DRAWS, IRON_APPLICATIONS_PER_TURN, STANDARD_TURNS
from lab.relaxed import (
    ACTIONS_AT,
    CTX_TURN,
    DRAW_ON,
    END_TURN,
    HAS_RUN_ARRAY,
    RACK_FIRST,
    RACK_MASKS,
    REAL,
    SLAIN,
    after_stop,
    card_lost,
    card_step,
    complete,
    draw_of,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
HTables = tuple[F64, F64, F64, F64, F64]
"""The penalty function's tables as the kernels take them: ``per_suit``, ``expect``,
``counts``, ``psi_court``, ``psi_joker`` (:meth:`Compiled.h_tables`)."""

# --------------------------------------------------------------------------- features
DONE: Final = 0
"""Feature index of a suit whose run is complete."""
DEAD: Final = 1
"""Feature index of a suit with no live window (the phrase is out of reach)."""
MAX_USEFUL: Final = 7
MAX_WINDOWS: Final = 4
NEED_LEVELS: Final = 3
NUM_FEATURES: Final = 2 + NEED_LEVELS * (MAX_USEFUL + 1) * (MAX_WINDOWS + 1)
"""Per-suit feature indices: done, dead, then (need 1..3, useful cards 0..7, best windows 0..4)."""

# keep modes of a draw, per suit: which drawn numbered cards of the suit are kept
KEEP_NONE: Final = 0
KEEP_ALL: Final = 1
KEEP_RANK0: Final = 2
"""Keep mode ``KEEP_RANK0 + r``: only rank ``r`` (0 = Ace) is kept (a rank rack)."""
NUM_KEEP_MODES: Final = KEEP_RANK0 + NUM_RANKS

# kinds of draw (for the psi weights)
DRAW_THREATEN: Final = 0
DRAW_IRON: Final = 1
DRAW_BONUS: Final = 2
DRAW_IRON_BONUS: Final = 3
DRAW_RACK: Final = 4
DRAW_REST: Final = 5
NUM_DRAW_KINDS: Final = 6

NUM_COURT_CARDS: Final = NUM_COURTS
NEGATIVE: Final = -1.0


def feature_table() -> npt.NDArray[np.int16]:
    """``PHI[held, unseen]``: the feature index of one suit (the package's table, 2-D)."""
    from lab.bound import suit_feature_table

    return suit_feature_table().reshape(NUM_FIELDS, NUM_FIELDS).astype(np.int16)


# --------------------------------------------------------------------------- the tables
@dataclass
class ValueTables:
    """The penalty function's parameters (see the module docstring) and its derived tables.

    ``log_suit`` (:data:`NUM_FEATURES`) and ``log_counts`` (deck, courts, Jokers) are the
    logarithms of ``P``'s and ``C``'s factors; ``psi_court`` / ``psi_joker``
    (:data:`NUM_DRAW_KINDS`) the weights of a court or Joker drawn, per kind of draw. All
    zero (``zero()``) is ``h = 0``: the bare clairvoyant.
    """

    log_suit: F64
    log_counts: F64
    psi_court: F64
    psi_joker: F64
    name: str = "unnamed"
    meta: dict[str, Any] = field(default_factory=dict)
    zero: bool = False
    """``h = 0`` everywhere (the clairvoyant bound)."""

    @classmethod
    def zeros(cls) -> ValueTables:
        return cls(
            np.zeros(NUM_FEATURES),
            np.zeros((DECK_SIZE + 1, NUM_COURT_CARDS + 1, NUM_JOKERS + 1)),
            np.zeros(NUM_DRAW_KINDS),
            np.zeros(NUM_DRAW_KINDS),
            name="zero",
            zero=True,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "zero": self.zero,
            "log_suit": self.log_suit.tolist(),
            "log_counts": self.log_counts.tolist(),
            "psi_court": self.psi_court.tolist(),
            "psi_joker": self.psi_joker.tolist(),
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValueTables:
        return cls(
            np.asarray(data["log_suit"], dtype=np.float64),
            np.asarray(data["log_counts"], dtype=np.float64),
            np.asarray(data["psi_court"], dtype=np.float64),
            np.asarray(data["psi_joker"], dtype=np.float64),
            name=str(data.get("name", "unnamed")),
            meta=dict(data.get("meta", {})),
            zero=bool(data.get("zero", False)),
        )

    def save(self, path: Path) -> None:
        from agents.atomic import atomic_write_json

        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: Path) -> ValueTables:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def compile(self) -> Compiled:
        """The look-up tables the search reads."""
        phi = feature_table().astype(np.int64)
        factor = np.exp(self.log_suit)
        factor[DONE] = 1.0
        factor[DEAD] = 0.0
        per_suit = factor[phi]  # (1024, 1024)
        expect = np.zeros((NUM_FIELDS, NUM_FIELDS, NUM_KEEP_MODES))
        fields = np.arange(NUM_FIELDS)
        for r in range(NUM_RANKS):
            bit = 1 << r
            has = (fields & bit) != 0  # unseen fields holding rank r
            for held in range(NUM_FIELDS):
                unseen_after = fields[has] & ~bit
                dropped = per_suit[held, unseen_after]
                kept = per_suit[held | bit, unseen_after]
                expect[held, has, KEEP_NONE] += dropped
                expect[held, has, KEEP_ALL] += kept
                for mode_rank in range(NUM_RANKS):
                    mode = KEEP_RANK0 + mode_rank
                    expect[held, has, mode] += kept if mode_rank == r else dropped
        counts = np.exp(self.log_counts)
        return Compiled(
            per_suit.reshape(-1).copy(),
            expect.reshape(-1).copy(),
            counts,
            self.psi_court.astype(np.float64).copy(),
            self.psi_joker.astype(np.float64).copy(),
            self.zero,
        )


@dataclass
class Compiled:
    per_suit: F64
    """``P[held * 1024 + unseen]``."""
    expect: F64
    """``S[(held * 1024 + unseen) * NUM_KEEP_MODES + mode]``: sum over the suit's unseen ranks
    of ``P`` after drawing that rank (kept or not by ``mode``)."""
    counts: F64
    psi_court: F64
    psi_joker: F64
    zero: bool

    def h_tables(self) -> HTables:
        """The tables as the kernels take them."""
        return self.per_suit, self.expect, self.counts, self.psi_court, self.psi_joker


# --------------------------------------------------------------------------- penalties
@compiled
def value_w(
    hand: int, unseen: int, deck: int, courts: int, jokers: int, per_suit: F64, counts: F64
) -> float:
    """``W``: the product of the per-suit factors and the deck's factor."""
    w = counts[deck, courts, jokers]
    for s in range(NUM_SUITS):
        held = (hand >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        un = (unseen >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        w *= per_suit[held * NUM_FIELDS + un]
    return float(w)


@compiled
def keep_mode(kind: int, rack_action_index: int, suit: int) -> int:
    """Which drawn numbered cards of ``suit`` a draw of ``kind`` keeps."""
    if kind == DRAW_REST:
        return KEEP_NONE
    if kind == DRAW_RACK:
        if rack_action_index < NUM_RANKS:
            return KEEP_RANK0 + rack_action_index
        return KEEP_ALL if rack_action_index - NUM_RANKS == suit else KEEP_NONE
    return KEEP_ALL


@compiled
def expected_h(
    hand: int,
    unseen: int,
    deck: int,
    courts: int,
    jokers: int,
    kind: int,
    rack_index: int,
    h_tables: HTables,
) -> float:
    """``E[h(after the next card)]`` over the unseen cards (``deck`` of them: ``unseen``
    numbered, ``courts`` courts, ``jokers`` Jokers), for a draw of ``kind``."""
    per_suit, expect, counts, psi_court, psi_joker = h_tables
    factors = np.empty(NUM_SUITS)
    sums = np.empty(NUM_SUITS)
    for s in range(NUM_SUITS):
        held = (hand >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        un = (unseen >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        index = held * NUM_FIELDS + un
        factors[s] = per_suit[index]
        sums[s] = expect[index * NUM_KEEP_MODES + keep_mode(kind, rack_index, s)]
    all_suits = factors[0] * factors[1] * factors[2] * factors[3]
    numbered = 0.0
    for s in range(NUM_SUITS):
        others = 1.0
        for t in range(NUM_SUITS):
            if t != s:
                others *= factors[t]
        numbered += others * sums[s]
    total = numbered * counts[deck - 1, courts, jokers]
    w_now = all_suits * counts[deck, courts, jokers]
    if courts > 0:
        total += courts * (
            all_suits * counts[deck - 1, courts - 1, jokers] + w_now * psi_court[kind]
        )
    if jokers > 0:
        total += jokers * (
            all_suits * counts[deck - 1, courts, jokers - 1] + w_now * psi_joker[kind]
        )
    return float(total / deck)


@compiled
def realized_h(
    card: int,
    kept: bool,
    hand: int,
    unseen: int,
    deck: int,
    courts: int,
    jokers: int,
    kind: int,
    h_tables: HTables,
) -> float:
    """``h`` after ``card`` is drawn (``hand``/``unseen``/counts are *before* the draw)."""
    per_suit, _, counts, psi_court, psi_joker = h_tables
    w_now = value_w(hand, unseen, deck, courts, jokers, per_suit, counts)
    if card < FIRST_COURT:
        after = hand | (1 << card) if kept else hand
        return float(
            value_w(after, unseen & ~(1 << card), deck - 1, courts, jokers, per_suit, counts)
        )
    if card < FIRST_JOKER:
        w_after = value_w(hand, unseen, deck - 1, courts - 1, jokers, per_suit, counts)
        return float(w_after + w_now * psi_court[kind])
    w_after = value_w(hand, unseen, deck - 1, courts, jokers - 1, per_suit, counts)
    return float(w_after + w_now * psi_joker[kind])


# --------------------------------------------------------------------------- the search
# Memo: open addressing over int64 keys (position, canonical hand, context, Hurt) holding
# the earliest turn explored and its value.
EMPTY_KEY: Final = -1
MIX: Final = 0x9E3779B97F4A7C15 - (1 << 64)  # Fibonacci hashing (as a signed int64)
HASH_SHIFT: Final = 20
TABLE_FILL: Final = 0.7


@compiled
def _slot(keys: I64, key: int) -> int:
    mask = keys.shape[0] - 1
    i = ((key * MIX) >> HASH_SHIFT) & mask
    while keys[i] != EMPTY_KEY and keys[i] != key:
        i = (i + 1) & mask
    return int(i)


_F = TypeVar("_F", bound=Callable[..., Any])


def _recursive(fn: _F) -> _F:
    """Compiled without numba's disk cache: it cannot resolve mutually recursive functions.
    Typed as ``fn`` (its Python signature)."""
    return cast(_F, compiled(fn, cache=False))


@compiled
def _canonical(hand: int, unseen: int, has_run: Any, live: I64, need: I64) -> int:
    """The hand reduced to what matters (complete suits marked, dead cards dropped); -1 when
    a suit has no live window (the phrase is out of reach)."""
    canon = 0
    for s in range(NUM_SUITS):
        shift = s * NUM_RANKS
        held = (hand >> shift) & SUIT_FIELD_MASK
        un = (unseen >> shift) & SUIT_FIELD_MASK
        if has_run[held]:
            canon |= SUIT_FIELD_MASK << shift
        else:
            if need[held, un] >= IMPOSSIBLE:
                return -1
            canon |= (held & live[held, un]) << shift
    return canon


@compiled
def _draw_penalty(
    card: int,
    kept: bool,
    hand: int,
    pos: int,
    kind: int,
    rack_index: int,
    unseen_t: I64,
    courts_t: I64,
    jokers_t: I64,
    h_tables: HTables,
    zero: bool,
) -> float:
    """``z`` of drawing ``card`` (the deck's card at ``pos``) in a draw of ``kind``."""
    if zero:
        return 0.0
    deck = DECK_SIZE - pos
    unseen, courts, jokers = unseen_t[pos], courts_t[pos], jokers_t[pos]
    h: float = realized_h(card, kept, hand, unseen, deck, courts, jokers, kind, h_tables)
    e: float = expected_h(hand, unseen, deck, courts, jokers, kind, rack_index, h_tables)
    return h - e


@compiled
def _draw(pos: int, hand: int, kept: bool, kind: int, rack_index: int, A: Any) -> float:
    """``z`` of the deck's card at ``pos`` drawn in a draw of ``kind`` (``A``: the tables)."""
    deck, unseen_t, courts_t, jokers_t, h_tables, zero = A[:6]
    return float(_draw_penalty(deck[pos], kept, hand, pos, kind, rack_index, unseen_t, courts_t,
                               jokers_t, h_tables, zero))  # fmt: skip


KINDS: Final = np.array(
    [DRAW_THREATEN, DRAW_REST]
    + [DRAW_IRON] * IRON_APPLICATIONS_PER_TURN
    + [DRAW_BONUS] * BONUS_DRAWS
    + [DRAW_IRON_BONUS] * (IRON_APPLICATIONS_PER_TURN * BONUS_DRAWS)
    + [DRAW_RACK],
    dtype=np.int64,
)
"""``KINDS[xk]``: the kind of the draw ``xk`` (:data:`lab.relaxed.XK_RACK` and the others),
for the ``psi`` weights."""
REAL_GAME: Final = REAL.packed()
"""Cold Iron's own keeping: a Rest's card and a rack's unmatched cards are lost."""


@_recursive
def _next(pos: int, hand: int, hurt: int, turn: int, follows: int, A: Any) -> float:
    """The best from the decision point ``follows`` (or the next turn's start) of this turn."""
    if follows != END_TURN:
        return _solve(pos, hand, hurt, turn, follows, A)
    if turn >= STANDARD_TURNS:
        return 0.0  # midnight: lost
    return _solve(pos, hand, hurt, turn + 1, CTX_TURN, A)


@_recursive
def _act(pos: int, hand: int, hurt: int, turn: int, ctx: int, action: int, A: Any) -> float:
    """``R - Z`` of ``action`` at a decision point, the best play after it: the cards drawn
    by the rules of :mod:`lab.relaxed`, kept or lost as in Cold Iron, each penalised."""
    if action == STOP:
        return _next(pos, hand, hurt, turn, after_stop(ctx), A)
    deck = A[0]
    rack_index = action - RACK_FIRST if RACK_FIRST <= action < REST else 0
    total: float = 0.0
    drawn = 0
    while True:
        card = deck[pos]
        kept = card < FIRST_COURT and not card_lost(action, card, 0, REAL_GAME)
        total -= _draw(pos, hand, kept, KINDS[draw_of(action, ctx, drawn)], rack_index, A)
        pos += 1
        if kept:
            hand = hand | (1 << card)
            if complete(hand):
                return total + 1.0
        if pos >= DECK_SIZE:
            return total  # deck exhausted
        hurt, follows = card_step(action, ctx, drawn, card, hurt)
        if follows == SLAIN:
            return total
        if follows != DRAW_ON:
            return total + _next(pos, hand, hurt, turn, follows, A)
        drawn += 1


@_recursive
def _solve(pos: int, hand: int, hurt: int, turn: int, ctx: int, A: Any) -> float:
    """The relaxed maximum of ``R - Z`` from a decision point (quitting is allowed)."""
    unseen_t, zero = A[1], A[5]
    keys, kturn, vals, stats, has_run, live, need = A[6:13]
    canon = _canonical(hand, unseen_t[pos], has_run, live, need)
    if canon < 0:
        return 0.0  # out of reach: W = 0 here and after, so no penalty and no win
    base = ((pos << 3) | ctx) << 3
    found = NEGATIVE
    for h in range(hurt + 1):
        key = ((base | h) << 40) | canon
        slot = _slot(keys, key)
        if keys[slot] == key and kturn[slot] <= turn and (found < 0 or vals[slot] < found):
            found = vals[slot]
    if found >= 0:
        stats[1] += 1
        return found
    stats[0] += 1
    if stats[4] > 0 and stats[0] > stats[4]:
        stats[3] = 2  # the node budget is spent
        return 0.0
    best = 0.0  # quit
    if ctx == CTX_TURN:
        # the racks that draw the most cards first: the search then meets most states first
        # at their earliest turn, and a later meeting at a later turn reuses the value
        order = A[13][pos]
        for j in range(order.shape[0]):
            best = max(best, _act(pos, hand, hurt, turn, ctx, RACK_FIRST + order[j], A))
            if zero and best >= 1.0:
                break
        if not (zero and best >= 1.0):
            for action in (IRON, THREATEN, REST):
                best = max(best, _act(pos, hand, hurt, turn, ctx, action, A))
    else:  # after an Iron application (again, or end the turn), or a bonus on offer
        for i in range(2):
            best = max(best, _act(pos, hand, hurt, turn, ctx, ACTIONS_AT[ctx, i], A))
    key = ((base | hurt) << 40) | canon
    slot = _slot(keys, key)
    if keys[slot] != key:
        stats[2] += 1
        if stats[2] > keys.shape[0] * TABLE_FILL:
            stats[3] = 1  # full: the caller retries with a larger table
            return 1.0 * (DECK_SIZE + 1)
        keys[slot] = key
        kturn[slot] = turn
        vals[slot] = best
    elif turn < kturn[slot]:
        kturn[slot] = turn
        vals[slot] = best
    return best


def deal_suffixes(deck: I64) -> tuple[I64, I64, I64]:
    """Per position: the numbered cards not yet drawn (mask), and the courts and Jokers."""
    n = len(deck)
    unseen = np.zeros(n + 1, dtype=np.int64)
    courts = np.zeros(n + 1, dtype=np.int64)
    jokers = np.zeros(n + 1, dtype=np.int64)
    for pos in range(n - 1, -1, -1):
        card = int(deck[pos])
        unseen[pos] = unseen[pos + 1] | ((1 << card) if card < FIRST_COURT else 0)
        courts[pos] = courts[pos + 1] + int(FIRST_COURT <= card < FIRST_JOKER)
        jokers[pos] = jokers[pos + 1] + int(card >= FIRST_JOKER)
    return unseen, courts, jokers


def rack_orders(deck: I64) -> I64:
    """Per position, the rack indices sorted by how far each rack draws (farthest first)."""
    out = np.zeros((len(deck) + 1, len(RACK_MASKS)), dtype=np.int64)
    for pos in range(len(deck)):
        reach = []
        for index, targets in enumerate(RACK_MASKS.tolist()):
            stop = pos
            while stop < len(deck) and not (
                deck[stop] < FIRST_COURT and (targets >> int(deck[stop])) & 1
            ):
                stop += 1
            reach.append((-stop, index))
        out[pos] = [index for _, index in sorted(reach)]
    return out


DEFAULT_TABLE_BITS: Final = 24
MAX_TABLE_BITS: Final = 28


class BudgetExceeded(RuntimeError):
    """The search explored more states than its budget allows."""


@dataclass(frozen=True)
class DealBound:
    value: float
    """The clairvoyant's relaxed maximum of ``R - Z`` on the deal (the deal's bound)."""
    explored: int
    reused: int
    seconds: float


def relaxed_max(
    deck: Any, tables: Compiled, bits: int = DEFAULT_TABLE_BITS, budget: int = 0
) -> DealBound:
    """The deal's bound: the relaxed clairvoyant's maximum of ``R - Z`` (module docstring)."""
    import time

    cards = np.asarray(deck, dtype=np.int64)
    unseen, courts, jokers = deal_suffixes(cards)
    need_t, _, live_t = suit_tables()
    t0 = time.perf_counter()
    while True:
        size = 1 << bits
        keys = np.full(size, EMPTY_KEY, dtype=np.int64)
        kturn = np.zeros(size, dtype=np.int64)
        vals = np.zeros(size, dtype=np.float64)
        stats = np.zeros(5, dtype=np.int64)
        stats[4] = budget
        A = (cards, unseen, courts, jokers, tables.h_tables(), tables.zero, keys, kturn, vals,
             stats, HAS_RUN_ARRAY, live_t.astype(np.int64), need_t.astype(np.int64),
             rack_orders(cards))  # fmt: skip
        value = _solve(0, 0, 0, 1, CTX_TURN, A)
        if stats[3] == 2:
            raise BudgetExceeded(f"more than {budget:,} states explored")
        if not stats[3]:
            return DealBound(float(value), int(stats[0]), int(stats[1]), time.perf_counter() - t0)
        if bits >= MAX_TABLE_BITS:
            raise MemoryError(f"the search outgrew a table of 2**{bits} entries")
        bits += 2


def _demo_tables(base: float) -> ValueTables:
    """A simple ``W``: each suit's factor ``base ** need`` (the cost measurement's)."""
    tables = ValueTables.zeros()
    tables.zero = False
    tables.name = f"per-suit {base} ** need"
    log_suit = np.zeros(NUM_FEATURES)
    for need in range(1, NEED_LEVELS + 1):
        for useful in range(MAX_USEFUL + 1):
            for windows in range(MAX_WINDOWS + 1):
                index = 2 + ((need - 1) * (MAX_USEFUL + 1) + useful) * (MAX_WINDOWS + 1) + windows
                log_suit[index] = np.log(base) * need
    tables.log_suit = log_suit
    return tables


def main(argv: list[str] | None = None) -> int:
    import argparse
    import contextlib
    import time

    from agents.atomic import atomic_write_json
    from agents.evaluation.arena import validation_decks
    from agents.gitinfo import git_commit, utc_now

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deals", type=int, default=3)
    parser.add_argument("--seed", type=int, default=901, help="validation seed of the deals")
    parser.add_argument("--budget", type=int, default=5_000_000, help="states per deal at most")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    decks = validation_decks(args.seed, args.deals)
    rows = []
    for name, tables in (("h = 0 (clairvoyant)", ValueTables.zeros()),
                         ("W = 0.6 ** need per suit", _demo_tables(0.6))):  # fmt: skip
        compiled_tables = tables.compile()
        with contextlib.suppress(BudgetExceeded):  # compile before timing
            relaxed_max(decks[0], compiled_tables, budget=10)
        for k, deck in enumerate(decks):
            t0 = time.perf_counter()
            try:
                found = relaxed_max(deck, compiled_tables, budget=args.budget)
                row = {"penalties": name, "deal": k, "value": found.value,
                       "explored": found.explored, "seconds": round(found.seconds, 2),
                       "finished": True}  # fmt: skip
            except BudgetExceeded:
                row = {"penalties": name, "deal": k, "value": None,
                       "explored": args.budget, "seconds": round(time.perf_counter() - t0, 2),
                       "finished": False}  # fmt: skip
            print(row, flush=True)
            rows.append(row)
    atomic_write_json(args.json, {
        "command": "lab/experiments/bound_search.py " + " ".join(argv or []),
        "commit": git_commit(), "time": utc_now(), "budget": args.budget,
        "deals": f"the first {args.deals} validation deals of seed {args.seed}",
        "rows": rows,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
