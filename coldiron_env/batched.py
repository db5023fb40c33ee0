"""The batched rules core: Cold Iron's rules over arrays of game state, compiled by numba.

:func:`step_games` is the rules of :mod:`coldiron_env.game` transcribed one game after another
over the arrays of :class:`~coldiron_env.game.Games` (one action in every game; ``SKIP`` leaves
a game as it is), the rules packed once by :func:`pack_rules`: the only implementation of the
rules besides :class:`~coldiron_env.game.Game`, kept in lockstep with it by the tests
(tests/test_vector.py, tests/test_rollouts.py). Two users: the native vector env
(:mod:`coldiron_env.vector`) and the planner's compiled rollouts (:mod:`agents.players.rollouts`).

With numba installed (the ``fast`` extra) the functions are compiled (about a second the first
time, cached on disk); without it they run as plain Python, the same games about forty times
slower. This module itself imports only NumPy (and numba when installed).
"""

from __future__ import annotations

import importlib
from typing import Any, Final

import numpy as np

from coldiron_env.actions import (
    BONUS,
    IRON,
    NUM_ACTIONS,
    PHASE_BONUS,
    PHASE_IRON,
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
)
from coldiron_env.game import (
    BONUS_FROM_IRON,
    BONUS_FROM_NONE,
    BONUS_FROM_THREATEN,
    DECK_EXHAUSTED,
    I8,
    I64,
    ILLEGAL,
    MIDNIGHT,
    SLAIN,
    WON,
    Games,
)
from coldiron_env.judge import HAS_RUN
from coldiron_env.options import BONUS_DRAWS, IRON_APPLICATIONS_PER_TURN, MAX_HURT, RuleOptions

FORFEIT: Final = NUM_ACTIONS
"""Pseudo-action of :func:`step_games`: the game is lost by an illegal action (``Game.forfeit``)."""
SKIP: Final = NUM_ACTIONS + 1
"""Pseudo-action of :func:`step_games`: the game is left as it is (dealt again this step)."""

# Outcome codes of step_games (index into OUTCOME_NAMES); PLAYING while the game goes on.
PLAYING: Final = 0
OUTCOME_NAMES: Final = ("", WON, SLAIN, DECK_EXHAUSTED, MIDNIGHT, ILLEGAL)
CODE_WON: Final = OUTCOME_NAMES.index(WON)
CODE_SLAIN: Final = OUTCOME_NAMES.index(SLAIN)
CODE_EXHAUSTED: Final = OUTCOME_NAMES.index(DECK_EXHAUSTED)
CODE_MIDNIGHT: Final = OUTCOME_NAMES.index(MIDNIGHT)
CODE_ILLEGAL: Final = OUTCOME_NAMES.index(ILLEGAL)

RACK_TARGET_TABLE: Final = np.array(
    [RACK_TARGETS[a] for a in range(NUM_ACTIONS)] + [0, 0], dtype=np.int64
)
HAS_RUN_TABLE: Final = np.array(HAS_RUN, dtype=np.bool_)
SUITS_DONE_COUNT: Final = np.array([bin(m).count("1") for m in range(1 << NUM_SUITS)])
numba: Any
try:  # optional: the `fast` extra compiles the loop below
    numba = importlib.import_module("numba")
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None

NUMBA_AVAILABLE: Final = numba is not None
SLOW_WARNING: Final = (
    "coldiron's vector env runs its game loop as plain Python (about 40x slower) because "
    "numba is not installed: pip install 'coldiron[fast]'"
)


def compiled(fn: Any, cache: bool = True) -> Any:
    """``fn`` compiled by numba (lazily, cached on disk unless ``cache`` is false);
    ``fn.py_func`` is the plain Python."""
    if numba is None:
        fn.py_func = fn
        return fn
    try:
        return numba.njit(cache=cache, nogil=True)(fn)
    except RuntimeError:  # no writable place for the cache (a read-only install, no HOME)
        return numba.njit(cache=False, nogil=True)(fn)


def compiled_uncached(fn: Any) -> Any:
    """:func:`compiled` without the cache on disk: for a function that calls compiled
    functions of *another* module. Numba checks a cached function against its own file
    only, so a cached caller would keep running the callee's old code after that module
    changed (a rule changed in this module, say, but not in the planner's rollouts)."""
    return compiled(fn, cache=False)


# ------------------------------------------------------------------ the rules, packed
# RuleOptions as the kernels read it (each game's turns and suits_required are in its
# Games row): an int64 array, which numba's dispatcher types fastest, of these entries.
BONUS_ALWAYS: Final = 0
JOKER_GRANTS_MORE: Final = 1
JOKER_KEEPS: Final = 2
"""``RuleOptions.joker_keeps``: the keep bound's cards per Joker."""


def pack_rules(rules: RuleOptions) -> I64:
    """``rules`` packed for the kernels (entries ``BONUS_ALWAYS`` ...), once per env or batch."""
    packed = (rules.bonus_always, rules.bonus_joker_grants_more, rules.joker_keeps)
    return np.array(packed, dtype=np.int64)


