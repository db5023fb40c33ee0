"""A two-step search (issue 19 point 2): the planner whose rollouts take one planned decision.

The planner (``search:`` in ``search_probes.py``) compares its candidates on sampled orders
of the unseen cards, each rollout playing the candidate and then the rollout player to the
end. Here each rollout, at the next decision it reaches, plays what an *inner* search would
choose there (the same planner over the same network, on its own fresh orders sampled from
what the player would know then), and only then the rollout player: an expectimax over the
next cards in which every next information state's decision is itself searched (a nested
rollout of depth 2). The inner search never sees the outer orders, so its choice is not
fitted to the orders it is scored on; its choice is memoised per information state for the
game (the same state reached again, from another candidate or a later decision, is not
searched twice).

    spec: lookahead:MODEL:ROLLOUTS:SAMPLES:FROM_TURN:inner=K[:NAME=VALUE...]

``MODEL``, ``ROLLOUTS``, ``SAMPLES`` (outer orders a decision), ``FROM_TURN`` and the
``PlannerConfig`` fields as in a ``search:`` spec (both searches take the fields);
``inner=K``: the inner search's orders a decision (it plans wherever the outer one's
rollouts lead).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from agents.players.planner import DEFAULT_SEED, PlannerAgent
from agents.players.policy_net import play_network
from agents.players.rollouts import Estimate, candidate_games, pack_params, play_out, tables
from agents.players.threads import one_blas_thread
from coldiron_env.batched import CODE_WON, PLAYING, pack_rules, step_games
from coldiron_env.game import Games
from coldiron_env.knowledge import Knowledge
from coldiron_env.options import RuleOptions

PREFIX: Final = "lookahead:"
INNER: Final = "inner"
INNER_SEED: Final = 0x5EED
"""Mixed into the agent's seed for the inner search's own orders."""

Leaf = Callable[[npt.NDArray[np.int64], Games, Knowledge], npt.NDArray[np.bool_]]
Key = tuple[int, int, int, int, int, int]


def rows_of(games: Games, rows: npt.NDArray[np.int64]) -> Games:
    """The games ``rows`` of ``games`` (copies)."""
    return Games._make(np.ascontiguousarray(field[rows]) for field in games)


class LookaheadRoller:
    """The planner's roller (``Roller``'s interface) whose rollouts take the inner search's
    choice at the next decision, then ``leaf`` (the rollout player) to the end."""

    compiled: Final = True

    def __init__(self, inner: PlannerAgent, leaf: Leaf) -> None:
        self.inner = inner
        self.leaf = leaf
        self.choices: dict[Key, int] = {}
        self.inner_searches = 0

    def clear(self) -> None:
        self.choices.clear()

    def estimate(
        self,
        kn: Knowledge,
        candidates: Sequence[int],
        rng: np.random.Generator,
        samples: int,
        estimate: Estimate | None = None,
    ) -> Estimate:
        """Every candidate on ``samples`` more orders (the same for each), as the planner's."""
        if estimate is None:
            estimate = Estimate.start(candidates)
        orders = kn.sample_order_array(rng, samples)
        first, games = candidate_games(kn, orders, candidates)
        step_games(first, games, pack_rules(kn.rules))
        won = games.outcome == CODE_WON
        live = np.flatnonzero(games.outcome == PLAYING)
        seen = games.hand | games.discarded
        second = np.empty(live.shape[0], dtype=np.int64)
        for j, i in enumerate(live.tolist()):
            key = (
                int(games.hand[i]),
                int(seen[i]),
                int(games.hurt[i]),
                int(games.turn[i]),
                int(games.phase[i]),
                int(games.iron_count[i]),
            )
            choice = self.choices.get(key)
            if choice is None:
                after = Knowledge(
                    hand=key[0],
                    seen=key[1],
                    hurt=key[2],
                    turn=key[3],
                    deck_count=int(games.deck.shape[1] - games.pos[i]),
                    phase=key[4],
                    iron_count=key[5],
                    rules=kn.rules,
                )
                choice = self.inner.choose(after)
                self.choices[key] = choice
                self.inner_searches += 1
            second[j] = choice
        if live.size:
            won[live] = self.leaf(second, rows_of(games, live), kn)
        estimate.add(won.reshape(samples, len(candidates)))
        return estimate


class LookaheadPlanner(PlannerAgent):
    """The planner with a :class:`LookaheadRoller`; the inner search is reset with it."""

    def __init__(self, outer: PlannerAgent, inner: PlannerAgent, leaf: Leaf, name: str) -> None:
        super().__init__(outer.config, name=name, base=outer.base)
        self.inner = inner
        self._roller = LookaheadRoller(inner, leaf)  # type: ignore[assignment]  # its interface
        self.reset()

    def set_rules(self, rules: RuleOptions) -> None:
        super().set_rules(rules)
        self.inner.set_rules(rules)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)  # the inner search draws apart from the outer one, seed or not
        self.inner.reset((DEFAULT_SEED if seed is None else seed) ^ INNER_SEED)


def leaf_of(inner: PlannerAgent) -> Leaf:
    """What the inner search's own rollouts play after its choice: the heuristic or its net."""
    net = inner.rollout_policy
    if net is None:
        packed = pack_params(inner.config.params)
        return lambda first, games, kn: play_out(
            first, games, pack_rules(kn.rules), tables(), packed
        )

    def network(first: npt.NDArray[np.int64], games: Games, kn: Knowledge) -> npt.NDArray[np.bool_]:
        with one_blas_thread():
            return play_network(net, first, games, kn.rules)

    return network


def make_lookahead(spec: str, make: Callable[[str], object]) -> LookaheadPlanner:
    """The agent ``spec`` names (the module doc); ``make`` builds ``search:`` specs."""
    parts = spec[len(PREFIX) :].split(":")
    inner_parts = [p for p in parts if p.partition("=")[0] == INNER]
    if len(inner_parts) != 1:
        raise ValueError(f"{spec!r}: expected one {INNER}=K")
    inner_samples = inner_parts[0].partition("=")[2]
    if not inner_samples.isdigit() or int(inner_samples) <= 0:
        raise ValueError(f"{spec!r}: {INNER}={inner_samples!r} is not a positive whole number")
    kept = [p for p in parts if p not in inner_parts]
    outer = make("search:" + ":".join(kept))
    model, rollouts, _, _, *extra = kept
    inner = make(":".join(["search", model, rollouts, inner_samples, "0", *extra]))
    if not isinstance(outer, PlannerAgent) or not isinstance(inner, PlannerAgent):
        raise ValueError(f"{spec!r}: not a search")
    return LookaheadPlanner(outer, inner, leaf_of(inner), spec)
