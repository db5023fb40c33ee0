"""Behaviour-cloning warm start: imitate a teacher agent before RL.

Why: on the sparse win/lose reward an untrained policy racks into Jokers and never sees a
win, so RL has nothing to learn from (issue 3). Cloning a hand-written player first starts
RL from a policy that already wins a few percent of deals, where the reward carries signal.

:func:`warm_start`: the teacher plays seeded deals (:func:`collect_demonstrations`: every
decision with its episode's discounted Monte-Carlo return), then :func:`behaviour_clone`
trains the SB3 network towards its actions. Actor-critic algorithms: cross-entropy on the
logits, masked for MaskablePPO (which plays masked), unmasked for the others (which must
also learn to avoid illegal actions); with ``value_pretrain`` the value head is regressed
on the returns at the same time, so RL's first advantages are not noise that undoes the
clone; RecurrentPPO is trained on whole episodes through its LSTM. DQN and QR-DQN: a
large-margin loss (the teacher's action above every other legal one by :data:`Q_MARGIN`)
plus regression of its Q on the return; the target network is synchronised afterwards.
"""

from __future__ import annotations

import functools
import io
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import torch as th
import torch.nn.functional as F

from agents.atomic import atomic_write_bytes
from agents.evaluation.lockstep import (
    BatchPolicy,
    Episode,
    Move,
    Seat,
    play_lockstep,
    stack_observations,
)
from agents.learning.algorithms import algorithm_of
from agents.learning.sb3_agent import MaskedPolicy, q_values, zero_lstm_states
from agents.players.base import Agent
from agents.players.roster import make_player
from coldiron_env.dealer import DealStream, stream_seed
from coldiron_env.game import WON

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

    from agents.learning.config import Config

Q_MARGIN: Final = 0.05  # DQfD-style margin between the teacher's Q and any other legal action
MASKED_LOGIT: Final = -1e8  # logit given to illegal actions in the masked cross-entropy
VALUE_LOSS_WEIGHT: Final = 0.5
DAGGER_BATCH: Final = 256
CHUNK: Final = 250  # teacher deals played between two looks at the clock (a time budget)
"""Games the student plays in lockstep while DAgger's teachers label them."""
FORWARD_CHUNK: Final = 4096  # decisions per forward pass outside training (accuracy, logits)
OBS_PREFIX: Final = "obs/"
"""Prefix of the observation arrays' names in a saved :class:`Demonstrations` file."""
SAVED_ARRAYS: Final = ("masks", "actions", "returns", "episode", "targets")
"""The other arrays of a saved :class:`Demonstrations` file (``targets`` if any)."""


def _quiet(_message: str) -> None:
    """The default ``log``: progress lines are dropped."""


@dataclass
class Demonstrations:
    """Teacher decisions: ``obs`` (array or dict of arrays, n rows), masks, actions, returns;
    ``episode``: each row's episode (an episode's rows consecutive, in order). ``targets``:
    soft labels (a probability row a decision) cloned on instead of ``actions``, which stay
    the teacher's choices (for the agreement figures)."""

    obs: Any
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    episode: np.ndarray
    episodes: int
    wins: int
    targets: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.actions)

    def soft_targets(self) -> np.ndarray:
        """``targets``, or the actions one-hot when there are none."""
        if self.targets is not None:
            return self.targets
        one_hot = np.zeros(self.masks.shape, dtype=np.float32)
        one_hot[np.arange(len(self)), self.actions] = 1.0
        return one_hot

    def save(self, path: Path) -> None:
        """Write to ``path`` (compressed ``.npz``, atomically); :meth:`load` reads it back."""
        obs = self.obs if isinstance(self.obs, dict) else {"": self.obs}
        arrays = {f"{OBS_PREFIX}{k}": v for k, v in obs.items()}
        arrays |= {k: getattr(self, k) for k in SAVED_ARRAYS if getattr(self, k) is not None}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, counts=np.asarray([self.episodes, self.wins]), **arrays)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, buffer.getvalue())

    @classmethod
    def load(cls, path: Path) -> Demonstrations:
        """What :meth:`save` wrote to ``path``."""
        with np.load(path) as data:
            obs = {k[len(OBS_PREFIX) :]: data[k] for k in data.files if k.startswith(OBS_PREFIX)}
            arrays = {k: data[k] for k in SAVED_ARRAYS if k in data.files}
            episodes, wins = (int(x) for x in data["counts"])
        return cls(
            obs.get("") if list(obs) == [""] else obs, **arrays, episodes=episodes, wins=wins
        )