# ------------------------------------------------------------------ the batched core
# The rules of game.py, one game at a time: every draw is resolved in the order of R11.
_NEXT_NONE: Final = 0
_NEXT_END_TURN: Final = 1
_NEXT_AFTER_IRON: Final = 2
_NEXT_AFTER_BONUS: Final = 3
_NEXT_BONUS_OFFER: Final = 4


@compiled
def _resolve(
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


@compiled
def _bonus(
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
    """The Joker's bonus draws (R17) of game ``i``; the outcome code (PLAYING while playing)."""
    hurting = source[i] == BONUS_FROM_IRON
    remaining = BONUS_DRAWS
    while remaining > 0:
        remaining -= 1
        card = np.int64(deck[i, pos[i]])
        pos[i] += 1
        code = _resolve(
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


@compiled
def step_games(actions: I64, games: Games, rules: I64) -> None:
    """One legal action (or ``FORFEIT``, or ``SKIP``) in every game, as ``Game.step``:
    ``actions[i]`` in game ``i``; writes the outcome code into ``games.outcome``.
    ``games`` may be passed as ``tuple(games)``: numba's dispatcher types a plain tuple
    about 4 us a call faster than a NamedTuple (the vector env's hot call).

    Nothing is checked here (the hot path): the caller passes one action per game, legal
    in its phase, and no action to a game that has ended, as the vector env and the
    rollouts do after their own checks. Anything else is undefined: compiled, an action out
    of range or a game past its deck reads and writes out of the arrays' bounds."""
    named = Games(*games)
    # each array read out once: numba counts a reference at every read of a tuple member
    deck, pos, hand, discarded = named.deck, named.pos, named.hand, named.discarded
    hurt, turn, phase, iron = named.hurt, named.turn, named.phase, named.iron_count
    suits_done, source, turns = named.suits_done, named.bonus_source, named.turns
    suits_required, outcome = named.suits_required, named.outcome
    bonus_always, joker_grants_more = rules[BONUS_ALWAYS] != 0, rules[JOKER_GRANTS_MORE] != 0
    for i in range(actions.shape[0]):
        action = actions[i]
        code = PLAYING
        nxt = _NEXT_NONE
        if action == SKIP:
            outcome[i] = PLAYING
            continue
        if action == FORFEIT:
            code = CODE_ILLEGAL
        elif action == STOP:
            nxt = _NEXT_END_TURN if phase[i] == PHASE_IRON else _NEXT_AFTER_BONUS
        elif action == BONUS:
            code = _bonus(
                i, deck, pos, hand, discarded, hurt, suits_done, source,
                suits_required[i], joker_grants_more,
            )  # fmt: skip
            nxt = _NEXT_AFTER_BONUS
        elif action == THREATEN or action == IRON:  # noqa: PLR1714, SIM109 (numba)
            if action == IRON:
                iron[i] += 1
            card = np.int64(deck[i, pos[i]])
            pos[i] += 1
            code = _resolve(
                i, card, card < FIRST_COURT, hand, discarded, pos, suits_done, suits_required[i]
            )
            if code == PLAYING and action == IRON:
                hurt[i] += 1
                if hurt[i] >= MAX_HURT:
                    code = CODE_SLAIN
            if code == PLAYING:
                if card >= FIRST_JOKER:
                    source[i] = BONUS_FROM_IRON if action == IRON else BONUS_FROM_THREATEN
                    if bonus_always:
                        code = _bonus(
                            i, deck, pos, hand, discarded, hurt, suits_done, source,
                            suits_required[i], joker_grants_more,
                        )  # fmt: skip
                        nxt = _NEXT_AFTER_BONUS
                    else:
                        nxt = _NEXT_BONUS_OFFER
                else:
                    nxt = _NEXT_AFTER_IRON if action == IRON else _NEXT_END_TURN
        elif action == REST:
            card = np.int64(deck[i, pos[i]])
            pos[i] += 1
            code = _resolve(i, card, False, hand, discarded, pos, suits_done, suits_required[i])
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
                    code = _resolve(
                        i, card, True, hand, discarded, pos, suits_done, suits_required[i]
                    )
                    nxt = _NEXT_END_TURN
                    break
                code = _resolve(i, card, False, hand, discarded, pos, suits_done, suits_required[i])
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
                nxt = _NEXT_AFTER_IRON if source[i] == BONUS_FROM_IRON else _NEXT_END_TURN
                source[i] = BONUS_FROM_NONE
            if nxt == _NEXT_AFTER_IRON:
                spent = iron[i] >= IRON_APPLICATIONS_PER_TURN
                nxt = _NEXT_END_TURN if spent else _NEXT_NONE
                if not spent:
                    phase[i] = PHASE_IRON
            if nxt == _NEXT_END_TURN:
                if turn[i] >= turns[i]:
                    code = CODE_MIDNIGHT
                else:
                    turn[i] += 1
                    iron[i] = 0
                    phase[i] = PHASE_TURN
            elif nxt == _NEXT_BONUS_OFFER:
                phase[i] = PHASE_BONUS
        if code != PLAYING:
            phase[i] = PHASE_OVER
        outcome[i] = code
