"""The clairvoyant solver: can this exact deal be won at all, and how?

It sees the whole deck order, which no player does, so the share of deals it wins is an
**upper bound** on any player's win rate. It searches depth-first over the player's
decisions with the rules engine itself (each child a :meth:`~coldiron_env.game.Game.clone`
advanced by :meth:`~coldiron_env.game.Game.step`: no second copy of the rules), and replays a
found win on a fresh game (:func:`solve_deck`). Its reductions are exact (never turning a win
into a loss) and read the card counting of :mod:`coldiron_env.analysis`:

* **Canonical hand.** A completed suit is one marker; otherwise only the held cards of live
  run windows count. Too few suits still completable: lost.
* **Dominance memo.** Only losses are stored (a win ends the search): a state is lost if a
  lost state with its key had an earlier-or-equal turn and lower-or-equal Hurt (a later turn
  or more Hurt never helps: every line from the worse state can be played from the better).
* **Keep bound.** More cards needed than :func:`~coldiron_env.analysis.max_keeps` can keep:
  lost.
* **Rack deduplication.** Racks that stop at the same card give the same state: one is tried.

Actions are tried in order of promise: a win, then the most useful cards kept, then the least Hurt.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from coldiron_env.actions import (
    IRON,
    LEGAL_ACTIONS,
    PHASE_BONUS,
    PHASE_TURN,
    RACK_ACTIONS,
    RACK_TARGETS,
    REST,
    THREATEN,
)
from coldiron_env.analysis import (
    FULL_DECK_MASK,
    IMPOSSIBLE,
    JOKER_MASK,
    analyse,
    max_keeps,
    suit_tables,
)
from coldiron_env.cards import DECK_SIZE, NUM_RANKS, NUM_SUITS, SUIT_FIELD_MASK
from coldiron_env.game import Game
from coldiron_env.judge import HAS_RUN
from coldiron_env.options import DEFAULT_RULES, IRON_APPLICATIONS_PER_TURN, RuleOptions

# Verdicts of a solve.
WINNABLE: Final = "winnable"
UNWINNABLE: Final = "unwinnable"
UNKNOWN: Final = "unknown"  # the node budget ran out first

DONE_FIELD: Final = SUIT_FIELD_MASK  # canonical field of a suit whose run is complete
DRAW_ACTIONS: Final = (IRON, THREATEN, REST)  # the turn's other actions, in the order tried


@dataclass(frozen=True)
class Solution:
    """One deal solved: its verdict, a winning line (verified on a fresh game) when
    winnable, the search nodes expanded."""

    verdict: str
    actions: tuple[int, ...]
    nodes: int

    @property
    def winnable(self) -> bool:
        return self.verdict == WINNABLE


class SearchBudgetExceeded(RuntimeError):
    """The node budget of a solve ran out before the verdict was known."""


Key = tuple[int, int, int, int, int]
"""``(pos, canonical hand, phase, iron_count, bonus_source)``."""


class ClairvoyantSolver:
    """Exact search over one fixed deck. Build once per deal, then :meth:`solve`."""

    def __init__(self, deck: Sequence[int], rules: RuleOptions = DEFAULT_RULES) -> None:
        if len(deck) != DECK_SIZE or sorted(deck) != list(range(DECK_SIZE)):
            raise ValueError(f"deck must be a permutation of the {DECK_SIZE} card ids")
        self.deck = list(deck)
        self.rules = rules
        # Racks from each position: one action per distinct stopping position.
        self._racks: list[tuple[int, ...]] = []
        for pos in range(DECK_SIZE + 1):
            stops: dict[int, int] = {}
            for action in RACK_ACTIONS:
                targets = RACK_TARGETS[action]
                m = pos
                while m < DECK_SIZE and not targets >> self.deck[m] & 1:
                    m += 1
                if m < DECK_SIZE and m not in stops:
                    stops[m] = action
            self._racks.append(tuple(action for _, action in sorted(stops.items())))
        self._analysed = functools.cache(self._analyse)  # by (hand, seen)
        self._lost: dict[Key, list[tuple[int, int]]] = {}
        self.nodes = 0
        self._budget = 0

    def _analyse(self, hand: int, seen: int) -> tuple[int, int, int] | None:
        """``(canonical hand, need, useful)``, or None when the phrase is out of reach."""
        unseen = FULL_DECK_MASK & ~seen
        need, useful = analyse(hand, unseen, self.rules.suits_required)
        if need >= IMPOSSIBLE:
            return None
        _, _, live_t = suit_tables()
        canon = 0
        for suit in range(NUM_SUITS):
            shift = suit * NUM_RANKS
            held = (hand >> shift) & SUIT_FIELD_MASK
            if HAS_RUN[held]:
                canon |= DONE_FIELD << shift
            else:
                canon |= (held & int(live_t[held, (unseen >> shift) & SUIT_FIELD_MASK])) << shift
        return canon, need, useful

    def _keep_bound(self, game: Game, seen: int) -> int:
        """:func:`~coldiron_env.analysis.max_keeps` of ``game``'s position."""
        turns_left, jokers = game.rules.turns - game.turn + 1, (JOKER_MASK & ~seen).bit_count()
        iron_left = IRON_APPLICATIONS_PER_TURN - game.iron_count
        return max_keeps(turns_left, game.hurt, jokers, game.deck_count, game.rules,
                         iron_left=iron_left if game.phase != PHASE_TURN else None,
                         bonus_pending=game.phase == PHASE_BONUS)  # fmt: skip

    def solve(self, max_nodes: int = 0) -> Solution:
        """Decide the deal from the start. ``max_nodes`` > 0 caps the search
        (verdict ``"unknown"`` if it runs out)."""
        self.nodes = 0
        self._budget = max_nodes
        path: list[int] = []
        try:
            found = self._search(Game(self.deck, self.rules), path)
        except SearchBudgetExceeded:
            return Solution(UNKNOWN, (), self.nodes)
        if not found:
            return Solution(UNWINNABLE, (), self.nodes)
        return Solution(WINNABLE, tuple(reversed(path)), self.nodes)

    def actions(self, game: Game) -> tuple[int, ...]:
        """The legal actions searched from ``game``: racks deduplicated by their stopping card."""
        if game.phase != PHASE_TURN:
            return LEGAL_ACTIONS[game.phase]
        return self._racks[game.pos] + DRAW_ACTIONS

    def _search(self, game: Game, path: list[int]) -> bool:
        self.nodes += 1
        if self._budget and self.nodes > self._budget:
            raise SearchBudgetExceeded
        hand = game.hand
        seen = hand | game.discarded
        analysis = self._analysed(hand, seen)
        if analysis is None:
            return False
        canon, need, useful = analysis
        if need > self._keep_bound(game, seen):
            return False
        key = (game.pos, canon, game.phase, game.iron_count, game.bonus_source)
        turn, hurt = game.turn, game.hurt
        lost = self._lost.get(key)
        if lost is not None and any(t <= turn and h <= hurt for t, h in lost):
            return False
        # Promise: a win now; then keeping useful cards; then less Hurt; then as listed.
        scored: list[tuple[int, int, int, int, Game]] = []
        for order, action in enumerate(self.actions(game)):
            child = game.clone()
            child.step(action)
            if child.won:
                path.append(action)
                return True
            if child.over:
                continue
            gained = (child.hand & ~hand & useful).bit_count()
            scored.append((-gained, child.hurt - hurt, order, action, child))
        scored.sort(key=lambda item: item[:3])
        for *_, action, child in scored:
            if self._search(child, path):
                path.append(action)
                return True
        if lost is None:
            self._lost[key] = [(turn, hurt)]
        else:
            lost[:] = [(t, h) for t, h in lost if not (t >= turn and h >= hurt)]
            lost.append((turn, hurt))
        return False


