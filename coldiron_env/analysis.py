"""What a card-counting player computes in their head: run windows, rack odds, keep bounds.

Every card that is not in the deck has been seen, so a player with a perfect memory knows the
deck's exact *contents* (not its order): the *unseen* cards. From them and the hand this
module derives, as look-up tables built once with NumPy and used by scalar and batched
callers alike, each suit's run windows (:func:`suit_tables`), a rack's odds
(:func:`rack_odds`), an Iron bonus's risk (:func:`bonus_risk`) and the most cards that can
still be kept (:func:`max_keeps`); :class:`Counting` computes them all for a batch of games.
The heuristic, the planner, the solver and the ``counting`` observation all read these
tables, so each piece of card counting is written once.
"""

from __future__ import annotations

from array import array
from functools import cache, lru_cache
from math import comb
from typing import Final

import numpy as np
import numpy.typing as npt

from coldiron_env.actions import RACK_ACTIONS, RACK_TARGETS
from coldiron_env.cards import (
    DECK_SIZE,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_JOKERS,
    NUM_RANKS,
    NUM_SUITS,
    SUIT_FIELD_MASK,
)
from coldiron_env.judge import HAS_RUN, NUM_FIELDS, WINDOW_MASKS
from coldiron_env.options import (
    BONUS_DRAWS,
    DEFAULT_RULES,
    IRON_APPLICATIONS_PER_TURN,
    MAX_HURT,
    RuleOptions,
)

ANALYSIS_CACHE: Final = 1 << 18
"""Positions whose :func:`analyse` is remembered (search and rollouts revisit them)."""
IMPOSSIBLE: Final = 99
"""The ``need`` of a suit with no live window (the phrase cannot be completed)."""
SURVIVABLE_HURT: Final = MAX_HURT - 1
"""The most Hurt the Changeling can take and live (what :class:`Counting`'s keep bound spends)."""
IRON_KEEPS: Final = MAX_HURT
"""Iron applications that can each keep a card, from Hurt 0: five the Changeling lives
through, and a sixth whose card is kept before its Hurt slays (R11), winning if it
completes the phrase (R7). What :func:`max_keeps` spends."""
IRON_KEEP_GAIN: Final = IRON_APPLICATIONS_PER_TURN - 1
"""Cards a turn of three Iron applications keeps beyond the one card of any turn."""
NUM_COURTS: Final = FIRST_JOKER - FIRST_COURT

FULL_DECK_MASK: Final = (1 << DECK_SIZE) - 1
COURT_MASK: Final = ((1 << NUM_COURTS) - 1) << FIRST_COURT
JOKER_MASK: Final = ((1 << NUM_JOKERS) - 1) << FIRST_JOKER


