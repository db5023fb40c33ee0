"""The ``heuristic`` player: collect cards cheaply, then rack precisely for what is missing.

It decides from what a player may know (:class:`~coldiron_env.knowledge.Knowledge`: the hand,
every card seen, hence the exact contents of the deck, and the counters) through
:func:`decide`, a pure function of that knowledge. Its pieces (:func:`rack_scores`,
:func:`turn_choice`, :func:`iron_ok`) are public so that the planner plays exactly this
policy in its rollouts; the card counting (run windows, rack odds, bonus risk) is
:mod:`coldiron_env.analysis`.

**Analysis.** A suit's run window (A-2-3 .. 8-9-10) is *live* while every card of it not held
is unseen (in the deck). The suit's *need* is the fewest missing cards over its live windows
(0 once the run is complete), its *useful* cards the missing cards of the windows achieving
it; the game's need sums the smallest ``suits_required`` suits' needs. A suit with no live
window means the game cannot be won: the player then simply Threatens.

**Racks.** For every rack (10 ranks, 4 suits) with a useful unseen target it computes exactly,
from the unseen cards: ``p_ok``, the chance that the first target comes before any Joker and
before enough courts to slay the Changeling (only the order of ``k`` targets, Jokers and
courts matters), and the courts expected on the way; the chance ``useful / k`` that the first
target is useful; the useful cards of other racks destroyed on the way (each unseen
non-target precedes the first target with chance ``1 / (k + 1)``). Its score is
``p_ok * useful / k - waste_weight * destroyed - hurt_weight * expected_courts``. It racks
with the best rack when time is short (need + ``rack_slack`` >= turns left, this one
counted: every turn must now bring a useful card) or when the score reaches
``rack_min_score`` (a near-certain, cheap hit).

**Otherwise, draw more cards** (win chances climb steeply with the numbered cards
collected): apply the Iron, again within the turn, while the Hurt after it stays at most
``iron_limit`` (3: room for later racks' courts), and on the last turn while it cannot slay.
With Hurt at ``rest_at`` or more and time to spare (turns left > need + ``rest_margin``) it
Rests to buy room for the racks; otherwise it Threatens.

**Jokers.** A Joker's bonus after Threaten is always taken (three free draws). After the
Iron each court in the bonus hurts: it takes the bonus unless the chance of drawing enough
courts in three draws to slay exceeds ``bonus_max_risk`` (hypergeometric).

:class:`HeuristicParams` were tuned by hand, one at a time, on the first 10,000 deals of seed
0 (``scripts/evaluate.py --seed 0``); seed 1 is a held-out check.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from agents.players.base import KnowledgePlayer
from coldiron_env.actions import (
    BONUS,
    IRON,
    PHASE_BONUS,
    PHASE_IRON,
    PHASE_OVER,
    RACK_ACTIONS,
    RACK_TARGETS,
    REST,
    STOP,
    THREATEN,
)
from coldiron_env.analysis import IMPOSSIBLE, analyse, bonus_risk, rack_odds
from coldiron_env.knowledge import Knowledge
from coldiron_env.options import MAX_HURT, RuleOptions


@dataclass(frozen=True)
class HeuristicParams:
    """Tunable thresholds of :func:`decide` (defaults tuned by simulation)."""

    iron_limit: int = 3
    """Apply the Iron while the Hurt after the application would be at most this."""
    rack_slack: int = 1
    """Rack every turn once need + rack_slack >= turns left (this one included)."""
    rack_min_score: float = 0.8
    """Rack anyway when the best rack's score reaches this."""
    waste_weight: float = 0.5
    """Score penalty per useful card a rack is expected to destroy."""
    hurt_weight: float = 0.05
    """Score penalty per court a rack is expected to draw."""
    bonus_max_risk: float = 0.05
    """Decline an Iron bonus whose chance of slaying exceeds this."""
    rest_at: int = 4
    """Rest (when there is time) with Hurt at least this."""
    rest_margin: int = 2
    """Rest only when turns left > need + rest_margin."""


DEFAULT_PARAMS: Final = HeuristicParams()


def knowledge_need(kn: Knowledge) -> tuple[int, int]:
    """``(need, useful)`` of the game ``kn`` describes (:func:`coldiron_env.analysis.analyse`)."""
    return analyse(kn.hand, kn.unseen, kn.rules.suits_required)


def rack_scores(kn: Knowledge, useful: int, params: HeuristicParams) -> Iterator[tuple[float, int]]:
    """``(score, action)`` of every rack with a useful unseen target, in action order."""
    unseen = kn.unseen
    jokers = kn.unseen_jokers
    courts = kn.unseen_courts
    hurt_left = MAX_HURT - kn.hurt
    useful_unseen = (useful & unseen).bit_count()
    waste, hurt_weight = params.waste_weight, params.hurt_weight
    for action in RACK_ACTIONS:
        targets = RACK_TARGETS[action] & unseen
        hits = (targets & useful).bit_count()
        if hits:
            k = targets.bit_count()
            alive, courts_expected = rack_odds(k, jokers, courts, hurt_left)
            score = (
                alive * hits / k
                - waste * (useful_unseen - hits) / (k + 1)
                - hurt_weight * courts_expected
            )
            yield score, action


def iron_ok(kn: Knowledge, params: HeuristicParams) -> bool:
    """Apply the Iron (again)? While the Hurt after it stays within ``iron_limit``,
    or on the last turn while it cannot slay."""
    last_turn = kn.turn >= kn.rules.turns
    return kn.hurt + 1 <= params.iron_limit or (last_turn and kn.hurt + 1 < MAX_HURT)


def turn_choice(kn: Knowledge, need: int, useful: int, params: HeuristicParams) -> int:
    """The ``turn``-phase action for a phrase that still needs ``need`` cards (``useful``)."""
    turns_left = kn.turns_left
    # the best-scoring rack with a useful target (the first in action order on a tie)
    scored = rack_scores(kn, useful, params)
    score, rack = max(scored, key=lambda item: item[0], default=(-math.inf, -1))
    if rack >= 0 and (need + params.rack_slack >= turns_left or score >= params.rack_min_score):
        return rack
    if iron_ok(kn, params):
        return IRON
    if kn.hurt >= params.rest_at and turns_left > need + params.rest_margin:
        return REST
    return THREATEN


def decide(kn: Knowledge, params: HeuristicParams = DEFAULT_PARAMS) -> int:
    """The heuristic's action for knowledge ``kn`` (always legal in ``kn.phase``)."""
    phase = kn.phase
    if phase == PHASE_OVER:
        raise ValueError("no legal action: the game is over")
    if phase == PHASE_BONUS:
        if kn.iron_count == 0:  # the bonus of a Threaten: courts do not hurt
            return BONUS
        risk = bonus_risk(kn.deck_count, kn.unseen_courts, MAX_HURT - kn.hurt)
        return BONUS if risk <= params.bonus_max_risk else STOP
    if phase == PHASE_IRON:
        return IRON if iron_ok(kn, params) else STOP
    need, useful = knowledge_need(kn)
    if need >= IMPOSSIBLE:
        return THREATEN
    return turn_choice(kn, need, useful, params)


class HeuristicAgent(KnowledgePlayer):
    """The hand-written player of :func:`decide` (any observation mode)."""

    name = "heuristic"

    def __init__(
        self, params: HeuristicParams = DEFAULT_PARAMS, rules: RuleOptions | None = None
    ) -> None:
        self.params = params
        super().__init__(rules)

    def act_knowledge(self, kn: Knowledge) -> int:
        return decide(kn, self.params)
