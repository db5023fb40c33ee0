"""A native batched Cold Iron: ``N`` games stepped at once (NumPy, or numba when installed).

:class:`ColdIronVectorEnv` is a :class:`gymnasium.vector.VectorEnv` that plays
exactly the games of :class:`~coldiron_env.env.ColdIronEnv` (the rules of
:mod:`coldiron_env.game`, numbered in ``RULES.md``), ``num_envs`` at a time,
without a Python loop over the games. It is registered as the
``vector_entry_point`` of ``coldiron/ColdIron-v0``::

    envs = gymnasium.make_vec("coldiron/ColdIron-v0", num_envs=1024,
                              vectorization_mode="vector_entry_point")

Backends
--------
``backend="numba"`` (the default when numba is installed: ``pip install numba``)
runs the rules one game after another in a compiled loop, the plainest
transcription of ``game.py``. ``backend="numpy"`` (the default otherwise) needs
nothing but NumPy and is described below. Both are tested against ``game.py``.

How a NumPy step stays batched
------------------------------
Every method of the game is "draw cards from the deck position ``p`` until a
stop card appears": one card for Threaten, the Iron and Rest; for a rack, the
first matching numbered card, the first Joker (slays), the court card that
brings Hurt to 6, or the last card of the deck, whichever comes first. When a
deck is dealt, each game gets 54-bit masks over deck *positions*: for every
action the positions where it stops, and the positions where the card drawn is
kept; the Jokers' and the court cards' positions. The stop of every game is
then the lowest set bit of ``stop_mask & ~((1 << p) - 1)``, found for all games
with a few array operations (``np.bitwise_count``), and the Hurt a rack deals is
a popcount of the court mask over ``[p, stop]``. The only variable-length part
left, the Joker's bonus draws (at most three, six with
``bonus_joker_grants_more``), runs as "draw one card for every game still
drawing" over the few games taking a bonus.

Autoreset: ``AutoresetMode.SAME_STEP`` (``metadata["autoreset_mode"]``). A game
that ends is dealt again within the same :meth:`step`: the returned observation
and ``info`` are those of the new deal; the last observation is in
``info["final_obs"]`` (an object array, entry ``i`` set where
``info["_final_obs"][i]``) and the last ``info`` in ``info["final_info"]``.
This is the convention SB3's ``VecEnv`` uses, and the state is never ``over``
when a step begins, so every action mask has a legal action.

Seeding: game ``i`` has its own generator and its own :class:`~coldiron_env.dealer.Dealer`
batch of shuffles, so ``reset(seed=s)`` deals game ``i`` exactly the decks a
:class:`ColdIronEnv` deals after ``reset(seed=s + i)``, on the first deal and
on every automatic one.
"""

from __future__ import annotations

import importlib
import operator
from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from coldiron_env.actions import (
    ACTION_NAMES,
    BONUS,
    IRON,
    LEGAL_ACTIONS,
    LEGAL_BITS,
    NUM_ACTIONS,
    NUM_PHASES,
    PHASE_BONUS,
    PHASE_IRON,
    PHASE_NAMES,
    PHASE_OVER,
    PHASE_TURN,
    RACK_RANK_FIRST,
    RACK_SUIT_FIRST,
    RACK_TARGETS,
    REST,
    STOP,
    THREATEN,
)
from coldiron_env.cards import (
    DECK_SIZE,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_NUMBERED,
    NUM_RANKS,
    NUM_SUITS,
    SUIT_FIELD_MASK,
    hand_codes,
    parse_deck,
)
from coldiron_env.dealer import SHUFFLE_BATCH, relabel_jokers
from coldiron_env.env import ColdIronEnv
from coldiron_env.game import (
    DECK_EXHAUSTED,
    ILLEGAL,
    MIDNIGHT,
    SLAIN,
    WON,
    GameOverError,
    IllegalActionError,
)
from coldiron_env.judge import HAS_RUN
from coldiron_env.observation import (
    DECK_COUNT,
    DISCARDED,
    HAND,
    HURT,
    IRON_COUNT,
    PHASE,
    TURN,
    flat_size,
)
from coldiron_env.options import BONUS_DRAWS, IRON_APPLICATIONS_PER_TURN, MAX_HURT

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]
Bools = npt.NDArray[np.bool_]
AnyArray = npt.NDArray[Any]

# ------------------------------------------------------------------ constants
NOOP: Final = NUM_ACTIONS
"""Pseudo-action standing for an illegal action under ``illegal_action="end"``."""
NUM_TABLE_ACTIONS: Final = NUM_ACTIONS + 1

# Outcome codes (index into OUTCOME_NAMES); 0 while the game goes on.
PLAYING: Final = 0
OUTCOME_NAMES: Final = (None, WON, SLAIN, DECK_EXHAUSTED, MIDNIGHT, ILLEGAL)
CODE_WON: Final = OUTCOME_NAMES.index(WON)
CODE_SLAIN: Final = OUTCOME_NAMES.index(SLAIN)
CODE_EXHAUSTED: Final = OUTCOME_NAMES.index(DECK_EXHAUSTED)
CODE_MIDNIGHT: Final = OUTCOME_NAMES.index(MIDNIGHT)
CODE_ILLEGAL: Final = OUTCOME_NAMES.index(ILLEGAL)

# What granted a pending bonus (game.py's private codes, same meaning).
SOURCE_NONE: Final = 0
SOURCE_THREATEN: Final = 1
SOURCE_IRON: Final = 2

LAST_POSITION: Final = DECK_SIZE - 1
BYTES_PER_MASK: Final = 8  # a uint64 position or card mask
_ONE: Final = np.uint64(1)
ALL_POSITIONS: Final = np.uint64((1 << DECK_SIZE) - 1)
LAST_BIT: Final = np.uint64(1 << LAST_POSITION)

