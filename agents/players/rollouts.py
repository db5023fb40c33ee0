"""The planner's rollouts, compiled: the heuristic played to the end of many games at once.

:class:`agents.players.planner.Roller` plays each sampled game to its end in Python (about 22 µs a
rollout: the planner's hot path). Here the same rollouts run in one numba-compiled loop: the rules
are the batched rules core's (:func:`coldiron_env.batched.step_games`), the heuristic is
:func:`agents.players.heuristic.decide` transcribed over plain integers (:func:`heuristic_action`),
reading the tables the Python heuristic reads, so every decision and every rollout's result is the
same (tests/test_rollouts.py). Without numba the planner keeps its Python rollouts (these would run
as plain Python, slower). :func:`play_out` is compiled at each process's first use, not cached on
disk (it calls another module's rules).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from typing import TYPE_CHECKING, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from coldiron_env.actions import (
    BONUS,
    IRON,
    LEGAL_ACTIONS,
    PHASE_BONUS,
    PHASE_IRON,
    PHASE_NAMES,
    PHASE_TURN,
    RACK_ACTIONS,
    REST,
    STOP,
    THREATEN,
)
from coldiron_env.analysis import (
    COURT_MASK,
    FULL_DECK_MASK,
    IMPOSSIBLE,
    IRON_KEEP_GAIN,
    IRON_KEEPS,
    JOKER_MASK,
    bonus_risk_table,
    rack_tables,
    suit_tables,
)
from coldiron_env.batched import (
    CODE_WON,
    JOKER_KEEPS,
    NUMBA_AVAILABLE,
    PLAYING,
    RACK_TARGET_TABLE,
    SKIP,
    compiled,
    compiled_uncached,
    step_games,
)
from coldiron_env.cards import DECK_SIZE, NUM_RANKS, NUM_SUITS, SUIT_FIELD_MASK
from coldiron_env.game import I64, Games
from coldiron_env.options import IRON_APPLICATIONS_PER_TURN, MAX_HURT

if TYPE_CHECKING:
    from agents.players.heuristic import HeuristicParams
    from coldiron_env.knowledge import Knowledge

F64 = npt.NDArray[np.float64]

COMPILED: Final = NUMBA_AVAILABLE  # else the planner rolls out in Python
HOPELESS: Final = -1
"""What :func:`heuristic_action` (and the planner's ``turn_decision``) returns for a turn
that can no longer lead to a win."""
FIRST_RACK: Final = RACK_ACTIONS[0]
LAST_RACK: Final = RACK_ACTIONS[-1]


@compiled
def _popcount(x: int) -> int:  # int.bit_count does not compile in numba
    count = 0
    while x:
        x &= x - 1
        count += 1
    return count


@compiled
def _suit(hand: int, unseen: int, suit: int, need_t: npt.NDArray[np.uint8]) -> int:
    shift = suit * NUM_RANKS
    return int(need_t[(hand >> shift) & SUIT_FIELD_MASK, (unseen >> shift) & SUIT_FIELD_MASK])


@compiled
def _need(
    hand: int,
    unseen: int,
    suits_required: int,
    need_t: npt.NDArray[np.uint8],
    useful_t: npt.NDArray[np.uint16],
) -> tuple[int, int]:
    """:func:`coldiron_env.analysis.analyse`: ``(need, useful)``."""
    useful = 0
    for suit in range(NUM_SUITS):
        shift = suit * NUM_RANKS
        held = (hand >> shift) & SUIT_FIELD_MASK
        avail = (unseen >> shift) & SUIT_FIELD_MASK
        useful |= int(useful_t[held, avail]) << shift
    # the suits' needs sorted by a four-input sorting network, then the smallest summed
    a = _suit(hand, unseen, 0, need_t)
    b = _suit(hand, unseen, 1, need_t)
    c = _suit(hand, unseen, 2, need_t)
    d = _suit(hand, unseen, 3, need_t)
    a, b = min(a, b), max(a, b)
    c, d = min(c, d), max(c, d)
    a, c = min(a, c), max(a, c)
    b, d = min(b, d), max(b, d)
    b, c = min(b, c), max(b, c)
    total = a
    if suits_required > 1:
        total += b
    if suits_required > 2:
        total += c
    if suits_required > 3:
        total += d
    return total, useful


@compiled
def keep_bound(turns_left: int, hurt: int, jokers: int, deck_count: int, joker_keeps: int) -> int:
    """:func:`coldiron_env.analysis.max_keeps` from the start of a turn
    (``joker_keeps``: ``RuleOptions.joker_keeps``)."""
    budget = max(IRON_KEEPS - hurt, 0)
    full = budget // IRON_APPLICATIONS_PER_TURN
    rest = budget % IRON_APPLICATIONS_PER_TURN
    keeps = turns_left + full * IRON_KEEP_GAIN + max(rest - 1, 0)
    return min(keeps + joker_keeps * jokers, deck_count)


class Tables(NamedTuple):
    """The heuristic's look-up tables (:func:`tables`)."""

    need: npt.NDArray[np.uint8]
    useful: npt.NDArray[np.uint16]
    alive: F64
    courts: F64
    risk: F64


@compiled
def _turn_analysis(games: Games, i: int, rules: I64, tables: Tables) -> tuple[int, int, int, int]:
    """``(need, useful, unseen Jokers, keep bound)`` of game ``i`` at the start of a turn: it
    can no longer be won when ``need >= IMPOSSIBLE or need > bound``."""
    hand = games.hand[i]
    unseen = FULL_DECK_MASK & ~(hand | games.discarded[i])
    need, useful = _need(hand, unseen, games.suits_required[i], tables.need, tables.useful)
    jokers = _popcount(unseen & JOKER_MASK)
    turns_left, deck_count = games.turns[i] - games.turn[i] + 1, DECK_SIZE - games.pos[i]
    bound = keep_bound(turns_left, games.hurt[i], jokers, deck_count, rules[JOKER_KEEPS])
    return need, useful, jokers, bound


@compiled
def heuristic_action(games: Games, i: int, rules: I64, tables: Tables, params: F64) -> int:
    """The heuristic's action in game ``i`` (``HeuristicParams`` in ``params``,
    :func:`pack_params`' order); in the ``turn`` phase :data:`HOPELESS` when the game can
    no longer be won (as the planner's ``turn_decision``)."""
    (iron_limit, rack_slack, rack_min_score, waste, hurt_weight, bonus_max_risk, rest_at,
     rest_margin) = params  # fmt: skip
    hand, hurt, turn, phase = games.hand[i], games.hurt[i], games.turn[i], games.phase[i]
    turns, deck_count = games.turns[i], DECK_SIZE - games.pos[i]
    unseen = FULL_DECK_MASK & ~(hand | games.discarded[i])
    courts = _popcount(unseen & COURT_MASK)
    iron_ok = hurt + 1 <= iron_limit or (turn >= turns and hurt + 1 < MAX_HURT)
    if phase == PHASE_BONUS:
        if games.iron_count[i] == 0:
            return BONUS
        risk = tables.risk[deck_count, courts, MAX_HURT - hurt]
        return BONUS if risk <= bonus_max_risk else STOP
    if phase == PHASE_IRON:
        return IRON if iron_ok else STOP
    need, useful, jokers, bound = _turn_analysis(games, i, rules, tables)
    if need >= IMPOSSIBLE or need > bound:
        return HOPELESS
    turns_left = turns - turn + 1
    hurt_left = MAX_HURT - hurt
    useful_unseen = _popcount(useful & unseen)
    best = -1
    best_score = -np.inf
    for action in range(FIRST_RACK, LAST_RACK + 1):
        targets = RACK_TARGET_TABLE[action] & unseen
        hits = _popcount(targets & useful)
        if hits:
            k = _popcount(targets)
            alive = tables.alive[k, jokers, courts, hurt_left]
            courts_expected = tables.courts[k, jokers, courts, hurt_left]
            score = (
                alive * hits / k
                - waste * (useful_unseen - hits) / (k + 1)
                - hurt_weight * courts_expected
            )
            if score > best_score:
                best = action
                best_score = score
    if best >= 0 and (need + rack_slack >= turns_left or best_score >= rack_min_score):
        return best
    if iron_ok:
        return IRON
    if hurt >= rest_at and turns_left > need + rest_margin:
        return REST
    return THREATEN


@compiled_uncached
def play_out(
    first: I64, games: Games, rules: I64, tables: Tables, params: F64
) -> npt.NDArray[np.bool_]:
    """Game ``i`` plays ``first[i]``, then the heuristic to its end; which games were won.
    All games step together (:func:`~coldiron_env.batched.step_games`); a game that can no
    longer be won stops there, lost (as :class:`Roller`)."""
    n = first.shape[0]
    won = np.zeros(n, dtype=np.bool_)
    outcome = games.outcome
    actions = first.copy()
    playing = n
    while playing > 0:
        step_games(actions, games, rules)
        for i in range(n):
            if actions[i] == SKIP:
                continue
            if outcome[i] != PLAYING:
                won[i] = outcome[i] == CODE_WON
                actions[i] = SKIP
                playing -= 1
                continue
            action = heuristic_action(games, i, rules, tables, params)
            if action == HOPELESS:
                actions[i] = SKIP
                playing -= 1
            else:
                actions[i] = action
    return won


@compiled_uncached
def hopeless_games(
    live: npt.NDArray[np.bool_], games: Games, rules: I64, tables: Tables
) -> npt.NDArray[np.bool_]:
    """Which of the ``live`` games, at the start of a turn, can no longer be won whatever the
    order (the planner's ``hopeless``: a suit without a live window, or more cards needed
    than can still be kept)."""
    out = np.zeros(live.shape[0], dtype=np.bool_)
    for i in range(live.shape[0]):
        if not live[i] or games.phase[i] != PHASE_TURN:
            continue
        need, _, _, bound = _turn_analysis(games, i, rules, tables)
        out[i] = need >= IMPOSSIBLE or need > bound
    return out


def pack_params(params: HeuristicParams) -> F64:
    """``params`` as the float array :func:`heuristic_action` reads (its fields in order)."""
    return np.array(astuple(params), dtype=np.float64)


def tables() -> Tables:
    """The heuristic's look-up tables, as :func:`heuristic_action` reads them."""
    need_t, useful_t, _ = suit_tables()
    alive_t, courts_t = rack_tables()
    return Tables(need_t, useful_t, alive_t, courts_t, bonus_risk_table())


def candidate_games(kn: Knowledge, orders: I64, candidates: Sequence[int]) -> tuple[I64, Games]:
    """The position ``kn`` describes with the unseen cards in each order (rows of
    ``orders``), once per candidate: the first actions (``candidates`` over and over) and
    the games, row ``o * len(candidates) + c`` for order ``o`` and candidate ``c``."""
    legal = LEGAL_ACTIONS[kn.phase]
    if any(action not in legal for action in candidates):
        raise ValueError(
            f"candidates {list(candidates)} include an action illegal in phase "
            f"{PHASE_NAMES[kn.phase]} (legal: {list(legal)})"
        )
    games = kn.games(np.repeat(orders, len(candidates), axis=0))
    first = np.tile(np.asarray(candidates, dtype=np.int64), orders.shape[0])
    return first, games


@dataclass
class Estimate:
    """Per-candidate results of one decision's rollouts (wins per sampled order)."""

    candidates: list[int]
    wins: dict[int, list[int]] = field(default_factory=dict)

    @property
    def samples(self) -> int:
        return len(self.wins[self.candidates[0]]) if self.candidates else 0

    @classmethod
    def start(cls, candidates: Sequence[int]) -> Estimate:
        """No rollouts yet."""
        return cls(list(candidates), {a: [] for a in candidates})

    def add(self, won: npt.NDArray[np.bool_]) -> None:
        """More rollouts: ``won[o, c]``, sampled order ``o`` with candidate ``c`` played."""
        for column, action in enumerate(self.candidates):
            self.wins[action].extend(won[:, column].astype(int).tolist())

    def win_chance(self, action: int) -> float:
        results = self.wins[action]
        return sum(results) / len(results) if results else math.nan


class BatchRoller:
    """What the planner rolls out with: every candidate on the same sampled orders of the
    unseen cards, all the games at once, played out by :meth:`play` (the heuristic compiled,
    a network, or a lab experiment's rollouts)."""

    def clear(self) -> None:
        """Forget what was cached for the rules before (nothing here)."""

    def play(self, first: I64, games: Games, kn: Knowledge) -> npt.NDArray[np.bool_]:
        """Game ``i`` plays ``first[i]``, then the rollout policy to its end: which were won."""
        raise NotImplementedError

    def estimate(
        self,
        kn: Knowledge,
        candidates: Sequence[int],
        rng: np.random.Generator,
        samples: int,
        estimate: Estimate | None = None,
    ) -> Estimate:
        """Roll every candidate out on ``samples`` more orders (the same for each); the rules
        are those ``kn`` carries."""
        estimate = estimate or Estimate.start(candidates)
        first, games = candidate_games(kn, kn.sample_order_array(rng, samples), candidates)
        estimate.add(np.asarray(self.play(first, games, kn)).reshape(samples, len(candidates)))
        return estimate
