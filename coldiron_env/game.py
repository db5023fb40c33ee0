"""The rules engine: a pure state machine for one game of Cold Iron (no Gymnasium here).

:class:`Game` holds the state of one game (its attributes are the state) and is advanced by
:meth:`Game.step` with an action index from :mod:`coldiron_env.actions`; its phase gives the
legal actions. The rule variants live apart in :class:`~coldiron_env.options.RuleOptions`.
:class:`Games` declares the same state for ``n`` games as arrays: the state of the batched
rules core (:mod:`coldiron_env.batched`), the native vector env and the planner's compiled
rollouts. The rules are numbered in ``RULES.md`` (R1..R20); comments below cite them. The
hand is a 40-bit mask of numbered card ids, the discard pile a 54-bit mask: each draw is a
handful of integer operations.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import cache
from typing import Final, NamedTuple

import numpy as np
import numpy.typing as npt

from coldiron_env.actions import (
    ACTION_NAMES,
    BONUS,
    IRON,
    LEGAL_ACTIONS,
    LEGAL_BITS,
    NUM_ACTIONS,
    PHASE_BONUS,
    PHASE_IRON,
    PHASE_NAMES,
    PHASE_OVER,
    PHASE_TURN,
    RACK_TARGETS,
    REST,
    STOP,
    THREATEN,
)
from coldiron_env.cards import (
    DECK_SIZE,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_RANKS,
    NUM_SUITS,
    SUIT_FIELD_MASK,
    suit_field,
)
from coldiron_env.judge import HAS_RUN
from coldiron_env.options import (
    BONUS_DRAWS,
    DEFAULT_RULES,
    IRON_APPLICATIONS_PER_TURN,
    MAX_HURT,
    RuleOptions,
)

# Outcome codes (spec): exactly one is reported when a game ends.
WON: Final = "won"
SLAIN: Final = "slain"
DECK_EXHAUSTED: Final = "deck_exhausted"
MIDNIGHT: Final = "midnight"
ILLEGAL: Final = "illegal"
OUTCOMES: Final = (WON, SLAIN, DECK_EXHAUSTED, MIDNIGHT, ILLEGAL)

# What granted a pending or running Joker's bonus (``Game.bonus_source``).
BONUS_FROM_NONE: Final = 0
BONUS_FROM_THREATEN: Final = 1
BONUS_FROM_IRON: Final = 2  # court cards drawn in the bonus hurt (R17)


def describe_illegal(action: object, phase: int) -> str:
    """The message for ``action`` taken in ``phase``, naming it and the legal actions."""
    legal = ", ".join(f"{a} ({ACTION_NAMES[a]})" for a in LEGAL_ACTIONS[phase])
    if isinstance(action, int) and 0 <= action < NUM_ACTIONS:
        shown = f"{action} ({ACTION_NAMES[action]})"
    else:
        shown = repr(action)
    return f"action {shown} is illegal in phase {PHASE_NAMES[phase]!r}; legal: {legal}"


def suits_done_of(hand: int) -> int:
    """Bit mask of the suits whose run ``hand`` (a mask of numbered cards) holds."""
    return sum(1 << suit for suit in range(NUM_SUITS) if HAS_RUN[suit_field(hand, suit)])


def pending_bonus_source(phase: int, iron_count: int) -> int:
    """What granted the bonus on offer in ``phase`` (``BONUS_FROM_NONE`` outside ``bonus``):
    the Iron when it was applied this turn (a Threaten is only legal before any Iron)."""
    if phase != PHASE_BONUS:
        return BONUS_FROM_NONE
    return BONUS_FROM_IRON if iron_count else BONUS_FROM_THREATEN


class IllegalActionError(ValueError):
    """An action that is not legal in the current phase (or not an action at all)."""


def action_index(action: object) -> int:
    """``action`` as an action index: an int (a NumPy integer too) in ``0..18``; a bool, a
    float, a string or an int out of range raises :class:`IllegalActionError` naming it."""
    if type(action) is int and 0 <= action < NUM_ACTIONS:  # the common case, one test
        return action
    try:
        if isinstance(action, (bool, np.bool_)):
            raise TypeError
        a = operator.index(action)  # type: ignore[arg-type]
    except TypeError:
        raise IllegalActionError(
            f"action must be an integer in 0..{NUM_ACTIONS - 1}, got {action!r}"
        ) from None
    if not 0 <= a < NUM_ACTIONS:
        raise IllegalActionError(f"action {a} is outside the action space Discrete({NUM_ACTIONS})")
    return a


def _checked_deck(deck: Sequence[int]) -> list[int]:
    """``deck`` as a list of card ids, or a ``ValueError`` naming what is wrong with it."""
    try:
        cards = [operator.index(card) for card in deck]
    except TypeError:
        raise ValueError(f"deck must hold card ids (integers), got {deck!r}") from None
    if sorted(cards) != list(range(DECK_SIZE)):  # every card id once
        if len(cards) != DECK_SIZE:
            raise ValueError(f"deck must hold {DECK_SIZE} card ids, got {len(cards)}")
        wrong = sorted({c for c in cards if not 0 <= c < DECK_SIZE or cards.count(c) > 1})
        raise ValueError(f"deck must hold each card id 0..{DECK_SIZE - 1} once; {wrong} are not")
    return cards


class GameOverError(RuntimeError):
    """A step was asked of a game that has ended."""


def max_decisions(rules: RuleOptions = DEFAULT_RULES) -> int:
    """Upper bound on the number of steps (decisions) in one game.

    A turn takes at most three decisions (Iron, Iron, Iron; the third ends the turn) and each
    of the two Jokers can add one bonus decision. Each decision but Stop also draws at least
    one card, so the 54-card deck bounds it too.
    """
    by_turns = rules.turns * IRON_APPLICATIONS_PER_TURN + 2
    by_deck = DECK_SIZE + rules.turns + 2  # draws + Stops + bonus decisions
    return min(by_turns, by_deck)


class Game:
    """One game of Cold Iron, advanced one decision at a time.

    Attributes (the state):
        deck: the 54 card ids in draw order (face down: not for the player).
        pos: how many cards have been drawn; ``DECK_SIZE - pos`` remain.
        hand: bit mask of the numbered cards kept.
        discarded: bit mask of the cards discarded (the discard pile).
        hurt: the Changeling's Hurt, 0..6.
        turn: the turn being played, 1..``rules.turns``.
        phase: ``PHASE_TURN``, ``PHASE_IRON``, ``PHASE_BONUS`` or ``PHASE_OVER``.
        iron_count: Iron applications made this turn, 0..3.
        outcome: ``None`` while playing, then one of :data:`OUTCOMES`.
        last_action: the last action taken (``-1`` after reset).
        drawn: the cards drawn by the last step, in order.
        steps: decisions taken so far.
        bonus_source: what granted the Joker's bonus on offer or being drawn
            (``BONUS_FROM_THREATEN`` or ``BONUS_FROM_IRON``), else ``BONUS_FROM_NONE``.
    """

    __slots__ = (
        "rules", "deck", "pos", "hand", "discarded", "hurt", "turn", "phase", "iron_count",
        "outcome", "last_action", "drawn", "steps", "suits_done", "bonus_source",
    )  # fmt: skip

    def __init__(self, deck: Sequence[int], rules: RuleOptions = DEFAULT_RULES) -> None:
        if not isinstance(rules, RuleOptions):
            raise TypeError(
                f"rules must be a RuleOptions (e.g. RuleOptions(**options)), got {rules!r}"
            )
        self.rules = rules
        self.reset(deck)

    def reset(self, deck: Sequence[int], *, dealt: bool = False) -> None:
        """Start a new game on ``deck`` (each card id ``0..53`` once, first drawn first).
        ``dealt``: the deck comes from :mod:`~coldiron_env.dealer` (a list of card ids, a
        permutation by construction: the env's every reset), so it is not checked again."""
        self.deck = list(deck) if dealt else _checked_deck(deck)
        self.pos = 0
        self.hand = 0
        self.discarded = 0
        self.hurt = 0
        self.turn = 1
        self.phase = PHASE_TURN
        self.iron_count = 0
        self.outcome: str | None = None
        self.last_action = -1
        self.drawn: list[int] = []
        self.steps = 0
        self.suits_done = 0  # bit mask of suits whose run is complete
        self.bonus_source = BONUS_FROM_NONE

    # ----------------------------------------------------------------- queries
    @property
    def deck_count(self) -> int:
        return DECK_SIZE - self.pos

    @property
    def over(self) -> bool:
        return self.phase == PHASE_OVER

    @property
    def won(self) -> bool:
        return self.outcome == WON

    @property
    def phase_name(self) -> str:
        return PHASE_NAMES[self.phase]

    def legal_actions(self) -> tuple[int, ...]:
        return LEGAL_ACTIONS[self.phase]

    def is_legal(self, action: int) -> bool:
        return 0 <= action < NUM_ACTIONS and bool(LEGAL_BITS[self.phase] >> action & 1)

    def clone(self) -> Game:
        """An independent copy of this game (for search)."""
        other = Game.__new__(Game)
        # Every slot, spelled out: the search's hot path (a loop over __slots__ with
        # getattr/setattr costs twice as much): the solver and the Python rollouts;
        # tests/test_planner.py checks none is missed.
        other.rules = self.rules
        other.deck = list(self.deck)
        other.pos = self.pos
        other.hand = self.hand
        other.discarded = self.discarded
        other.hurt = self.hurt
        other.turn = self.turn
        other.phase = self.phase
        other.iron_count = self.iron_count
        other.outcome = self.outcome
        other.last_action = self.last_action
        other.drawn = list(self.drawn)
        other.steps = self.steps
        other.suits_done = self.suits_done
        other.bonus_source = self.bonus_source
        return other

    # ------------------------------------------------------------------ step
    def step(self, action: int) -> None:
        """Take ``action`` (an int). Raises :class:`IllegalActionError` if it is not
        legal now (the game is unchanged) and :class:`GameOverError` after the end."""
        if self.phase == PHASE_OVER:
            raise GameOverError("the game is over; start a new one")
        if not (type(action) is int and 0 <= action < NUM_ACTIONS):  # the common case, fast
            action = action_index(action)
        if not LEGAL_BITS[self.phase] >> action & 1:
            raise IllegalActionError(self.describe_illegal(action))
        self.steps += 1
        self.last_action = action
        self.drawn = []
        if action == THREATEN:
            self._threaten()
        elif action == IRON:
            self._iron()
        elif action == STOP:
            if self.phase == PHASE_IRON:
                self._end_turn()
            else:
                self._after_bonus()
        elif action == BONUS:
            self._bonus()
            if self.phase != PHASE_OVER:
                self._after_bonus()
        elif action == REST:
            self._rest()
        else:
            self._rack(RACK_TARGETS[action])

    def forfeit(self, action: int) -> None:
        """End the game as lost by the illegal ``action`` (R18, default policy)."""
        if self.phase == PHASE_OVER:
            raise GameOverError("the game is over; start a new one")
        if LEGAL_BITS[self.phase] >> action_index(action) & 1:
            raise ValueError(f"action {action} is legal in phase {self.phase_name!r}: not forfeit")
        self.steps += 1
        self.last_action = action
        self.drawn = []
        self._end(ILLEGAL)

    def describe_illegal(self, action: object) -> str:
        return describe_illegal(action, self.phase)

    # ------------------------------------------------------------ mechanics
    def _end(self, outcome: str) -> None:
        self.outcome = outcome
        self.phase = PHASE_OVER

    def _draw(self) -> int:
        card = self.deck[self.pos]
        self.pos += 1
        self.drawn.append(card)
        return card

    def _keep(self, card: int) -> bool:
        """Keep numbered ``card``; True when that completes the phrase (game won, R7)."""
        self.hand |= 1 << card
        suit = card // NUM_RANKS
        if (
            not self.suits_done >> suit & 1
            and HAS_RUN[(self.hand >> (suit * NUM_RANKS)) & SUIT_FIELD_MASK]
        ):
            self.suits_done |= 1 << suit
            if self.suits_done.bit_count() >= self.rules.suits_required:
                self._end(WON)
                return True
        return False

    def _resolve(self, card: int, keep: bool) -> bool:
        """Keep or discard a drawn card, then check the deck (R11 order).

        Returns True when the game ended: the kept card completed the phrase
        (R7), or the deck is now empty (R9).
        """
        if keep:
            if self._keep(card):
                return True
        else:
            self.discarded |= 1 << card
        if self.pos == DECK_SIZE:
            self._end(DECK_EXHAUSTED)
            return True
        return False

    def _hurt(self) -> bool:
        """One point of Hurt; True when the Changeling is slain (R8)."""
        self.hurt += 1
        if self.hurt >= MAX_HURT:
            self._end(SLAIN)
            return True
        return False

    def _end_turn(self) -> None:
        if self.turn >= self.rules.turns:
            self._end(MIDNIGHT)
            return
        self.turn += 1
        self.iron_count = 0
        self.phase = PHASE_TURN

    def _threaten(self) -> None:
        card = self._draw()
        if self._resolve(card, card < FIRST_COURT):
            return
        if card >= FIRST_JOKER and self._offer_bonus(BONUS_FROM_THREATEN):
            return
        self._end_turn()

    def _iron(self) -> None:
        self.iron_count += 1
        card = self._draw()
        if self._resolve(card, card < FIRST_COURT):
            return
        if self._hurt():
            return
        if card >= FIRST_JOKER and self._offer_bonus(BONUS_FROM_IRON):
            return
        self._after_iron()

    def _after_iron(self) -> None:
        if self.iron_count >= IRON_APPLICATIONS_PER_TURN:
            self._end_turn()
        else:
            self.phase = PHASE_IRON

    def _after_bonus(self) -> None:
        source = self.bonus_source
        self.bonus_source = BONUS_FROM_NONE
        if source == BONUS_FROM_IRON:
            self._after_iron()
        else:
            self._end_turn()

    def _offer_bonus(self, source: int) -> bool:
        """A Joker's bonus (R16). True when the action stops here: the player must
        decide (phase ``bonus``), or the bonus drawn at once (variant) ended the game."""
        self.bonus_source = source
        if not self.rules.bonus_always:
            self.phase = PHASE_BONUS
            return True
        self._bonus()
        self.bonus_source = BONUS_FROM_NONE
        return self.phase == PHASE_OVER

    def _bonus(self) -> None:
        """The Joker's bonus draws (R17); may end the game."""
        courts_hurt = self.bonus_source == BONUS_FROM_IRON
        remaining = BONUS_DRAWS
        while remaining:
            remaining -= 1
            card = self._draw()
            if self._resolve(card, card < FIRST_COURT):
                return
            if card >= FIRST_JOKER:
                if self.rules.bonus_joker_grants_more:
                    remaining += BONUS_DRAWS
            elif card >= FIRST_COURT and courts_hurt and self._hurt():
                return

    def _rack(self, targets: int) -> None:
        while True:
            card = self._draw()
            if targets >> card & 1:
                if not self._resolve(card, True):
                    self._end_turn()
                return
            if self._resolve(card, False):
                return
            if card >= FIRST_JOKER:
                self._end(SLAIN)
                return
            if card >= FIRST_COURT and self._hurt():
                return

    def _rest(self) -> None:
        card = self._draw()
        if self._resolve(card, False):
            return
        if self.hurt > 0:
            self.hurt -= 1
        self._end_turn()


I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]


