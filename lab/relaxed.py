"""The relaxed game's rules, written once for every search of the lab that plays them.

The *relaxed game* (lab/docs/bound.md) is Cold Iron in which every numbered card drawn is
kept. Its variants differ only in which numbered cards are lost (:class:`Keeping`): the
*strict* game loses a Rest's card (the first ``cap`` of them), the real game also a rack's
card that does not end the rack. Everything else is the real game's rules, here:

- :func:`card_step`: what one card drawn does: the Hurt after it, and what comes next
  (another card of the same action, a decision point of this turn, the turn's end, or death);
- :func:`after_stop`: where Stop (end the turn, decline a bonus) goes, drawing nothing;
- :func:`draw_of`: which draw exactly a card is (``XK_*``), which is what a penalty's ``W``
  is told about the draw (the need-known ``W`` reads the decision point after it);
- :func:`card_lost`: whether a numbered card drawn is lost, by the variant;
- :func:`advance`: an action played forward on the cards in the order they come (a player's
  game on a deal, or on a sampled order of the unseen cards).

The searches (:mod:`lab.bound`'s clairvoyant, with :mod:`lab.experiments.strict_bound`'s
variants; :mod:`lab.experiments.bound_search`'s real game), the fitting of ``W``
(:mod:`lab.bound_fit`) and the need-known game (:mod:`lab.need_game`, whose rack may end
after any card) all play these. Standard rules only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from coldiron_env.actions import (
    BONUS,
    IRON,
    PHASE_BONUS,
    PHASE_IRON,
    RACK_ACTIONS,
    RACK_TARGETS,
    REST,
    STOP,
    THREATEN,
)
from coldiron_env.batched import compiled
from coldiron_env.cards import (
    DECK_SIZE,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_NUMBERED,
    NUM_RANKS,
    NUM_SUITS,
    SUIT_FIELD_MASK,
)
from coldiron_env.judge import HAS_RUN
from coldiron_env.options import BONUS_DRAWS, IRON_APPLICATIONS_PER_TURN, MAX_HURT, STANDARD_TURNS

I64 = npt.NDArray[np.int64]

# --------------------------------------------------------------------------- decision points
CTX_TURN: Final = 0
"""Start of a turn; ``CTX_TURN + n`` (n = 1, 2): after n Iron applications this turn."""
CTX_BONUS: Final = 3
"""A Joker's bonus on offer: ``CTX_BONUS`` after a Threaten, ``CTX_BONUS + n`` after the n-th
Iron application."""
NUM_CTX: Final = CTX_BONUS + IRON_APPLICATIONS_PER_TURN + 1

# what follows a card (card_step), beside a decision point CTX_* of the same turn
DRAW_ON: Final = -1
"""The action draws another card (a bonus's next draw, a rack not yet ended)."""
END_TURN: Final = -2
"""The turn is over: the next one starts, or midnight has come."""
SLAIN: Final = -3
"""The Hurt reached :data:`MAX_HURT`, or a rack drew a Joker."""

# the actions (the product's indices)
RACK_FIRST: Final = RACK_ACTIONS[0]
RACK_MASKS: Final = np.array([RACK_TARGETS[a] for a in RACK_ACTIONS], dtype=np.int64)
"""``RACK_MASKS[action - RACK_FIRST]``: the numbered cards that end that rack."""
ACTIONS_AT: Final = np.array(
    [[*range(REST + 1)]]
    + [[IRON, STOP] + [-1] * (REST - 1)] * (CTX_BONUS - CTX_TURN - 1)
    + [[STOP, BONUS] + [-1] * (REST - 1)] * (NUM_CTX - CTX_BONUS),
    dtype=np.int64,
)
"""``ACTIONS_AT[ctx]``: the legal actions at a decision point, in the searches' order
(padded with -1): at a turn's start Threaten, the Iron, every rack, Rest; after an Iron
application the Iron again, Stop; a bonus on offer Stop (decline), the bonus."""

# --------------------------------------------------------------------------- draws
XK_THREATEN: Final = 0
XK_REST: Final = 1
XK_IRON: Final = 1
"""``XK_IRON + a`` (a = 1..3): the a-th Iron application's card."""
XK_THREATEN_BONUS: Final = XK_IRON + IRON_APPLICATIONS_PER_TURN + 1
"""``+ (b - 1)``: a Threaten's bonus card with ``b`` draws left before it."""
XK_IRON_BONUS: Final = XK_THREATEN_BONUS + BONUS_DRAWS
"""``+ (a - 1) * 3 + (b - 1)``: an Iron bonus card, after application a, ``b`` draws left."""
XK_RACK: Final = XK_IRON_BONUS + IRON_APPLICATIONS_PER_TURN * BONUS_DRAWS
"""A rack's card."""
NUM_XK: Final = XK_RACK + 1

# kinds of draw: what a court or a Joker drawn does (W's penalties read it)
DRAW_SAFE: Final = 0
"""Threaten, Rest, the Iron's own card, a Threaten's bonus: a court or a Joker costs nothing."""
DRAW_HURTING: Final = 1
"""An Iron's bonus: a court costs 1 Hurt."""
DRAW_RACK: Final = 2
"""A rack: a court costs 1 Hurt, a Joker slays."""
DRAW_KINDS: Final = np.array(
    [DRAW_HURTING if XK_IRON_BONUS <= xk < XK_RACK else DRAW_SAFE for xk in range(XK_RACK)]
    + [DRAW_RACK],
    dtype=np.int64,
)
"""``DRAW_KINDS[xk]``: the kind of a draw."""


@compiled
def after_iron(applications: int) -> int:
    """Where the turn goes once its ``applications``-th Iron application (its bonus
    included) is over: the Iron's decision point, or the turn's end after the last."""
    if applications < IRON_APPLICATIONS_PER_TURN:
        return CTX_TURN + applications
    return END_TURN


@compiled
def after_stop(ctx: int) -> int:
    """Where Stop at ``ctx`` goes (it draws nothing): ending the turn, or declining an
    Iron's bonus, which leaves the Iron's decision point (the turn's end after the last)."""
    if ctx > CTX_BONUS:
        return int(after_iron(ctx - CTX_BONUS))
    return END_TURN


@compiled
def draw_of(action: int, ctx: int, drawn: int) -> int:
    """Which draw (``XK_*``) the ``drawn``-th card (from 0) of ``action`` taken at ``ctx`` is."""
    if action == BONUS:
        left = BONUS_DRAWS - drawn
        if ctx > CTX_BONUS:
            return XK_IRON_BONUS + (ctx - CTX_BONUS - 1) * BONUS_DRAWS + left - 1
        return XK_THREATEN_BONUS + left - 1
    if RACK_FIRST <= action < REST:
        return XK_RACK
    if action == REST:
        return XK_REST
    if action == THREATEN:
        return XK_THREATEN
    return XK_IRON + ctx - CTX_TURN + 1


@compiled
def card_step(action: int, ctx: int, drawn: int, card: int, hurt: int) -> tuple[int, int]:
    """The rules of one card: ``card``, the ``drawn``-th card of ``action`` taken at ``ctx``
    with Hurt ``hurt`` before it, neither winning nor the deck's last. Returns the Hurt
    after it and what comes next: a decision point ``CTX_*`` of this turn, :data:`DRAW_ON`,
    :data:`END_TURN` or :data:`SLAIN`. (Whether a numbered card is kept is
    :func:`card_lost`'s; no rule here depends on it.)"""
    if action == THREATEN:
        return hurt, (CTX_BONUS if card >= FIRST_JOKER else END_TURN)
    if action == REST:
        return max(hurt - 1, 0), END_TURN
    if action == IRON:
        hurt += 1
        if hurt >= MAX_HURT:
            return hurt, SLAIN
        applications = ctx - CTX_TURN + 1
        if card >= FIRST_JOKER:
            return hurt, CTX_BONUS + applications
        return hurt, after_iron(applications)
    hurting = action != BONUS or ctx > CTX_BONUS  # a rack's or an Iron bonus's court hurts
    if hurting and FIRST_COURT <= card < FIRST_JOKER:
        hurt += 1
        if hurt >= MAX_HURT:
            return hurt, SLAIN
    if action == BONUS:
        if drawn + 1 < BONUS_DRAWS:
            return hurt, DRAW_ON
        return hurt, after_stop(ctx)
    if card >= FIRST_JOKER:
        return hurt, SLAIN  # a rack's Joker
    if card < FIRST_COURT and (RACK_MASKS[action - RACK_FIRST] >> card) & 1 == 1:
        return hurt, END_TURN  # the rack's target
    return hurt, DRAW_ON


DRAWS: Final = tuple(
    (action, ctx, drawn)
    for ctx in range(NUM_CTX)
    for action in ACTIONS_AT[ctx].tolist()
    if action >= 0 and action != STOP
    for drawn in range(BONUS_DRAWS if action == BONUS else 1)
)
"""Every draw of the game: an action, the decision point it is taken at, and which of its
cards (from 0) it is."""


# --------------------------------------------------------------------------- the variants
@dataclass(frozen=True)
class Keeping:
    """Which numbered cards drawn a variant of the relaxed game loses (the others join the
    hand); as the kernels read it: :meth:`packed`."""

    cap: int = 0
    """A Rest's numbered card is lost while fewer than ``cap`` cards are lost."""
    forbid: bool = False
    """Every Rest's numbered card is lost, and the player may lose no more than ``cap``
    numbered cards (a game that would is left out: the searches' lower estimates)."""
    real: bool = False
    """A rack's numbered card that does not end it is lost, as in Cold Iron."""

    def packed(self) -> I64:
        return np.array([self.cap, int(self.forbid), int(self.real)], dtype=np.int64)


K_CAP: Final = 0
K_FORBID: Final = 1
K_REAL: Final = 2
RELAXED: Final = Keeping()
"""Every numbered card drawn is kept."""
STRICT: Final = Keeping(cap=NUM_NUMBERED)
"""A Rest's card is lost; a rack keeps every numbered card it draws."""
REAL: Final = Keeping(cap=NUM_NUMBERED, real=True)
"""Cold Iron's own keeping: a Rest's card and a rack's unmatched cards are lost."""


@compiled
def count(x: int) -> int:
    """The bits set in ``x`` (cards in a mask)."""
    n = 0
    while x:
        x &= x - 1
        n += 1
    return n


@compiled
def rest_loses(lost: int, keeping: I64) -> bool:
    """Whether a Rest's numbered card is lost, ``lost`` the numbered cards lost so far."""
    return bool(keeping[K_FORBID]) or count(lost) < keeping[K_CAP]


ALL_NUMBERED: Final = (1 << NUM_NUMBERED) - 1


@compiled
def kept_cards(action: int, lost: int, keeping: I64) -> int:
    """The numbered cards that ``action``'s next card is kept if it is one of, the others
    lost (``lost``: the numbered cards lost so far): a Rest's while the variant loses them,
    a real rack's but its targets."""
    if action == REST:
        return 0 if rest_loses(lost, keeping) else ALL_NUMBERED
    if keeping[K_REAL] and RACK_FIRST <= action < REST:
        return int(RACK_MASKS[action - RACK_FIRST])
    return ALL_NUMBERED


@compiled
def card_lost(action: int, card: int, lost: int, keeping: I64) -> bool:
    """Whether the numbered ``card`` drawn by ``action`` is lost."""
    return bool((kept_cards(action, lost, keeping) >> card) & 1 == 0)


@compiled
def over_cap(lost: int, keeping: I64) -> bool:
    """``forbid``: one more numbered card lost is one too many (the game is left out)."""
    return bool(keeping[K_FORBID]) and count(lost) >= keeping[K_CAP]


HAS_RUN_ARRAY: Final = np.array(HAS_RUN, dtype=np.bool_)


@compiled
def complete(hand: int) -> bool:
    """A run in every suit: the phrase is complete, the game won."""
    done = True
    for s in range(NUM_SUITS):
        done = done and HAS_RUN_ARRAY[(hand >> (s * NUM_RANKS)) & SUIT_FIELD_MASK]
    return done


# --------------------------------------------------------------------------- playing forward
# A position as a player keeps it (what it has seen): an int64 array of these entries.
P_HAND: Final = 0
"""The numbered cards held."""
P_UNSEEN: Final = 1
"""The numbered cards not yet drawn."""
P_COURTS: Final = 2
"""Courts not yet drawn."""
P_JOKERS: Final = 3
"""Jokers not yet drawn."""
P_HURT: Final = 4
P_TURN: Final = 5
P_CTX: Final = 6
P_LOST: Final = 7
"""The numbered cards lost (drawn and not kept)."""
POSITION_SIZE: Final = 8

PLAYING: Final = 0
WON: Final = 1
LOST: Final = 2


@compiled
def start_position(deck: Any) -> I64:
    """A deal's first decision point (turn 1, nothing drawn), ``deck``'s cards unseen."""
    out = np.zeros(POSITION_SIZE, dtype=np.int64)
    for card in deck:
        if card < FIRST_COURT:
            out[P_UNSEEN] |= np.int64(1) << card
        elif card < FIRST_JOKER:
            out[P_COURTS] += 1
        else:
            out[P_JOKERS] += 1
    out[P_TURN] = 1
    out[P_CTX] = CTX_TURN
    return out


@compiled
def advance(order: Any, start: int, position: I64, action: int, keeping: I64) -> tuple[int, int]:
    """Play ``action`` at ``position`` (a decision point, updated in place to the next one)
    on the unseen cards in the order ``order[start:]`` comes in. Returns the outcome
    (:data:`PLAYING`, :data:`WON` or :data:`LOST`: slain, the deck exhausted, midnight)
    and how many cards it drew. The deck is exhausted when ``position`` counts no card
    unseen, so ``order`` may be a deal (``start`` its position) or any order of the unseen
    cards (a one-card action reads ``order[start]`` only)."""
    hand, unseen, courts, jokers = (
        position[P_HAND],
        position[P_UNSEEN],
        position[P_COURTS],
        position[P_JOKERS],
    )
    hurt, turn, ctx, lost = position[P_HURT], position[P_TURN], position[P_CTX], position[P_LOST]
    outcome = PLAYING
    drawn = 0
    follows = after_stop(ctx) if action == STOP else DRAW_ON
    while follows == DRAW_ON:
        card = order[start + drawn]
        if card < FIRST_COURT:
            bit = np.int64(1) << card
            unseen &= ~bit
            if card_lost(action, card, lost, keeping):
                lost |= bit
            else:
                hand |= bit
        elif card < FIRST_JOKER:
            courts -= 1
        else:
            jokers -= 1
        if complete(hand):
            outcome = WON
        elif unseen == 0 and courts == 0 and jokers == 0:
            outcome = LOST  # the deck is exhausted
        else:
            hurt, follows = card_step(action, ctx, drawn, card, hurt)
        drawn += 1
        if outcome != PLAYING:
            break
    if follows == SLAIN:
        outcome = LOST
    elif follows == END_TURN:
        if turn >= STANDARD_TURNS:
            outcome = LOST  # midnight
        else:
            turn, ctx = turn + 1, CTX_TURN
    elif follows >= 0:
        ctx = follows
    position[P_HAND], position[P_UNSEEN], position[P_COURTS], position[P_JOKERS] = (
        hand,
        unseen,
        courts,
        jokers,
    )
    position[P_HURT], position[P_TURN], position[P_CTX], position[P_LOST] = hurt, turn, ctx, lost
    return outcome, drawn


# --------------------------------------------------------------------------- one deal
ROW_CARDS: Final = 0
ROW_HANDS: Final = 1
ROW_UNSEEN: Final = 2
ROW_COURTS: Final = 3
ROW_JOKERS: Final = 4
"""Rows of :meth:`DealFacts.packed`."""


@dataclass(frozen=True)
class DealFacts:
    """A deal's relaxed hands and suffix counts by position (what is held and unseen)."""

    cards: I64
    hands: I64
    """``hands[p]``: the numbered cards among the first ``p`` (every one kept)."""
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
        won = np.array([bool(complete(int(h))) for h in hands])
        return cls(cards, hands, unseen, courts, jokers, won)

    def packed(self) -> I64:
        """The deal as the kernels read it: one array, rows ``ROW_*`` by position (the cards'
        row padded with -1 at the deck's end)."""
        cards = np.append(self.cards, -1)
        return np.stack([cards, self.hands, self.unseen, self.courts, self.jokers])


def ctx_of(game: Any) -> int:
    """The decision point (``CTX_*``) of a reference engine's game (``coldiron_env.game.Game``)."""
    from coldiron_env.game import BONUS_FROM_IRON

    if game.phase == PHASE_IRON:
        return int(CTX_TURN + game.iron_count)
    if game.phase == PHASE_BONUS:
        return int(CTX_BONUS + (game.iron_count if game.bonus_source == BONUS_FROM_IRON else 0))
    return CTX_TURN
