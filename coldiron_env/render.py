"""Text view of a game: the compact table behind ``render_mode="ansi"`` and ``"human"``."""

from __future__ import annotations

from typing import Final

from coldiron_env.actions import (
    ACTION_LABELS,
    ACTION_NAMES,
    LEGAL_ACTIONS,
    RACK_RANK_FIRST,
    RACK_SUIT_FIRST,
    REST,
    is_rack,
)
from coldiron_env.cards import (
    CARD_CODES,
    FIRST_JOKER,
    NUM_RANKS,
    NUM_SUITS,
    RANK_CODES,
    SUIT_FIELD_MASK,
    SUIT_NAMES,
    suit_field,
)
from coldiron_env.game import Game
from coldiron_env.judge import BEST_WINDOW, HAS_RUN, run_cards
from coldiron_env.options import IRON_APPLICATIONS_PER_TURN, MAX_HURT

START_HOUR: Final = 18  # 6pm
MINUTES_PER_TURN: Final = 15
MINUTES_PER_HOUR: Final = 60
HOURS_ON_CLOCK: Final = 12
RUN_MARK: Final = "*"
RACK_COUNT: Final = REST - RACK_RANK_FIRST
NAME_WIDTH: Final = max(len(n) for n in SUIT_NAMES)
RACKS_FOLDED: Final = (
    f"{RACK_RANK_FIRST}-{RACK_SUIT_FIRST - 1} rack A..10, "
    f"{RACK_SUIT_FIRST}-{REST - 1} rack hearts/diamonds/clubs/spades"
)


def clock(turn: int) -> str:
    """Clock time at the start of ``turn``: 6:00pm plus 15 minutes a turn."""
    minutes = (turn - 1) * MINUTES_PER_TURN
    hour = START_HOUR + minutes // MINUTES_PER_HOUR
    minute = minutes % MINUTES_PER_HOUR
    suffix = "pm" if hour % 24 >= HOURS_ON_CLOCK else "am"
    shown = hour % HOURS_ON_CLOCK or HOURS_ON_CLOCK
    return f"{shown}:{minute:02d}{suffix}"


def hurt_bar(hurt: int) -> str:
    return "[" + "#" * hurt + "." * (MAX_HURT - hurt) + f"] {hurt}/{MAX_HURT}"


def suit_line(hand: int, suit: int, unseen: int = SUIT_FIELD_MASK) -> str:
    """One suit of the hand; the cards of its best run window (``run_cards``) are marked ``*``.

    ``unseen`` is the suit's rank field of cards not seen yet (by default all).
    """
    field = suit_field(hand, suit)
    marked = run_cards(field, unseen)
    cards = [
        (RUN_MARK if marked >> r & 1 else "") + RANK_CODES[r]
        for r in range(NUM_RANKS)
        if field >> r & 1
    ]
    status = "run complete" if HAS_RUN[field] else f"run {BEST_WINDOW[field]}/3"
    shown = " ".join(cards) if cards else "-"
    return f"{SUIT_NAMES[suit]:<{NAME_WIDTH}}  {shown:<24} {status}"


def legal_summary(actions: tuple[int, ...]) -> str:
    """Legal actions (ascending) by number and name, the rank and suit racks folded."""
    if sum(map(is_rack, actions)) != RACK_COUNT:
        return ", ".join(f"{a} {ACTION_NAMES[a]}" for a in actions)
    parts = [f"{a} {ACTION_NAMES[a]}" for a in actions if not is_rack(a)]
    parts.insert(sum(a < RACK_RANK_FIRST for a in actions), RACKS_FOLDED)
    return ", ".join(parts)


def slain_by(game: Game) -> str:
    """Why a slain Changeling died (a Joker drawn by a rack, or Hurt 6); "" otherwise."""
    if game.outcome != "slain":
        return ""
    if is_rack(game.last_action) and any(card >= FIRST_JOKER for card in game.drawn):
        return " (a rack drew a Joker: that slays the Changeling at once)"
    return " (Hurt reached 6)"


def render_text(game: Game) -> str:
    """The table as text: clock, Hurt bar, deck count, hand by suit, last action, legal actions."""
    iron = f" ({game.iron_count}/{IRON_APPLICATIONS_PER_TURN} Iron this turn)"
    lines = [
        f"Cold Iron  {clock(game.turn)}  turn {game.turn}/{game.rules.turns}  "
        f"phase: {game.phase_name}{iron if game.iron_count else ''}",
        f"Hurt  {hurt_bar(game.hurt)}   Deck {game.deck_count} cards",
    ]
    unseen = ~(game.hand | game.discarded)
    lines += [suit_line(game.hand, s, suit_field(unseen, s)) for s in range(NUM_SUITS)]
    if game.last_action >= 0:
        drew = ", ".join(CARD_CODES[c] for c in game.drawn) or "nothing"
        lines.append(f"Last: {ACTION_LABELS[game.last_action]}; drew {drew}")
    if game.outcome is not None:
        lines.append(f"Game over: {game.outcome}{slain_by(game)}")
    else:
        lines.append(f"Legal: {legal_summary(LEGAL_ACTIONS[game.phase])}")
    return "\n".join(lines) + "\n"
