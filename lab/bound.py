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
Hurt), fitted by :mod:`lab.bound_fit` on deals of a stream of its own.
Standard rules only.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from coldiron_env.actions import BONUS, RACK_ACTIONS, RACK_TARGETS, REST, STOP
from coldiron_env.analysis import IMPOSSIBLE, NUM_COURTS, suit_tables
from coldiron_env.batched import compiled
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
from coldiron_env.judge import HAS_RUN, NUM_FIELDS, WINDOW_MASKS
from coldiron_env.options import BONUS_DRAWS, IRON_APPLICATIONS_PER_TURN, MAX_HURT, STANDARD_TURNS
from lab.need_game import (
    CAPACITY_M,
    CARD_COURT,
    CARD_JOKER,
    CARD_NUMBERED,
    NUM_XK,
    OFFSET,
    XK_IRON,
    XK_IRON_BONUS,
    XK_RACK,
    XK_REST,
    XK_THREATEN,
    XK_THREATEN_BONUS,
    completion_curve,
    expected_after_need,
    need_game_values,
    realized_after,
)

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

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
OFF_BIAS: Final = OFF_CTX + 7
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

# decision points of the relaxed game
CTX_TURN: Final = 0
"""Start of a turn; ``CTX_TURN + n`` (n = 1, 2): after n Iron applications this turn."""
CTX_BONUS: Final = 3
"""A Joker's bonus on offer: ``CTX_BONUS`` after a Threaten, ``CTX_BONUS + n`` after the n-th
Iron application."""
NUM_CTX: Final = CTX_BONUS + IRON_APPLICATIONS_PER_TURN + 1

# kinds of draw: which numbered cards are kept (all, in the relaxed game), and whether a
# court hurts and a Joker slays
DRAW_SAFE: Final = 0
"""Threaten, Rest, a Threaten's bonus: a court or a Joker does nothing to Hurt."""
DRAW_HURTING: Final = 1
"""An Iron's bonus: a court costs 1 Hurt."""
DRAW_RACK: Final = 2
"""A rack: a court costs 1 Hurt, a Joker slays."""

RACK_MASKS: Final = np.array([RACK_TARGETS[a] for a in RACK_ACTIONS], dtype=np.int64)
RACK_ACTION_FIRST: Final = RACK_ACTIONS[0]
ACTION_REST: Final = REST
ACTION_STOP: Final = STOP
ACTION_TAKE_BONUS: Final = BONUS
ACTIONS_AT_TURN: Final = REST + 1
HAS_RUN_ARRAY: Final = np.array(HAS_RUN, dtype=np.bool_)
UNSET: Final = -1e9


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


