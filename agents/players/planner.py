"""The ``planner``: Monte-Carlo rollouts over the unseen cards' orders, improving on ``heuristic``.

What it knows
-------------
It plans from :class:`~coldiron_env.knowledge.Knowledge` only: the hand, the cards
seen (hence the exact *contents* of the deck) and the counters, never the
deck's order. Given what a player has seen, every order of the unseen cards is
equally likely (the deck was shuffled uniformly and everything observed is a
function of the cards already drawn), so a *determinization* is a game drawn
by :meth:`Knowledge.resample <coldiron_env.knowledge.Knowledge.resample>`: this
position with the unseen cards in a uniformly random order. The planner is
never given a game, so it cannot read a deck order.

How it decides (a rollout algorithm, Bertsekas)
-----------------------------------------------
The heuristic (:func:`agents.players.heuristic.decide`) is the base policy and the
rollout policy. At a decision the planner

1. takes the heuristic's action ``h`` and a few promising alternatives
   (:func:`candidate_actions`: Threaten, the Iron when it cannot slay, Rest when
   there is Hurt to heal, the two best-scoring racks; Iron/Stop and
   Bonus/Stop in the other phases), dropping racks equivalent to another one
   (same targets among the unseen cards) and racks with no unseen target;
2. samples orders of the unseen cards in batches and, on **the same orders for
   every candidate** (common random numbers), plays the candidate then the
   heuristic to the end of the game, recording win or loss;
3. compares each alternative with ``h`` by the paired per-order difference
   ``d = win(a) - win(h)``: it switches to an alternative only if the mean of
   ``d`` exceeds ``z`` standard errors (default 2.0) and at least
   ``min_discordant`` orders favour it, choosing the one with the largest
   mean among those. Otherwise it plays ``h``. After each batch an
   alternative is dropped (no more rollouts spent on it) when its mean is
   below zero by ``drop_z`` standard errors, or not above zero once
   ``min_samples`` orders are in; sampling stops when only ``h`` is left, when
   an alternative is ahead by ``stop_z`` standard errors, or at ``samples``.

Playing ``h`` unless an alternative is *significantly* better is what makes
the planner robust to the trap of rare wins: with win chances of a few
percent, the action with the most rollout wins is mostly noise, and an
arg-max over noisy estimates would play worse than the heuristic.

Trivial spots are not planned: one legal action, or a game that can no longer
be won (a suit without any completable window, or more cards needed than can
still be kept: :func:`hopeless`), where every action loses.

Speed
-----
Rollouts are the hot path. With numba installed they run compiled
(:mod:`agents.players.rollouts`: the heuristic and the batched rules core in one
loop: the planner plays about 16 times faster, every rollout's result the same). Otherwise each
rollout reuses one mutable ``Knowledge``, the heuristic's decisions are memoised
per knowledge state across the whole game (rollouts of consecutive decisions
revisit the same states). Either way a rollout stops as soon as the position is
:func:`hopeless` (a certain loss, so the result is exact).

Where to plan. Decisions before turn ``plan_from_turn`` (18) are left to
the heuristic: measured on 1,100 deals (seed 0) with up to 384 orders per
decision from turn 16, the estimated gain of the best alternative averaged
0.1-0.5 points per decision before turn 19 (undetectable at any affordable
budget) against 2-10 points at turns 20-23, where almost all switches
happened (rack -> Threaten, Threaten -> rack, -> Rest). Rollouts there are
also short, so the budget goes where it pays.

Budgets (:class:`PlannerConfig`): ``samples`` orders per decision at most
(in batches of ``batch``), optionally a wall-clock ``time_limit`` per decision
(then the play depends on the machine's speed and is no longer reproducible).
Registered names (:data:`BUDGETS`): ``planner-small`` (256 orders from turn
18), ``planner`` (:data:`PLANNER_DEFAULT`, 1,024 orders from turn 18) and
``planner-large`` (4,096 orders from turn 16, for those with time).
Evaluation figures: ``lab/docs/ladder.md``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import numpy as np

from agents.players.base import Agent, KnowledgeActor
from agents.players.heuristic import (
    DEFAULT_PARAMS,
    HeuristicParams,
    decide,
    knowledge_need,
    rack_scores,
    turn_choice,
)
from agents.players.policy_net import NetRoller, PolicyNet
from agents.players.rollouts import COMPILED, HOPELESS, Estimate, pack_params, rollout_wins
from coldiron_env.actions import (
    IRON,
    LEGAL_ACTIONS,
    PHASE_OVER,
    PHASE_TURN,
    RACK_ACTIONS,
    RACK_TARGETS,
    REST,
    THREATEN,
)
from coldiron_env.analysis import IMPOSSIBLE, max_keeps
from coldiron_env.cards import DECK_SIZE
from coldiron_env.game import WON, Game
from coldiron_env.knowledge import Knowledge
from coldiron_env.options import MAX_HURT, RuleOptions

DEFAULT_SEED: Final = 0
"""Seed of the planner's own sampling when it is reset without one."""
CACHE_LIMIT: Final = 400_000
"""Memoised heuristic decisions kept before the cache is cleared."""
RACKS_CONSIDERED: Final = 2
"""Best-scoring racks (by the heuristic's own score) offered as alternatives by default."""


