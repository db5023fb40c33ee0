"""Truncated rollouts with the network's value (issue 19 point 2).

The search over a network (``search:MODEL:network:...`` in ``search_probes.py``) scores each
candidate by rollouts the network plays to the end of the game. Here a rollout stops
``horizon`` network moves after the candidate and the position is scored by the network's
own value head (its critic, trained on the undiscounted win of the games it played: a win
chance, ``value_calibration.py`` measures how good a one). So that the planner's paired test
keeps its binary results, a stopped rollout counts as won when one uniform number drawn
for its sampled order (the same for every candidate: common random numbers) falls below
the value clipped to [0, 1]: the expected result is the value. A rollout that ends or can
no longer be won before the horizon counts as it ended.

    spec: truncated:MODEL:SAMPLES:FROM_TURN:horizon=H[:NAME=VALUE...]

``MODEL``, ``SAMPLES``, ``FROM_TURN`` and the ``PlannerConfig`` fields as in a ``search:``
spec whose rollouts the network plays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from agents.players.planner import PlannerAgent
from agents.players.policy_net import PolicyNet, mlp
from agents.players.rollouts import Estimate, candidate_games, hopeless_games, tables
from agents.players.threads import one_blas_thread
from coldiron_env.batched import CODE_WON, PLAYING, SKIP, pack_rules, step_games
from coldiron_env.knowledge import Knowledge

PREFIX: Final = "truncated:"
HORIZON: Final = "horizon"

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ValueNet:
    """A trained actor-critic's value MLP in NumPy (as ``PolicyNet`` holds its actor)."""

    weights: tuple[F32, ...]
    biases: tuple[F32, ...]
    activation: str

    def __call__(self, obs: F32) -> npt.NDArray[np.float64]:
        return mlp(obs, self.weights, self.biases, self.activation)[:, 0].astype(np.float64)


def value_net(agent: Any, actor: PolicyNet) -> ValueNet:
    """The value MLP of ``agent`` (an ``SB3Agent`` whose actor is ``actor``)."""
    import torch as th

    policy = agent.model.policy
    layers = [m for m in policy.mlp_extractor.value_net if isinstance(m, th.nn.Linear)]
    layers.append(policy.value_net)
    return ValueNet(
        tuple(np.ascontiguousarray(m.weight.detach().numpy().T) for m in layers),
        tuple(np.ascontiguousarray(m.bias.detach().numpy()) for m in layers),
        actor.activation,
    )


class TruncatedRoller:
    """The planner's roller (``Roller``'s interface): the candidate, ``horizon`` network
    moves, then the value (see the module doc)."""

    compiled: Final = True

    def __init__(self, net: PolicyNet, value: Callable[[F32], Any], horizon: int) -> None:
        if horizon < 0:
            raise ValueError(f"horizon must be 0 or more, got {horizon}")
        self.net = net
        self.value = value
        self.horizon = horizon
        self.valued = 0
        """Rollouts scored by the value so far (the others ended before the horizon)."""

    def clear(self) -> None:
        """Nothing is cached between decisions."""

    def estimate(
        self,
        kn: Knowledge,
        candidates: Sequence[int],
        rng: np.random.Generator,
        samples: int,
        estimate: Estimate | None = None,
    ) -> Estimate:
        """Every candidate on ``samples`` more orders (the same for each)."""
        if estimate is None:
            estimate = Estimate.start(candidates)
        orders = kn.sample_order_array(rng, samples)
        chance = np.repeat(rng.random(samples), len(candidates))  # one per order
        actions, games = candidate_games(kn, orders, candidates)
        net, rules = self.net, kn.rules
        packed, lookup = pack_rules(rules), tables()
        won = np.zeros(actions.shape[0], dtype=np.bool_)
        live = np.ones(actions.shape[0], dtype=np.bool_)
        with one_blas_thread():
            for move in range(self.horizon + 1):
                step_games(actions, games, packed)
                ended = live & (games.outcome != PLAYING)
                won |= ended & (games.outcome == CODE_WON)
                live &= ~ended
                live &= ~hopeless_games(live, games, packed, lookup)
                index = np.flatnonzero(live)
                actions[:] = SKIP
                if index.size == 0 or move == self.horizon:
                    break
                actions[index] = net.act(net.observe(games, rules, index), games.phase[index])
            index = np.flatnonzero(live)
            if index.size:
                values = np.clip(self.value(net.observe(games, rules, index)), 0.0, 1.0)
                won[index] = chance[index] < values
                self.valued += index.size
        estimate.add(won.reshape(samples, len(candidates)))
        return estimate


def make_truncated(spec: str, make: Callable[[str], object]) -> PlannerAgent:
    """The agent ``spec`` names (the module doc); ``make`` builds ``search:`` specs."""
    from agents.registry import make_agent

    parts = spec[len(PREFIX) :].split(":")
    horizons = [p for p in parts if p.partition("=")[0] == HORIZON]
    if len(horizons) != 1 or len(parts) < len(("MODEL", "SAMPLES", "FROM_TURN")) + 1:
        raise ValueError(f"{spec!r}: expected truncated:MODEL:SAMPLES:FROM_TURN:{HORIZON}=H")
    horizon = horizons[0].partition("=")[2]
    if not horizon.isdigit():
        raise ValueError(f"{spec!r}: {HORIZON}={horizon!r} is not a whole number of moves")
    kept = [p for p in parts if p not in horizons]
    if not (kept[1].isdigit() and kept[2].isdigit()):  # a search: spec's ROLLOUTS in its place
        raise ValueError(f"{spec!r}: expected truncated:MODEL:SAMPLES:FROM_TURN:{HORIZON}=H")
    planner = make(":".join(["search", kept[0], "network", *kept[1:]]))
    if not isinstance(planner, PlannerAgent) or planner.rollout_policy is None:
        raise ValueError(f"{spec!r}: not a search over a network")
    value = value_net(make_agent(kept[0]), planner.rollout_policy)
    planner._roller = TruncatedRoller(planner.rollout_policy, value, int(horizon))  # type: ignore[assignment]
    planner.name = spec
    return planner