def collect_demonstrations(
    teacher: Agent, env_kwargs: dict[str, Any], episodes: int, seed: int, gamma: float = 0.99
) -> Demonstrations:
    """The teacher plays deals ``seed .. seed + episodes - 1``; every decision is kept."""

    def seat(game: int) -> Agent:
        teacher.reset(seed + game)
        return teacher

    return Played.play(seat, env_kwargs, episodes, seed, batch=1).demonstrations(gamma)


class Played:
    """The moves of the games of a :func:`play_lockstep` call, game by game (its ``on_move``
    hook), and how the games ended."""

    def __init__(self, episodes: int) -> None:
        self.moves: list[list[Move]] = [[] for _ in range(episodes)]
        self.ended: list[Episode] = []

    def __call__(self, move: Move) -> None:
        self.moves[move.game].append(move)

    @classmethod
    def play(
        cls, players: BatchPolicy | Seat, env_kwargs: dict[str, Any], episodes: int, seed: int,
        batch: int,
    ) -> Played:  # fmt: skip
        """``players`` play deals ``seed .. seed + episodes - 1``, ``batch`` at a time."""
        played = cls(episodes)
        resets = [{"seed": seed + ep} for ep in range(episodes)]
        played.ended = play_lockstep(players, env_kwargs, resets, batch, on_move=played)
        return played

    def demonstrations(
        self, gamma: float, labels: Sequence[int] | None = None, targets: np.ndarray | None = None
    ) -> Demonstrations:
        """Every move as a row, game by game, labelled with the action played or with
        ``labels`` (one per move, in that order; ``targets``: soft labels, a row each), with
        its ``gamma``-discounted Monte-Carlo return."""
        returns: list[float] = []
        for trace in self.moves:
            g, ep_returns = 0.0, []
            for move in reversed(trace):
                g = move.reward + gamma * g
                ep_returns.append(g)
            returns.extend(reversed(ep_returns))
        rows = [(ep, move) for ep, trace in enumerate(self.moves) for move in trace]
        actions = [move.action for _, move in rows] if labels is None else labels
        return Demonstrations(
            obs=stack_observations([move.obs for _, move in rows]),
            masks=np.stack([move.info["action_mask"].astype(bool) for _, move in rows]),
            actions=np.asarray(actions, dtype=np.int64),
            returns=np.asarray(returns, dtype=np.float32),
            episode=np.asarray([ep for ep, _ in rows], dtype=np.int64),
            episodes=len(self.ended),
            wins=sum(e.outcome == WON for e in self.ended),
            targets=targets,
        )


def concat(parts: list[Demonstrations]) -> Demonstrations:
    """One dataset of several (episode indices renumbered)."""
    first = parts[0]
    if isinstance(first.obs, dict):
        obs: Any = {k: np.concatenate([p.obs[k] for p in parts]) for k in first.obs}
    else:
        obs = np.concatenate([p.obs for p in parts])
    offsets = np.cumsum([0] + [p.episodes for p in parts[:-1]])
    return Demonstrations(
        obs=obs,
        masks=np.concatenate([p.masks for p in parts]),
        actions=np.concatenate([p.actions for p in parts]),
        returns=np.concatenate([p.returns for p in parts]),
        episode=np.concatenate([p.episode + off for p, off in zip(parts, offsets, strict=True)]),
        episodes=sum(p.episodes for p in parts),
        wins=sum(p.wins for p in parts),
        targets=(
            np.concatenate([p.soft_targets() for p in parts])
            if any(p.targets is not None for p in parts)
            else None
        ),
    )


