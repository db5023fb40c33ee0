"""The judge: run tables that decide whether a hand holds the phrase.

A suit's numbered cards in a hand are a 10-bit field (bit ``r - 1`` = rank ``r``). All 1,024
fields are classified once at import, so checking a suit is one table look-up.
"""

from __future__ import annotations

from typing import Final

from coldiron_env.cards import NUM_RANKS, RUN_LENGTH, SUIT_FIELD_MASK

NUM_FIELDS: Final = 1 << NUM_RANKS
WINDOW_STARTS: Final = tuple(range(NUM_RANKS - RUN_LENGTH + 1))  # run A-2-3 .. 8-9-10
WINDOW_MASKS: Final = tuple(((1 << RUN_LENGTH) - 1) << start for start in WINDOW_STARTS)


HAS_RUN: Final[tuple[bool, ...]] = tuple(
    any(field & mask == mask for mask in WINDOW_MASKS) for field in range(NUM_FIELDS)
)
"""``HAS_RUN[field]``: the suit's field holds three consecutive ranks."""

BEST_WINDOW: Final[tuple[int, ...]] = tuple(
    max((field & mask).bit_count() for mask in WINDOW_MASKS) for field in range(NUM_FIELDS)
)
"""``BEST_WINDOW[field]``: 0..3, the most cards held of any one run window."""


def run_cards(field: int, unseen: int = SUIT_FIELD_MASK) -> int:
    """Ranks of ``field`` (as a field) that form or advance the suit's run: one window's.

    A complete run's cards when there is one; otherwise the held cards of one
    window holding the most cards, when that is at least two (a pair one card
    from a run): the lowest such window whose missing card is still ``unseen``
    (a rank field; by default every card is), else the lowest. Marking a single
    window keeps ``*A *3 *5`` from reading like a run. Lone cards give ``0``.
    """
    field &= SUIT_FIELD_MASK
    best = BEST_WINDOW[field]
    if best < RUN_LENGTH - 1:
        return 0
    windows = [mask for mask in WINDOW_MASKS if (field & mask).bit_count() == best]
    live = [mask for mask in windows if not mask & ~field & ~unseen]
    return field & (live or windows)[0]
