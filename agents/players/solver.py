"""The clairvoyant solver: can this exact deal be won at all, and how?

The solver sees the whole deck order, which no player does, so the share of
deals it wins is an **upper bound** on any player's win rate.

It searches depth-first over the player's decisions with a compact state
transition of its own (plain integers; :meth:`ClairvoyantSolver.transition`,
cross-checked against :meth:`coldiron_env.game.Game.step` by the tests), and
returns a winning action sequence that is verified by replaying it on a fresh
:class:`~coldiron_env.game.Game`.

Search state: ``(pos, hand, hurt, turn, phase, iron_count, bonus_source)``.
The deck is fixed, so ``pos`` determines the cards still to come (the discard
pile is implied). Reductions, each exact (they never turn a win into a loss):

* **Canonical hand.** A suit whose run is complete is collapsed to one marker;
  otherwise only the held cards that lie in a run window still completable
  (all its missing cards still in the deck) are kept in the key. A suit with no
  completable window left is a dead state.
* **Dominance memo.** Only losses are stored (a win ends the search). A state
  is known lost if a lost state with the same key had an earlier-or-equal turn
  and a lower-or-equal Hurt: a later turn or more Hurt can never help, since
  every line from the worse state can be played from the better one.
* **Keep bound.** Completing the phrase needs ``need`` more cards kept (the
  fewest missing cards over completable windows). In the turns left at most
  one card is kept per turn, plus at most two more per turn of three Iron
  applications paid in Hurt, plus three per Joker bonus still possible; if
  that cannot reach ``need`` the state is lost.
* **Rack deduplication.** Racks that stop at the same card give the same state.

Actions are tried in order of promise (racks and draws that keep a missing
card of a completable window first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from coldiron_env.actions import (
    BONUS,
    IRON,
    PHASE_BONUS,
    PHASE_IRON,
    PHASE_OVER,
    PHASE_TURN,
    RACK_RANK_FIRST,
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
    parse_deck,
)
from coldiron_env.game import Game
from coldiron_env.judge import HAS_RUN, WINDOW_MASKS
from coldiron_env.options import (
    BONUS_DRAWS,
    DEFAULT_RULES,
    IRON_APPLICATIONS_PER_TURN,
    MAX_HURT,
    RuleOptions,
)

# Bonus sources (what granted a pending bonus), as in the engine.
NO_BONUS: Final = 0
FROM_THREATEN: Final = 1
FROM_IRON: Final = 2

# Results of a transition that ends the game.
WIN: Final = "win"
LOSS: Final = "loss"

# Verdicts of a solve.
WINNABLE: Final = "winnable"
UNWINNABLE: Final = "unwinnable"
UNKNOWN: Final = "unknown"  # the node budget ran out first

RACK_ACTIONS: Final = tuple(range(RACK_RANK_FIRST, REST))
DONE_FIELD: Final = SUIT_FIELD_MASK  # canonical field of a suit whose run is complete
SURVIVABLE_HURT: Final = MAX_HURT - 1
IRON_KEEP_GAIN: Final = IRON_APPLICATIONS_PER_TURN - 1  # cards beyond one per turn
NO_POSITION: Final = DECK_SIZE
RUN_CARDS: Final = 3  # cards in one suit's run

State = tuple[int, int, int, int, int, int, int]
"""``(pos, hand, hurt, turn, phase, iron_count, bonus_source)``."""

Outcome = State | str


def iron_extra_keeps(budget: int) -> int:
    """Most cards kept beyond one a turn with ``budget`` Hurt to spend on the Iron.

    A turn of k Iron applications keeps at most k cards for k Hurt, i.e. k - 1
    more than a free Threaten or rack; the best use is three at a time.
    """
    full, rest = divmod(max(budget, 0), IRON_APPLICATIONS_PER_TURN)
    return full * IRON_KEEP_GAIN + max(rest - 1, 0)


@dataclass(frozen=True)
class Solution:
    """Result of solving one deal.

    Attributes:
        verdict: ``"winnable"``, ``"unwinnable"`` or ``"unknown"`` (budget spent).
        actions: a winning action sequence (verified on a fresh Game) when winnable.
        nodes: search nodes expanded.
    """

    verdict: str
    actions: tuple[int, ...]
    nodes: int

    @property
    def winnable(self) -> bool:
        return self.verdict == WINNABLE


class SearchBudgetExceeded(RuntimeError):
    """The node budget of a solve ran out before the verdict was known."""


class ClairvoyantSolver:
    """Exact search over one fixed deck. Build once per deal, then :meth:`solve`."""

    def __init__(self, deck: Sequence[int], rules: RuleOptions = DEFAULT_RULES) -> None:
        if len(deck) != DECK_SIZE or sorted(deck) != list(range(DECK_SIZE)):
            raise ValueError(f"deck must be a permutation of the {DECK_SIZE} card ids")
        self.deck = list(deck)
        self.rules = rules
        self._turns = rules.turns
        self._suits_required = rules.suits_required
        self._bonus_always = rules.bonus_always
        self._joker_more = rules.bonus_joker_grants_more
        d = self.deck
        # Suffix tables: cards still in the deck at each position.
        self._remaining_fields: list[tuple[int, ...]] = []
        self._jokers_left: list[int] = []
        courts = [0] * (DECK_SIZE + 1)
        for i, card in enumerate(d):
            courts[i + 1] = courts[i] + (FIRST_COURT <= card < FIRST_JOKER)
        self._courts_before = courts
        next_joker = [NO_POSITION] * (DECK_SIZE + 1)
        for i in range(DECK_SIZE - 1, -1, -1):
            next_joker[i] = i if d[i] >= FIRST_JOKER else next_joker[i + 1]
        self._next_joker = next_joker
        for pos in range(DECK_SIZE + 1):
            mask = 0
            jokers = 0
            for card in d[pos:]:
                if card < FIRST_COURT:
                    mask |= 1 << card
                elif card >= FIRST_JOKER:
                    jokers += 1
            self._remaining_fields.append(
                tuple((mask >> (s * NUM_RANKS)) & SUIT_FIELD_MASK for s in range(NUM_SUITS))
            )
            self._jokers_left.append(jokers)
        # Racks: for each position, the distinct stopping positions and one action for each.
        self._rack_stops: list[tuple[tuple[int, int], ...]] = []
        for pos in range(DECK_SIZE + 1):
            stops: dict[int, int] = {}
            for action in RACK_ACTIONS:
                targets = RACK_TARGETS[action]
                m = pos
                while m < DECK_SIZE and not targets >> d[m] & 1:
                    m += 1
                if m < DECK_SIZE and m not in stops:
                    stops[m] = action
            self._rack_stops.append(tuple(sorted((m, a) for m, a in stops.items())))
        self._analysis: dict[tuple[int, int], tuple[int, int] | None] = {}
        self._lost: dict[tuple[int, int, int, int, int], list[tuple[int, int]]] = {}
        self.nodes = 0
        self._budget = 0

    @classmethod
    def from_codes(
        cls, codes: Sequence[str], rules: RuleOptions = DEFAULT_RULES
    ) -> ClairvoyantSolver:
        return cls(parse_deck(codes), rules)

    @classmethod
    def from_game(cls, game: Game) -> ClairvoyantSolver:
        """A solver for ``game``'s deck (from the start of the deal)."""
        return cls(game.deck, game.rules)

    # ------------------------------------------------------------ transition
    @staticmethod
    def state_of(game: Game) -> State:
        """The solver's state tuple for an engine ``game`` in play."""
        return (
            game.pos,
            game.hand,
            game.hurt,
            game.turn,
            game.phase,
            game.iron_count,
            game._bonus_source,
        )

    def initial_state(self) -> State:
        return (0, 0, 0, 1, PHASE_TURN, 0, NO_BONUS)

    def _won(self, hand: int) -> bool:
        done = 0
        for s in range(NUM_SUITS):
            if HAS_RUN[(hand >> (s * NUM_RANKS)) & SUIT_FIELD_MASK]:
                done += 1
        return done >= self._suits_required

    def _end_turn(self, pos: int, hand: int, hurt: int, turn: int) -> Outcome:
        if turn >= self._turns:
            return LOSS
        return (pos, hand, hurt, turn + 1, PHASE_TURN, 0, NO_BONUS)

    def _after_iron(self, pos: int, hand: int, hurt: int, turn: int, ic: int) -> Outcome:
        if ic >= IRON_APPLICATIONS_PER_TURN:
            return self._end_turn(pos, hand, hurt, turn)
        return (pos, hand, hurt, turn, PHASE_IRON, ic, NO_BONUS)

    def _bonus_draws(
        self, pos: int, hand: int, hurt: int, source: int
    ) -> tuple[int, int, int] | str:
        """Run a Joker's bonus; ``(pos, hand, hurt)`` after it, or WIN / LOSS."""
        d = self.deck
        remaining = BONUS_DRAWS
        while remaining:
            remaining -= 1
            card = d[pos]
            pos += 1
            if card < FIRST_COURT:
                hand |= 1 << card
                if self._won(hand):
                    return WIN
            if pos == DECK_SIZE:
                return LOSS
            if card >= FIRST_JOKER:
                if self._joker_more:
                    remaining += BONUS_DRAWS
            elif card >= FIRST_COURT and source == FROM_IRON:
                hurt += 1
                if hurt >= MAX_HURT:
                    return LOSS
        return pos, hand, hurt

    def _after_bonus(
        self, pos: int, hand: int, hurt: int, turn: int, ic: int, source: int
    ) -> Outcome:
        if source == FROM_IRON:
            return self._after_iron(pos, hand, hurt, turn, ic)
        return self._end_turn(pos, hand, hurt, turn)

    def _joker_drawn(
        self, pos: int, hand: int, hurt: int, turn: int, ic: int, source: int
    ) -> Outcome:
        if not self._bonus_always:
            return (pos, hand, hurt, turn, PHASE_BONUS, ic, source)
        out = self._bonus_draws(pos, hand, hurt, source)
        if isinstance(out, str):
            return out
        return self._after_bonus(out[0], out[1], out[2], turn, ic, source)

    def transition(self, state: State, action: int) -> Outcome:
        """The state after ``action`` (legal in ``state``), or ``"win"`` / ``"loss"``."""
        pos, hand, hurt, turn, phase, ic, source = state
        d = self.deck
        if action in (THREATEN, IRON):
            if action == IRON:
                ic += 1
            card = d[pos]
            pos += 1
            if card < FIRST_COURT:
                hand |= 1 << card
                if self._won(hand):
                    return WIN
            if pos == DECK_SIZE:
                return LOSS
            if action == IRON:
                hurt += 1
                if hurt >= MAX_HURT:
                    return LOSS
                if card >= FIRST_JOKER:
                    return self._joker_drawn(pos, hand, hurt, turn, ic, FROM_IRON)
                return self._after_iron(pos, hand, hurt, turn, ic)
            if card >= FIRST_JOKER:
                return self._joker_drawn(pos, hand, hurt, turn, ic, FROM_THREATEN)
            return self._end_turn(pos, hand, hurt, turn)
        if action == STOP:
            if phase == PHASE_IRON:
                return self._end_turn(pos, hand, hurt, turn)
            return self._after_bonus(pos, hand, hurt, turn, ic, source)
        if action == BONUS:
            out = self._bonus_draws(pos, hand, hurt, source)
            if isinstance(out, str):
                return out
            return self._after_bonus(out[0], out[1], out[2], turn, ic, source)
        if action == REST:
            pos += 1
            if pos == DECK_SIZE:
                return LOSS
            return self._end_turn(pos, hand, max(hurt - 1, 0), turn)
        return self._rack(pos, hand, hurt, turn, RACK_TARGETS[action])

    def _rack(self, pos: int, hand: int, hurt: int, turn: int, targets: int) -> Outcome:
        d = self.deck
        m = pos
        while m < DECK_SIZE and not targets >> d[m] & 1:
            m += 1
        return self._rack_to(pos, m, hand, hurt, turn)

    def _rack_to(self, pos: int, m: int, hand: int, hurt: int, turn: int) -> Outcome:
        """A rack from ``pos`` that stops (keeps) the card at ``m``."""
        if m >= DECK_SIZE or self._next_joker[pos] < m:
            return LOSS
        hurt += self._courts_before[m] - self._courts_before[pos]
        if hurt >= MAX_HURT:
            return LOSS
        card = self.deck[m]
        hand |= 1 << card
        if self._won(hand):
            return WIN
        if m + 1 == DECK_SIZE:
            return LOSS
        return self._end_turn(m + 1, hand, hurt, turn)

    # ------------------------------------------------------------ analysis
    def _analyse(self, pos: int, hand: int) -> tuple[int, int] | None:
        """``(canonical hand, cards still needed)``, or None when the phrase is out of reach."""
        key = (pos, hand)
        cached = self._analysis.get(key, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        remaining = self._remaining_fields[pos]
        canon = 0
        need = 0
        done = 0
        reachable = 0
        for s in range(NUM_SUITS):
            field = (hand >> (s * NUM_RANKS)) & SUIT_FIELD_MASK
            if HAS_RUN[field]:
                canon |= DONE_FIELD << (s * NUM_RANKS)
                done += 1
                continue
            avail = field | remaining[s]
            union = 0
            best = RUN_CARDS
            for w in WINDOW_MASKS:
                if avail & w == w:
                    union |= w
                    missing = RUN_CARDS - (field & w).bit_count()
                    best = min(best, missing)
            if union:
                reachable += 1
                canon |= (field & union) << (s * NUM_RANKS)
                need += best
        result: tuple[int, int] | None
        if done + reachable < self._suits_required:
            result = None
        else:
            if reachable + done > self._suits_required:
                # Fewer suits than four required (curricula): a loose but safe bound.
                need = 1
            result = (canon, need)
        self._analysis[key] = result
        return result

    def _max_keeps(self, pos: int, hurt: int, turn: int, phase: int, ic: int) -> int:
        """Upper bound on the cards that can still be kept (see module doc)."""
        later_turns = self._turns - turn
        budget = SURVIVABLE_HURT - hurt
        jokers = self._jokers_left[pos]
        bonus = BONUS_DRAWS * (jokers + (phase == PHASE_BONUS))
        if self._joker_more:
            bonus *= 2
        if phase == PHASE_TURN:
            keeps = later_turns + 1 + iron_extra_keeps(budget)
        else:
            # This turn's remaining applications cost Hurt; then the later turns.
            left = IRON_APPLICATIONS_PER_TURN - ic
            keeps = max(
                j + later_turns + iron_extra_keeps(budget - j) for j in range(min(left, budget) + 1)
            )
        return min(keeps + bonus, DECK_SIZE - pos)

    # ------------------------------------------------------------ search
    def solve(self, max_nodes: int = 0) -> Solution:
        """Decide the deal from the start. ``max_nodes`` > 0 caps the search
        (verdict ``"unknown"`` if it runs out)."""
        return self.solve_from(self.initial_state(), max_nodes)

    def solve_from(self, state: State, max_nodes: int = 0) -> Solution:
        """Decide the deal from ``state`` (e.g. :meth:`state_of` a game in play)."""
        self.nodes = 0
        self._budget = max_nodes
        path: list[int] = []
        try:
            found = self._search(state, path)
        except SearchBudgetExceeded:
            return Solution(UNKNOWN, (), self.nodes)
        if not found:
            return Solution(UNWINNABLE, (), self.nodes)
        actions = tuple(reversed(path))
        return Solution(WINNABLE, actions, self.nodes)

    def _children(self, state: State) -> list[tuple[int, Outcome]]:
        pos, hand, hurt, turn, phase = state[:5]
        if phase == PHASE_BONUS:
            return [(BONUS, self.transition(state, BONUS)), (STOP, self.transition(state, STOP))]
        if phase == PHASE_IRON:
            return [(IRON, self.transition(state, IRON)), (STOP, self.transition(state, STOP))]
        out: list[tuple[int, Outcome]] = []
        for m, action in self._rack_stops[pos]:
            out.append((action, self._rack_to(pos, m, hand, hurt, turn)))
        out.append((IRON, self.transition(state, IRON)))
        out.append((THREATEN, self.transition(state, THREATEN)))
        out.append((REST, self.transition(state, REST)))
        return out

    def _useful(self, hand: int, card: int, pos: int) -> bool:
        """True when numbered ``card`` is missing from a completable window of its suit."""
        if card >= FIRST_COURT or hand >> card & 1:
            return False
        suit, rank = divmod(card, NUM_RANKS)
        field = (hand >> (suit * NUM_RANKS)) & SUIT_FIELD_MASK
        if HAS_RUN[field]:
            return False
        avail = field | self._remaining_fields[pos][suit] | 1 << rank
        return any(avail & w == w and w >> rank & 1 for w in WINDOW_MASKS)

    def _search(self, state: State, path: list[int]) -> bool:
        self.nodes += 1
        if self._budget and self.nodes > self._budget:
            raise SearchBudgetExceeded
        pos, hand, hurt, turn, phase, ic, source = state
        analysis = self._analyse(pos, hand)
        if analysis is None:
            return False
        canon, need = analysis
        if need > self._max_keeps(pos, hurt, turn, phase, ic):
            return False
        key = (pos, canon, phase, ic, source)
        lost = self._lost.get(key)
        if lost is not None:
            for t, h in lost:
                if t <= turn and h <= hurt:
                    return False
        children = self._children(state)
        # Promise: a win now; then keeping a useful card; then the rest as listed.
        scored: list[tuple[int, int, int, State]] = []
        for order, (action, out) in enumerate(children):
            if out == WIN:
                path.append(action)
                return True
            if out == LOSS or isinstance(out, str):
                continue
            gained = out[1] & ~hand
            useful = 0
            while gained:
                low = gained & -gained
                if self._useful(hand, low.bit_length() - 1, pos):
                    useful += 1
                gained ^= low
            scored.append((-useful, out[2] - hurt, order, out))
        scored.sort()
        for _, _, order, child in scored:
            if self._search(child, path):
                path.append(children[order][0])
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


def solve_deck(
    deck: Sequence[int], rules: RuleOptions = DEFAULT_RULES, max_nodes: int = 0
) -> Solution:
    """Solve one deal and verify a found win by replaying it on a fresh Game.

    Raises ``RuntimeError`` if the replay does not win (that would be a solver bug).
    """
    solution = ClairvoyantSolver(deck, rules).solve(max_nodes)
    if solution.winnable:
        game = replay(deck, solution.actions, rules)
        if not game.won or game.phase != PHASE_OVER:
            raise RuntimeError(
                f"solver bug: the found line {list(solution.actions)} does not win on replay "
                f"(outcome {game.outcome!r})"
            )
    return solution
