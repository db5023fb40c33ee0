"""The dealer: shuffles and deals decks from a NumPy generator.

Shuffles are drawn a batch at a time (one vectorised call per
:data:`SHUFFLE_BATCH` deals), which is several times cheaper per deck than one
``permutation`` call per deal. A :class:`Dealer` tied to a generator refills
its batch from that generator only, so a seeded generator deals the same decks
in the same order whatever else happens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from coldiron_env.cards import DECK_SIZE, FIRST_JOKER, parse_deck

SHUFFLE_BATCH: Final = 64
_ORDERED: Final = np.arange(DECK_SIZE, dtype=np.int64)


def relabel_jokers(decks: np.ndarray) -> np.ndarray:
    """Relabel, in place, the Jokers of card rows of shape (..., n) so that 52 precedes 53.

    Every row must hold both Jokers (a full deck does).
    """
    flat = decks.reshape(-1, decks.shape[-1])
    first = (flat == FIRST_JOKER).argmax(axis=1)
    second = (flat == FIRST_JOKER + 1).argmax(axis=1)
    rows = np.flatnonzero(second < first)
    flat[rows, second[rows]] = FIRST_JOKER
    flat[rows, first[rows]] = FIRST_JOKER + 1
    return decks


def shuffled_decks(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` shuffled decks, shape (count, 54); Jokers relabelled so 52 precedes 53."""
    return relabel_jokers(rng.permuted(np.broadcast_to(_ORDERED, (count, DECK_SIZE)), axis=1))


def shuffled_deck(rng: np.random.Generator) -> list[int]:
    """One uniformly shuffled deck of card ids drawn from ``rng``, first card drawn first."""
    return shuffled_decks(rng, 1)[0].tolist()  # type: ignore[no-any-return]


class Dealer:
    """Deals decks from a generator, a batch of shuffles at a time."""

    def __init__(self, batch: int = SHUFFLE_BATCH) -> None:
        self.batch = batch
        self._rng: np.random.Generator | None = None
        self._decks: list[list[int]] = []

    def deal(self, rng: np.random.Generator, codes: Sequence[str] | None = None) -> list[int]:
        """The deck given as ``codes`` (validated; consumes no randomness), or the next
        shuffled deck from ``rng``. A new generator object discards the batch in hand."""
        if codes is not None:
            return parse_deck(codes)
        if rng is not self._rng or not self._decks:
            self._rng = rng
            self._decks = shuffled_decks(rng, self.batch).tolist()
            self._decks.reverse()
        return self._decks.pop()
