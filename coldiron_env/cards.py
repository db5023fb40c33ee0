"""Cards of the Cold Iron pack: integer ids, text codes and deck parsing.

This module is the one place that knows how a card is numbered.

Card ids (``int``):

* ``0 .. 39`` numbered cards, ``id = suit * 10 + (rank - 1)`` (Ace = rank 1),
  so ascending ids are sorted by suit order (Hearts, Diamonds, Clubs, Spades)
  then rank, and a suit's ten cards are one 10-bit field of a hand bit mask;
* ``40 .. 51`` court cards, ``id = 40 + suit * 3 + court`` (Jack, Queen, King);
* ``52, 53`` the two Jokers, numbered in the order they lie in the deck (the
  first Joker to be drawn is always ``52``).

Codes (``str``) follow the spec: rank ``A 2 .. 10 J Q K`` then suit ``H D C S`` (``AH``,
``10S``, ``QD``), each Joker ``JK``. Parsing is case-insensitive and accepts ``T`` for 10.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

SUITS: Final = ("H", "D", "C", "S")
SUIT_NAMES: Final = ("Hearts", "Diamonds", "Clubs", "Spades")
NUM_SUITS: Final = 4
NUM_RANKS: Final = 10  # Ace (1) .. 10
RANK_CODES: Final = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10")
COURT_CODES: Final = ("J", "Q", "K")
NUM_COURTS_PER_SUIT: Final = 3
JOKER_CODE: Final = "JK"
NUM_JOKERS: Final = 2

NUM_NUMBERED: Final = NUM_SUITS * NUM_RANKS  # 40
FIRST_COURT: Final = NUM_NUMBERED  # 40
FIRST_JOKER: Final = FIRST_COURT + NUM_SUITS * NUM_COURTS_PER_SUIT  # 52
DECK_SIZE: Final = FIRST_JOKER + NUM_JOKERS  # 54

SUIT_FIELD_MASK: Final = (1 << NUM_RANKS) - 1  # the ten bits of one suit in a hand mask
RUN_LENGTH: Final = 3  # cards in one suit's part of the phrase


def numbered_id(suit: int, rank: int) -> int:
    """Id of the numbered card of ``suit`` (0..3) and ``rank`` (1..10)."""
    return suit * NUM_RANKS + rank - 1


def _code(card: int) -> str:
    if card < FIRST_COURT:
        return RANK_CODES[card % NUM_RANKS] + SUITS[card // NUM_RANKS]
    if card < FIRST_JOKER:
        offset = card - FIRST_COURT
        return COURT_CODES[offset % NUM_COURTS_PER_SUIT] + SUITS[offset // NUM_COURTS_PER_SUIT]
    return JOKER_CODE


CARD_CODES: Final[tuple[str, ...]] = tuple(_code(c) for c in range(DECK_SIZE))
"""``CARD_CODES[card_id]`` is the card's code."""

_CODE_TO_ID: Final = {code: card for card, code in enumerate(CARD_CODES) if card < FIRST_JOKER}
_CODE_TO_ID.update({"T" + code[2:]: _CODE_TO_ID[code] for code in CARD_CODES if code[:2] == "10"})

_CANONICAL_IDS: Final = {**_CODE_TO_ID, JOKER_CODE: FIRST_JOKER}
"""The codes :func:`parse_deck` reads with one lookup (both Jokers as the first)."""


def parse_card(code: str) -> int:
    """Id of the card named by ``code``; a Joker parses as the first Joker (52).

    Raises ``ValueError`` naming the code if it is not a card.
    """
    if not isinstance(code, str):
        raise ValueError(f"card code must be a string, got {code!r} ({type(code).__name__})")
    key = code.strip().upper()
    if key == JOKER_CODE:
        return FIRST_JOKER
    try:
        return _CODE_TO_ID[key]
    except KeyError:
        raise ValueError(
            f"unknown card code {code!r}: expected rank A,2..10 (or T),J,Q,K followed by "
            f"suit H,D,C,S, or JK for a Joker"
        ) from None


def parse_deck(codes: Iterable[str]) -> list[int]:
    """Card ids of a full 54-card deck given as codes, first code drawn first.

    The two Jokers become ids 52 then 53 in deck order. Refuses, with a ``ValueError`` that
    names the problem, a deck that is not a sequence of exactly 54 codes, holds an unknown
    code, or repeats a card (other than the two ``JK``; a third Joker is a repeat).
    """
    if isinstance(codes, (str, bytes)) or not isinstance(codes, Iterable):
        raise ValueError(
            f"deck must be a list of {DECK_SIZE} card codes, got {type(codes).__name__}"
        )
    codes = list(codes)  # also takes a tuple or a NumPy array of codes
    if len(codes) != DECK_SIZE:
        raise ValueError(f"deck must hold exactly {DECK_SIZE} cards, got {len(codes)}")
    try:  # the usual case first, one lookup a card; anything else is parsed and checked below
        ids = [_CANONICAL_IDS[code] for code in codes if isinstance(code, str)]
    except KeyError:
        ids = []
    whole = len(ids) == DECK_SIZE and len(set(ids)) == FIRST_JOKER + 1  # 53 kinds, 54 cards
    if whole and ids.count(FIRST_JOKER) == NUM_JOKERS:  # the one repeat: the Joker
        ids[ids.index(FIRST_JOKER, ids.index(FIRST_JOKER) + 1)] = FIRST_JOKER + 1
        return ids
    ids = []
    jokers = 0
    seen: dict[int, int] = {}
    for position, code in enumerate(codes):
        try:
            card = parse_card(code)
        except ValueError as err:
            raise ValueError(f"deck position {position}: {err}") from None
        if card == FIRST_JOKER:
            if jokers == NUM_JOKERS:
                raise ValueError(
                    f"deck position {position}: a third Joker {code!r}; the deck holds "
                    f"exactly {NUM_JOKERS}"
                )
            card = FIRST_JOKER + jokers
            jokers += 1
        elif card in seen:
            raise ValueError(
                f"deck position {position}: duplicate card {CARD_CODES[card]!r} "
                f"(already at position {seen[card]})"
            )
        seen[card] = position
        ids.append(card)
    # 54 codes with no duplicate and at most two Jokers are exactly the full pack.
    return ids


def deck_codes(deck: Sequence[int]) -> list[str]:
    """Codes of a deck of card ids (inverse of :func:`parse_deck`)."""
    return [CARD_CODES[c] for c in deck]


def hand_codes(hand: int) -> list[str]:
    """Codes of the numbered cards in hand bit mask ``hand``, sorted by suit then rank."""
    out: list[str] = []
    while hand:
        low = hand & -hand
        out.append(CARD_CODES[low.bit_length() - 1])
        hand ^= low
    return out


def suit_field(hand: int, suit: int) -> int:
    """The 10-bit rank field of ``suit`` in hand mask ``hand`` (bit r-1 = rank r)."""
    return (hand >> (suit * NUM_RANKS)) & SUIT_FIELD_MASK