POSITION_BITS: Final = _ONE << np.arange(DECK_SIZE, dtype=np.uint64)
ALL_CARD_BITS: Final = POSITION_BITS  # bit of card id c in a card mask (same numbering)
_ORDERED_BATCH: Final = np.broadcast_to(
    np.arange(DECK_SIZE, dtype=np.int64), (SHUFFLE_BATCH, DECK_SIZE)
)
LOW: Final = np.array([(1 << k) - 1 for k in range(DECK_SIZE + 2)], dtype=np.uint64)
"""``LOW[k]``: the positions (or card ids) below ``k``."""
HIGH: Final = ~LOW
"""``HIGH[k]``: the positions at or above ``k``."""

_actions = np.arange(NUM_TABLE_ACTIONS)
IS_DRAW: Final = _actions <= REST
IS_RACK: Final = (_actions >= RACK_RANK_FIRST) & (_actions < REST)
HURT_DELTA: Final = np.zeros(NUM_TABLE_ACTIONS, dtype=np.int64)
HURT_DELTA[IRON] = 1
HURT_DELTA[REST] = -1
SOURCE_OF: Final = np.zeros(NUM_TABLE_ACTIONS, dtype=np.int64)
SOURCE_OF[THREATEN] = SOURCE_THREATEN
SOURCE_OF[IRON] = SOURCE_IRON
LEGAL: Final = np.array(
    [[bool(LEGAL_BITS[p] >> a & 1) for a in range(NUM_ACTIONS)] for p in range(NUM_PHASES)]
).reshape(-1)
"""``LEGAL[phase * NUM_ACTIONS + action]``."""
MASKS_INT8: Final = LEGAL.reshape(NUM_PHASES, NUM_ACTIONS).astype(np.int8)
MASKS_BOOL: Final = LEGAL.reshape(NUM_PHASES, NUM_ACTIONS).copy()

