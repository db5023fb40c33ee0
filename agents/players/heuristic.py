"""The ``heuristic`` player: collect cards cheaply, then rack precisely for what is missing.

It decides through :func:`decide`, a pure function of what a player may know (a
:class:`~coldiron_env.knowledge.Knowledge`); its pieces are public so that the planner plays
exactly this policy in its rollouts; the card counting is :mod:`coldiron_env.analysis`.

**Analysis.** The game's *need* is the fewest cards still missing from live run windows (all
their missing cards unseen) over the ``suits_required`` best suits, its *useful* cards those
missing cards; with a suit that has no live window the game is lost: it simply Threatens.

**Racks.** For every rack with ``k`` unseen targets, ``useful`` of them useful, its score is
``p_ok * useful / k - waste_weight * destroyed - hurt_weight * expected_courts``: ``p_ok`` the
exact chance that the first target comes before a Joker or enough courts to slay
(:func:`~coldiron_env.analysis.rack_odds`), ``destroyed`` the useful cards of other racks
expected on the way (each unseen non-target comes first with chance ``1 / (k + 1)``). It racks
with the best rack when time is short (need + ``rack_slack`` >= turns left, this one counted:
every turn must now bring a useful card) or when the score reaches ``rack_min_score``.

**Otherwise, draw more cards** (win chances climb steeply with the numbered cards
collected): apply the Iron, again within the turn, while the Hurt after it stays at most
``iron_limit`` (3: room for later racks' courts), and on the last turn while it cannot slay.
With Hurt at ``rest_at`` or more and time to spare (turns left > need + ``rest_margin``) it
Rests to buy room for the racks; otherwise it Threatens.

**Jokers.** A Joker's bonus after Threaten is always taken (three free draws). After the
Iron each court in the bonus hurts: it takes the bonus unless the chance of drawing enough
courts in three draws to slay exceeds ``bonus_max_risk`` (hypergeometric).

:class:`HeuristicParams` were tuned by hand, one at a time, on the first 10,000 deals of seed 0
(``scripts/evaluate.py --seed 0``); seed 1 is a held-out check.
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
from coldiron_env.options import MAX_HURT


@dataclass(frozen=True)
class HeuristicParams:
    """Tunable thresholds of :func:`decide` (each one's part: the module doc)."""

    iron_limit: int = 3
    rack_slack: int = 1
    rack_min_score: float = 0.8
    waste_weight: float = 0.5
    hurt_weight: float = 0.05
    bonus_max_risk: float = 0.05
    rest_at: int = 4
    rest_margin: int = 2


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
    return THREATEN if need >= IMPOSSIBLE else turn_choice(kn, need, useful, params)


class HeuristicAgent(KnowledgePlayer):
    """The hand-written player of :func:`decide` (any observation mode)."""

    name = "heuristic"

    def act_knowledge(self, kn: Knowledge) -> int:
        return decide(kn)
