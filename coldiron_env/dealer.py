"""The dealer: shuffles and deals decks from a NumPy generator; the deal audit; the seed streams.

Shuffles are drawn a batch at a time (one vectorised call per :data:`SHUFFLE_BATCH` deals),
several times cheaper per deck than one ``permutation`` call per deal. A :class:`Dealer` tied
to a generator refills its batch from that generator only, so a seeded generator deals the
same decks in the same order whatever else happens.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from enum import IntEnum
from pathlib import Path
from typing import Final

import numpy as np

from coldiron_env.cards import DECK_SIZE, FIRST_JOKER, parse_deck

SHUFFLE_BATCH: Final = 64
_ORDERED: Final = np.arange(DECK_SIZE, dtype=np.int64)


def relabel_jokers(decks: np.ndarray) -> np.ndarray:
    """Relabel, in place, the Jokers of card rows of shape (..., n) so that 52 precedes 53
    (every row must hold both Jokers, as a full deck does)."""
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


# --------------------------------------------------------------------------- deal audit
AUDIT_VARIABLE: Final = "COLDIRON_DEAL_AUDIT"
"""Environment variable naming a folder: while it is set (:func:`set_audit`), every shuffled
deck an env deals (single or vector, in any process) is appended to ``deals-<pid>.txt`` there,
one line ``<seed> <deck as hex>``, ``<seed>`` the :func:`generator_seed` of the generator that
shuffled it (``unseeded`` when that is None). It records what was dealt, not what was asked for:
tests/test_held_out.py reads it to check that no training, imitation, labelling or
validation deal comes from an evaluation seed."""
AUDIT_FILE_PREFIX: Final = "deals-"


def generator_seed(rng: np.random.Generator) -> int | None:
    """The integer a generator was seeded with (its ``SeedSequence`` entropy: for one seeded
    from the OS, the OS's 128-bit entropy, beyond every stream's seeds), or None when it has
    no integer entropy (seeded with a list of words, or a spawned child)."""
    bit_generator = rng.bit_generator
    seq = getattr(bit_generator, "seed_seq", None) or getattr(bit_generator, "_seed_seq", None)
    entropy = getattr(seq, "entropy", None)
    if isinstance(entropy, (int, np.integer)) and not getattr(seq, "spawn_key", ()):
        return int(entropy)
    return None


_audit_folder: str | None = os.environ.get(AUDIT_VARIABLE) or None
"""The audit folder of this process: read once at import (reading the environment at every
deal costs a sixth of a reset), then set by :func:`set_audit`."""


def set_audit(folder: str | os.PathLike[str] | None) -> None:
    """Start (a folder) or stop (None) the deal audit in this process and in the processes it
    starts from now on (through :data:`AUDIT_VARIABLE`)."""
    global _audit_folder  # noqa: PLW0603 (the one switch of the audit)
    if folder is None:
        os.environ.pop(AUDIT_VARIABLE, None)
        _audit_folder = None
    else:
        os.environ[AUDIT_VARIABLE] = str(folder)
        _audit_folder = str(folder)


def auditing() -> bool:
    """Whether the deal audit is on in this process (callers skip building its arguments)."""
    return _audit_folder is not None


def audit_deals(
    rngs: Sequence[np.random.Generator | None], decks: Sequence[Sequence[int]] | np.ndarray
) -> None:
    """Record ``decks[i]``, shuffled by ``rngs[i]``, while the audit is on (:func:`set_audit`)."""
    folder = _audit_folder
    if folder is None:
        return
    lines = []
    for rng, deck in zip(rngs, np.asarray(decks, dtype=np.uint8), strict=True):
        seed = None if rng is None else generator_seed(rng)
        lines.append(f"{'unseeded' if seed is None else seed} {deck.tobytes().hex()}\n")
    with open(Path(folder) / f"{AUDIT_FILE_PREFIX}{os.getpid()}.txt", "a") as fh:
        fh.write("".join(lines))


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
        deck = self._decks.pop()
        audit_deals((rng,), (deck,))
        return deck


# --------------------------------------------------------------------------- seed streams
class DealStream(IntEnum):
    """What a deal is for. Each purpose draws its decks from its own range of seeds.

    ``EVALUATION`` seeds are the small ints of ``scripts/evaluate.py --seed S``
    (deal ``i`` is row ``i`` of ``shuffled_decks(numpy.random.default_rng(S), N)``),
    below :data:`EVALUATION_SEED_LIMIT`. Every other stream's seeds are at or
    above ``stream * STREAM_SPAN`` (:func:`stream_seed`), so no training,
    imitation or validation deal is ever dealt from an evaluation seed: the
    decks a result is reported on are held out by construction.
    """

    EVALUATION = 0
    """Reported results: evaluate.py, the ladder, the main job."""
    VALIDATION = 1
    """Model selection: periodic evaluation during training, the tuning objective."""
    TRAINING = 2
    """The training envs' deals."""
    IMITATION = 3
    """Teacher demonstrations and DAgger rounds."""
    SEARCH = 4
    """Expert iteration: deals the network plays while the planner over it labels them."""


STREAM_SPAN: Final = 1 << 40
"""Seeds per stream."""
STREAM_SEED_BITS: Final = 16
"""A stream's seeds: ``seed`` (the config's) in [0, 2**16), then an index in [0, 2**24)."""
STREAM_INDEX_BITS: Final = 24
EVALUATION_SEED_LIMIT: Final = 1 << 32
"""Evaluation seeds are below this (the other streams start at ``STREAM_SPAN``)."""


def stream_seed(stream: DealStream, seed: int, index: int = 0) -> int:
    """The env seed of deal (or env) ``index`` for run seed ``seed`` in ``stream``.

    ``reset(seed=stream_seed(...))`` deals from a generator that no other stream
    and no evaluation seed uses. Refuses a seed or index outside its range.
    """
    if stream == DealStream.EVALUATION:
        raise ValueError("evaluation deals are shuffled_decks(default_rng(seed)); seed them so")
    if not 0 <= seed < 1 << STREAM_SEED_BITS:
        limit = (1 << STREAM_SEED_BITS) - 1
        raise ValueError(f"a {stream.name.lower()} seed must be in 0..{limit}, got {seed}")
    if not 0 <= index < 1 << STREAM_INDEX_BITS:
        limit = (1 << STREAM_INDEX_BITS) - 1
        raise ValueError(f"a deal index must be in 0..{limit}, got {index}")
    return int(stream) * STREAM_SPAN + (seed << STREAM_INDEX_BITS) + index


def check_evaluation_seed(seed: int) -> int:
    """``seed`` if it is an evaluation seed (0 <= seed < 2**32), else a ``ValueError``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < EVALUATION_SEED_LIMIT:
        raise ValueError(
            f"an evaluation seed must be an int in 0..{EVALUATION_SEED_LIMIT - 1}, got {seed!r} "
            "(larger seeds belong to the training, imitation and validation deals)"
        )
    return seed