def collect_dagger(
    model: BaseAlgorithm,
    teacher_factory: Callable[[Sequence[Move]], Agent],
    env_kwargs: dict[str, Any],
    episodes: int,
    seed: int,
    gamma: float = 0.99,
    batch: int = DAGGER_BATCH,
    soft_label: Callable[[int, int], np.ndarray] | None = None,
) -> Demonstrations:
    """DAgger (Ross et al., 2011): the *student* plays, the teacher labels every state.

    Cloning alone trains on the teacher's states only; the student's small errors lead it
    where it was never taught. Here the student's play chooses the moves, then a teacher per
    game, fed its every observation and ``info`` in order (so its memory is right), says
    what it would have done at each; ``teacher_factory`` is given the game's moves. Returns
    are the student's. ``soft_label(choice, actions)``, asked after each of the teacher's
    choices, gives that decision's soft label.
    """
    played = Played.play(MaskedPolicy(model), env_kwargs, episodes, seed, batch)
    labels: list[int] = []
    rows: list[np.ndarray] = []
    for game, moves in enumerate(played.moves):
        teacher = teacher_factory(moves)
        teacher.reset(seed + game)
        for move in moves:
            mask = move.info["action_mask"]
            labels.append(int(teacher.act(move.obs, mask, move.info)))
            if soft_label is not None:
                rows.append(soft_label(labels[-1], len(mask)))
    return played.demonstrations(gamma, labels, np.stack(rows) if soft_label else None)


def _rows(obs: Any, idx: np.ndarray) -> Any:
    return {k: v[idx] for k, v in obs.items()} if isinstance(obs, dict) else obs[idx]


def _masked(scores: th.Tensor, masks: th.Tensor) -> th.Tensor:
    return th.where(masks, scores, th.full_like(scores, MASKED_LOGIT))


class _Cloner:
    """Forward passes of one model's network for the cloning losses."""

    def __init__(self, model: BaseAlgorithm) -> None:
        self.spec = algorithm_of(model)
        self.policy: Any = model.policy

    def scores_values(self, obs: Any) -> tuple[th.Tensor, th.Tensor | None]:
        """(logits or Q-values (n, 19), values (n,) or None) for flat rows."""
        obs_t, _ = self.policy.obs_to_tensor(obs)
        if self.spec.family == "q_value":
            return q_values(self.policy, obs_t), None
        dist = self.policy.get_distribution(obs_t)
        return dist.distribution.logits, self.policy.predict_values(obs_t).flatten()


def accuracy(model: BaseAlgorithm, demos: Demonstrations) -> float:
    """The share of ``demos``' decisions on which ``model`` (masked, deterministic) takes
    the labelled action."""
    policy, hits = MaskedPolicy(model), 0
    if policy.spec.recurrent:
        for ep in range(demos.episodes):
            idx = np.flatnonzero(demos.episode == ep)
            policy.reset_states()
            for j, row in enumerate(idx):
                a = policy.act(
                    _rows(demos.obs, np.array([row])), demos.masks[row][None], np.array([j == 0])
                )
                hits += int(a[0] == demos.actions[row])
        return hits / len(demos)
    for start in range(0, len(demos), FORWARD_CHUNK):
        idx = np.arange(start, min(start + FORWARD_CHUNK, len(demos)))
        a = policy.act(_rows(demos.obs, idx), demos.masks[idx])
        hits += int((a == demos.actions[idx]).sum())
    return hits / len(demos)