def replay(deck: Sequence[int], actions: Sequence[int], rules: RuleOptions = DEFAULT_RULES) -> Game:
    """Play ``actions`` on a fresh Game over ``deck`` and return it (for verification)."""
    game = Game(deck, rules)
    for action in actions:
        game.step(action)
    return game


Solved = tuple[str, int, float]  # a deal's verdict, search nodes and seconds


def solve_decks(
    decks: Sequence[Sequence[int]], max_nodes: int = 0, rules: RuleOptions = DEFAULT_RULES
) -> list[Solved]:
    """:func:`solve_deck` on each deal, timed (the worker task of the solve and ladder scripts)."""
    out: list[Solved] = []
    for deck in decks:
        start = time.perf_counter()
        solution = solve_deck(deck, rules, max_nodes)
        out.append((solution.verdict, solution.nodes, time.perf_counter() - start))
    return out


def solve_deck(
    deck: Sequence[int], rules: RuleOptions = DEFAULT_RULES, max_nodes: int = 0
) -> Solution:
    """Solve one deal, a found win verified on a fresh Game (``RuntimeError``, a solver bug,
    if it does not win there)."""
    solution = ClairvoyantSolver(deck, rules).solve(max_nodes)
    if solution.winnable and not (game := replay(deck, solution.actions, rules)).won:
        raise RuntimeError(
            f"solver bug: the found line {list(solution.actions)} does not win on replay "
            f"(outcome {game.outcome!r})"
        )
    return solution
