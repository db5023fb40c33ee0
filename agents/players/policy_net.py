"""A trained policy network in NumPy, and rollouts it plays (batched across sampled orders).

The better the policy that plays the planner's rollouts, the better its estimates.
:class:`PolicyNet` is a trained MaskablePPO actor held as NumPy arrays, so players need neither
torch nor SB3 (:func:`agents.learning.sb3_agent.policy_net` reads it out of a model).
:class:`NetRoller` plays it in every sampled game at once: one observation batch (what the env would
show, never the sampled order), one matrix product per layer and one step of the batched rules core
per decision, with one BLAS thread (:mod:`agents.players.threads`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from agents.players.rollouts import BatchRoller, hopeless_games, tables
from agents.players.threads import one_blas_thread
from coldiron_env.actions import LEGAL_MASKS
from coldiron_env.batched import CODE_WON, PLAYING, SKIP, pack_rules, step_games
from coldiron_env.observation import encode_batch, flat_size

if TYPE_CHECKING:
    from coldiron_env.game import Games
    from coldiron_env.knowledge import Knowledge
    from coldiron_env.options import RuleOptions

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

ACTIVATIONS: Final[dict[str, Callable[[F32], F32]]] = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0.0),
}  # the hidden-layer activations a PolicyNet can run (the configs' names)


def mlp(obs: F32, weights: Sequence[F32], biases: Sequence[F32], activation: str) -> F32:
    """``W_k(... act(W_1 obs + b_1) ...) + b_k``: a trained MLP's output for a batch."""
    act = ACTIVATIONS[activation]
    for w, b in zip(weights[:-1], biases[:-1], strict=True):
        obs = act(obs @ w + b)
    return obs @ weights[-1] + biases[-1]


@dataclass(frozen=True)
class PolicyNet:
    """A trained policy's MLP: ``logits = W_k(... act(W_1 x + b_1) ...) + b_k``.

    Attributes:
        weights: one ``(inputs, outputs)`` float32 matrix per layer; the last gives the
            19 action scores.
        biases: one float32 vector per layer.
        activation: the hidden layers' activation (a key of :data:`ACTIVATIONS`).
        recall, counting: the flat observation the network was trained on.
        name: a label (the model's name).
    """

    weights: tuple[F32, ...]
    biases: tuple[F32, ...]
    activation: str
    recall: bool
    counting: bool
    name: str = "network"

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"{self.name}: activation {self.activation!r} is not one of {sorted(ACTIVATIONS)}"
            )
        if len(self.weights) != len(self.biases) or not self.weights:
            raise ValueError(f"{self.name}: need one bias per weight matrix, at least one layer")
        inputs = flat_size(self.recall, self.counting)
        if self.weights[0].shape[0] != inputs:
            raise ValueError(
                f"{self.name}: the first layer takes {self.weights[0].shape[0]} inputs, the "
                f"flat observation (recall={self.recall}, counting={self.counting}) has {inputs}"
            )
        if self.weights[-1].shape[1] != LEGAL_MASKS.shape[1]:
            raise ValueError(f"{self.name}: the last layer must give {LEGAL_MASKS.shape[1]} scores")

    def logits(self, obs: F32) -> F32:
        """Action scores of a batch of flat observations, shape (n, 19)."""
        return mlp(obs, self.weights, self.biases, self.activation)

    def act(self, obs: F32, phases: I64) -> I64:
        """The best-scoring legal action of each game (its phase gives the legal ones)."""
        scores = self.logits(obs)
        scores[~LEGAL_MASKS[phases]] = -np.inf
        best: I64 = scores.argmax(axis=1)
        return best

    def observe(self, games: Games, rules: RuleOptions, rows: I64 | None = None) -> F32:
        """The flat observations of the games ``rows`` of ``games`` (what the env shows)."""
        obs: F32 = encode_batch("flat", games, rules, self.recall, self.counting, rows)
        return obs

    def act_knowledge(self, kn: Knowledge) -> int:
        """The network's action for what a player knows (a batch of one)."""
        obs = kn.observation("flat", self.recall, self.counting)
        return int(self.act(obs, np.array([kn.phase]))[0])


def play_network(
    net: PolicyNet, first: I64, games: Games, rules: RuleOptions
) -> npt.NDArray[np.bool_]:
    """Game ``i`` (row ``i`` of ``games``) plays ``first[i]``, then the network to its end;
    which games were won. A game that can no longer be won stops there, lost."""
    n = first.shape[0]
    won = np.zeros(n, dtype=np.bool_)
    packed = pack_rules(rules)
    lookup = tables()
    actions = first.copy()
    live = np.ones(n, dtype=np.bool_)
    while True:
        step_games(actions, games, packed)
        ended = live & (games.outcome != PLAYING)
        won |= ended & (games.outcome == CODE_WON)
        live &= ~ended
        live &= ~hopeless_games(live, games, packed, lookup)
        index = np.flatnonzero(live)
        actions[:] = SKIP
        if index.size == 0:
            return won
        actions[index] = net.act(net.observe(games, rules, index), games.phase[index])


class NetRoller(BatchRoller):
    """The planner's rollouts played by a :class:`PolicyNet`."""

    def __init__(self, net: PolicyNet) -> None:
        self.net = net

    def play(self, first: I64, games: Games, kn: Knowledge) -> npt.NDArray[np.bool_]:
        with one_blas_thread():
            return play_network(self.net, first, games, kn.rules)