def behaviour_clone(
    model: BaseAlgorithm,
    demos: Demonstrations,
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    value_pretrain: bool = True,
    seed: int = 0,
    log: Callable[[str], None] = _quiet,
    stop: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """Train ``model``'s network to imitate ``demos``; returns accuracy and loss figures.
    Soft labels (``demos.targets``) need a flat actor-critic network. ``stop()``: after an epoch."""
    cloner = _Cloner(model)
    if demos.targets is not None and (cloner.spec.recurrent or cloner.spec.family == "q_value"):
        raise ValueError("soft labels are for flat actor-critic networks")
    optimizer = th.optim.Adam(model.policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)
    accuracy_before = accuracy(model, demos)
    epoch = _recurrent_epoch if cloner.spec.recurrent else _flat_epoch
    losses: list[float] = []
    model.policy.set_training_mode(True)
    for done in range(1, epochs + 1):
        losses.append(epoch(cloner, demos, optimizer, batch_size, rng, value_pretrain))
        log(f"  imitation epoch {done}/{epochs}: loss {losses[-1]:.4f}")
        if stop():
            break
    model.policy.set_training_mode(False)
    if cloner.spec.family == "q_value":
        target: Any = model.policy
        if hasattr(target, "quantile_net_target"):
            target.quantile_net_target.load_state_dict(target.quantile_net.state_dict())
        else:
            target.q_net_target.load_state_dict(target.q_net.state_dict())
    return {
        "samples": len(demos),
        "accuracy_before": accuracy_before,
        "accuracy_after": accuracy(model, demos),
        "epoch_losses": losses,
    }


def _descend(optimizer: th.optim.Optimizer, loss: th.Tensor) -> float:
    """One gradient step on ``loss``; returns its value."""
    optimizer.zero_grad()
    loss.backward()  # type: ignore[no-untyped-call]
    optimizer.step()
    return float(loss.detach())


def _flat_epoch(
    cloner: _Cloner,
    demos: Demonstrations,
    optimizer: th.optim.Optimizer,
    batch_size: int,
    rng: np.random.Generator,
    value_pretrain: bool,
) -> float:
    """One pass over ``demos`` in shuffled batches; returns the mean loss."""
    device = cloner.policy.device
    order = rng.permutation(len(demos))
    losses: list[float] = []
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        masks = th.as_tensor(demos.masks[idx], device=device)
        actions = th.as_tensor(demos.actions[idx], device=device)
        returns = th.as_tensor(demos.returns[idx], device=device)
        scores, values = cloner.scores_values(_rows(demos.obs, idx))
        if values is None:  # a Q-network
            q_teacher = scores.gather(1, actions[:, None]).squeeze(1)
            margins = th.full_like(scores, Q_MARGIN).scatter(1, actions[:, None], 0.0)
            best_other = _masked(scores + margins, masks).max(dim=1).values
            loss = (best_other - q_teacher).mean()
            if value_pretrain:
                loss = loss + F.mse_loss(q_teacher, returns)
        else:
            logits = _masked(scores, masks) if cloner.spec.supports_masks else scores
            wanted: th.Tensor = (
                actions
                if demos.targets is None
                else th.as_tensor(demos.targets[idx], device=device, dtype=logits.dtype)
            )
            loss = F.cross_entropy(logits, wanted)
            if value_pretrain:
                loss = loss + VALUE_LOSS_WEIGHT * F.mse_loss(values, returns)
        losses.append(_descend(optimizer, loss))
    return sum(losses) / max(len(losses), 1)


def _recurrent_epoch(
    cloner: _Cloner,
    demos: Demonstrations,
    optimizer: th.optim.Optimizer,
    batch_size: int,
    rng: np.random.Generator,
    value_pretrain: bool,
) -> float:
    """Whole episodes through the LSTM: pad to the longest, seq-major rows, mask the padding."""
    policy = cloner.policy
    device = policy.device
    bounds = np.flatnonzero(np.diff(demos.episode, prepend=-1, append=-2))
    starts, lengths = bounds[:-1], np.diff(bounds)
    episodes_per_batch = max(batch_size // max(int(lengths.mean()), 1), 1)
    order = rng.permutation(len(starts))
    losses: list[float] = []
    for b in range(0, len(order), episodes_per_batch):
        eps = order[b : b + episodes_per_batch]
        steps = np.arange(int(lengths[eps].max()))
        valid = steps < lengths[eps][:, None]
        flat_rows = np.where(valid, starts[eps][:, None] + steps, 0).reshape(-1)
        obs_t, _ = policy.obs_to_tensor(_rows(demos.obs, flat_rows))
        states = zero_lstm_states(policy, len(eps))
        no_starts = th.zeros(len(flat_rows), device=device)
        dist, _ = policy.get_distribution(obs_t, states, no_starts)
        valid_t = th.as_tensor(valid.reshape(-1), device=device)
        actions = th.as_tensor(demos.actions[flat_rows], device=device)
        loss = F.cross_entropy(dist.distribution.logits[valid_t], actions[valid_t])
        if value_pretrain:
            values = policy.predict_values(obs_t, states, no_starts).flatten()
            returns = th.as_tensor(demos.returns[flat_rows], device=device)
            loss = loss + VALUE_LOSS_WEIGHT * F.mse_loss(values[valid_t], returns[valid_t])
        losses.append(_descend(optimizer, loss))
    return sum(losses) / max(len(losses), 1)


def warm_start(
    model: BaseAlgorithm,
    cfg: Config,
    teacher_factory: Callable[[str], Agent] | None = None,
    log: Callable[[str], None] = _quiet,
    deadline: float = math.inf,
) -> dict[str, Any]:
    """Collect ``cfg.imitation`` teacher episodes and clone them into ``model``; to end by a
    ``deadline`` (a time budget), fewer deals (half the time), epochs and DAgger deals."""
    im = cfg.imitation
    factory = teacher_factory or make_player  # a built-in player by name by default
    teacher = factory(im.teacher)
    t0 = time.perf_counter()
    gamma = cfg.gamma
    win, lose = cfg.env.win_reward, cfg.env.loss_reward
    upto = "up to " if deadline < math.inf else ""  # a time budget may play fewer
    log(f"imitation: {im.teacher!r} plays {upto}{im.episodes} deals (win {win}, loss {lose})")
    first, parts = stream_seed(DealStream.IMITATION, im.seed), []
    until = t0 + (deadline - t0) / 2
    for n in range(0, im.episodes, CHUNK):  # a look at the clock between chunks
        parts.append(collect_demonstrations(teacher, cfg.env_kwargs(), min(CHUNK, im.episodes - n),
                                            first + n, gamma))  # fmt: skip
        if time.perf_counter() + (time.perf_counter() - t0) / len(parts) > until:
            break
    demos, t1 = concat(parts), time.perf_counter()
    clone = functools.partial(behaviour_clone, model, batch_size=im.batch_size,
                              learning_rate=im.learning_rate, value_pretrain=im.value_pretrain,
                              stop=lambda: time.perf_counter() > deadline)  # fmt: skip
    stats = clone(demos, epochs=im.epochs, seed=cfg.seed, log=log)
    stats.update(
        teacher=im.teacher,
        episodes=demos.episodes,
        teacher_wins=demos.wins,
        teacher_win_rate=demos.wins / demos.episodes,
        collect_seconds=round(t1 - t0, 2),
        clone_seconds=round(time.perf_counter() - t1, 2),
    )
    log(
        f"imitation: {len(demos)} decisions, teacher won {demos.wins}/{demos.episodes}; "
        f"accuracy {stats['accuracy_before']:.3f} -> {stats['accuracy_after']:.3f}"
    )
    rounds, dagger = [], -(-im.dagger_episodes * demos.episodes // im.episodes)  # scaled
    for r in range(im.dagger_rounds):
        if (t2 := time.perf_counter()) > deadline:
            break
        extra = collect_dagger(
            model, lambda _: factory(im.teacher), cfg.env_kwargs(), dagger,
            first + im.episodes + r * im.dagger_episodes, gamma,
        )  # fmt: skip
        demos = concat([demos, extra])
        round_stats = clone(demos, epochs=im.dagger_epochs, seed=cfg.seed + r + 1)
        round_stats.update(
            student_win_rate=extra.wins / extra.episodes, seconds=round(time.perf_counter() - t2, 2)
        )
        rounds.append(round_stats)
        log(
            f"dagger round {r + 1}/{im.dagger_rounds}: student won "
            f"{extra.wins}/{extra.episodes}; {len(demos)} decisions, "
            f"accuracy {round_stats['accuracy_after']:.3f}"
        )
    stats["dagger_rounds"] = rounds
    return stats
