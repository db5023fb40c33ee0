"""The ``planner``: Monte-Carlo rollouts over the unseen cards' orders, improving on ``heuristic``.

It plans from :class:`~coldiron_env.knowledge.Knowledge` alone (the hand, the cards seen, hence
the deck's contents, and the counters), never the deck's order. Given what a player has seen,
every order of the unseen cards is equally likely, so it samples them
(:meth:`Knowledge.resample <coldiron_env.knowledge.Knowledge.resample>`). A rollout algorithm
(Bertsekas) over the heuristic (:func:`agents.players.heuristic.decide`), at each decision it

1. takes the heuristic's action ``h`` and a few promising alternatives
   (:func:`candidate_actions`: Threaten, the Iron when it cannot slay, Rest when there is Hurt
   to heal, the two best-scoring racks (``planner-free``: every rack, unranked), no two racks
   with the same unseen targets; Iron/Stop and Bonus/Stop in the other phases);
2. on **the same sampled orders for every candidate** (common random numbers), in batches,
   plays the candidate then the heuristic to the end of the game;
3. switches to an alternative only if the paired per-order difference
   ``d = win(a) - win(h)`` has a mean above ``z`` standard errors and ``min_discordant`` more
   orders favour it (the largest mean among those). After each batch an alternative is
   dropped when its mean is below zero by ``drop_z`` standard errors, or not above zero once
   ``min_samples`` orders are in; sampling stops when only ``h`` is left, when an alternative
   leads by ``stop_z`` standard errors, or at ``samples``.

Playing ``h`` unless an alternative is *significantly* better makes it robust to rare wins: at
win chances of a few percent, an arg-max over noisy estimates plays worse than the heuristic.
It does not plan with one legal action, in a position that can no longer be won
(:func:`hopeless`), or before turn ``plan_from_turn`` (18): measured on 1,100 deals (seed 0),
the best alternative's gain averaged 0.1-0.5 points a decision before turn 19 (undetectable at
any affordable budget) against 2-10 points at turns 20-23, where rollouts are also short.

The heuristic's rollouts (:class:`Roller`) run compiled with numba (about 16 times faster), else in
Python; a network's are :class:`~agents.players.policy_net.NetRoller`'s. A rollout stops, lost, once
the position is :func:`hopeless`. Budgets: :data:`BUDGETS`; evaluation figures:
``lab/docs/ladder.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, NoReturn

import numpy as np
import numpy.typing as npt

from agents.players.base import KnowledgeActor, KnowledgePlayer
from agents.players.heuristic import (
    DEFAULT_PARAMS,
    HeuristicParams,
    decide,
    knowledge_need,
    rack_scores,
    turn_choice,
)
from agents.players.policy_net import NetRoller, PolicyNet
from agents.players.rollouts import (
    COMPILED,
    HOPELESS,
    BatchRoller,
    Estimate,
    pack_params,
    play_out,
    tables,
)
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
from coldiron_env.batched import pack_rules
from coldiron_env.game import I64, WON, Game, Games
from coldiron_env.knowledge import Knowledge
from coldiron_env.options import MAX_HURT, RuleOptions

DEFAULT_SEED: Final = 0  # seed of the planner's own sampling when it is reset without one
CACHE_LIMIT: Final = 400_000  # memoised heuristic decisions kept before the cache is cleared
RACKS_CONSIDERED: Final = 2  # best-scoring racks (by the heuristic's score) offered by default


@dataclass(frozen=True)
class PlannerConfig:
    """The planner's budget and test thresholds (the module doc's steps)."""

    samples: int = 1024  # the most orders of the unseen cards sampled per decision
    batch: int = 64  # orders sampled between two looks at the statistics
    min_samples: int = 64  # orders sampled before it may stop because nothing differs
    z: float = 2.0  # switch when an alternative's paired mean exceeds z standard errors
    stop_z: float = 3.0  # stop sampling once one exceeds stop_z standard errors
    drop_z: float = 1.0  # drop an alternative below zero by drop_z standard errors
    min_discordant: int = 3  # switch or stop only with this many more orders in its favour
    plan_from_turn: int = 18  # the base policy plays alone before this turn
    racks: int | None = RACKS_CONSIDERED  # best-scoring racks offered (None: all, unranked)
    params: HeuristicParams = DEFAULT_PARAMS  # the heuristic (base, rollouts: where none given)

    def __post_init__(self) -> None:
        def refuse(name: str, rule: str) -> NoReturn:
            raise ValueError(f"PlannerConfig.{name} must be {rule}, got {getattr(self, name)!r}")

        least = {"samples": 1, "batch": 1, "min_samples": 1, "racks": 1, "min_discordant": 0}
        for name in (*least, "plan_from_turn"):
            value = getattr(self, name)
            whole = isinstance(value, int) and not isinstance(value, bool)
            if (not whole or value < least.get(name, value)) and (name, value) != ("racks", None):
                refuse(name, f"an integer >= {least[name]}" if name in least else "an integer")
        for name in ("z", "stop_z", "drop_z"):
            if not getattr(self, name) > 0:
                refuse(name, "positive")


PLANNER_DEFAULT: Final = PlannerConfig()
BUDGETS: Final[dict[str, PlannerConfig]] = {
    "planner-small": PlannerConfig(samples=256, batch=32, min_samples=32, plan_from_turn=18),
    "planner": PLANNER_DEFAULT,
    "planner-large": PlannerConfig(samples=4096, batch=128, min_samples=128, plan_from_turn=16),
    "planner-free": PlannerConfig(racks=None),
}
"""Registered planner names and their budgets."""
BEST_DRAWS: Final = 4096  # DecisionRecord.chance_best's draws with several alternatives left
BEST_SEED: Final = 0  # the fixed seed of those draws
HINT_SAMPLES: Final = 200  # orders action_win_chances samples (every legal action on each)


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


def candidate_actions(
    kn: Knowledge,
    base: int,
    params: HeuristicParams = DEFAULT_PARAMS,
    racks: int | None = RACKS_CONSIDERED,
) -> list[int]:
    """The base policy's action ``base`` first, then the alternatives worth comparing with it
    (``racks``: how many of the best-scoring racks; None: every rack, unranked)."""
    if kn.phase != PHASE_TURN:
        return [base] + [a for a in LEGAL_ACTIONS[kn.phase] if a != base]
    unseen = kn.unseen
    pool = [THREATEN]
    if kn.hurt + 1 < MAX_HURT:
        pool.append(IRON)
    if kn.hurt > 0:
        pool.append(REST)  # Rest at Hurt 0 only burns a card a Threaten would have kept
    if racks is not None:  # the racks with a useful unseen target, best first:
        _, useful = knowledge_need(kn)
        ranked = sorted(rack_scores(kn, useful, params), key=lambda item: (-item[0], item[1]))
        pool += [action for _, action in ranked[:racks]]
    else:
        pool += list(RACK_ACTIONS)
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


@dataclass(frozen=True)
class DecisionRecord:
    """One planned decision: the heuristic's action, the choice, and the estimates."""

    turn: int
    phase: int
    hurt: int
    base: int
    choice: int
    samples: int
    win_chances: dict[int, float]  # of each candidate still compared at the end
    advantages: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Each alternative still compared at the end: the paired mean of its wins less the base
    action's over the sampled orders, and that mean's standard error (:func:`paired`)."""

    dropped: dict[int, float] = field(default_factory=dict)
    """The candidates dropped on the way (not better than the base action), each with its win
    chance on the orders it was rolled out on."""

    def chance_best(self, z: float = 0.0, draws: int = BEST_DRAWS) -> dict[int, float]:
        """The chance that each candidate still compared is the best, were the paired means
        normal around their estimates with their standard errors (the base action's is 0; a
        tie loses to it), each alternative's handicapped by ``z`` standard errors; they sum to 1.

        With one alternative and the planner's ``z`` this is its rule made soft (even odds at
        the switching threshold). With several, ``draws`` independent draws from a fixed seed
        (the correlation through the base action's results ignored): the maximum of several
        draws favours the alternatives, so the likeliest action may differ from the planner's
        choice. An estimate without a finite standard error (a single order) counts as a tie."""
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
            # the normal CDF by erfc: NormalDist.cdf's 1 + erf loses the small tail's digits
            chances[action] = 0.5 * math.erfc(-mean / (se * math.sqrt(2.0)))
            chances[self.base] = 1.0 - chances[action]
        else:
            actions = list(spread)
            means, ses = np.array([spread[a] for a in actions]).T
            noise = np.random.default_rng(BEST_SEED).standard_normal((draws, len(actions)))
            drawn = means + ses * noise
            top = drawn.argmax(axis=1)
            wins = np.bincount(top[drawn.max(axis=1) > 0], minlength=len(actions))
            chances.update(zip(actions, (wins / draws).tolist(), strict=True))
            chances[self.base] = 1.0 - float(wins.sum()) / draws
        return chances


class Roller(BatchRoller):
    """Plays the heuristic to the end of sampled games: compiled (:mod:`agents.players.rollouts`)
    with numba, else in Python here, memoising its decisions; the same results (tested)."""

    def __init__(self, params: HeuristicParams, compiled: bool = COMPILED) -> None:
        self.params = params
        self.compiled = compiled and COMPILED  # without numba: the Python rollouts
        self.packed = pack_params(params)
        self.cache: dict[tuple[int, int, int, int, int, int], int] = {}

    def clear(self) -> None:
        self.cache.clear()

    def play(self, first: I64, games: Games, kn: Knowledge) -> npt.NDArray[np.bool_]:
        won: npt.NDArray[np.bool_]
        won = play_out(first, games, pack_rules(kn.rules), tables(), self.packed)
        return won

    def rollout(self, game: Game) -> bool:
        """Play ``game`` (modified in place) to its end with the heuristic; True if won.
        The memo holds the decisions of one set of rules: :meth:`clear` it when they change."""
        cache, params = self.cache, self.params
        while game.phase != PHASE_OVER:
            key = (game.hand, game.hand | game.discarded, game.hurt, game.turn, game.phase,
                   game.iron_count)  # fmt: skip
            action = cache.get(key)
            if action is None:
                kn = Knowledge.from_game(game)
                action = turn_decision(kn, params) if kn.phase == PHASE_TURN else decide(kn, params)
                if len(cache) >= CACHE_LIMIT:
                    cache.clear()
                cache[key] = action
            if action == HOPELESS:
                return False
            game.step(action)
        return game.outcome == WON

    def estimate(
        self,
        kn: Knowledge,
        candidates: Sequence[int],
        rng: np.random.Generator,
        samples: int,
        estimate: Estimate | None = None,
    ) -> Estimate:
        if self.compiled:
            return super().estimate(kn, candidates, rng, samples, estimate)
        estimate = estimate or Estimate.start(candidates)
        for sampled in kn.resample(rng, samples):  # the same orders as the compiled rollouts
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


class PlannerAgent(KnowledgePlayer):
    """Rollout planner (the module doc) over a ``base`` policy, by default the heuristic (any
    :class:`~agents.players.base.KnowledgeActor`: a network for one), its rollouts compiled or
    not (the same results) or played by a ``rollout_policy`` network; deterministic given the
    seed."""

    name = "planner"
    searches = True

    def __init__(
        self,
        config: PlannerConfig = PLANNER_DEFAULT,
        name: str | None = None,
        base: KnowledgeActor | None = None,
        compiled: bool = COMPILED,
        rollout_policy: PolicyNet | None = None,
    ) -> None:
        self.config = config
        self.base = base
        if name is not None:
            self.name = name
        self.planned = self.switched = 0
        """Decisions planned, and those where it switched from the base action."""
        self._rng = np.random.default_rng(DEFAULT_SEED)
        self.decisions: list[DecisionRecord] | None = None
        """Set to a list to record every planned decision (analysis, tests)."""
        self.rollout_policy = rollout_policy
        self._roller: BatchRoller = (
            Roller(config.params, compiled) if rollout_policy is None else NetRoller(rollout_policy)
        )
        super().__init__()

    def set_rules(self, rules: RuleOptions) -> None:
        super().set_rules(rules)
        self._roller.clear()  # its memo holds the decisions of the rules before

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._rng = np.random.default_rng(DEFAULT_SEED if seed is None else seed)
        self._roller.clear()

    def act_knowledge(self, kn: Knowledge) -> int:
        """The planner's action for knowledge ``kn``."""
        config = self.config
        base = decide(kn, config.params) if self.base is None else self.base.act_knowledge(kn)
        if len(LEGAL_ACTIONS[kn.phase]) == 1 or kn.turn < config.plan_from_turn:
            return base
        if kn.phase == PHASE_TURN and hopeless(kn):
            return base  # every action loses
        candidates = candidate_actions(kn, base, config.params, config.racks)
        if len(candidates) == 1:
            return base
        self.planned += 1
        estimate, alive, done = Estimate.start(candidates), candidates, 0
        dropped: dict[int, float] = {}
        while done < config.samples:
            batch = min(config.batch, config.samples - done)
            estimate = self._roller.estimate(kn, alive, self._rng, batch, estimate)
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
                dropped.update({a: estimate.win_chance(a) for a in alive if a not in keep})
                alive = keep
                estimate = Estimate(alive, {a: estimate.wins[a] for a in alive})
            if len(alive) == 1 or settled:
                break
        tests = {a: paired(estimate.wins[base], estimate.wins[a]) for a in alive[1:]}
        better = [a for a, (mean, se, net) in tests.items()
                  if mean > config.z * se and net >= config.min_discordant]  # fmt: skip
        choice = max(better, key=lambda a: tests[a][0], default=base)  # the first on a tie
        self.switched += choice != base
        if self.decisions is not None:
            chances = {a: estimate.win_chance(a) for a in alive}
            advantages = {a: (mean, se) for a, (mean, se, _) in tests.items()}
            record = (kn.turn, kn.phase, kn.hurt, base, choice, estimate.samples)
            self.decisions.append(DecisionRecord(*record, chances, advantages, dropped))
        return choice

    choose = act_knowledge


def action_win_chances(
    kn: Knowledge,
    actions: Sequence[int] | None = None,
    samples: int = HINT_SAMPLES,
    seed: int = DEFAULT_SEED,
    params: HeuristicParams = DEFAULT_PARAMS,
) -> dict[int, float]:
    """Estimated win chance of each legal action, then the heuristic to the end, on the same
    ``samples`` games resampled from what the player knows (never the real order); ``actions``
    (those played so far) only varies the sampling seed between positions. Empty when the
    game is over; 0.0 for every action, unsampled, when it can no longer be won."""
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