def popcount(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Set bits of each (up to 64-bit, non-negative) integer: ``np.bitwise_count`` where
    NumPy has it (2.0+), else the sum of the unpacked bits."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(values).astype(np.int64)
    as_bytes = np.asarray(values).astype(np.uint64)[..., None].view(np.uint8)
    counts: npt.NDArray[np.int64] = np.unpackbits(as_bytes, axis=-1).sum(axis=-1, dtype=np.int64)
    return counts


U16 = npt.NDArray[np.uint16]
U8 = npt.NDArray[np.uint8]
F64 = npt.NDArray[np.float64]


# --------------------------------------------------------------------------- run windows
@cache
def suit_tables() -> tuple[U8, U16, U16]:
    """``(NEED, USEFUL, LIVE)`` of a suit, each indexed ``[held_field, unseen_field]`` (1024 x 1024)

    A run window (A-2-3 .. 8-9-10) is *live* when every card of it is held or unseen. ``NEED``
    is the fewest missing cards over the live windows (0 once the run is complete,
    :data:`IMPOSSIBLE` with no live window), ``USEFUL`` the missing cards of the live windows
    achieving it, ``LIVE`` the union of the live windows. Built once, vectorised (a few tens
    of milliseconds).
    """
    held = np.arange(NUM_FIELDS, dtype=np.int64)[:, None]
    unseen = np.arange(NUM_FIELDS, dtype=np.int64)[None, :]
    shape = (NUM_FIELDS, NUM_FIELDS)
    need = np.full(shape, IMPOSSIBLE, dtype=np.int64)
    useful = np.zeros(shape, dtype=np.int64)
    live = np.zeros(shape, dtype=np.int64)
    for window in WINDOW_MASKS:
        missing = window & ~held
        alive = np.broadcast_to((missing & ~unseen) == 0, shape)
        count = np.broadcast_to(popcount(missing), shape)
        missing_b = np.broadcast_to(missing, shape)
        better = alive & (count < need)
        equal = alive & (count == need)
        useful = np.where(better, missing_b, np.where(equal, useful | missing_b, useful))
        need = np.where(better, count, need)
        live = np.where(alive, live | window, live)
    done = np.asarray(HAS_RUN, dtype=bool)[:, None]
    need = np.where(done, 0, need)
    useful = np.where(done, 0, useful)
    return need.astype(np.uint8), useful.astype(np.uint16), live.astype(np.uint16)


@cache
def _scalar_tables() -> tuple[bytes, array[int]]:
    """:func:`suit_tables`'s ``NEED`` and ``USEFUL`` flattened for fast scalar look-ups."""
    need, useful, _ = suit_tables()
    return need.tobytes(), array("H", useful.tobytes())


def suit_need(held: int, unseen: int) -> tuple[int, int]:
    """``(need, useful)`` of one suit from its held and unseen 10-bit rank fields."""
    need, useful = _scalar_tables()
    index = held << NUM_RANKS | unseen
    return need[index], useful[index]


@lru_cache(maxsize=ANALYSIS_CACHE)
def analyse(hand: int, unseen: int, suits_required: int = NUM_SUITS) -> tuple[int, int]:
    """``(need, useful)`` of the game: cards still needed, mask of the useful cards.

    ``hand`` is the mask of numbered cards held, ``unseen`` the mask of cards in
    the deck. The need sums the ``suits_required`` smallest suit needs; it is
    :data:`IMPOSSIBLE` or more when the phrase is out of reach.
    """
    need_t, useful_t = _scalar_tables()
    needs = []
    useful = 0
    for suit in range(NUM_SUITS):
        shift = suit * NUM_RANKS
        held = (hand >> shift) & SUIT_FIELD_MASK
        index = held << NUM_RANKS | (unseen >> shift) & SUIT_FIELD_MASK
        needs.append(need_t[index])
        useful |= useful_t[index] << shift
    needs.sort()
    return sum(needs[:suits_required]), useful


# --------------------------------------------------------------------------- racks
@cache
def rack_odds(targets: int, jokers: int, courts: int, hurt_left: int) -> tuple[float, float]:
    """Chance that a rack reaches its first target alive, and the expected courts before it.

    ``targets`` cards end the rack, ``jokers`` slay, each of ``courts`` costs
    1 Hurt and ``hurt_left`` of them slay. Other cards do not matter: only the
    relative order of these cards does, and it is uniformly random. With no
    target the rack empties the deck: ``(0.0, 0.0)``.
    """
    if targets == 0:
        return 0.0, 0.0
    total = targets + jokers + courts
    prefix = 1.0  # chance that the first i of these cards are all courts
    alive = expected = 0.0
    for i in range(min(courts, hurt_left - 1) + 1):
        p = prefix * targets / (total - i)
        alive += p
        expected += i * p
        prefix *= (courts - i) / (total - i)
    return alive, expected


@cache
def rack_tables() -> tuple[F64, F64]:
    """``(ALIVE, COURTS)`` of :func:`rack_odds`, by ``[targets, jokers, courts, hurt_left]``."""
    shape = (NUM_RANKS + 1, NUM_JOKERS + 1, NUM_COURTS + 1, MAX_HURT + 1)
    alive = np.zeros(shape)
    courts = np.zeros(shape)
    for index in np.ndindex(shape):
        alive[index], courts[index] = rack_odds(*index)
    return alive, courts


# --------------------------------------------------------------------------- bonus
@cache
def bonus_risk(deck: int, courts: int, hurt_left: int) -> float:
    """Chance that an Iron bonus (three draws from ``deck`` cards) holds ``hurt_left`` courts."""
    draws = min(BONUS_DRAWS, deck)
    if hurt_left > draws or deck <= 0:
        return 0.0
    bad = sum(comb(courts, x) * comb(deck - courts, draws - x) for x in range(hurt_left, draws + 1))
    return bad / comb(deck, draws)


@cache
def bonus_risk_table() -> F64:
    """:func:`bonus_risk` indexed ``[deck, courts, hurt_left]``."""
    shape = (DECK_SIZE + 1, NUM_COURTS + 1, MAX_HURT + 1)
    out = np.zeros(shape)
    for deck, courts, hurt_left in np.ndindex(shape):
        if courts <= deck:
            out[deck, courts, hurt_left] = bonus_risk(deck, courts, hurt_left)
    return out


# --------------------------------------------------------------------------- keep bound
def iron_extra_keeps(budget: int) -> int:
    """Most cards kept beyond one a turn with ``budget`` Hurt to spend on the Iron.

    A turn of k Iron applications keeps at most k cards for k Hurt, i.e. k - 1
    more than a free Threaten or rack; the best use is three at a time.
    """
    full, rest = divmod(max(budget, 0), IRON_APPLICATIONS_PER_TURN)
    return full * IRON_KEEP_GAIN + max(rest - 1, 0)


def max_keeps(
    turns_left: int,
    hurt: int,
    jokers: int,
    deck_count: int,
    rules: RuleOptions = DEFAULT_RULES,
    *,
    iron_left: int | None = None,
    bonus_pending: bool = False,
) -> int:
    """Most cards that can still be kept, whatever the deck's order.

    From the start of a turn (``iron_left=None``): one card a turn (``turns_left`` turns, this
    one included), plus what the Iron can add for the Hurt left to spend (the application that
    slays keeps its card first, R11: a winning one counts). Within a turn, with up to
    ``iron_left`` more Iron applications this turn (one card and one Hurt each), then the later
    turns. Plus ``rules.joker_keeps`` cards per Joker still in the deck or whose bonus is on
    offer (``bonus_pending``); never more than the cards left.
    """
    budget = IRON_KEEPS - hurt
    if iron_left is None:
        keeps = turns_left + iron_extra_keeps(budget)
    else:
        later = turns_left - 1
        keeps = max(
            j + later + iron_extra_keeps(budget - j)
            for j in range(min(iron_left, max(budget, 0)) + 1)
        )
    return min(keeps + rules.joker_keeps * (jokers + bonus_pending), deck_count)


# --------------------------------------------------------------------------- batched
RACK_COUNT: Final = len(RACK_ACTIONS)
RACK_TARGET_MASKS: Final = np.array([RACK_TARGETS[a] for a in RACK_ACTIONS], dtype=np.uint64)
"""Numbered cards that end each rack, in action order (rack A .. rack 10, Hearts .. Spades)."""

_U64_FIELD: Final = np.uint64(SUIT_FIELD_MASK)
_COURTS_U64: Final = np.uint64(COURT_MASK)
_JOKERS_U64: Final = np.uint64(JOKER_MASK)
_FULL_U64: Final = np.uint64(FULL_DECK_MASK)


class Counting:
    """What a counting player knows of ``n`` games at once (arrays with leading dimension n).

    Built from the hand and the seen cards (bit masks) and the counters; ``turns`` and
    ``suits_required`` are the rules (one for all games, or one per game), ``rules`` gives the
    variants. Every attribute is derived: nothing is read from a deck order.

    Attributes:
        unseen: (n,) uint64 mask of the cards in the deck.
        courts, jokers: (n,) court cards and Jokers in the deck.
        suit_need: (n, 4) cards missing from each suit's best live window
            (:data:`IMPOSSIBLE` for a dead suit, 0 for a complete run).
        need: (n,) the game's need (sum of the ``suits_required`` smallest).
        useful: (n,) uint64 mask of the useful cards.
        keep_bound: (n,) :func:`max_keeps` from the start of the current turn, but with
            the Iron's Hurt spent only up to :data:`SURVIVABLE_HURT` (one card fewer where
            a winning Iron at Hurt 5 would keep one more: the observation's feature, kept
            as the trained networks learnt it).
        rack_targets, rack_hits: (n, 14) targets in the deck, and useful ones.
        rack_alive, rack_courts: (n, 14) :func:`rack_odds` of each rack.
        bonus_risk: (n,) :func:`bonus_risk` of an Iron bonus now.
    """

    def __init__(
        self,
        hand: npt.NDArray[np.uint64],
        seen: npt.NDArray[np.uint64],
        hurt: npt.NDArray[np.int64],
        turn: npt.NDArray[np.int64],
        deck_count: npt.NDArray[np.int64],
        turns: int | npt.NDArray[np.int64],
        suits_required: int | npt.NDArray[np.int64] = NUM_SUITS,
        rules: RuleOptions = DEFAULT_RULES,
    ) -> None:
        need_t, useful_t, _ = suit_tables()
        hand = np.asarray(hand, dtype=np.uint64)
        self.unseen = unseen = _FULL_U64 & ~np.asarray(seen, dtype=np.uint64)
        self.courts = popcount(unseen & _COURTS_U64)
        self.jokers = popcount(unseen & _JOKERS_U64)
        shifts = (np.arange(NUM_SUITS, dtype=np.uint64) * np.uint64(NUM_RANKS))[None, :]
        held_f = ((hand[:, None] >> shifts) & _U64_FIELD).astype(np.intp)
        avail_f = ((unseen[:, None] >> shifts) & _U64_FIELD).astype(np.intp)
        self.suit_need = need_t[held_f, avail_f].astype(np.int64)
        useful_f = useful_t[held_f, avail_f].astype(np.uint64)
        self.useful = np.bitwise_or.reduce(useful_f << shifts, axis=1)
        n = hand.shape[0]
        smallest = np.cumsum(np.sort(self.suit_need, axis=1), axis=1)
        required = np.broadcast_to(np.asarray(suits_required, dtype=np.intp), (n,))
        self.need = smallest[np.arange(n), required - 1]
        hurt = np.asarray(hurt, dtype=np.int64)
        turns_left = turns - np.asarray(turn, dtype=np.int64) + 1
        budget = np.maximum(SURVIVABLE_HURT - hurt, 0)
        iron_extra = budget // IRON_APPLICATIONS_PER_TURN * IRON_KEEP_GAIN + np.maximum(
            budget % IRON_APPLICATIONS_PER_TURN - 1, 0
        )
        bonus = rules.joker_keeps * self.jokers
        deck_count = np.asarray(deck_count, dtype=np.int64)
        self.keep_bound = np.minimum(turns_left + iron_extra + bonus, deck_count)
        targets = unseen[:, None] & RACK_TARGET_MASKS[None, :]
        self.rack_targets = popcount(targets).astype(np.intp)
        self.rack_hits = popcount(targets & self.useful[:, None])
        alive_t, courts_t = rack_tables()
        hurt_left = np.clip(MAX_HURT - hurt, 0, MAX_HURT)
        # [targets, jokers, courts, hurt_left] as one flat index (np.take): a third of the
        # time of indexing by four arrays, which was half of this constructor's
        _, jokers_dim, courts_dim, hurt_dim = alive_t.shape
        game_part = (self.jokers * courts_dim + self.courts) * hurt_dim + hurt_left
        flat = self.rack_targets * (jokers_dim * courts_dim * hurt_dim) + game_part[:, None]
        self.rack_alive = alive_t.ravel().take(flat)
        self.rack_courts = courts_t.ravel().take(flat)
        self.bonus_risk = bonus_risk_table()[deck_count, self.courts, hurt_left]