@compiled
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
def state_features(
    hand: int,
    unseen: int,
    deck: int,
    courts: int,
    jokers: int,
    turns_left: int,
    hurt: int,
    ctx: int,
    phi: I64,
    need_t: I64,
    out: I64,
) -> int:
    """Write the active parameter indices of a position into ``out``; returns 1 when the
    phrase is complete, -1 when it is out of reach, 0 otherwise."""
    total_need = 0
    done = 0
    for s in range(NUM_SUITS):
        held = (hand >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        un = (unseen >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
        index = held * NUM_FIELDS + un
        f = phi[index]
        if f == SUIT_DEAD:
            return -1
        if f == SUIT_DONE:
            done += 1
        out[s] = OFF_SUIT + f
        total_need += need_t[index]
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


@compiled
def value(
    hand: int,
    unseen: int,
    deck: int,
    courts: int,
    jokers: int,
    turns_left: int,
    hurt: int,
    theta: F64,
    phi: I64,
    need_t: I64,
    scratch: I64,
    ctx: int = 0,
) -> float:
    """``W`` of a relaxed position (1 when won, 0 when out of reach or the model is off)."""
    if theta.shape[0] == 0:
        return 0.0  # W = 0: the clairvoyant
    if turns_left <= 0:
        return 0.0  # past midnight
    if theta.shape[0] == CAPACITY_SIZE:
        return capacity_value(hand, jokers, min(turns_left, STANDARD_TURNS), hurt, theta)
    status = state_features(
        hand, unseen, deck, courts, jokers, turns_left, hurt, ctx, phi, need_t, scratch
    )
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
@compiled
def after_card(
    card: int,
    hand: int,
    unseen: int,
    deck: int,
    courts: int,
    jokers: int,
    turns_left: int,
    hurt: int,
    kind: int,
    theta: F64,
    phi: I64,
    need_t: I64,
    scratch: I64,
) -> float:
    """``W`` just after ``card`` is drawn in a draw of ``kind`` (every numbered card kept;
    dead if a rack's Joker or a court's Hurt slays)."""
    if card < FIRST_COURT:
        bit = 1 << card
        return value(
            hand | bit,
            unseen & ~bit,
            deck - 1,
            courts,
            jokers,
            turns_left,
            hurt,
            theta,
            phi,
            need_t,
            scratch,
        )
    if card < FIRST_JOKER:
        h = hurt + 1 if kind != DRAW_SAFE else hurt
        if h >= MAX_HURT:
            return 0.0
        return value(
            hand, unseen, deck - 1, courts - 1, jokers, turns_left, h, theta, phi, need_t, scratch
        )
    if kind == DRAW_RACK:
        return 0.0
    return value(
        hand, unseen, deck - 1, courts, jokers - 1, turns_left, hurt, theta, phi, need_t, scratch
    )


@compiled
def expected_after(
    hand: int,
    unseen: int,
    deck: int,
    courts: int,
    jokers: int,
    turns_left: int,
    hurt: int,
    kind: int,
    theta: F64,
    phi: I64,
    need_t: I64,
    scratch: I64,
) -> float:
    """``E[W(after the next card)]`` over the ``deck`` unseen cards: ``unseen`` (numbered),
    ``courts`` courts and ``jokers`` Jokers."""
    if theta.shape[0] == 0:
        return 0.0
    total = 0.0
    rest = unseen
    while rest:
        low = rest & -rest
        card = 0
        while (1 << card) != low:
            card += 1
        total += after_card(
            card,
            hand,
            unseen,
            deck,
            courts,
            jokers,
            turns_left,
            hurt,
            kind,
            theta,
            phi,
            need_t,
            scratch,
        )
        rest ^= low
    if courts > 0:
        total += courts * after_card(
            FIRST_COURT,
            hand,
            unseen,
            deck,
            courts,
            jokers,
            turns_left,
            hurt,
            kind,
            theta,
            phi,
            need_t,
            scratch,
        )
    if jokers > 0:
        total += jokers * after_card(
            FIRST_JOKER,
            hand,
            unseen,
            deck,
            courts,
            jokers,
            turns_left,
            hurt,
            kind,
            theta,
            phi,
            need_t,
            scratch,
        )
    return float(total / deck)


# --------------------------------------------------------------------------- one deal
@dataclass(frozen=True)
class DealFacts:
    """A deal's relaxed hands and suffix counts by position (what is held and unseen)."""

    cards: I64
    hands: I64
    unseen: I64
    courts: I64
    jokers: I64
    won: npt.NDArray[np.bool_]
    """``won[p]``: the first ``p`` cards hold a run in every suit."""

    @classmethod
    def of(cls, deck: Any) -> DealFacts:
        cards = np.asarray(deck, dtype=np.int64)
        n = DECK_SIZE
        hands = np.zeros(n + 1, dtype=np.int64)
        unseen = np.zeros(n + 1, dtype=np.int64)
        courts = np.zeros(n + 1, dtype=np.int64)
        jokers = np.zeros(n + 1, dtype=np.int64)
        for pos in range(n):
            card = int(cards[pos])
            hands[pos + 1] = hands[pos] | ((1 << card) if card < FIRST_COURT else 0)
        for pos in range(n - 1, -1, -1):
            card = int(cards[pos])
            unseen[pos] = unseen[pos + 1] | ((1 << card) if card < FIRST_COURT else 0)
            courts[pos] = courts[pos + 1] + int(FIRST_COURT <= card < FIRST_JOKER)
            jokers[pos] = jokers[pos + 1] + int(card >= FIRST_JOKER)
        won = np.array(
            [
                all(
                    HAS_RUN[(int(h) >> (s * NUM_RANKS)) & SUIT_FIELD_MASK] for s in range(NUM_SUITS)
                )
                for h in hands
            ]
        )
        return cls(cards, hands, unseen, courts, jokers, won)


def _recursive(fn: Any) -> Any:
    """Compiled without numba's disk cache (it cannot resolve mutual recursion)."""
    return compiled(fn, cache=False)


@_recursive
def _z(pos: int, turn: int, hurt: int, kind: int, xk: int, D: Any) -> float:
    """The penalty of the card at ``pos`` drawn in a draw of ``kind`` (``xk``: which draw
    exactly, for the need-known ``W``), its expectation cached per (pos, turn, Hurt, xk)."""
    cards, hands, unseen_t, courts_t, jokers_t, theta, phi, need_t, scratch, cache = D[:10]
    if theta.shape[0] == 0:
        return 0.0
    expected = cache[pos, turn, hurt, xk]
    deck = DECK_SIZE - pos
    turns_left = STANDARD_TURNS - turn + 1
    if theta.shape[0] == NEED_GAME_SIZE:
        V, off, post, numbered_t = D[13], D[14], D[15], D[16]
        m = NUM_NUMBERED - numbered_t[pos]
        c = NUM_COURTS - courts_t[pos]
        j = NUM_JOKERS - jokers_t[pos]
        if expected == UNSET:
            expected = expected_after_need(V, off, post[pos], m, c, j, turn, hurt, xk)
            cache[pos, turn, hurt, xk] = expected
        card = cards[pos]
        card_type = CARD_NUMBERED
        if card >= FIRST_JOKER:
            card_type = CARD_JOKER
        elif card >= FIRST_COURT:
            card_type = CARD_COURT
        after = realized_after(V, off, post[pos + 1], card_type, m, c, j, turn, hurt, xk)
        return after - expected
    if expected == UNSET:
        expected = expected_after(
            hands[pos],
            unseen_t[pos],
            deck,
            courts_t[pos],
            jokers_t[pos],
            turns_left,
            hurt,
            kind,
            theta,
            phi,
            need_t,
            scratch,
        )
        cache[pos, turn, hurt, xk] = expected
    realized = after_card(
        cards[pos],
        hands[pos],
        unseen_t[pos],
        deck,
        courts_t[pos],
        jokers_t[pos],
        turns_left,
        hurt,
        kind,
        theta,
        phi,
        need_t,
        scratch,
    )
    return realized - expected


@_recursive
def _end_turn(pos: int, turn: int, hurt: int, D: Any) -> float:
    if turn >= STANDARD_TURNS:
        return 0.0  # midnight
    return _solve(pos, turn + 1, hurt, CTX_TURN, D)


@_recursive
def _after_iron(pos: int, turn: int, hurt: int, apps: int, D: Any) -> float:
    if apps >= IRON_APPLICATIONS_PER_TURN:
        return _end_turn(pos, turn, hurt, D)
    return _solve(pos, turn, hurt, CTX_TURN + apps, D)


@_recursive
def _single(pos: int, turn: int, hurt: int, action: int, D: Any) -> float:
    """Threaten (0), Rest (1) or the ``action - 1``-th Iron application (2..4)."""
    cards, won = D[0], D[10]
    card = cards[pos]
    iron = action >= 2
    xk = XK_THREATEN if action == 0 else (XK_REST if action == 1 else XK_IRON + action - 1)
    value_now = -_z(pos, turn, hurt, DRAW_SAFE, xk, D)
    pos += 1
    if won[pos]:
        return value_now + 1.0
    if pos >= DECK_SIZE:
        return value_now  # deck exhausted
    if iron:
        hurt += 1
        if hurt >= MAX_HURT:
            return value_now
        if card >= FIRST_JOKER:
            return value_now + _solve(pos, turn, hurt, CTX_BONUS + action - 1, D)
        return value_now + _after_iron(pos, turn, hurt, action - 1, D)
    if action == 1:  # Rest
        return value_now + _end_turn(pos, turn, max(hurt - 1, 0), D)
    if card >= FIRST_JOKER:
        return value_now + _solve(pos, turn, hurt, CTX_BONUS, D)
    return value_now + _end_turn(pos, turn, hurt, D)


@_recursive
def _bonus(pos: int, turn: int, hurt: int, ctx: int, D: Any) -> float:
    cards, won = D[0], D[10]
    hurting = ctx > CTX_BONUS
    kind = DRAW_HURTING if hurting else DRAW_SAFE
    total = 0.0
    for drawn in range(BONUS_DRAWS):
        left = BONUS_DRAWS - drawn
        if hurting:
            xk = XK_IRON_BONUS + (ctx - CTX_BONUS - 1) * BONUS_DRAWS + left - 1
        else:
            xk = XK_THREATEN_BONUS + left - 1
        card = cards[pos]
        total -= _z(pos, turn, hurt, kind, xk, D)
        pos += 1
        if won[pos]:
            return total + 1.0
        if pos >= DECK_SIZE:
            return total
        if hurting and FIRST_COURT <= card < FIRST_JOKER:
            hurt += 1
            if hurt >= MAX_HURT:
                return total
    if not hurting:
        return total + _end_turn(pos, turn, hurt, D)
    return total + _after_iron(pos, turn, hurt, ctx - CTX_BONUS, D)


@_recursive
def _rack(pos: int, turn: int, hurt: int, index: int, D: Any) -> float:
    cards, won = D[0], D[10]
    targets = RACK_MASKS[index]
    total = 0.0
    while True:
        card = cards[pos]
        total -= _z(pos, turn, hurt, DRAW_RACK, XK_RACK, D)
        pos += 1
        if won[pos]:
            return total + 1.0
        if pos >= DECK_SIZE:
            return total
        if card < FIRST_COURT and (targets >> card) & 1 == 1:
            return total + _end_turn(pos, turn, hurt, D)
        if card >= FIRST_JOKER:
            return total  # slain
        if card >= FIRST_COURT:
            hurt += 1
            if hurt >= MAX_HURT:
                return total


@_recursive
def _solve(pos: int, turn: int, hurt: int, ctx: int, D: Any) -> float:
    """The clairvoyant's maximum of ``R - Z`` from a decision point of the relaxed game."""
    memo = D[11]
    known = memo[pos, turn, hurt, ctx]
    if known != UNSET:
        return known
    chosen = D[12]
    best = UNSET
    if ctx == CTX_TURN:
        for action in range(ACTIONS_AT_TURN):
            if action == 0:
                v = _single(pos, turn, hurt, 0, D)  # Threaten
            elif action == 1:
                v = _single(pos, turn, hurt, 2, D)  # the first Iron application
            elif action == ACTION_REST:
                v = _single(pos, turn, hurt, 1, D)  # Rest
            else:
                v = _rack(pos, turn, hurt, action - RACK_ACTION_FIRST, D)
            if v > best:
                best, chosen[pos, turn, hurt, ctx] = v, action
    elif ctx < CTX_BONUS:
        v = _single(pos, turn, hurt, ctx + 2, D)  # Iron again
        if v > best:
            best, chosen[pos, turn, hurt, ctx] = v, 1
        v = _end_turn(pos, turn, hurt, D)  # Stop
        if v > best:
            best, chosen[pos, turn, hurt, ctx] = v, ACTION_STOP
    else:
        if ctx == CTX_BONUS:
            v = _end_turn(pos, turn, hurt, D)  # decline
        else:
            v = _after_iron(pos, turn, hurt, ctx - CTX_BONUS, D)
        if v > best:
            best, chosen[pos, turn, hurt, ctx] = v, ACTION_STOP
        v = _bonus(pos, turn, hurt, ctx, D)
        if v > best:
            best, chosen[pos, turn, hurt, ctx] = v, ACTION_TAKE_BONUS
    memo[pos, turn, hurt, ctx] = best
    return best


def _arrays(facts: DealFacts, model: ValueModel) -> tuple[Any, ...]:
    phi, need_t = _tables()
    return (
        facts.cards,
        facts.hands,
        facts.unseen,
        facts.courts,
        facts.jokers,
        model.theta,
        phi,
        need_t,
        np.zeros(FEATURES_PER_STATE, dtype=np.int64),
        np.full((DECK_SIZE + 1, STANDARD_TURNS + 2, MAX_HURT, NUM_XK), UNSET),
        facts.won,
        np.full((DECK_SIZE + 1, STANDARD_TURNS + 2, MAX_HURT, NUM_CTX), UNSET),
        np.full((DECK_SIZE + 1, STANDARD_TURNS + 2, MAX_HURT, NUM_CTX), -1, dtype=np.int64),
        *_need_arrays(facts, model),
    )


def _need_arrays(facts: DealFacts, model: ValueModel) -> tuple[Any, ...]:
    """The need-known game's table, the (m, r) offsets, ``P(r | hand)`` by position and
    the unseen numbered count by position (empty stand-ins for the other forms of W)."""
    numbered_t = np.array([bin(int(u)).count("1") for u in facts.unseen], dtype=np.int64)
    if model.theta.size != NEED_GAME_SIZE:
        empty = np.zeros((1, 1, 1, 1, 1, 1), dtype=np.float32)
        return empty, OFFSET, np.zeros((DECK_SIZE + 1, CAPACITY_M)), numbered_t
    return need_game_values(), OFFSET, need_posteriors(facts.hands), numbered_t


def need_posteriors(hands: I64) -> F64:
    """``post[p, r]``: the chance that the hand ``hands[p]`` needs exactly ``r`` more
    numbered cards (drawn at random from the unseen ones) to complete the phrase."""
    out = np.zeros((len(hands), CAPACITY_M))
    curve = np.zeros(CAPACITY_M)
    for p, hand in enumerate(hands):
        completion_curve(int(hand), curve)
        out[p, 0] = curve[0]
        out[p, 1:] = np.diff(curve)
    return out


@functools.cache
def _tables() -> tuple[I64, I64]:
    """The per-suit feature and need tables (built once per process)."""
    return suit_feature_table(), suit_need_table()


def deal_bound(deck: Any, model: ValueModel) -> float:
    """The clairvoyant's maximum of ``R - Z`` over every relaxed game of ``deck`` (its bound)."""
    return float(_solve(0, 1, 0, CTX_TURN, _arrays(DealFacts.of(deck), model)))


def deal_bound_path(deck: Any, model: ValueModel) -> tuple[float, list[tuple[int, int, int, int]]]:
    """The deal's bound and the decision points ``(pos, turn, hurt, ctx)`` of the
    clairvoyant's best relaxed game."""
    facts = DealFacts.of(deck)
    arrays = _arrays(facts, model)
    best = float(_solve(0, 1, 0, CTX_TURN, arrays))
    chosen = arrays[12]
    path = []
    pos, turn, hurt, ctx = 0, 1, 0, CTX_TURN
    while True:
        action = int(chosen[pos, turn, hurt, ctx])
        path.append((pos, turn, hurt, ctx))
        step = relaxed_step(facts, pos, turn, hurt, ctx, action)
        if step is None:
            return best, path
        pos, turn, hurt, ctx = step


def relaxed_step(
    facts: DealFacts, pos: int, turn: int, hurt: int, ctx: int, action: int
) -> tuple[int, int, int, int] | None:
    """The next decision point after ``action`` in the relaxed game on ``facts``'s deal, or
    None when the game ends (won or lost). Plain Python: the replay of a path."""
    cards, won = facts.cards, facts.won
    draws, hurting, rack, apps = 1, False, -1, ctx if ctx < CTX_BONUS else 0
    if action == ACTION_STOP:
        if ctx > CTX_BONUS and ctx - CTX_BONUS < IRON_APPLICATIONS_PER_TURN:
            return pos, turn, hurt, CTX_TURN + ctx - CTX_BONUS
        return None if turn >= STANDARD_TURNS else (pos, turn + 1, hurt, CTX_TURN)
    if action == ACTION_TAKE_BONUS:
        draws, hurting = 3, ctx > CTX_BONUS
    elif RACK_ACTION_FIRST <= action < ACTION_REST:
        draws, hurting, rack = DECK_SIZE, True, action - RACK_ACTION_FIRST
    next_ctx = -1
    for _ in range(draws):
        card = int(cards[pos])
        pos += 1
        if won[pos] or pos >= DECK_SIZE:
            return None
        if FIRST_COURT <= card < FIRST_JOKER and hurting:
            hurt += 1
        if card >= FIRST_JOKER and rack >= 0:
            return None
        if hurt >= MAX_HURT:
            return None
        if action == 1:  # Iron
            hurt += 1
            if hurt >= MAX_HURT:
                return None
            if card >= FIRST_JOKER:
                next_ctx = CTX_BONUS + apps + 1
            elif apps + 1 < IRON_APPLICATIONS_PER_TURN:
                next_ctx = CTX_TURN + apps + 1
        elif action == 0 and card >= FIRST_JOKER:
            next_ctx = CTX_BONUS
        if rack >= 0 and card < FIRST_COURT and (int(RACK_MASKS[rack]) >> card) & 1:
            break
    if action == ACTION_REST:
        hurt = max(hurt - 1, 0)
    if action == ACTION_TAKE_BONUS and ctx > CTX_BONUS:
        left = ctx - CTX_BONUS
        next_ctx = CTX_TURN + left if left < IRON_APPLICATIONS_PER_TURN else -1
    if next_ctx >= 0:
        return pos, turn, hurt, next_ctx
    return None if turn >= STANDARD_TURNS else (pos, turn + 1, hurt, CTX_TURN)


# --------------------------------------------------------------------------- checks
def draw_kind(action: int, iron_bonus: bool, apps: int, drawn: int) -> tuple[int, int]:
    """The kind of draw (``DRAW_*``) and which draw exactly (``XK_*``) of the ``drawn``-th
    card of ``action``, taken with ``apps`` Iron applications made this turn before it
    (``iron_bonus``: a bonus on offer came from the Iron)."""
    if action == ACTION_TAKE_BONUS:
        left = BONUS_DRAWS - drawn
        if iron_bonus:
            return DRAW_HURTING, XK_IRON_BONUS + (apps - 1) * BONUS_DRAWS + left - 1
        return DRAW_SAFE, XK_THREATEN_BONUS + left - 1
    if RACK_ACTION_FIRST <= action < ACTION_REST:
        return DRAW_RACK, XK_RACK
    if action == ACTION_REST:
        return DRAW_SAFE, XK_REST
    if action == 0:
        return DRAW_SAFE, XK_THREATEN
    return DRAW_SAFE, XK_IRON + apps + 1


def card_penalty(
    arrays: tuple[Any, ...], pos: int, turn: int, hurt: int, kind: int, xk: int
) -> float:
    """``z`` of the deck's card at ``pos`` (``arrays``: a deal's, from :func:`_arrays`)."""
    return float(_z(pos, turn, hurt, kind, xk, arrays))


def twin_result(deck: Any, actions: list[int], model: ValueModel) -> tuple[float, float, str]:
    """The relaxed twin of a real game: ``actions`` (a real player's, on ``deck``) replayed
    in the relaxed game, with the penalties of its draws. Returns ``(R, Z, real outcome)``:
    the twin's own result (1 if the relaxed game completed its phrase along these draws,
    which it must whenever the real game wins, maybe earlier), the sum of its penalties up
    to its end, and the real game's outcome (the real game is played to its end). The
    clairvoyant's maximum on the deal is at least ``R - Z`` (it can play these actions),
    and over the games of an honest player ``Z`` has mean zero."""
    from coldiron_env.game import BONUS_FROM_IRON, Game

    facts = DealFacts.of(deck)
    arrays = _arrays(facts, model)
    game = Game([int(c) for c in facts.cards])
    total = 0.0
    twin_won = False
    for action in actions:
        pos, turn, hurt, apps = game.pos, game.turn, game.hurt, game.iron_count
        iron_bonus = game.bonus_source == BONUS_FROM_IRON
        game.step(action)
        for drawn, card in enumerate(game.drawn):
            if twin_won:
                break  # the relaxed game is over; the real one plays on, for its outcome
            kind, xk = draw_kind(action, iron_bonus, apps, drawn)
            total += card_penalty(arrays, pos, turn, hurt, kind, xk)
            pos += 1
            twin_won = bool(facts.won[pos])
            if kind != DRAW_SAFE and FIRST_COURT <= card < FIRST_JOKER:
                hurt += 1
        if game.outcome is not None:
            break
    return float(twin_won), total, game.outcome or "playing"