@dataclass(frozen=True)
class PlannerConfig:
    """The planner's budget and test thresholds."""

    samples: int = 1024
    """Most sampled orders of the unseen cards per decision."""
    batch: int = 64
    """Orders sampled between two looks at the statistics."""
    min_samples: int = 64
    """Orders sampled before the search may stop because nothing differs."""
    z: float = 2.0
    """Switch from the heuristic's action only when the paired mean exceeds z standard errors."""
    stop_z: float = 3.0
    """Stop sampling early once an alternative's paired mean exceeds this many standard errors."""
    drop_z: float = 1.0
    """Drop an alternative whose paired mean is below zero by this many standard errors."""
    min_discordant: int = 3
    """...and when at least this many more orders favour the alternative than the heuristic."""
    plan_from_turn: int = 18
    """Plan only from this turn on; before it the heuristic plays (see the module doc)."""
    racks: int = RACKS_CONSIDERED
    """Best-scoring racks offered as alternatives (by the heuristic's score)."""
    rank_racks: bool = True
    """Rank the racks by the heuristic's score and offer the best ``racks``; False: offer every
    rack with an unseen target, in action order (no hand-written player in the search)."""
    time_limit: float | None = None
    """Optional wall-clock seconds per decision (stops sampling early; not reproducible)."""
    params: HeuristicParams = DEFAULT_PARAMS
    """The heuristic used as base policy and rollout policy."""

    def __post_init__(self) -> None:
        def refuse(name: str, rule: str) -> NoReturn:
            raise ValueError(f"PlannerConfig.{name} must be {rule}, got {getattr(self, name)!r}")

        for name in ("samples", "batch", "min_samples", "racks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                refuse(name, "a positive integer")
        for name in ("z", "stop_z", "drop_z"):
            if not getattr(self, name) > 0:
                refuse(name, "positive")
        if isinstance(self.plan_from_turn, bool) or not isinstance(self.plan_from_turn, int):
            refuse("plan_from_turn", "an integer")
        if self.min_discordant < 0:
            refuse("min_discordant", ">= 0")
        if self.time_limit is not None and not self.time_limit > 0:
            refuse("time_limit", "positive")


PLANNER_DEFAULT: Final = PlannerConfig()
BUDGETS: Final[dict[str, PlannerConfig]] = {
    "planner-small": PlannerConfig(samples=256, batch=32, min_samples=32, plan_from_turn=18),
    "planner": PLANNER_DEFAULT,
    "planner-large": PlannerConfig(samples=4096, batch=128, min_samples=128, plan_from_turn=16),
    "planner-free": PlannerConfig(rank_racks=False),
}
"""Registered planner names and their budgets."""
BEST_DRAWS: Final = 4096
"""Draws of :meth:`DecisionRecord.chance_best` when more than one alternative is left."""
BEST_SEED: Final = 0
"""The fixed seed of those draws."""
HINT_SAMPLES: Final = 200
"""Orders sampled by :func:`action_win_chances` (every legal action is rolled out on each)."""


# --------------------------------------------------------------------------- analysis
def hopeless(kn: Knowledge) -> bool:
    """True when a ``turn``-phase position can no longer be won, whatever the order."""
    return why_hopeless(kn) is not None


def _keep_bound(kn: Knowledge) -> int:
    return max_keeps(kn.turns_left, kn.hurt, kn.unseen_jokers, kn.deck_count, kn.rules)


def why_hopeless(kn: Knowledge) -> str | None:
    """Why a position can no longer be won, in words (None when it still can be)."""
    need, _ = knowledge_need(kn)
    if need >= IMPOSSIBLE:
        return (
            "the phrase can no longer be completed: a suit has no run window left whose "
            "missing cards are all still in the deck"
        )
    bound = _keep_bound(kn)
    if need > bound:
        return (
            f"the phrase can no longer be completed: it needs {need} more cards and at most "
            f"{bound} can still be kept, whatever the order of the deck"
        )
    return None


def turn_decision(kn: Knowledge, params: HeuristicParams = DEFAULT_PARAMS) -> int:
    """The heuristic's ``turn``-phase action, or :data:`HOPELESS` when :func:`hopeless`
    (one analysis for both: the rollouts' hot path)."""
    need, useful = knowledge_need(kn)
    if need >= IMPOSSIBLE or need > _keep_bound(kn):
        return HOPELESS
    return turn_choice(kn, need, useful, params)


def ranked_racks(kn: Knowledge, params: HeuristicParams = DEFAULT_PARAMS) -> list[int]:
    """The racks with a useful unseen target, best heuristic score first."""
    _, useful = knowledge_need(kn)
    scored = sorted(rack_scores(kn, useful, params), key=lambda item: (-item[0], item[1]))
    return [action for _, action in scored]


def candidate_actions(
    kn: Knowledge,
    base: int,
    params: HeuristicParams = DEFAULT_PARAMS,
    racks: int = RACKS_CONSIDERED,
    rank_racks: bool = True,
) -> list[int]:
    """The heuristic's action ``base`` first, then the alternatives worth comparing with it."""
    if kn.phase != PHASE_TURN:
        return [base] + [a for a in LEGAL_ACTIONS[kn.phase] if a != base]
    unseen = kn.unseen
    pool = [THREATEN]
    if kn.hurt + 1 < MAX_HURT:
        pool.append(IRON)
    if kn.hurt > 0:
        pool.append(REST)  # Rest at Hurt 0 only burns a card a Threaten would have kept
    pool += ranked_racks(kn, params)[:racks] if rank_racks else list(RACK_ACTIONS)
    out = [base]
    seen_targets = {RACK_TARGETS[base] & unseen} if RACK_TARGETS[base] else set()
    for action in pool:
        if action in out:
            continue
        targets = RACK_TARGETS[action] & unseen
        if RACK_TARGETS[action]:
            if not targets or targets in seen_targets:
                continue  # a certain loss, or the same rack as one already listed
            seen_targets.add(targets)
        out.append(action)
    return out


# --------------------------------------------------------------------------- rollouts
@dataclass
class PlannerStats:
    """Counters over a planner's decisions: those it planned, those where it switched."""

    planned: int = 0
    switched: int = 0


@dataclass(frozen=True)
class DecisionRecord:
    """One planned decision: the heuristic's action, the choice, and the estimates."""

    turn: int
    phase: int
    hurt: int
    base: int
    choice: int
    samples: int
    win_chances: dict[int, float]
    """Estimated win chance of each candidate still compared at the end."""
    advantages: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Each alternative still compared at the end: the paired mean of its wins less the base
    action's over the sampled orders, and that mean's standard error (:func:`paired`)."""

    def chance_best(self, z: float = 0.0, draws: int = BEST_DRAWS) -> dict[int, float]:
        """The chance that each candidate still compared is the best, were the paired means
        normal around their estimates with their standard errors (the base action's is 0
        exactly; an alternative that never differed from it ties and loses to it), each
        alternative's handicapped by ``z`` standard errors. With one alternative left and the
        planner's ``z`` this is its rule made soft: an alternative at the switching threshold
        gets even odds, so the likeliest action is the planner's choice (up to its
        ``min_discordant``). With several, the draws are independent (the paired means'
        correlation through the base action's results is ignored) and the maximum of several
        draws favours the alternatives: the likeliest action may then differ from the
        planner's choice. Drawn ``draws`` times from a fixed seed when more than one
        alternative is left, so the same record always gives the same chances; they sum to
        1. An estimate without a finite standard error (a single order) counts as a tie."""
        finite = {a: ms for a, ms in self.advantages.items() if math.isfinite(ms[1])}
        spread = {a: (mean - z * se, se) for a, (mean, se) in finite.items() if se > 0}
        sure = [a for a, (mean, se) in finite.items() if se == 0 and mean > 0]
        if sure:  # won on every sampled order where the base action lost on every one
            best = max(sure, key=lambda a: self.advantages[a][0])
            return {a: float(a == best) for a in self.win_chances}
        chances = dict.fromkeys(self.win_chances, 0.0)
        if not spread:
            chances[self.base] = 1.0
        elif len(spread) == 1:
            ((action, (mean, se)),) = spread.items()
            chances[action] = 0.5 * math.erfc(-mean / (se * math.sqrt(2.0)))
            chances[self.base] = 1.0 - chances[action]
        else:
            actions = list(spread)
            means = np.array([spread[a][0] for a in actions])
            ses = np.array([spread[a][1] for a in actions])
            noise = np.random.default_rng(BEST_SEED).standard_normal((draws, len(actions)))
            drawn = means + ses * noise
            top = drawn.argmax(axis=1)
            wins = np.bincount(top[drawn.max(axis=1) > 0], minlength=len(actions))
            for action, count in zip(actions, wins, strict=True):
                chances[action] = float(count) / draws
            chances[self.base] = 1.0 - float(wins.sum()) / draws
        return chances


class Roller:
    """Plays the heuristic to the end of determinized games: compiled
    (:mod:`agents.players.rollouts`) when numba is installed, else in Python here,
    memoising its decisions. Both give every rollout the same result (tested)."""

    def __init__(self, params: HeuristicParams, compiled: bool = COMPILED) -> None:
        self.params = params
        self.compiled = compiled and COMPILED  # without numba: the Python rollouts
        self.packed = pack_params(params)
        self.cache: dict[tuple[int, int, int, int, int, int], int] = {}
        self.kn = Knowledge()

    def clear(self) -> None:
        self.cache.clear()

    def rollout(self, game: Game) -> bool:
        """Play ``game`` (modified in place) to its end with the heuristic; True if won.
        The memo holds the decisions of one set of rules: :meth:`clear` it when they change."""
        kn = self.kn
        kn.rules = game.rules
        cache = self.cache
        params = self.params
        while True:
            phase = game.phase
            if phase == PHASE_OVER:
                return game.outcome == WON
            hand = game.hand
            seen = hand | game.discarded
            key = (hand, seen, game.hurt, game.turn, phase, game.iron_count)
            action = cache.get(key)
            if action is None:
                kn.hand = hand
                kn.seen = seen
                kn.hurt = game.hurt
                kn.turn = game.turn
                kn.deck_count = DECK_SIZE - game.pos
                kn.phase = phase
                kn.iron_count = game.iron_count
                action = turn_decision(kn, params) if phase == PHASE_TURN else decide(kn, params)
                if len(cache) >= CACHE_LIMIT:
                    cache.clear()
                cache[key] = action
            if action == HOPELESS:
                return False
            game.step(action)

    def estimate(
        self,
        kn: Knowledge,
        candidates: Sequence[int],
        rng: np.random.Generator,
        samples: int,
        estimate: Estimate | None = None,
    ) -> Estimate:
        """Roll every candidate out on ``samples`` more games resampled from ``kn`` (the
        same games for each candidate)."""
        if estimate is None:
            estimate = Estimate.start(candidates)
        if self.compiled:
            orders = kn.sample_order_array(rng, samples)
            estimate.add(rollout_wins(kn, orders, candidates, self.packed))
            return estimate
        for sampled in kn.resample(rng, samples):
            for action in candidates:
                game = sampled.clone()
                game.step(action)
                estimate.wins[action].append(1 if self.rollout(game) else 0)
        return estimate


def paired(base: list[int], other: list[int]) -> tuple[float, float, int]:
    """Mean and standard error of ``other - base`` per order, and (favourable - unfavourable)."""
    n = len(base)
    plus = sum(1 for b, o in zip(base, other, strict=True) if o > b)
    minus = sum(1 for b, o in zip(base, other, strict=True) if o < b)
    mean = (plus - minus) / n
    var = (plus + minus) / n - mean * mean
    se = math.sqrt(max(var, 0.0) / n) if n > 1 else math.inf
    return mean, se, plus - minus


# --------------------------------------------------------------------------- the agent
class PlannerAgent(Agent):
    """Rollout planner over a base policy (see the module doc). Deterministic given the seed.

    The base policy proposes the action the planner keeps unless an alternative's
    rollouts (the heuristic to the end) are significantly better: by default the
    heuristic; any :class:`~agents.players.base.KnowledgeActor` (a trained network,
    for one) can be the ``base``.
    """

    name = "planner"
    searches = True

    def __init__(
        self,
        config: PlannerConfig = PLANNER_DEFAULT,
        rules: RuleOptions | None = None,
        name: str | None = None,
        base: KnowledgeActor | None = None,
        compiled: bool = COMPILED,
        rollout_policy: PolicyNet | None = None,
    ) -> None:
        # compiled: the rollouts compiled (agents.players.rollouts) or in Python; same results
        # rollout_policy: a network that plays the rollouts instead of the heuristic
        self.config = config
        self.base = base
        if name is not None:
            self.name = name
        self.knowledge = Knowledge()
        self.stats = PlannerStats()
        self._rng = np.random.default_rng(DEFAULT_SEED)
        self.decisions: list[DecisionRecord] | None = None
        """Set to a list to record every planned decision (analysis, tests)."""
        self.rollout_policy = rollout_policy
        self._roller: Roller | NetRoller = (
            Roller(config.params, compiled) if rollout_policy is None else NetRoller(rollout_policy)
        )
        if rules is not None:
            self.set_rules(rules)

    def set_rules(self, rules: RuleOptions) -> None:
        """Play a game with these rules (the default is the game)."""
        self.knowledge.rules = rules
        self._roller.clear()  # its memo holds the decisions of the rules before

    def reset(self, seed: int | None = None) -> None:
        self.knowledge.reset()
        self._rng = np.random.default_rng(DEFAULT_SEED if seed is None else seed)
        self._roller.clear()

    def replay(
        self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None, action: int
    ) -> None:
        self.knowledge.observe(obs, info)  # what it saw; nothing to decide

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        self.knowledge.observe(obs, info)
        action = self.choose(self.knowledge)
        if not action_mask[action]:
            raise ValueError(
                f"planner chose action {action}, illegal under mask "
                f"{np.asarray(action_mask).tolist()} (was info from a different step passed?)"
            )
        return action

    def act_knowledge(self, kn: Knowledge) -> int:
        """The action for what the player knows (as :meth:`act`)."""
        return self.choose(kn)

    def choose(self, kn: Knowledge) -> int:
        """The planner's action for knowledge ``kn``."""
        start = time.perf_counter()
        config = self.config
        base = decide(kn, config.params) if self.base is None else self.base.act_knowledge(kn)
        if len(LEGAL_ACTIONS[kn.phase]) == 1 or kn.turn < config.plan_from_turn:
            return base
        if kn.phase == PHASE_TURN and hopeless(kn):
            return base  # every action loses
        candidates = candidate_actions(kn, base, config.params, config.racks, config.rank_racks)
        if len(candidates) == 1:
            return base
        self.stats.planned += 1
        roller = self._roller
        estimate: Estimate | None = None
        alive = candidates
        done = 0
        while done < config.samples:
            batch = min(config.batch, config.samples - done)
            estimate = roller.estimate(kn, alive, self._rng, batch, estimate)
            done += batch
            base_wins = estimate.wins[base]
            keep = [base]
            settled = False
            for action in alive[1:]:
                mean, se, net = paired(base_wins, estimate.wins[action])
                if mean + config.drop_z * se < 0 or (mean <= 0 and done >= config.min_samples):
                    continue  # not better than the heuristic's action: stop spending on it
                keep.append(action)
                if mean > config.stop_z * se and net >= config.min_discordant:
                    settled = True
            if len(keep) != len(alive):
                alive = keep
                estimate = Estimate(alive, {a: estimate.wins[a] for a in alive})
            if len(alive) == 1 or settled:
                break
            if config.time_limit is not None and time.perf_counter() - start > config.time_limit:
                break
        assert estimate is not None
        choice = base
        best = 0.0
        for action in alive[1:]:
            mean, se, net = paired(estimate.wins[base], estimate.wins[action])
            if mean > config.z * se and net >= config.min_discordant and mean > best:
                choice, best = action, mean
        if choice != base:
            self.stats.switched += 1
        if self.decisions is not None:
            self.decisions.append(
                DecisionRecord(
                    kn.turn,
                    kn.phase,
                    kn.hurt,
                    base,
                    choice,
                    estimate.samples,
                    {a: estimate.win_chance(a) for a in alive},
                    {a: paired(estimate.wins[base], estimate.wins[a])[:2] for a in alive[1:]},
                )
            )
        return choice


def make_planner(name: str) -> PlannerAgent:
    """The registered planner ``name`` (one of :data:`BUDGETS`)."""
    if name not in BUDGETS:
        raise ValueError(f"unknown planner {name!r}; expected one of {', '.join(BUDGETS)}")
    return PlannerAgent(BUDGETS[name], name=name)


# --------------------------------------------------------------------------- hints
def action_win_chances(
    kn: Knowledge,
    actions: Sequence[int] | None = None,
    samples: int = HINT_SAMPLES,
    seed: int = DEFAULT_SEED,
    params: HeuristicParams = DEFAULT_PARAMS,
) -> dict[int, float]:
    """Estimated win chance of each legal action, then the heuristic to the end.

    Every legal action is rolled out on the same ``samples`` games resampled
    from what the player knows (``kn``; never the real order). ``actions``
    (the actions played so far) only varies the sampling seed between
    positions. Empty when the game is over; a game that can no longer be won
    gives 0.0 for every action without sampling.
    """
    if kn.phase == PHASE_OVER:
        return {}
    if isinstance(samples, bool) or not isinstance(samples, int) or samples <= 0:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    legal = list(LEGAL_ACTIONS[kn.phase])
    if kn.phase == PHASE_TURN and hopeless(kn):
        return dict.fromkeys(legal, 0.0)
    history = list(actions or ())
    rng = np.random.default_rng([seed, len(history), *history])
    estimate = Roller(params).estimate(kn, legal, rng, samples)
    return {a: estimate.win_chance(a) for a in legal}