class Games(NamedTuple):
    """The state of ``n`` games as arrays, entry ``i`` of each (row ``i`` of ``deck``) game
    ``i``'s: :class:`Game`'s attributes, with the outcome as a code
    (:data:`coldiron_env.batched.OUTCOME_NAMES`) and each game's curriculum rules. The
    batched rules core's kernels take it whole."""

    deck: I8
    """(n, 54) card ids in draw order."""
    pos: I64
    hand: I64
    """Bit masks of the numbered cards kept (int64, viewed as uint64 for the observation)."""
    discarded: I64
    hurt: I64
    turn: I64
    phase: I64
    iron_count: I64
    suits_done: I64
    bonus_source: I64
    turns: I64
    """Each game's ``RuleOptions.turns`` (a curriculum changes it between deals)."""
    suits_required: I64
    outcome: I64
    """The outcome code of the last step (``batched.PLAYING`` while the game goes on)."""

    @classmethod
    def zeros(cls, n: int) -> Games:
        """``n`` games, every array zero (deal them with :meth:`deal`)."""
        counters = (np.zeros(n, dtype=np.int64) for _ in cls._fields[1:])
        return cls(np.zeros((n, DECK_SIZE), dtype=np.int8), *counters)

    def deal(self, rows: I64 | slice, decks: npt.ArrayLike, rules: RuleOptions) -> None:
        """Start the games ``rows`` on ``decks`` with ``rules``: ``Game(deck, rules)``'s state."""
        self.deck[rows] = decks
        counters: tuple[I64, ...] = self[1:]
        for state, value in zip(counters, _start_values(rules), strict=True):
            state[rows] = value


@cache
def _start_values(rules: RuleOptions) -> tuple[int, ...]:
    """The value of every array of :class:`Games` but the deck at the start of a deal."""
    start = {
        "turn": 1,
        "phase": PHASE_TURN,
        "turns": rules.turns,
        "suits_required": rules.suits_required,
    }
    return tuple(start.get(name, 0) for name in Games._fields[1:])
