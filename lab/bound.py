"""An upper bound on the win rate of every player who sees only what a player sees.

Two relaxations, each of which can only raise the best win rate, make the bound computable.

1. **Every numbered card drawn is kept** (the *relaxed game*). A rack or a Rest discards
   the numbered cards it draws; here they join the hand. Any player of the real game has a
   twin in the relaxed game that takes the same actions (it can compute the real player's
   hand from what it has seen): the same cards are drawn, the same Hurt taken, the same
   turns spent, and its hand always holds the real one, so it wins every deal the real
   player wins, no later. The relaxed game's hand is then fixed by how many cards have been
   drawn: a deal's whole relaxed game has at most 54 x 25 x 6 x 7 positions.
2. **Information relaxation** (Brown, Smith & Sun, *Operations Research* 58(4), 2010): on
   a deal whose order is known, a clairvoyant maximises ``R - Z`` over every relaxed game,
   where ``R`` is 1 for a win and ``Z`` is the sum of a penalty at every card drawn,
   ``z = W(after the card) - E[W(after the card) | what the player knew before it]``
   (the expectation over the next card, uniform over the unseen cards). For any function
   ``W`` of what a player knows, fixed before the deals, ``E[z] = 0`` along the game of
   any honest player, so the mean over deals of the clairvoyant's maximum bounds every
   honest player's win rate in the relaxed game, hence in the real one. ``W = 0`` gives
   the clairvoyant (100%); the closer ``W`` is to the best honest win chance, the tighter.

:func:`deal_bound` solves one deal exactly (memoised over position, turn, Hurt and
decision point); :class:`ValueModel` is ``W``: a logistic model over what a card counter
knows of the relaxed position (each suit's run prospects, the deck's make-up, turns left,
Hurt), fitted by :mod:`lab.bound_fit` on deals of a stream of its own, or the need-known
game's value (:mod:`lab.need_game`).

The search (:func:`search_state`, :func:`solve`) is the one every bound of the lab on the
relaxed game runs: it plays the rules of :mod:`lab.relaxed`, and with a
:class:`~lab.relaxed.Keeping` that loses cards it is the strict relaxed game's and the real
game's (``lab/experiments/strict_bound.py``: their ``W`` is the need-known one, which reads
the cards lost), with the cut of a supersolution ``W`` and a state budget. Standard rules
only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import numpy as np
import numpy.typing as npt
from numba import typeof, types
from numba.typed import Dict

from coldiron_env.actions import REST, STOP, THREATEN
from coldiron_env.analysis import IMPOSSIBLE, NUM_COURTS, suit_tables
from coldiron_env.batched import compiled, compiled_uncached
from coldiron_env.cards import (
    DECK_SIZE,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_JOKERS,
    NUM_NUMBERED,
    NUM_RANKS,
    NUM_SUITS,
    RUN_LENGTH,
    SUIT_FIELD_MASK,
)
from coldiron_env.judge import NUM_FIELDS, WINDOW_MASKS
from coldiron_env.options import MAX_HURT, STANDARD_TURNS
from lab.need_game import (
    CAPACITY_M,
    CARD_COURT,
    CARD_JOKER,
    CARD_NUMBERED,
    OFFSET,
    after_value,
    completion_curve,
    completions_with_unseen,
    expected_sum,
    need_game_values,
    need_posterior,
    phase_of,
    realized_after,
)
from lab.relaxed import (
    ACTIONS_AT,
    ALL_NUMBERED,
    CTX_TURN,
    DRAW_KINDS,
    DRAW_ON,
    DRAW_RACK,
    DRAW_SAFE,
    END_TURN,
    HAS_RUN_ARRAY,
    K_REAL,
    NUM_CTX,
    P_CTX,
    P_HURT,
    P_TURN,
    PLAYING,
    RACK_FIRST,
    RELAXED,
    ROW_CARDS,
    ROW_COURTS,
    ROW_HANDS,
    ROW_JOKERS,
    ROW_UNSEEN,
    SLAIN,
    XK_THREATEN,
    DealFacts,
    Keeping,
    advance,
    after_stop,
    card_step,
    complete,
    ctx_of,
    draw_of,
    kept_cards,
    over_cap,
    start_position,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
At = tuple[int, int, int, int, int, int, int]
"""A relaxed position as ``W`` reads it: the hand, the numbered cards unseen, the cards
unseen, the courts and Jokers unseen, the turns left (the current one counted), the Hurt."""
WArgs = tuple[F64, I64, I64]
"""``W`` as the kernels take it (:func:`w_args`): its weights, the per-suit feature and need
tables (:func:`suit_tables_packed`), the features' scratch."""