_cards = np.arange(DECK_SIZE)
_numbered = _cards < FIRST_COURT
CARD_BIT: Final = np.where(_numbered, _ONE << _cards.astype(np.uint64), 0).astype(np.uint64)
"""Hand bit of a kept card (0 for court cards and Jokers, never kept)."""
SUIT_SHIFT: Final = np.where(_numbered, _cards // NUM_RANKS * NUM_RANKS, 0).astype(np.uint64)
SUIT_BIT: Final = np.where(_numbered, 1 << (_cards // NUM_RANKS), 0).astype(np.int64)
IS_COURT: Final = (_cards >= FIRST_COURT) & (_cards < FIRST_JOKER)
IS_JOKER: Final = _cards >= FIRST_JOKER
HAS_RUN_TABLE: Final = np.array(HAS_RUN, dtype=np.bool_)
SUITS_DONE_COUNT: Final = np.array([bin(m).count("1") for m in range(1 << NUM_SUITS)])

PHASE_NAME_ARRAY: Final = np.array(PHASE_NAMES)
"""Phase names as a NumPy string array (``info["phase"]``)."""
OUTCOME_NAME_ARRAY: Final = np.array(["" if o is None else o for o in OUTCOME_NAMES])
"""Outcome names as a NumPy string array (``""`` while playing)."""
PHASE_ONE_HOT: Final = np.eye(NUM_PHASES, dtype=np.float32)
HURT_VALUES: Final = (np.arange(MAX_HURT + 1) / MAX_HURT).astype(np.float32)
DECK_VALUES: Final = (np.arange(DECK_SIZE + 1) / DECK_SIZE).astype(np.float32)
IRON_VALUES: Final = (
    np.arange(IRON_APPLICATIONS_PER_TURN + 1) / IRON_APPLICATIONS_PER_TURN
).astype(np.float32)

RESET_OPTION_KEYS: Final = ("deck",)
BACKENDS: Final = ("auto", "numpy", "numba")

numba: Any
try:  # optional: `pip install numba` compiles the per-game loop below
    numba = importlib.import_module("numba")
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None

NUMBA_AVAILABLE: Final = numba is not None


def _jit(fn: Any) -> Any:
    """Compile ``fn`` with numba (lazily, cached on disk) when numba is installed."""
    return numba.njit(cache=True, nogil=True)(fn) if numba is not None else fn


# ------------------------------------------------------------------ numba backend
# The same rules as game.py, one game at a time in compiled code: every draw is
# resolved in the order of R11. Used with backend="numba"; the NumPy backend below
# is the reference when numba is absent, and the tests run both against game.py.
_NEXT_NONE: Final = 0
_NEXT_END_TURN: Final = 1
_NEXT_AFTER_IRON: Final = 2
_NEXT_AFTER_BONUS: Final = 3
_NEXT_IRON: Final = 4
_NEXT_PENDING: Final = 5
RACK_TARGET_TABLE: Final = np.array(
    [RACK_TARGETS[a] for a in range(NUM_ACTIONS)] + [0], dtype=np.int64
)


@_jit
def _nb_resolve(
    i: int,
    card: int,
    keep: bool,
    hand: I64,
    discarded: I64,
    pos: I64,
    suits_done: I64,
    suits_required: int,
) -> int:
    """R11 (1, 2) for a drawn card: keep it (phrase check, R7) or discard it; the deck check."""
    if keep:
        held = hand[i] | (1 << card)
        hand[i] = held
        suit = card // NUM_RANKS
        if HAS_RUN_TABLE[(held >> (suit * NUM_RANKS)) & SUIT_FIELD_MASK]:
            done = suits_done[i] | (1 << suit)
            suits_done[i] = done
            if SUITS_DONE_COUNT[done] >= suits_required:
                return CODE_WON
    else:
        discarded[i] |= 1 << card
    if pos[i] == DECK_SIZE:
        return CODE_EXHAUSTED
    return PLAYING


@_jit
def _nb_bonus(
    i: int,
    deck: I8,
    pos: I64,
    hand: I64,
    discarded: I64,
    hurt: I64,
    suits_done: I64,
    source: I64,
    suits_required: int,
    joker_grants_more: bool,
) -> int:
    """The Joker's bonus draws (R17) of game ``i``; the outcome code (0 while playing)."""
    hurting = source[i] == SOURCE_IRON
    remaining = BONUS_DRAWS
    while remaining > 0:
        remaining -= 1
        card = np.int64(deck[i, pos[i]])
        pos[i] += 1
        code = _nb_resolve(
            i, card, card < FIRST_COURT, hand, discarded, pos, suits_done, suits_required
        )
        if code != PLAYING:
            return code  # type: ignore[no-any-return]
        if card >= FIRST_JOKER:
            if joker_grants_more:
                remaining += BONUS_DRAWS
        elif card >= FIRST_COURT and hurting:
            hurt[i] += 1
            if hurt[i] >= MAX_HURT:
                return CODE_SLAIN
    return PLAYING


@_jit
def _nb_step(
    actions: I64,
    deck: I8,
    pos: I64,
    hand: I64,
    discarded: I64,
    hurt: I64,
    turn: I64,
    phase: I64,
    iron: I64,
    suits_done: I64,
    source: I64,
    outcome: I64,
    bonus_always: bool,
    joker_grants_more: bool,
    turns: int,
    suits_required: int,
) -> None:
    """One legal action (or NOOP: forfeit) in every game, as ``Game.step`` / ``Game.forfeit``."""
    for i in range(actions.shape[0]):
        action = actions[i]
        code = PLAYING
        nxt = _NEXT_NONE
        if action == NOOP:
            code = CODE_ILLEGAL
        elif action == STOP:
            nxt = _NEXT_END_TURN if phase[i] == PHASE_IRON else _NEXT_AFTER_BONUS
        elif action == BONUS:
            code = _nb_bonus(
                i,
                deck,
                pos,
                hand,
                discarded,
                hurt,
                suits_done,
                source,
                suits_required,
                joker_grants_more,
            )
            nxt = _NEXT_AFTER_BONUS
        elif action == THREATEN or action == IRON:  # noqa: PLR1714, SIM109 (numba)
            if action == IRON:
                iron[i] += 1
            card = np.int64(deck[i, pos[i]])
            pos[i] += 1
            code = _nb_resolve(
                i, card, card < FIRST_COURT, hand, discarded, pos, suits_done, suits_required
            )
            if code == PLAYING and action == IRON:
                hurt[i] += 1
                if hurt[i] >= MAX_HURT:
                    code = CODE_SLAIN
            if code == PLAYING:
                if card >= FIRST_JOKER:
                    source[i] = SOURCE_IRON if action == IRON else SOURCE_THREATEN
                    if bonus_always:
                        code = _nb_bonus(
                            i,
                            deck,
                            pos,
                            hand,
                            discarded,
                            hurt,
                            suits_done,
                            source,
                            suits_required,
                            joker_grants_more,
                        )
                        nxt = _NEXT_AFTER_BONUS
                    else:
                        nxt = _NEXT_PENDING
                else:
                    nxt = _NEXT_AFTER_IRON if action == IRON else _NEXT_END_TURN
        elif action == REST:
            card = np.int64(deck[i, pos[i]])
            pos[i] += 1
            code = _nb_resolve(i, card, False, hand, discarded, pos, suits_done, suits_required)
            if code == PLAYING:
                if hurt[i] > 0:
                    hurt[i] -= 1
                nxt = _NEXT_END_TURN
        else:  # a rack (R14)
            targets = RACK_TARGET_TABLE[action]
            while True:
                card = np.int64(deck[i, pos[i]])
                pos[i] += 1
                if card < FIRST_COURT and (targets >> card) & 1:
                    code = _nb_resolve(
                        i, card, True, hand, discarded, pos, suits_done, suits_required
                    )
                    nxt = _NEXT_END_TURN
                    break
                code = _nb_resolve(i, card, False, hand, discarded, pos, suits_done, suits_required)
                if code != PLAYING:
                    break
                if card >= FIRST_JOKER:
                    code = CODE_SLAIN
                    break
                if card >= FIRST_COURT:
                    hurt[i] += 1
                    if hurt[i] >= MAX_HURT:
                        code = CODE_SLAIN
                        break
        if code == PLAYING:
            if nxt == _NEXT_AFTER_BONUS:
                nxt = _NEXT_AFTER_IRON if source[i] == SOURCE_IRON else _NEXT_END_TURN
            if nxt == _NEXT_AFTER_IRON:
                spent = iron[i] >= IRON_APPLICATIONS_PER_TURN
                nxt = _NEXT_END_TURN if spent else _NEXT_IRON
            if nxt == _NEXT_END_TURN:
                if turn[i] >= turns:
                    code = CODE_MIDNIGHT
                else:
                    turn[i] += 1
                    iron[i] = 0
                    phase[i] = PHASE_TURN
            elif nxt == _NEXT_IRON:
                phase[i] = PHASE_IRON
            elif nxt == _NEXT_PENDING:
                phase[i] = PHASE_BONUS
        if code != PLAYING:
            phase[i] = PHASE_OVER
        outcome[i] = code


# Field offsets as plain ints for compiled code (observation.py stays the one layout).
_HAND_START: Final = HAND.start
_HAND_SIZE: Final = HAND.size
_HURT_AT: Final = HURT.start
_TURN_AT: Final = TURN.start
_DECK_AT: Final = DECK_COUNT.start
_PHASE_START: Final = PHASE.start
_PHASE_SIZE: Final = PHASE.size
_IRON_AT: Final = IRON_COUNT.start
_DISCARDED_START: Final = DISCARDED.start
_DISCARDED_SIZE: Final = DISCARDED.size


@_jit
def _nb_encode_flat(
    envs: I64,
    hand: I64,
    hurt: I64,
    turn: I64,
    pos: I64,
    phase: I64,
    iron: I64,
    discarded: I64,
    recall: bool,
    turn_values: npt.NDArray[np.float32],
    out: npt.NDArray[np.float32],
) -> None:
    """Flat observations of games ``envs`` into ``out`` (the numba :func:`encode_flat`)."""
    for j in range(envs.shape[0]):
        i = envs[j]
        held = hand[i]
        for c in range(_HAND_SIZE):
            out[j, _HAND_START + c] = (held >> c) & 1
        out[j, _HURT_AT] = HURT_VALUES[hurt[i]]
        out[j, _TURN_AT] = turn_values[turn[i]]
        out[j, _DECK_AT] = DECK_VALUES[DECK_SIZE - pos[i]]
        for k in range(_PHASE_SIZE):
            out[j, _PHASE_START + k] = 0.0
        out[j, _PHASE_START + phase[i]] = 1.0
        out[j, _IRON_AT] = IRON_VALUES[iron[i]]
        if recall:
            gone = discarded[i]
            for c in range(_DISCARDED_SIZE):
                out[j, _DISCARDED_START + c] = (gone >> c) & 1


# ------------------------------------------------------------------ encoders
def _bits(masks: U64, count: int) -> npt.NDArray[np.uint8]:
    """Rows of the low ``count`` bits of each uint64 mask (bit ``i`` in column ``i``)."""
    as_bytes = masks.astype("<u8", copy=False).view(np.uint8).reshape(-1, BYTES_PER_MASK)
    return np.unpackbits(as_bytes, axis=1, count=count, bitorder="little")


def encode_flat(
    hand: U64,
    hurt: I64,
    turn: I64,
    deck_count: I64,
    phase: I64,
    iron_count: I64,
    discarded: U64 | None,
    turn_values: npt.NDArray[np.float32],
) -> npt.NDArray[np.float32]:
    """Flat observations of a batch of games, the layout of :mod:`coldiron_env.observation`.

    ``hand`` and ``discarded`` are bit masks over card ids; ``turn_values[t]``
    is ``t / turns`` in float32. ``discarded=None`` leaves the recall part out.
    """
    out = np.empty((hand.shape[0], flat_size(discarded is not None)), dtype=np.float32)
    out[:, HAND.start : HAND.stop] = _bits(hand, HAND.size)
    out[:, HURT.start] = HURT_VALUES[hurt]
    out[:, TURN.start] = turn_values[turn]
    out[:, DECK_COUNT.start] = DECK_VALUES[deck_count]
    out[:, PHASE.start : PHASE.stop] = np.take(PHASE_ONE_HOT, phase, axis=0)
    out[:, IRON_COUNT.start] = IRON_VALUES[iron_count]
    if discarded is not None:
        out[:, DISCARDED.start : DISCARDED.stop] = _bits(discarded, DISCARDED.size)
    return out


def encode_dict(
    hand: U64,
    hurt: I64,
    turn: I64,
    deck_count: I64,
    phase: I64,
    iron_count: I64,
    discarded: U64 | None,
) -> dict[str, AnyArray]:
    """Dict observations of a batch of games (the batched ``observation_mode="dict"``)."""
    obs: dict[str, AnyArray] = {
        HAND.name: _bits(hand, HAND.size).view(np.int8),
        HURT.name: hurt.copy(),
        TURN.name: turn.copy(),
        DECK_COUNT.name: deck_count,
        PHASE.name: phase.copy(),
        IRON_COUNT.name: iron_count.copy(),
    }
    if discarded is not None:
        obs[DISCARDED.name] = _bits(discarded, DISCARDED.size).view(np.int8)
    return obs


# ------------------------------------------------------------------ the env
class ColdIronVectorEnv(VectorEnv[Any, I64, AnyArray]):
    """``num_envs`` games of Cold Iron stepped together (a native :class:`VectorEnv`).

    Takes the keyword arguments of :class:`~coldiron_env.env.ColdIronEnv`
    (validated by it, with the same messages) except that ``render_mode`` must
    be ``None``; plus ``max_episode_steps`` (optional truncation, as
    ``gymnasium.make`` would add; every game ends by itself within 74 steps)
    and ``backend`` (``"auto"``: numba when installed, else ``"numpy"``).

    * Spaces: ``single_observation_space`` / ``single_action_space`` are the
      single env's; ``observation_space`` and ``action_space``
      (``MultiDiscrete([19] * N)``) are batched. Flat observations are an
      (N, 48) or (N, 102) float32 array; dict observations a dict of arrays.
    * ``step(actions)`` takes N integer actions. An action outside
      ``Discrete(19)`` raises :class:`IllegalActionError` (no game changes); an
      illegal one ends that game (``outcome="illegal"``) or raises, as
      ``illegal_action`` says.
    * ``info`` (Gymnasium's dict-of-arrays convention, each key with its
      ``_key`` mask): ``action_mask`` (N, 19) int8, ``phase`` (a NumPy string
      array of names), ``turn``, ``hurt``, ``deck_count``, ``iron_count``; for
      the games that ended this step, ``outcome`` (string array, ``""`` where
      ``_outcome`` is false) and ``is_success``, also inside ``final_info``,
      with ``final_obs`` (autoreset, below). A key that no game has this step
      (``final_obs`` when no game ended) is absent, as in Gymnasium.
      The per-game ``hand`` and ``drawn`` lists of the single env are left out
      (see :meth:`hand_codes`).
    * Autoreset ``SAME_STEP``; see the module docstring.
    * ``reset(seed=s)`` seeds game ``i`` with ``s + i`` (or takes a list of N
      seeds, ``None`` entries keeping that game's generator);
      ``reset(options={"deck": decks})`` deals ``decks[i]`` (54 codes, or
      ``None`` for a shuffled deck) to game ``i``.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012 (Gymnasium declares it so)
        "autoreset_mode": AutoresetMode.SAME_STEP,
        "render_modes": [],
    }

    def __init__(
        self,
        num_envs: int,
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
        backend: str = "auto",
        **kwargs: Any,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if render_mode is not None:
            raise ValueError(
                f"render_mode must be None for the native vector env, got {render_mode!r}; "
                "render single games with ColdIronEnv"
            )
        if max_episode_steps is not None and (
            isinstance(max_episode_steps, bool)
            or not isinstance(max_episode_steps, int)
            or max_episode_steps < 1
        ):
            raise ValueError(
                f"max_episode_steps must be None or a positive int, got {max_episode_steps!r}"
            )
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if backend == "numba" and not NUMBA_AVAILABLE:
            raise ValueError("backend='numba' needs numba: pip install numba (or use 'numpy')")
        self.backend = "numba" if backend == "auto" and NUMBA_AVAILABLE else backend
        if self.backend == "auto":
            self.backend = "numpy"
        self._numba = self.backend == "numba"
        template = ColdIronEnv(**kwargs)  # validates every option, with its messages
        self.num_envs = num_envs
        self.render_mode = None
        self.rules = template.rules
        self.observation_mode = template.observation_mode
        self.recall = template.recall
        self.win_reward = template.win_reward
        self.loss_reward = template.loss_reward
        self.illegal_action = template.illegal_action
        self.max_episode_steps = max_episode_steps
        self.single_observation_space = template.observation_space
        self.single_action_space = spaces.Discrete(NUM_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        template.close()

        self._flat = self.observation_mode == "flat"
        self._turns = self.rules.turns
        self._suits_required = self.rules.suits_required
        self._bonus_always = self.rules.bonus_always
        self._joker_grants_more = self.rules.bonus_joker_grants_more
        self._turn_values = (np.arange(self._turns + 1) / self._turns).astype(np.float32)
        self._rewards = np.array(
            [0.0, self.win_reward] + [self.loss_reward] * (len(OUTCOME_NAMES) - 2),
            dtype=np.float64,
        )

        n = num_envs
        self._index = np.arange(n)
        self._base_deck = self._index * DECK_SIZE
        # game state
        self._deck = np.zeros((n, DECK_SIZE), dtype=np.int8)
        self._deck_flat = self._deck.reshape(-1)
        self._pos = np.zeros(n, dtype=np.int64)
        self._hand = np.zeros(n, dtype=np.uint64)
        self._hurt = np.zeros(n, dtype=np.int64)
        self._turn = np.ones(n, dtype=np.int64)
        self._phase = np.zeros(n, dtype=np.int64)
        self._iron = np.zeros(n, dtype=np.int64)
        self._suits_done = np.zeros(n, dtype=np.int64)
        self._source = np.zeros(n, dtype=np.int64)
        self._steps = np.zeros(n, dtype=np.int64)
        # per-deck look-ups (filled when a deck is dealt)
        self._stop_mask = np.zeros((NUM_TABLE_ACTIONS, n), dtype=np.uint64)
        self._stop_flat = self._stop_mask.reshape(-1)
        self._keep_mask = np.zeros((NUM_TABLE_ACTIONS, n), dtype=np.uint64)
        self._keep_flat = self._keep_mask.reshape(-1)
        self._joker_mask = np.zeros(n, dtype=np.uint64)
        self._court_mask = np.zeros(n, dtype=np.uint64)
        self._position_bits = np.tile(POSITION_BITS, n)  # to scatter into card order
        self._drawn_cards = (
            np.zeros((n, DECK_SIZE + 1), dtype=np.uint64)
            if self.recall and not self._numba
            else None
        )
        self._discarded = np.zeros(n, dtype=np.int64)  # the numba backend's discard pile
        # dealing: a generator and a batch of shuffles per game, as ColdIronEnv's Dealer
        self._rngs: list[np.random.Generator | None] = [None] * n
        self._pool = np.zeros((n, SHUFFLE_BATCH, DECK_SIZE), dtype=np.int8)
        self._pool_next = np.full(n, SHUFFLE_BATCH, dtype=np.int64)
        self._needs_reset = True

    # ------------------------------------------------------------ Gym API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Deal a new game to every env (see the class docstring for ``seed`` and ``options``)."""
        n = self.num_envs
        seeds = self._seed_list(seed)
        decks = self._deck_option(options)
        for i, s in enumerate(seeds):
            if s is not None:
                self._rngs[i] = seeding.np_random(s)[0]
                self._pool_next[i] = SHUFFLE_BATCH  # a new generator discards the batch
        if isinstance(seed, (int, np.integer)):
            super().reset(seed=int(seed))  # the vector env's own np_random, as Gymnasium's
        dealt = np.empty((n, DECK_SIZE), dtype=np.int8)
        shuffled = np.array([i for i, d in enumerate(decks) if d is None], dtype=np.int64)
        if shuffled.size:
            dealt[shuffled] = self._deal(shuffled)
        for i, codes in enumerate(decks):
            if codes is not None:  # a given deck consumes no randomness, as in ColdIronEnv
                dealt[i] = codes
        self._start(self._index, dealt)
        self._needs_reset = False
        return self._observe(None), self._info()

    def step(
        self, actions: Any
    ) -> tuple[Any, npt.NDArray[np.float64], Bools, Bools, dict[str, Any]]:
        """Take one action in every game; games that end are dealt again (SAME_STEP)."""
        if self._needs_reset:
            raise GameOverError("step() called before reset()")
        action = self._check_actions(actions)
        phase = self._phase
        legal = LEGAL[phase * NUM_ACTIONS + action]
        illegal: Bools | None = None
        if not legal.all():
            if self.illegal_action == "raise":
                i = int(np.flatnonzero(~legal)[0])
                raise IllegalActionError(
                    f"env {i}: {_describe_illegal(int(action[i]), int(phase[i]))}"
                )
            illegal = ~legal
            action = np.where(legal, action, NOOP)

        if self._numba:
            outcome = np.empty(self.num_envs, dtype=np.int64)
            _nb_step(
                action,
                self._deck,
                self._pos,
                self._hand.view(np.int64),
                self._discarded,
                self._hurt,
                self._turn,
                self._phase,
                self._iron,
                self._suits_done,
                self._source,
                outcome,
                self._bonus_always,
                self._joker_grants_more,
                self._turns,
                self._suits_required,
            )
            terminated = outcome != PLAYING
        else:
            outcome, terminated = self._advance(action, phase, illegal)
        self._steps += 1
        if self.max_episode_steps is None:
            truncated = np.zeros(self.num_envs, dtype=np.bool_)
        else:
            truncated = self._steps >= self.max_episode_steps
        rewards = self._rewards[outcome]

        done = terminated | truncated
        if not done.any():
            return self._observe(None), rewards, terminated, truncated, self._info()
        ended = np.flatnonzero(done)
        final_batch = self._observe(ended)
        final_info = self._info(ended, outcome)
        final_obs = np.full(self.num_envs, None, dtype=object)
        if self._flat:
            final_obs[ended] = np.fromiter(final_batch, dtype=object, count=ended.size)
        else:
            for j, i in enumerate(ended.tolist()):
                final_obs[i] = {key: value[j] for key, value in final_batch.items()}
        self._start(ended, self._deal(ended))
        info = self._info()
        info["final_obs"] = final_obs
        info["_final_obs"] = done
        info["final_info"] = final_info
        info["_final_info"] = done
        for key in ("outcome", "is_success"):
            info[key] = final_info[key]
            info["_" + key] = final_info["_" + key]
        return self._observe(None), rewards, terminated, truncated, info

    def _advance(self, action: I64, phase: I64, illegal: Bools | None) -> tuple[I64, Bools]:
        """The NumPy backend: one action in every game with array operations."""
        pos = self._pos
        row = action * self.num_envs + self._index
        # ---- where every game's draws stop: one card, or a rack's first match, first
        # Joker or last card; a rack's court cards before that stop deal Hurt (R14)
        high = HIGH[pos]
        stop = self._stop_flat[row] | self._joker_mask
        stop |= LAST_BIT
        stop &= high
        low_bit = stop & np.negative(stop)
        end = np.bitwise_count(low_bit - _ONE).astype(np.intp)
        hurt = self._hurt + np.bitwise_count(self._court_mask & high & LOW[end])
        over = hurt >= MAX_HURT
        if over.any():  # a court card slays before the stop: the draws end there
            self._slaying_courts(np.flatnonzero(over), end, low_bit, hurt)
        card = self._deck_flat[self._base_deck + end].astype(np.intp)
        # ---- R11 (1): a kept card joins the hand and the phrase is checked (R7)
        keep = (self._keep_flat[row] & low_bit) != 0
        hand = self._hand
        hand |= CARD_BIT[card] * keep
        field = ((hand >> SUIT_SHIFT[card]) & SUIT_FIELD_MASK).view(np.int64)
        self._suits_done |= SUIT_BIT[card] * (HAS_RUN_TABLE[field] & keep)
        won = SUITS_DONE_COUNT[self._suits_done] >= self._suits_required
        # ---- R11 (2): the draw emptied the deck (R9)
        draw = IS_DRAW[action]
        after = end + 1
        exhausted = (after == DECK_SIZE) & draw & ~won
        # ---- R11 (3, 4): a Joker in a rack slays; the Iron's Hurt; Rest heals (R13-R15)
        quiet = exhausted | won
        hurt += HURT_DELTA[action] * ~quiet
        np.maximum(hurt, 0, out=hurt)
        self._hurt = hurt
        joker = IS_JOKER[card]
        slain = ~quiet & ((hurt >= MAX_HURT) | (joker & IS_RACK[action]))
        outcome = won * CODE_WON
        outcome += slain * CODE_SLAIN
        outcome += exhausted * CODE_EXHAUSTED
        np.copyto(pos, after, where=draw)
        # ---- what follows: a Joker's bonus, another Iron, the end of the turn
        alive = draw & ~(quiet | slain)
        source = SOURCE_OF[action]
        bonus_start = alive & joker & (source != SOURCE_NONE)
        np.copyto(self._source, source, where=bonus_start)
        iron_act = action == IRON
        self._iron += iron_act
        go_on = alive & ~bonus_start
        iron_on = go_on & iron_act
        end_turn = go_on & ~iron_act
        stopping = action == STOP
        back = stopping & (phase == PHASE_BONUS)
        end_turn |= stopping & (phase == PHASE_IRON)
        if self._bonus_always:
            taking = bonus_start | (action == BONUS)
            pending = None
        else:
            taking = action == BONUS
            pending = bonus_start
        drawing = np.flatnonzero(taking)
        if drawing.size:
            back |= self._bonus_draws(drawing, outcome)
        from_iron = back & (self._source == SOURCE_IRON)
        iron_on |= from_iron
        end_turn |= back & ~from_iron
        spent = self._iron >= IRON_APPLICATIONS_PER_TURN
        end_turn |= iron_on & spent
        to_iron = iron_on & ~spent
        midnight = end_turn & (self._turn >= self._turns)
        advance = end_turn & ~midnight
        self._turn += advance
        self._iron *= ~advance
        outcome += midnight * CODE_MIDNIGHT
        if illegal is not None:
            outcome += illegal * CODE_ILLEGAL
        terminated = outcome != PLAYING
        new_phase = terminated * PHASE_OVER
        new_phase += to_iron * PHASE_IRON
        if pending is not None:
            new_phase += pending * PHASE_BONUS
        self._phase = new_phase
        return outcome, terminated

    def action_masks(self) -> Bools:
        """Legal actions of every game, an (N, 19) bool array (for sb3-contrib's MaskablePPO)."""
        return np.take(MASKS_BOOL, self._phase, axis=0)

    # ------------------------------------------------------------ queries
    def hand_codes(self, i: int) -> list[str]:
        """Card codes of game ``i``'s hand, sorted by suit then rank (the single env's ``hand``)."""
        return hand_codes(int(self._hand[i]))

    def state_nbytes(self) -> int:
        """Bytes of NumPy state held for all games (grows linearly with ``num_envs``)."""
        arrays = [v for v in vars(self).values() if isinstance(v, np.ndarray) and v.base is None]
        return sum(a.nbytes for a in arrays)

    # ------------------------------------------------------------ internals
    def _check_actions(self, actions: Any) -> I64:
        a = np.asarray(actions)
        if a.shape != (self.num_envs,):
            if a.ndim == 0 or a.size != self.num_envs:
                raise IllegalActionError(
                    f"actions must be an array of {self.num_envs} integers (one per env), "
                    f"got shape {a.shape}"
                )
            a = a.reshape(self.num_envs)
        if a.dtype.kind not in "iu":
            raise IllegalActionError(
                f"actions must be integers in 0..{NUM_ACTIONS - 1}, got dtype {a.dtype}"
            )
        out = a.astype(np.int64, copy=False)
        outside = (out < 0) | (out >= NUM_ACTIONS)
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise IllegalActionError(
                f"env {i}: action {int(out[i])} is outside the action space Discrete({NUM_ACTIONS})"
            )
        return out

    def _seed_list(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        n = self.num_envs
        if seed is None:
            return [None] * n
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            return [int(seed) + i for i in range(n)]
        if isinstance(seed, (str, bytes)) or not isinstance(seed, Sequence):
            raise ValueError(f"seed must be None, an int or a list of {n} ints, got {seed!r}")
        if len(seed) != n:
            raise ValueError(f"seed list must hold {n} entries (one per env), got {len(seed)}")
        out: list[int | None] = []
        for i, s in enumerate(seed):
            if s is not None and (isinstance(s, bool) or not isinstance(s, (int, np.integer))):
                raise ValueError(f"seed for env {i} must be an int or None, got {s!r}")
            out.append(None if s is None else operator.index(s))
        return out

    def _deck_option(self, options: dict[str, Any] | None) -> list[list[int] | None]:
        n = self.num_envs
        if not options:
            return [None] * n
        if not isinstance(options, dict):
            raise ValueError(f"options must be a dict, got {type(options).__name__}")
        unknown = sorted(set(options) - set(RESET_OPTION_KEYS))
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; known: {list(RESET_OPTION_KEYS)}")
        decks = options.get("deck")
        if decks is None:
            return [None] * n
        if isinstance(decks, (str, bytes)) or not isinstance(decks, Iterable):
            raise ValueError(
                f"deck option must be a list of {n} decks (each 54 card codes or None), "
                f"got {type(decks).__name__}"
            )
        decks = list(decks)  # also a tuple, or a NumPy array with one row per env
        if len(decks) > 0 and all(isinstance(d, str) for d in decks):
            raise ValueError(
                f"deck option must be a list of {n} decks (one per env, each 54 card codes or "
                f"None), got a single list of {len(decks)} codes"
            )
        if len(decks) != n:
            raise ValueError(f"deck option must hold {n} decks (one per env), got {len(decks)}")
        out: list[list[int] | None] = []
        for i, codes in enumerate(decks):
            if codes is None:
                out.append(None)
                continue
            try:
                out.append(parse_deck(codes))
            except ValueError as err:
                raise ValueError(f"deck option, env {i}: {err}") from None
        return out

    def _deal(self, envs: I64) -> I8:
        """The next shuffled deck of each game in ``envs``, each from its own generator.

        Game ``i`` refills its batch of :data:`SHUFFLE_BATCH` shuffles exactly as
        :class:`~coldiron_env.dealer.Dealer` does from the same generator.
        """
        empty = envs[self._pool_next[envs] >= SHUFFLE_BATCH]
        if empty.size:
            for i in empty.tolist():
                rng = self._rngs[i]
                if rng is None:
                    rng = self._rngs[i] = seeding.np_random()[0]
                self._pool[i] = rng.permuted(_ORDERED_BATCH, axis=1)
            self._pool[empty] = relabel_jokers(self._pool[empty])
            self._pool_next[empty] = 0
        decks = np.take(
            self._pool.reshape(-1, DECK_SIZE), envs * SHUFFLE_BATCH + self._pool_next[envs], axis=0
        )
        self._pool_next[envs] += 1
        return decks

    def _start(self, envs: I64, decks: I8) -> None:
        """Start new games on ``decks`` (k, 54) in ``envs`` and build their look-ups."""
        k = envs.shape[0]
        self._deck[envs] = decks
        for state in (self._pos, self._hurt, self._iron, self._source, self._steps):
            state[envs] = 0
        self._phase[envs] = PHASE_TURN
        self._hand[envs] = 0
        self._suits_done[envs] = 0
        self._turn[envs] = 1
        if self._numba:
            self._discarded[envs] = 0
            return  # the compiled loop reads the deck itself: no look-ups to build
        # Position bit of each card id, cards along axis 0 so that every operation
        # below runs over the k games: at[c, j] = 1 << (position of card c in deck j).
        at = np.empty(DECK_SIZE * k, dtype=np.uint64)
        where = decks.astype(np.intp)
        where *= k
        where += self._index[:k, None]
        at[where.reshape(-1)] = self._position_bits[: k * DECK_SIZE]
        at = at.reshape(DECK_SIZE, k)
        numbered = at[:NUM_NUMBERED].reshape(NUM_SUITS, NUM_RANKS, k)
        # unions of disjoint bits are sums
        stop = np.full((NUM_TABLE_ACTIONS, k), ALL_POSITIONS, dtype=np.uint64)
        numbered.sum(axis=0, out=stop[RACK_RANK_FIRST:RACK_SUIT_FIRST])
        numbered.sum(axis=1, out=stop[RACK_SUIT_FIRST:REST])
        keep = np.zeros((NUM_TABLE_ACTIONS, k), dtype=np.uint64)
        stop[RACK_SUIT_FIRST:REST].sum(axis=0, out=keep[THREATEN])
        keep[IRON] = keep[THREATEN]
        keep[RACK_RANK_FIRST:REST] = stop[RACK_RANK_FIRST:REST]
        self._stop_mask[:, envs] = stop
        self._keep_mask[:, envs] = keep
        self._joker_mask[envs] = at[FIRST_JOKER] | at[FIRST_JOKER + 1]
        self._court_mask[envs] = at[FIRST_COURT:FIRST_JOKER].sum(axis=0)
        if self._drawn_cards is not None:
            drawn = self._drawn_cards[envs]
            np.cumsum(np.take(ALL_CARD_BITS, decks), axis=1, out=drawn[:, 1:])
            self._drawn_cards[envs] = drawn

    def _slaying_courts(self, envs: I64, end: AnyArray, low_bit: U64, hurt: AnyArray) -> None:
        """For racks in ``envs`` whose court cards reach Hurt 6 before their stop card:
        move the stop to the court card that slays (the (6 - Hurt)-th from the deck top)."""
        courts = self._court_mask[envs] & HIGH[self._pos[envs]]
        skip = MAX_HURT - 1 - self._hurt[envs]  # court cards drawn before the slaying one
        while True:
            clearing = skip > 0
            if not clearing.any():
                break
            courts = np.where(clearing, courts & (courts - _ONE), courts)
            skip -= clearing
        bit = courts & np.negative(courts)
        low_bit[envs] = bit
        end[envs] = np.bitwise_count(bit - _ONE)
        hurt[envs] = MAX_HURT

    def _bonus_draws(self, envs: I64, outcome: I64) -> Bools:
        """The Joker's bonus draws (R17) for ``envs``; returns the games that live on."""
        live = np.zeros(self.num_envs, dtype=np.bool_)
        hurting = self._source[envs] == SOURCE_IRON
        remaining = np.full(envs.shape[0], BONUS_DRAWS, dtype=np.int64)
        while envs.size:
            pos = self._pos[envs]
            card = self._deck_flat[envs * DECK_SIZE + pos].astype(np.intp)
            pos += 1
            self._pos[envs] = pos
            hand = self._hand[envs] | CARD_BIT[card]
            self._hand[envs] = hand
            field = ((hand >> SUIT_SHIFT[card]) & SUIT_FIELD_MASK).view(np.int64)
            done = self._suits_done[envs] | SUIT_BIT[card] * HAS_RUN_TABLE[field]
            self._suits_done[envs] = done
            won = SUITS_DONE_COUNT[done] >= self._suits_required
            exhausted = ~won & (pos == DECK_SIZE)
            hurts = IS_COURT[card] & hurting & ~exhausted
            hurt = self._hurt[envs] + hurts
            self._hurt[envs] = hurt
            slain = hurts & (hurt >= MAX_HURT)
            code = won * CODE_WON + slain * CODE_SLAIN + exhausted * CODE_EXHAUSTED
            outcome[envs] = code
            going = code == PLAYING
            remaining -= 1
            if self._joker_grants_more:
                remaining += (IS_JOKER[card] & going) * BONUS_DRAWS
            live[envs[going & (remaining == 0)]] = True
            more = going & (remaining > 0)
            envs, remaining, hurting = envs[more], remaining[more], hurting[more]
        return live

    def _observe(self, envs: I64 | None) -> Any:
        if self._numba and self._flat:
            chosen = self._index if envs is None else envs
            out = np.empty((chosen.shape[0], flat_size(self.recall)), dtype=np.float32)
            _nb_encode_flat(
                chosen,
                self._hand.view(np.int64),
                self._hurt,
                self._turn,
                self._pos,
                self._phase,
                self._iron,
                self._discarded,
                self.recall,
                self._turn_values,
                out,
            )
            return out
        pick = slice(None) if envs is None else envs
        hand = self._hand[pick]
        deck_count = DECK_SIZE - self._pos[pick]
        discarded = None
        if self.recall and self._numba:
            discarded = self._discarded[pick].view(np.uint64)
        elif self._drawn_cards is not None:
            drawn = self._drawn_cards.reshape(-1)[
                (self._index[pick] * (DECK_SIZE + 1)) + self._pos[pick]
            ]
            discarded = drawn & ~hand
        if self._flat:
            return encode_flat(
                hand,
                self._hurt[pick],
                self._turn[pick],
                deck_count,
                self._phase[pick],
                self._iron[pick],
                discarded,
                self._turn_values,
            )
        return encode_dict(
            hand,
            self._hurt[pick],
            self._turn[pick],
            deck_count,
            self._phase[pick],
            self._iron[pick],
            discarded,
        )

    def _info(self, envs: I64 | None = None, outcome: I64 | None = None) -> dict[str, Any]:
        """The batched ``info``: of every game, or (``envs``) of the games that just ended."""
        n = self.num_envs
        if envs is None:
            present = np.ones(n, dtype=np.bool_)
            phase = self._phase
        else:
            present = np.zeros(n, dtype=np.bool_)
            present[envs] = True
            phase = self._phase
        info: dict[str, Any] = {
            "action_mask": np.take(MASKS_INT8, phase, axis=0),
            "phase": PHASE_NAME_ARRAY[phase],
            "turn": self._turn.copy(),
            "hurt": self._hurt.copy(),
            "deck_count": DECK_SIZE - self._pos,
            "iron_count": self._iron.copy(),
        }
        for key in list(info):
            info["_" + key] = present
        if outcome is not None:
            ended = present & (outcome != PLAYING)
            info["outcome"] = OUTCOME_NAME_ARRAY[outcome]
            info["_outcome"] = ended
            info["is_success"] = outcome == CODE_WON
            info["_is_success"] = ended
        return info


def _describe_illegal(action: int, phase: int) -> str:
    legal = ", ".join(f"{a} ({ACTION_NAMES[a]})" for a in LEGAL_ACTIONS[phase])
    return (
        f"action {action} ({ACTION_NAMES[action]}) is illegal in phase "
        f"{PHASE_NAMES[phase]!r}; legal: {legal}"
    )
