"""What a player of Cold Iron knows: the one information boundary every player sees through.

A player sees every card drawn (kept cards go to the hand, the others to the discard pile,
which the rules forbid *examining* but not remembering), so a player with a perfect memory
knows the exact *contents* of the deck (not its order): the cards not yet seen.
:class:`Knowledge` holds exactly that, as bit masks over the card ids of
:mod:`coldiron_env.cards`, plus the public counters; never the deck's order. Players are
given a ``Knowledge``, never a :class:`~coldiron_env.game.Game`: :meth:`Knowledge.observe`
builds it from env steps (the player's own memory), :meth:`Knowledge.from_game` from an
engine ``Game`` (the evaluator's one crossing of the boundary), both the same object for the
same game. A planner looks ahead on games drawn by :meth:`Knowledge.resample` (OpenSpiel's
``resample_from_infostate``): the seen cards where they were, the unseen ones in a uniformly
random order, which is exactly their distribution given everything observed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from coldiron_env.actions import PHASE_BONUS, PHASE_IRON, PHASE_NAMES, PHASE_OVER, PHASE_TURN
from coldiron_env.analysis import COURT_MASK, FULL_DECK_MASK, JOKER_MASK
from coldiron_env.cards import CARD_CODES, DECK_SIZE, FIRST_JOKER, JOKER_CODE, parse_card
from coldiron_env.dealer import relabel_jokers
from coldiron_env.game import Game, Games, pending_bonus_source, suits_done_of
from coldiron_env.observation import decode, encode_batch
from coldiron_env.options import DEFAULT_RULES, RuleOptions

FIRST_JOKER_BIT: Final = 1 << FIRST_JOKER
SECOND_JOKER_BIT: Final = 1 << (FIRST_JOKER + 1)

_PHASE_BY_NAME: Final = {name: index for index, name in enumerate(PHASE_NAMES)}
_PLAYING_PHASES: Final = (PHASE_TURN, PHASE_IRON, PHASE_BONUS)
_ID_BY_CODE: Final = {code: card for card, code in enumerate(CARD_CODES) if card < FIRST_JOKER}


def _card_bit(code: str) -> int:
    card = _ID_BY_CODE.get(code)  # None: lower case, "T" for 10, or not a card (ValueError)
    return 1 << (parse_card(code) if card is None else card)


def mask_from_codes(codes: Iterable[str]) -> int:
    """Bit mask of the (non-Joker) cards named by ``codes``."""
    return reduce(or_, map(_card_bit, codes), 0)


@dataclass(slots=True)
class Knowledge:
    """A player's knowledge of one game in progress.

    Attributes:
        hand: bit mask of the numbered cards held (card ids 0..39).
        seen: bit mask of every card seen so far (the hand and the discard pile;
            Jokers are ids 52 then 53 in the order they were drawn). Every card
            not seen is in the deck.
        hurt: the Changeling's Hurt, 0..6.
        turn: the turn being played, 1..``rules.turns``.
        deck_count: cards left in the deck.
        phase: ``PHASE_TURN``, ``PHASE_IRON``, ``PHASE_BONUS`` or ``PHASE_OVER``.
        iron_count: Iron applications made this turn, 0..3.
        rules: the rules of the game (the turns, the phrase, the variants).
    """

    hand: int = 0
    seen: int = 0
    hurt: int = 0
    turn: int = 1
    deck_count: int = DECK_SIZE
    phase: int = PHASE_TURN
    iron_count: int = 0
    rules: RuleOptions = DEFAULT_RULES

    # ------------------------------------------------------------ derived
    @property
    def unseen(self) -> int:
        """Bit mask of the cards not seen: exactly the deck's contents."""
        return FULL_DECK_MASK & ~self.seen

    @property
    def unseen_courts(self) -> int:
        """Number of court cards still in the deck."""
        return (COURT_MASK & ~self.seen).bit_count()

    @property
    def unseen_jokers(self) -> int:
        """Number of Jokers still in the deck (0..2)."""
        return (JOKER_MASK & ~self.seen).bit_count()

    @property
    def turns_left(self) -> int:
        """Turns still to be started or finished, the current one included."""
        return self.rules.turns - self.turn + 1

    def is_consistent(self) -> bool:
        """True when the memory accounts for every card drawn (unseen == deck count)."""
        return self.unseen.bit_count() == self.deck_count

    def unseen_cards(self) -> list[int]:
        """The unseen card ids, ascending (the deck's contents)."""
        return [c for c in range(DECK_SIZE) if not self.seen >> c & 1]

    # ------------------------------------------------------------ looking ahead
    def observation(self, mode: str = "flat", recall: bool = False, counting: bool = False) -> Any:
        """The env's observation of the game this describes (what this player would observe),
        so a trained model can decide from a ``Knowledge`` (the planner's base policy). A
        batch of one."""
        return encode_batch(mode, self._games(1, 0), self.rules, recall, counting)

    def _state(self) -> dict[str, int]:
        """This position as the attributes of a :class:`Game` (and arrays of :class:`Games`)."""
        return {
            "pos": DECK_SIZE - self.deck_count,
            "hand": self.hand,
            "discarded": self.seen & ~self.hand,
            "hurt": self.hurt,
            "turn": self.turn,
            "phase": self.phase,
            "iron_count": self.iron_count,
            "suits_done": suits_done_of(self.hand),
            "bonus_source": pending_bonus_source(self.phase, self.iron_count),
        }

    def _drawn_cards(self) -> list[int]:
        """The cards drawn so far: the seen ones, ascending. Refuses incomplete knowledge
        (a memory that lost track of a card) and a game that is over."""
        if not self.is_consistent():
            raise ValueError(
                f"knowledge is incomplete: {self.unseen.bit_count()} unseen cards for "
                f"{self.deck_count} left in the deck (every drawn card must be remembered)"
            )
        if self.phase == PHASE_OVER:
            raise ValueError("the game is over: there is no position to look ahead from")
        if self.phase not in _PLAYING_PHASES:
            raise ValueError(f"knowledge has no phase {self.phase!r}; phases: {PHASE_NAMES}")
        if self.hand & ~self.seen:
            raise ValueError("knowledge is inconsistent: the hand holds cards it has not seen")
        return [c for c in range(DECK_SIZE) if self.seen >> c & 1]

    def position(self) -> Game:
        """A game in this position: the seen cards drawn, the unseen ones after them in ascending
        order (:meth:`resample` orders them at random). Refuses incomplete knowledge and a game
        that is over."""
        game = Game(self._drawn_cards() + self.unseen_cards(), self.rules)
        for name, value in self._state().items():
            setattr(game, name, value)
        return game

    def games(self, orders: npt.NDArray[np.int64]) -> Games:
        """This position once per row of ``orders`` (orders of the unseen cards, as
        :meth:`sample_order_array` draws them): the batched :meth:`position`."""
        n = orders.shape[0]
        drawn = np.broadcast_to(
            np.asarray(self._drawn_cards(), dtype=np.int64), (n, DECK_SIZE - self.deck_count)
        )
        return self._games(n, np.concatenate([drawn, orders], axis=1))

    def _games(self, n: int, decks: npt.ArrayLike) -> Games:
        """``n`` games in this position on ``decks`` (one per row, or one for all)."""
        games = Games.zeros(n)
        games.deal(slice(None), decks, self.rules)
        for name, value in self._state().items():
            getattr(games, name)[:] = value
        return games

    def sample_orders(self, rng: np.random.Generator, count: int) -> list[list[int]]:
        """``count`` uniformly random orders of the unseen cards (Jokers relabelled so
        that 52 precedes 53, as the dealer does)."""
        return self.sample_order_array(rng, count).tolist()  # type: ignore[no-any-return]

    def sample_order_array(self, rng: np.random.Generator, count: int) -> npt.NDArray[np.int64]:
        """:meth:`sample_orders` as a ``(count, deck_count)`` array (the same draws)."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {rng!r}")
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise ValueError(f"count must be an int >= 0, got {count!r}")
        cards = self.unseen_cards()
        orders = rng.permuted(
            np.broadcast_to(np.asarray(cards, dtype=np.int64), (count, len(cards))), axis=1
        )
        if FIRST_JOKER in cards and FIRST_JOKER + 1 in cards:
            relabel_jokers(orders)
        return orders

    def resample(self, rng: np.random.Generator, count: int) -> Iterator[Game]:
        """``count`` games drawn from what this player knows: this position, with the
        unseen cards in a uniformly random order (each a fresh, independent game)."""
        root = self.position()
        pos = root.pos
        for order in self.sample_orders(rng, count):
            game = root.clone()
            game.deck[pos:] = order
            yield game

    # ------------------------------------------------------------ builders
    @classmethod
    def from_game(cls, game: Game) -> Knowledge:
        """What the player of ``game`` knows (hand, discard pile, counters; not the deck)."""
        return cls(
            hand=game.hand,
            seen=game.hand | game.discarded,
            hurt=game.hurt,
            turn=game.turn,
            deck_count=DECK_SIZE - game.pos,
            phase=game.phase,
            iron_count=game.iron_count,
            rules=game.rules,
        )

    def reset(self) -> None:
        """Forget everything: the start of a new game (the rules are kept)."""
        Knowledge.__init__(self, rules=self.rules)

    def see_codes(self, codes: Iterable[str]) -> None:
        """Remember the cards named by ``codes`` (a step's ``info["drawn"]``)."""
        for code in codes:
            if code == JOKER_CODE:
                self.seen |= SECOND_JOKER_BIT if self.seen & FIRST_JOKER_BIT else FIRST_JOKER_BIT
            else:
                self.seen |= _card_bit(code)

    def observe(self, obs: Any, info: Mapping[str, Any] | None) -> None:
        """Update from one env step (or reset): its observation and ``info``.

        With ``info`` (the env's usual dict) the counters and the hand come from it and the
        drawn cards are remembered. Without it they are decoded from ``obs``; then only a
        ``recall=True`` observation (which shows the discard pile) keeps the memory complete,
        otherwise the cards discarded are forgotten (:meth:`is_consistent` turns false).
        """
        if info is not None and "hand" in info:
            self.see_codes(info.get("drawn", ()))
            self.hand = mask_from_codes(info["hand"])
            self.hurt = int(info["hurt"])
            self.turn = int(info["turn"])
            self.deck_count = int(info["deck_count"])
            phase = info["phase"]
            if phase not in _PHASE_BY_NAME:
                raise ValueError(f"info['phase'] must be one of {PHASE_NAMES}, got {phase!r}")
            self.phase = _PHASE_BY_NAME[phase]
            self.iron_count = int(info.get("iron_count", 0))
        else:
            if obs is None:
                raise ValueError("observe needs the env's observation, or its info (with 'hand')")
            view = decode(obs, self.rules.turns)
            for name in ("hand", "hurt", "turn", "deck_count", "phase", "iron_count"):
                setattr(self, name, getattr(view, name))
            if view.discarded is not None:
                self.seen |= view.discarded
        self.seen |= self.hand