# --------------------------------------------------------------------------- features
SUIT_DONE: Final = 0
"""Per-suit feature of a complete suit."""
SUIT_DEAD: Final = 1
"""Per-suit feature of a suit with no live window: the phrase is out of reach (W = 0)."""
MAX_USEFUL: Final = 7
MAX_WINDOWS: Final = 4
NEED_LEVELS: Final = RUN_LENGTH
SUIT_FEATURES: Final = 2 + NEED_LEVELS * (MAX_USEFUL + 1) * (MAX_WINDOWS + 1)
MAX_NEED: Final = NUM_SUITS * RUN_LENGTH
TURNS_LEFT: Final = STANDARD_TURNS + 1
"""Turns left counting the current one: 1..24 (0 unused)."""

# The parameter vector: blocks of one-hot weights.
OFF_SUIT: Final = 0
OFF_TURNS: Final = OFF_SUIT + SUIT_FEATURES
OFF_HURT: Final = OFF_TURNS + TURNS_LEFT
OFF_COURTS: Final = OFF_HURT + MAX_HURT
OFF_JOKERS: Final = OFF_COURTS + NUM_COURTS + 1
OFF_DECK: Final = OFF_JOKERS + NUM_JOKERS + 1
OFF_NEED_TURNS: Final = OFF_DECK + DECK_SIZE + 1
OFF_HURT_COURTS: Final = OFF_NEED_TURNS + (MAX_NEED + 1) * TURNS_LEFT
OFF_CTX: Final = OFF_HURT_COURTS + MAX_HURT * (NUM_COURTS + 1)
OFF_BIAS: Final = OFF_CTX + NUM_CTX
NUM_PARAMS: Final = OFF_BIAS + 1
FEATURES_PER_STATE: Final = NUM_SUITS + 9
"""Active one-hot weights of a position: one per suit, then turns left, Hurt, courts left,
Jokers left, deck count, (need, turns left), (Hurt, courts left), the decision point, the
bias."""

MLP_HIDDEN: Final = 32
MLP_SIZE: Final = (
    NUM_PARAMS * MLP_HIDDEN + MLP_HIDDEN + MLP_HIDDEN * MLP_HIDDEN + MLP_HIDDEN * 2 + 1
)
"""Weights of the network form of ``W``: E (one row per one-hot feature), b1, W2, b2, w3, b3."""


def suit_feature_table() -> npt.NDArray[np.int64]:
    """``PHI[held * 1024 + unseen]``: one suit's feature (need, useful cards, best windows)."""
    need, useful, _ = suit_tables()
    held = np.arange(NUM_FIELDS)[:, None]
    unseen = np.arange(NUM_FIELDS)[None, :]
    shape = (NUM_FIELDS, NUM_FIELDS)
    need64 = need.astype(np.int64)
    best = np.zeros(shape, dtype=np.int64)
    ones = np.array([bin(m).count("1") for m in range(NUM_FIELDS)])
    for window in WINDOW_MASKS:
        missing = window & ~held
        alive = np.broadcast_to((missing & ~unseen) == 0, shape)
        count = np.broadcast_to(ones[missing[:, 0]][:, None], shape)
        best += alive & (count == need64)
    n_useful = ones[useful.astype(np.int64)]
    index = (
        2
        + (
            (np.clip(need64, 1, NEED_LEVELS) - 1) * (MAX_USEFUL + 1)
            + np.minimum(n_useful, MAX_USEFUL)
        )
        * (MAX_WINDOWS + 1)
        + np.minimum(best, MAX_WINDOWS)
    )
    index = np.where(need64 >= IMPOSSIBLE, SUIT_DEAD, index)
    index = np.where(HAS_RUN_ARRAY[:, None], SUIT_DONE, index)
    return index.reshape(-1).astype(np.int64)


# --------------------------------------------------------------------------- capacity W
CAPACITY_JOKERS: Final = NUM_JOKERS + 1
CAPACITY_CTX: Final = (STANDARD_TURNS + 1) * MAX_HURT * CAPACITY_JOKERS
CAPACITY_SIZE: Final = CAPACITY_CTX * CAPACITY_M
NEED_GAME_SIZE: Final = 1
"""The need-known form of ``W`` (lab/need_game.py) has no weights: its
``theta`` is one marker value."""
"""Weights of the capacity form of ``W``: ``q[context, m]``, the chance that ``m`` more
numbered cards are drawn from a context (turns left, Hurt, Jokers unseen)."""


def capacity_index(turns_left: int, hurt: int, jokers: int) -> int:
    """The context row of ``q`` (turns left 0..24, Hurt 0..5, Jokers unseen 0..2)."""
    return (turns_left * MAX_HURT + hurt) * CAPACITY_JOKERS + jokers


@compiled_uncached
def capacity_value(hand: int, jokers: int, turns_left: int, hurt: int, theta: F64) -> float:
    """``W = sum over m of q[context, m] * P(m more numbered cards complete the phrase)``."""
    curve = np.zeros(CAPACITY_M)
    completion_curve(hand, curve)
    base = ((turns_left * MAX_HURT + hurt) * CAPACITY_JOKERS + jokers) * CAPACITY_M
    total = 0.0
    for m in range(CAPACITY_M):
        total += theta[base + m] * curve[m]
    return total


def suit_need_table() -> npt.NDArray[np.int64]:
    """``NEED[held * 1024 + unseen]`` (0 when complete, IMPOSSIBLE without a live window)."""
    return suit_tables()[0].astype(np.int64).reshape(-1)


# --------------------------------------------------------------------------- W
@compiled
def state_features(at: At, ctx: int, tables: I64, out: I64) -> int:
    """Write the active parameter indices of a position ``at`` into ``out``; returns 1 when
    the phrase is complete, -1 when it is out of reach, 0 otherwise."""
    hand, unseen, deck, courts, jokers, turns_left, hurt = at
    total_need = 0
    done = 0
    for s in range(NUM_SUITS):
        held = (hand >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        un = (unseen >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        index = held * NUM_FIELDS + un
        f = tables[TABLE_FEATURE, index]
        if f == SUIT_DEAD:
            return -1
        if f == SUIT_DONE:
            done += 1
        out[s] = OFF_SUIT + f
        total_need += tables[TABLE_NEED, index]
    if done == NUM_SUITS:
        return 1
    tl = min(max(turns_left, 0), STANDARD_TURNS)
    out[4] = OFF_TURNS + tl
    out[5] = OFF_HURT + hurt
    out[6] = OFF_COURTS + courts
    out[7] = OFF_JOKERS + jokers
    out[8] = OFF_DECK + deck
    out[9] = OFF_NEED_TURNS + min(total_need, MAX_NEED) * TURNS_LEFT + tl
    out[10] = OFF_HURT_COURTS + hurt * (NUM_COURTS + 1) + courts
    out[11] = OFF_CTX + ctx
    out[12] = OFF_BIAS
    return 0


@compiled_uncached
def value(at: At, w: WArgs, ctx: int = 0) -> float:
    """``W`` of a relaxed position (1 when won, 0 when out of reach or the model is off)."""
    theta, tables, scratch = w
    hand, _, _, _, jokers, turns_left, hurt = at
    if theta.shape[0] == 0:
        return 0.0  # W = 0: the clairvoyant
    if turns_left <= 0:
        return 0.0  # past midnight
    if theta.shape[0] == CAPACITY_SIZE:
        return capacity_value(hand, jokers, min(turns_left, STANDARD_TURNS), hurt, theta)
    status = state_features(at, ctx, tables, scratch)
    if status != 0:
        return 1.0 if status > 0 else 0.0
    if theta.shape[0] == NUM_PARAMS:  # logistic over the one-hot features
        logit = 0.0
        for i in range(FEATURES_PER_STATE):
            logit += theta[scratch[i]]
        return float(1.0 / (1.0 + np.exp(-logit)))
    return _mlp(theta, scratch)


@compiled
def _mlp(theta: F64, active: I64) -> float:
    """A small network over the one-hot features: ``sigmoid(w3 . tanh(W2 tanh(sum of the
    active rows of E + b1) + b2) + b3)``, its weights packed in ``theta`` (:data:`MLP_SIZE`)."""
    hidden = MLP_HIDDEN
    first = np.zeros(hidden)
    for i in range(FEATURES_PER_STATE):
        row = active[i] * hidden
        for j in range(hidden):
            first[j] += theta[row + j]
    offset = NUM_PARAMS * hidden
    for j in range(hidden):
        first[j] = np.tanh(first[j] + theta[offset + j])
    offset += hidden
    logit = theta[offset + hidden * hidden + hidden + hidden]
    for k in range(hidden):
        acc = theta[offset + hidden * hidden + k]
        base = offset + k * hidden
        for j in range(hidden):
            acc += theta[base + j] * first[j]
        logit += theta[offset + hidden * hidden + hidden + k] * np.tanh(acc)
    return float(1.0 / (1.0 + np.exp(-logit)))


@dataclass
class ValueModel:
    """``W``: logistic weights over :func:`state_features`; empty ``theta`` is ``W = 0``."""

    theta: F64
    name: str = "W"
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def zero(cls) -> ValueModel:
        return cls(np.zeros(0), name="W = 0 (the clairvoyant)")

    @classmethod
    def need_game(cls) -> ValueModel:
        """``W`` from the need-known game (lab/need_game.py): no weights."""
        return cls(np.ones(NEED_GAME_SIZE), name="the need-known game's value")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "theta": self.theta.tolist(),
            "meta": self.meta,
            "num_params": NUM_PARAMS,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValueModel:
        theta = np.asarray(data["theta"], dtype=np.float64)
        if theta.size not in (0, NEED_GAME_SIZE, NUM_PARAMS, MLP_SIZE, CAPACITY_SIZE):
            raise ValueError(
                f"a value model has {NUM_PARAMS}, {MLP_SIZE} or {CAPACITY_SIZE} weights "
                f"({NEED_GAME_SIZE} for the need-known game's), got {theta.size}"
            )
        return cls(theta, str(data.get("name", "W")), dict(data.get("meta", {})))

    def save(self, path: Path) -> None:
        from agents.atomic import atomic_write_json

        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: Path) -> ValueModel:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


# --------------------------------------------------------------------------- penalties
@compiled_uncached
def after_card(card: int, at: At, kind: int, w: WArgs) -> float:
    """``W`` just after ``card`` is drawn at ``at`` in a draw of ``kind`` (every numbered card
    kept; dead if a rack's Joker or a court's Hurt slays)."""
    hand, unseen, deck, courts, jokers, turns_left, hurt = at
    if card < FIRST_COURT:
        bit = 1 << card
        hand, unseen = hand | bit, unseen & ~bit
    elif card < FIRST_JOKER:
        courts -= 1
        if kind != DRAW_SAFE:
            hurt += 1
        if hurt >= MAX_HURT:
            return 0.0
    elif kind == DRAW_RACK:
        return 0.0
    else:
        jokers -= 1
    return value((hand, unseen, deck - 1, courts, jokers, turns_left, hurt), w)


@compiled_uncached
def expected_after(at: At, kind: int, w: WArgs) -> float:
    """``E[W(after the next card)]`` over the unseen cards at ``at`` (its ``deck`` cards: the
    ``unseen`` numbered ones, ``courts`` courts and ``jokers`` Jokers)."""
    _, unseen, deck, courts, jokers, _, _ = at
    if w[0].shape[0] == 0:
        return 0.0
    total = 0.0
    for k in range(FIRST_COURT + 2):  # each unseen numbered card, then the courts, the Jokers
        if k < FIRST_COURT:
            card, weight = k, (unseen >> k) & 1
        elif k == FIRST_COURT:
            card, weight = FIRST_COURT, courts
        else:
            card, weight = FIRST_JOKER, jokers
        if weight > 0:
            total += weight * after_card(card, at, kind, w)
    return float(total / deck)


# --------------------------------------------------------------------------- the search
_F = TypeVar("_F", bound=Callable[..., Any])


def _recursive(fn: _F) -> _F:
    """``fn`` compiled without numba's disk cache (it cannot resolve mutual recursion),
    typed as ``fn`` (its Python signature)."""
    return cast(_F, compiled(fn, cache=False))


NO_CUT: Final = -1e18
"""The cut of a search that cuts nothing: below every result."""
NO_BUDGET: Final = 1 << 62
UPPER_SLACK: Final = 1e-5
"""Room for the need-known table's single-precision rounding in the cut's upper bound."""
ABORTED: Final = 1e9
"""What a search over its state budget returns (a valid, useless upper bound)."""
FORBIDDEN: Final = -1e9
"""What a game a :class:`~lab.relaxed.Keeping` with ``forbid`` leaves out scores (below every
real result)."""
EXPECTED_PER_STATE: Final = 8
"""The penalties' cache may hold this many entries per state of the budget (memory)."""
POSTERIORS_PER_STATE: Final = 1
"""The posteriors' cache (an array of :data:`CAPACITY_M` floats an entry) may hold this
many entries per state of the budget: it grows with the cards lost, as a real rack's are."""
MISSING: Final = np.inf
"""What the caches hold for a key they do not hold (no value or penalty is infinite)."""
KEY_SLOTS: Final = 32
"""Room for a decision point or a draw in a packed memo key."""
RACK_SLOTS: Final = 16
"""Room for a rack's index + 1 (0: not a rack, or a rack that loses nothing) in the
penalties' cache key."""
GONE_BITS: Final = NUM_NUMBERED
"""The caches' keys are int64: a packed (position, turn, Hurt, decision point or draw, rack)
above the cards lost (:func:`_key`; the packed part fits in 23 bits)."""

# The search's state: one tuple, its entries these (:func:`search_state` builds it). The
# recursion passes it by value, so it holds few arrays.
S_DEAL = 0
"""The deal (:meth:`~lab.relaxed.DealFacts.packed`: rows ``ROW_*`` by position)."""
S_W = 1
"""``W`` (:func:`w_args`)."""
S_V, S_C = 2, 3
"""The need-known ``W``: the need game's table and the completion table of
``P(r | hand, unseen)`` (empty stand-ins for the other forms of ``W``)."""
S_MEMO, S_BOUNDS, S_EXPECTED, S_POSTERIORS = 4, 5, 6, 7
"""Typed dicts: the exact values, the cut's upper bounds, the penalties' expectations, and
``P(r | hand, unseen)`` by (position, cards lost)."""
S_KEEPING, S_PRUNE, S_BUDGET = 8, 9, 10
"""The variant (:meth:`Keeping.packed`), the cut on (``W`` a supersolution), the state budget."""

EMPTY_V: Final = np.zeros((1, 1, 1, 1, 1, 1), dtype=np.float32)
EMPTY_C: Final = np.zeros((1, 1, 1), dtype=np.float32)


def search_state(
    facts: DealFacts,
    model: ValueModel,
    keeping: Keeping = RELAXED,
    prune: bool = False,
    budget: int = NO_BUDGET,
) -> tuple[Any, ...]:
    """The search's state on a deal: the argument list of every kernel below. A variant
    that loses cards, or the cut, needs the need-known ``W`` (the other forms read the
    relaxed hand)."""
    need = model.theta.size == NEED_GAME_SIZE
    if not need and (keeping != RELAXED or prune):
        raise ValueError(f"{keeping}, prune {prune}: the need-known W only")
    return (
        facts.packed(),
        w_args(model),
        need_game_values() if need else EMPTY_V,
        completions_with_unseen() if need else EMPTY_C,
        Dict.empty(key_type=types.int64, value_type=types.float64),
        Dict.empty(key_type=types.int64, value_type=types.float64),
        Dict.empty(key_type=types.int64, value_type=types.float64),
        Dict.empty(key_type=types.int64, value_type=types.float64[:]),
        keeping.packed(),
        prune,
        budget,
    )


@compiled
def _key(packed: int, gone: int) -> int:
    """A cache's key: ``packed`` above the cards lost."""
    return (packed << GONE_BITS) | gone


@_recursive
def _posterior(pos: int, gone: int, S: Any) -> F64:
    """``P(r | hand, unseen)`` at ``pos`` with the cards ``gone`` lost (cached)."""
    posts: MutableMapping[int, F64] = S[S_POSTERIORS]
    key = _key(pos, gone)
    if key in posts:
        return posts[key]
    out = np.zeros(CAPACITY_M)
    deal = S[S_DEAL]
    need_posterior(deal[ROW_HANDS, pos] & ~gone, deal[ROW_UNSEEN, pos], S[S_C], out)
    posts[key] = out
    return out


@_recursive
def _z(pos: int, turn: int, hurt: int, action: int, xk: int, gone: int, S: Any) -> float:
    """The penalty of the card at ``pos`` drawn by ``action`` in the draw ``xk``, the cards
    ``gone`` lost before it: ``W`` after it less its expectation (cached per position, turn,
    Hurt, draw, cards lost, and a rack where it decides what is lost)."""
    w = S[S_W]
    if w[0].shape[0] == 0:
        return 0.0  # W = 0: the clairvoyant
    deal = S[S_DEAL]
    expected_cache: MutableMapping[int, float] = S[S_EXPECTED]
    keeping = S[S_KEEPING]
    rack = action - RACK_FIRST + 1 if keeping[K_REAL] and RACK_FIRST <= action < REST else 0
    slot = (((pos * (STANDARD_TURNS + 2)) + turn) * MAX_HURT + hurt) * KEY_SLOTS + xk
    key = _key(slot * RACK_SLOTS + rack, gone)
    card = deal[ROW_CARDS, pos]
    if w[0].shape[0] == NEED_GAME_SIZE:
        V = S[S_V]
        c = NUM_COURTS - deal[ROW_COURTS, pos]
        j = NUM_JOKERS - deal[ROW_JOKERS, pos]
        m = pos - c - j  # the numbered cards drawn
        expected = expected_cache.get(key, MISSING)
        if expected == MISSING:
            expected = _expected_need(pos, turn, hurt, action, xk, gone, m, c, j, S)
            expected_cache[key] = expected
        card_type = CARD_NUMBERED
        if card >= FIRST_JOKER:
            card_type = CARD_JOKER
        elif card >= FIRST_COURT:
            card_type = CARD_COURT
        elif (kept_cards(action, gone, keeping) >> card) & 1 == 0:
            gone |= 1 << card
        post = _posterior(pos + 1, gone, S)
        return realized_after(V, post, card_type, m, c, j, turn, hurt, xk) - expected
    # a feature model of W: the relaxed game (nothing is lost)
    turns_left = STANDARD_TURNS - turn + 1
    at = (
        deal[ROW_HANDS, pos],
        deal[ROW_UNSEEN, pos],
        DECK_SIZE - pos,
        deal[ROW_COURTS, pos],
        deal[ROW_JOKERS, pos],
        turns_left,
        hurt,
    )
    expected = expected_cache.get(key, MISSING)
    if expected == MISSING:
        expected = expected_after(at, DRAW_KINDS[xk], w)
        expected_cache[key] = expected
    return after_card(card, at, DRAW_KINDS[xk], w) - expected


@_recursive
def _expected_need(
    pos: int, turn: int, hurt: int, action: int, xk: int, gone: int, m: int, c: int, j: int, S: Any
) -> float:
    """The need-known ``W``'s ``E[W(after the next card)]``. A kept numbered card lowers the
    need by one on average over the cards (the need game's shortcut); where some would be
    lost (a Rest's, a real rack's unmatched) the sum runs over the unseen cards."""
    V = S[S_V]
    kept = kept_cards(action, gone, S[S_KEEPING])
    sorts = kept != ALL_NUMBERED
    total = expected_sum(V, _posterior(pos, gone, S), m, c, j, turn, hurt, xk, not sorts)
    if sorts:
        hand = S[S_DEAL][ROW_HANDS, pos] & ~gone
        unseen = S[S_DEAL][ROW_UNSEEN, pos]
        lost = np.zeros(CAPACITY_M)
        out = np.zeros(CAPACITY_M)
        rest = unseen
        while rest:
            low = rest & -rest
            if kept & low:
                need_posterior(hand | low, unseen & ~low, S[S_C], out)  # kept
            else:
                need_posterior(hand, unseen & ~low, S[S_C], out)  # lost
            lost += out
            rest ^= low
        for r in range(CAPACITY_M):
            if lost[r] > 0.0:
                total += lost[r] * after_value(V, CARD_NUMBERED, r, m, c, j, turn, hurt, xk)
    return total / (DECK_SIZE - m - c - j)


@_recursive
def _next(pos: int, turn: int, hurt: int, follows: int, gone: int, alpha: float, S: Any) -> float:
    """The best from the decision point ``follows`` (or the next turn's start) of this turn."""
    if follows != END_TURN:
        return _solve(pos, turn, hurt, follows, gone, alpha, S)
    if turn >= STANDARD_TURNS:
        return 0.0  # midnight
    return _solve(pos, turn + 1, hurt, CTX_TURN, gone, alpha, S)


@_recursive
def _act(
    pos: int, turn: int, hurt: int, ctx: int, action: int, gone: int, alpha: float, S: Any
) -> float:
    """``R - Z`` of ``action`` at a decision point, the best play after it: its cards drawn
    by the rules (:func:`lab.relaxed.card_step`), each numbered card kept or lost by the
    variant, each penalised."""
    if action == STOP:
        return _next(pos, turn, hurt, after_stop(ctx), gone, alpha, S)
    deal, keeping = S[S_DEAL], S[S_KEEPING]
    total = 0.0
    drawn = 0
    kept = kept_cards(action, gone, keeping)
    while True:
        card = deal[ROW_CARDS, pos]
        lost = card < FIRST_COURT and (kept >> card) & 1 == 0
        if lost and over_cap(gone, keeping):
            return FORBIDDEN  # forbid: a lower estimate, not a bound
        total -= _z(pos, turn, hurt, action, draw_of(action, ctx, drawn), gone, S)
        if lost:
            gone |= 1 << card
            kept = kept_cards(action, gone, keeping)
        pos += 1
        if complete(deal[ROW_HANDS, pos] & ~gone):
            return total + 1.0
        if pos >= DECK_SIZE:
            return total  # deck exhausted
        hurt, follows = card_step(action, ctx, drawn, card, hurt)
        if follows == SLAIN:
            return total
        if follows != DRAW_ON:
            return total + _next(pos, turn, hurt, follows, gone, alpha - total, S)
        drawn += 1


@_recursive
def _upper(pos: int, turn: int, hurt: int, ctx: int, gone: int, S: Any) -> float:
    """The need-known ``W`` at a decision point: no game from here scores more (a
    supersolution), to single-precision rounding."""
    deal, V = S[S_DEAL], S[S_V]
    post = _posterior(pos, gone, S)
    c = NUM_COURTS - deal[ROW_COURTS, pos]
    j = NUM_JOKERS - deal[ROW_JOKERS, pos]
    m = pos - c - j  # the numbered cards drawn
    phase = phase_of(ctx)
    total: float = post[0]
    for r in range(1, CAPACITY_M):
        if post[r] > 0.0:
            total += post[r] * V[turn, OFFSET[m] + r, c, j, hurt, phase]
    return total + UPPER_SLACK


@_recursive
def _solve(pos: int, turn: int, hurt: int, ctx: int, gone: int, alpha: float, S: Any) -> float:
    """The clairvoyant's maximum of ``R - Z`` from a decision point, the cards ``gone`` lost,
    fail-soft: exact when above ``alpha``, else an upper bound (at most ``alpha``). With the
    cut on, subtrees whose ``W`` (an upper bound on their value) is at most ``alpha`` are
    cut; over the state budget, :data:`ABORTED`."""
    memo: MutableMapping[int, float] = S[S_MEMO]
    bounds: MutableMapping[int, float] = S[S_BOUNDS]
    key = _key((((pos * (STANDARD_TURNS + 2)) + turn) * MAX_HURT + hurt) * KEY_SLOTS + ctx, gone)
    known = memo.get(key, MISSING)
    if known != MISSING:
        return known
    upper = bounds.get(key, MISSING)
    if upper == MISSING:
        upper = _upper(pos, turn, hurt, ctx, gone, S) if S[S_PRUNE] else 1e9
    if upper <= alpha:
        return upper
    budget = S[S_BUDGET]
    if (
        len(memo) + len(bounds) > budget
        or len(S[S_EXPECTED]) // EXPECTED_PER_STATE > budget
        or len(S[S_POSTERIORS]) // POSTERIORS_PER_STATE > budget
    ):
        return ABORTED  # over the state budget: an upper bound that says nothing
    best = FORBIDDEN
    a = alpha
    actions = ACTIONS_AT[ctx]
    for i in range(actions.shape[0]):
        if actions[i] < 0:
            break
        v = _act(pos, turn, hurt, ctx, actions[i], gone, a, S)
        best = max(best, v)
        a = max(a, v)
    if best > alpha:
        memo[key] = best
    else:
        bounds[key] = min(upper, best)
    return best


def solve(S: tuple[Any, ...], alpha: float = NO_CUT) -> float:
    """The clairvoyant's maximum of ``R - Z`` over the games of ``S``'s deal (fail-soft
    above ``alpha``, as :func:`_solve`)."""
    return float(_solve(0, 1, 0, CTX_TURN, 0, alpha, S))


def states(S: tuple[Any, ...]) -> int:
    """How many decision points the search has memoised (exactly, or as cut)."""
    return len(S[S_MEMO]) + len(S[S_BOUNDS])


TABLE_FEATURE: Final = 0
TABLE_NEED: Final = 1


@functools.cache
def suit_tables_packed() -> I64:
    """The per-suit feature and need tables, rows :data:`TABLE_FEATURE` and
    :data:`TABLE_NEED` (built once per process)."""
    return np.stack([suit_feature_table(), suit_need_table()])


def w_args(model: ValueModel) -> WArgs:
    """``model`` as the kernels take it (:data:`WArgs`)."""
    return model.theta, suit_tables_packed(), np.zeros(FEATURES_PER_STATE, dtype=np.int64)


def deal_bound(deck: Any, model: ValueModel) -> float:
    """The clairvoyant's maximum of ``R - Z`` over every relaxed game of ``deck`` (its bound)."""
    return solve(search_state(DealFacts.of(deck), model))


def best_action(S: tuple[Any, ...], pos: int, turn: int, hurt: int, ctx: int) -> int:
    """The first action of the searched deal's best game from a decision point (nothing
    lost, no cut): each action's value again, its subtrees from the memo."""
    best, chosen = -np.inf, -1
    for action in ACTIONS_AT[ctx].tolist():
        if action < 0:
            break
        v = float(_act(pos, turn, hurt, ctx, action, 0, NO_CUT, S))
        if v > best:
            best, chosen = v, action
    return chosen


def deal_bound_path(deck: Any, model: ValueModel) -> tuple[float, list[tuple[int, int, int, int]]]:
    """The deal's bound and the decision points ``(pos, turn, hurt, ctx)`` of the
    clairvoyant's best relaxed game."""
    facts = DealFacts.of(deck)
    S = search_state(facts, model)
    best = solve(S)
    position = start_position(facts.cards)
    keeping = RELAXED.packed()
    path = []
    pos = 0
    while True:
        turn, hurt, ctx = int(position[P_TURN]), int(position[P_HURT]), int(position[P_CTX])
        path.append((pos, turn, hurt, ctx))
        action = best_action(S, pos, turn, hurt, ctx)
        outcome, drawn = advance(facts.cards, pos, position, action, keeping)
        if outcome != PLAYING:
            return best, path
        pos += int(drawn)


# --------------------------------------------------------------------------- checks
Penalty = Callable[..., float]
"""``z(pos, turn, hurt, action, xk, gone=0)`` of a deal (:func:`penalties`)."""


def penalties(S: tuple[Any, ...]) -> Penalty:
    """``z`` of the deck's card at ``pos`` drawn by ``action`` in the draw ``xk``, the cards
    ``gone`` lost before it (``S``: a deal's :func:`search_state`), called from Python: the
    compiled penalty, ``S``'s numba type found once (typing its dicts costs more than a
    penalty)."""
    _z(0, 1, 0, THREATEN, XK_THREATEN, 0, S)  # compiled for S's types (cached, not wasted)
    signature = (types.int64,) * 6 + (typeof(S),)  # type: ignore[no-untyped-call]
    entry = cast(Any, _z).get_overload(signature)

    def z(pos: int, turn: int, hurt: int, action: int, xk: int, gone: int = 0) -> float:
        return float(entry(pos, turn, hurt, action, xk, gone, S))

    return z


def card_penalty(S: tuple[Any, ...], pos: int, turn: int, hurt: int, action: int, xk: int) -> float:
    """``z`` of the deck's card at ``pos`` drawn by ``action`` in the draw ``xk``, nothing
    lost (``S``: a deal's :func:`search_state`; many calls: :func:`penalties`)."""
    return float(_z(pos, turn, hurt, action, xk, 0, S))


def twin_result(deck: Any, actions: list[int], model: ValueModel) -> tuple[float, float, str]:
    """The relaxed twin of a real game: ``actions`` (a real player's, on ``deck``) replayed
    in the relaxed game, with the penalties of its draws. Returns ``(R, Z, real outcome)``:
    the twin's own result (1 if the relaxed game completed its phrase along these draws,
    which it must whenever the real game wins, maybe earlier), the sum of its penalties up
    to its end, and the real game's outcome (the real game is played to its end). The
    clairvoyant's maximum on the deal is at least ``R - Z`` (it can play these actions),
    and over the games of an honest player ``Z`` has mean zero."""
    from coldiron_env.game import Game

    facts = DealFacts.of(deck)
    z = penalties(search_state(facts, model))
    game = Game([int(c) for c in facts.cards])
    total = 0.0
    twin_won = False
    for action in actions:
        pos, turn, hurt, ctx = game.pos, game.turn, game.hurt, ctx_of(game)
        game.step(action)
        for drawn, card in enumerate(game.drawn):
            if twin_won:
                break  # the relaxed game is over; the real one plays on, for its outcome
            total += z(pos, turn, hurt, action, int(draw_of(action, ctx, drawn)))
            pos += 1
            twin_won = bool(facts.won[pos])
            hurt = int(card_step(action, ctx, drawn, card, hurt)[0])
        if game.outcome is not None:
            break
    return float(twin_won), total, game.outcome or "playing"
