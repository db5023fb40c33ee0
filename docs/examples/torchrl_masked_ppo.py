"""Masked PPO on Cold Iron with TorchRL, top to bottom (a CleanRL-style recipe).

Run it::

    .venv/bin/pip install -e ".[torchrl]"
    .venv/bin/python docs/examples/torchrl_masked_ppo.py --frames 20000

What it shows, in order:

1. **The env.** ``GymEnv("coldiron/ColdIron-v0", mask_in_observation=True)``: the
   observation is a ``Dict`` whose two keys become two tensordict entries,
   ``"observations"`` (float32) and ``"action_mask"`` (int8, 1 = legal). TorchRL's
   masked pieces want a *bool* mask (``MaskedCategorical`` rejects an int8 one), so a
   ``DTypeCastTransform`` casts it, then the ``ActionMask`` transform copies each step's
   mask into the action spec. The env raises on an illegal action
   (``illegal_action="raise"``): nothing below can quietly step outside the mask.
2. **Masked random rollouts.** ``env.rollout(n)`` without a policy samples from the
   action spec, which ``ActionMask`` keeps masked: every action is legal. Remove the
   transform and the first illegal action raises ``IllegalActionError``.
3. **A masked policy.** ``ProbabilisticActor`` with ``MaskedCategorical``, fed the
   network's ``logits`` and the env's ``action_mask``: illegal actions get probability 0.
4. **PPO.** A collector (``Collector``; ``SyncDataCollector`` before torchrl 0.14)
   collects ``--frames-per-batch`` steps at a time; ``GAE`` computes advantages;
   ``ClipPPOLoss`` (with the same masked actor) is minimised over ``--epochs`` passes
   of minibatches.
5. **Validation.** With ``--eval-episodes N`` the greedy masked policy plays N
   validation deals (``agents.evaluation.arena.evaluate(..., validation=True)``: held
   apart from the report seed's deals); ``--json FILE`` writes the run's record.

Deals: the training env is seeded from the training stream
(``coldiron_env.dealer.stream_seed(DealStream.TRAINING, seed)``), never from an
evaluation seed. Rewards are the env's defaults (1 for a win, 0 otherwise), so PPO
learns from sparse wins: this is a recipe for the TorchRL plumbing, not the project's
strongest player (``configs/maskable_ppo.yaml`` is).
"""

from __future__ import annotations

import argparse
import copy
import inspect
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import gymnasium as gym
import numpy as np
import tensordict
import torch
import torchrl
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.envs import ActionMask, Compose, DTypeCastTransform, GymEnv, Transform, TransformedEnv
from torchrl.modules import MLP, MaskedCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

try:  # torchrl >= 0.14 calls the single-process collector ``Collector``
    from torchrl.collectors import Collector
except ImportError:  # earlier releases: ``SyncDataCollector``
    from torchrl.collectors import SyncDataCollector as Collector

import coldiron_env  # registers coldiron/ColdIron-v0
from agents.atomic import atomic_save, atomic_write_json
from agents.evaluation.arena import evaluate
from agents.gitinfo import git_commit, git_dirty, utc_now
from agents.players.base import Agent
from coldiron_env.actions import NUM_ACTIONS
from coldiron_env.cards import NUM_SUITS
from coldiron_env.dealer import DealStream, stream_seed
from coldiron_env.observation import ACTION_MASK_KEY, OBSERVATIONS_KEY

ENV_ID: Final = "coldiron/ColdIron-v0"
ACTION_KEY: Final = "action"
LOGITS_KEY: Final = "logits"
DONE_KEY: Final = ("next", "done")
REWARD_KEY: Final = ("next", "reward")
LOSS_KEYS: Final = ("loss_objective", "loss_critic", "loss_entropy")
DEFAULT_VALIDATION_SEED: Final = 0
"""Validation deals of this seed (``arena.validation_decks``) unless ``--eval-seed``."""


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class PPOConfig:
    """Every knob of the recipe (the command line's flags)."""

    frames: int = 20_000
    """Env steps collected in all."""
    frames_per_batch: int = 2_048
    """Env steps per collection; each batch is one PPO update of ``epochs`` passes."""
    epochs: int = 4
    minibatch_size: int = 256
    learning_rate: float = 3e-4
    gamma: float = 1.0
    """Cold Iron is episodic and short (at most 74 decisions): no discount."""
    lmbda: float = 0.95
    clip_epsilon: float = 0.2
    entropy_coeff: float = 0.01
    critic_coeff: float = 0.5
    max_grad_norm: float = 0.5
    hidden: tuple[int, ...] = (128, 128)
    counting: bool = True
    """Observe what a card counter computes (the env's ``counting=True``)."""
    train_suits: int = NUM_SUITS
    """Suits the *training* env's phrase needs (its ``suits_required``): fewer is an easier
    game that random play sometimes wins (1 suit: about 0.5% of games). Validation always
    plays the real game (4 suits)."""
    seed: int = 0
    """Seeds torch and the training deals (``DealStream.TRAINING``)."""

    def __post_init__(self) -> None:
        positive = ("frames", "frames_per_batch", "epochs", "minibatch_size")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.frames < self.frames_per_batch:
            raise ValueError(
                f"frames ({self.frames}) must be at least frames_per_batch "
                f"({self.frames_per_batch}): no batch would be collected"
            )
        if self.minibatch_size > self.frames_per_batch:
            raise ValueError(
                f"minibatch_size ({self.minibatch_size}) exceeds frames_per_batch "
                f"({self.frames_per_batch})"
            )
        for name in ("learning_rate", "clip_epsilon", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        for name in ("gamma", "lmbda"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")
        if not 1 <= self.train_suits <= NUM_SUITS:
            raise ValueError(f"train_suits must be in 1..{NUM_SUITS}, got {self.train_suits!r}")
        if not self.hidden or any(width <= 0 for width in self.hidden):
            raise ValueError(f"hidden must be one or more positive widths, got {self.hidden!r}")


# --------------------------------------------------------------------------- 1. the env
def env_kwargs(counting: bool) -> dict[str, Any]:
    """The Cold Iron options of the recipe's env (besides the mask in the observation)."""
    return {"counting": counting}


def make_env(
    seed: int = 0,
    *,
    counting: bool = True,
    action_mask: bool = True,
    suits_required: int = NUM_SUITS,
) -> TransformedEnv:
    """Cold Iron as a TorchRL env: integer actions, the mask in the observation cast to
    bool, and (``action_mask=True``) the ``ActionMask`` transform that masks the action
    spec, so that random actions (``env.rollout`` without a policy) are legal."""
    base = GymEnv(
        ENV_ID,
        categorical_action_encoding=True,  # actions are integers 0..18, not one-hot
        mask_in_observation=True,
        illegal_action="raise",  # an unmasked action fails loudly
        suits_required=suits_required,  # 4: the real game
        **env_kwargs(counting),
    )
    transforms: list[Transform] = [
        DTypeCastTransform(torch.int8, torch.bool, in_keys=[ACTION_MASK_KEY]),
    ]
    if action_mask:
        transforms.append(ActionMask(action_key=ACTION_KEY, mask_key=ACTION_MASK_KEY))
    env = TransformedEnv(base, Compose(*transforms))
    env.set_seed(stream_seed(DealStream.TRAINING, seed))
    return env


# --------------------------------------------------------------------------- 2. random rollouts
def random_rollout(env: TransformedEnv, steps: int) -> TensorDictBase:
    """``steps`` random steps (episodes restart when they end): sampled from the action
    spec, which the ``ActionMask`` transform keeps masked."""
    return env.rollout(steps, break_when_any_done=False)


def illegal_actions(batch: TensorDictBase) -> int:
    """How many steps of ``batch`` took an action outside the mask observed with it."""
    mask = batch.get(ACTION_MASK_KEY).bool()
    action = batch.get(ACTION_KEY).long()
    legal = mask.gather(-1, action.unsqueeze(-1)).squeeze(-1)
    return int((~legal).sum())


# --------------------------------------------------------------------------- 3. the policy
def make_modules(
    env: TransformedEnv, hidden: Sequence[int]
) -> tuple[ProbabilisticActor, ValueOperator]:
    """A masked categorical actor and a value network, both MLPs over ``observations``."""
    obs_size = env.observation_spec[OBSERVATIONS_KEY].shape[-1]
    logits_net = MLP(
        in_features=obs_size,
        out_features=NUM_ACTIONS,
        num_cells=list(hidden),
        activation_class=nn.Tanh,
    )
    actor = ProbabilisticActor(
        TensorDictModule(logits_net, in_keys=[OBSERVATIONS_KEY], out_keys=[LOGITS_KEY]),
        in_keys={"logits": LOGITS_KEY, "mask": ACTION_MASK_KEY},  # MaskedCategorical's kwargs
        out_keys=[ACTION_KEY],
        distribution_class=MaskedCategorical,
        spec=env.action_spec,
        return_log_prob=True,  # PPO's importance ratio needs the behaviour log-probability
    )
    value_net = MLP(
        in_features=obs_size, out_features=1, num_cells=list(hidden), activation_class=nn.Tanh
    )
    critic = ValueOperator(value_net, in_keys=[OBSERVATIONS_KEY])
    return actor, critic


# --------------------------------------------------------------------------- 4. PPO
@dataclass
class BatchStats:
    """What one collected batch and its update did."""

    frames: int
    episodes: int
    wins: int
    illegal: int
    losses: dict[str, float]
    seconds: float


@dataclass
class TrainLog:
    batches: list[BatchStats] = field(default_factory=list)

    @property
    def frames(self) -> int:
        return sum(b.frames for b in self.batches)

    @property
    def episodes(self) -> int:
        return sum(b.episodes for b in self.batches)

    @property
    def illegal(self) -> int:
        return sum(b.illegal for b in self.batches)


def _quiet_collector_kwargs() -> dict[str, Any]:
    """torchrl 0.14 warns that a policy without memory lacks an ``InitTracker`` transform
    (it needs none); opting out of the v0.15 behaviour silences it. Older releases lack
    the argument."""
    flag = "auto_register_policy_transforms"
    return {flag: False} if flag in inspect.signature(Collector.__init__).parameters else {}


BatchCallback = Callable[[TensorDictBase, BatchStats], None]
"""``callback(batch, stats)`` after each collected batch has been learned from."""


def train(
    env: TransformedEnv,
    actor: ProbabilisticActor,
    critic: ValueOperator,
    config: PPOConfig,
    on_batch: BatchCallback | None = None,
    log: Callable[[str], None] | None = print,
) -> TrainLog:
    """Collect ``config.frames`` steps with the masked ``actor`` and update it (and
    ``critic``) with clipped PPO after every ``config.frames_per_batch`` steps."""
    collector = Collector(
        env,
        actor,
        frames_per_batch=config.frames_per_batch,
        total_frames=config.frames,
        split_trajs=False,
        **_quiet_collector_kwargs(),
    )
    advantage = GAE(gamma=config.gamma, lmbda=config.lmbda, value_network=critic, average_gae=True)
    loss_module = ClipPPOLoss(
        actor_network=actor,
        critic_network=critic,
        clip_epsilon=config.clip_epsilon,
        entropy_bonus=config.entropy_coeff > 0,
        entropy_coeff=config.entropy_coeff,
        critic_coeff=config.critic_coeff,
        loss_critic_type="smooth_l1",
    )
    optimizer = torch.optim.Adam(loss_module.parameters(), lr=config.learning_rate)
    buffer = ReplayBuffer(
        storage=LazyTensorStorage(config.frames_per_batch),
        sampler=SamplerWithoutReplacement(),
        batch_size=config.minibatch_size,
    )
    result = TrainLog()
    start = time.perf_counter()
    for batch in collector:
        totals = dict.fromkeys(LOSS_KEYS, 0.0)
        updates = 0
        for _ in range(config.epochs):
            with torch.no_grad():
                advantage(batch)  # recomputed each epoch with the current critic
            buffer.empty()
            buffer.extend(batch.reshape(-1))
            for _ in range(math.ceil(config.frames_per_batch / config.minibatch_size)):
                minibatch = buffer.sample()
                losses = loss_module(minibatch)
                loss = sum((losses[key] for key in LOSS_KEYS), torch.zeros(()))
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(loss_module.parameters(), config.max_grad_norm)
                optimizer.step()
                for key in LOSS_KEYS:
                    totals[key] += float(losses[key].detach())
                updates += 1
        done = batch.get(DONE_KEY).squeeze(-1)
        reward = batch.get(REWARD_KEY).squeeze(-1)
        stats = BatchStats(
            frames=batch.numel(),
            episodes=int(done.sum()),
            wins=int((done & (reward > 0)).sum()),
            illegal=illegal_actions(batch),
            losses={key: value / updates for key, value in totals.items()},
            seconds=time.perf_counter() - start,
        )
        result.batches.append(stats)
        if on_batch is not None:
            on_batch(batch, stats)
        if log is not None:
            log(
                f"frames {result.frames:>8,}  episodes {stats.episodes:>4}  wins {stats.wins:>3}"
                f"  illegal {stats.illegal}  loss_objective {stats.losses['loss_objective']:+.4f}"
                f"  {stats.seconds:.0f} s"
            )
    collector.shutdown()
    return result


# --------------------------------------------------------------------------- 5. validation
class GreedyMaskedPolicy:
    """The actor's most probable legal action, for the project's evaluator: a
    ``BatchPolicy`` (``agents.evaluation.arena``) over the plain env's observations."""

    def __init__(self, actor: ProbabilisticActor) -> None:
        self.logits_net = copy.deepcopy(actor.module[0].module).eval()

    def reset_states(self) -> None:
        """No memory: nothing to clear."""

    def act(
        self, obs: Any, masks: np.ndarray, episode_starts: np.ndarray | None = None
    ) -> np.ndarray:
        with torch.no_grad():
            logits = self.logits_net(torch.as_tensor(np.asarray(obs), dtype=torch.float32))
        dist = MaskedCategorical(logits=logits, mask=torch.as_tensor(masks, dtype=torch.bool))
        return dist.mode.numpy()  # type: ignore[no-any-return]


class TorchRLAgent(Agent):
    """An :class:`~agents.players.base.Agent` around :class:`GreedyMaskedPolicy`."""

    name = "torchrl-ppo"

    def __init__(self, actor: ProbabilisticActor, counting: bool) -> None:
        self.batch_policy = GreedyMaskedPolicy(actor)
        self.env_kwargs = env_kwargs(counting)

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        return int(self.batch_policy.act(np.asarray(obs)[None], action_mask[None].astype(bool))[0])


def validation_win_rate(
    actor: ProbabilisticActor, counting: bool, episodes: int, seed: int = DEFAULT_VALIDATION_SEED
) -> dict[str, Any]:
    """The greedy masked policy's results on ``episodes`` validation deals of ``seed``."""
    agent = TorchRLAgent(actor, counting)
    [result] = evaluate(
        [(agent.name, agent)], episodes, seed, env_kwargs(counting), validation=True
    )
    return {"seed": seed, "deals": "validation", **result.to_dict()}


# --------------------------------------------------------------------------- command line
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    defaults = PPOConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=defaults.frames)
    parser.add_argument("--frames-per-batch", type=int, default=defaults.frames_per_batch)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--minibatch-size", type=int, default=defaults.minibatch_size)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--entropy-coeff", type=float, default=defaults.entropy_coeff)
    parser.add_argument(
        "--hidden", type=int, nargs="+", default=list(defaults.hidden), help="MLP widths"
    )
    parser.add_argument(
        "--no-counting", action="store_true", help="observe without the card-counting block"
    )
    parser.add_argument(
        "--train-suits",
        type=int,
        default=defaults.train_suits,
        help="suits the training game's phrase needs (validation plays the real game: 4)",
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--random-steps", type=int, default=1_000, help="masked random steps first (0: none)"
    )
    parser.add_argument(
        "--eval-episodes", type=int, default=0, help="validation deals to play at the end"
    )
    parser.add_argument("--eval-seed", type=int, default=DEFAULT_VALIDATION_SEED)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write the run's record here")
    parser.add_argument(
        "--save", type=Path, default=None, help="save the actor's and critic's weights here (.pt)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.torch_threads <= 0:
        raise SystemExit(f"--torch-threads must be positive, got {args.torch_threads}")
    if args.random_steps < 0 or args.eval_episodes < 0:
        raise SystemExit("--random-steps and --eval-episodes must not be negative")
    try:
        config = PPOConfig(
            frames=args.frames,
            frames_per_batch=args.frames_per_batch,
            epochs=args.epochs,
            minibatch_size=args.minibatch_size,
            learning_rate=args.learning_rate,
            entropy_coeff=args.entropy_coeff,
            hidden=tuple(args.hidden),
            counting=not args.no_counting,
            train_suits=args.train_suits,
            seed=args.seed,
        )
    except ValueError as err:
        raise SystemExit(f"bad setting: {err}") from err
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(config.seed)
    load_before = os.getloadavg()
    started = time.perf_counter()

    env = make_env(config.seed, counting=config.counting, suits_required=config.train_suits)
    random_illegal = 0
    if args.random_steps:
        rollout = random_rollout(env, args.random_steps)
        random_illegal = illegal_actions(rollout)
        print(
            f"masked random rollout: {rollout.numel()} steps, "
            f"{int(rollout.get(DONE_KEY).sum())} episodes ended, {random_illegal} illegal actions"
        )
    actor, critic = make_modules(env, config.hidden)
    log = train(env, actor, critic, config)
    env.close()
    train_seconds = time.perf_counter() - started
    print(f"trained on {log.frames:,} frames ({log.episodes:,} episodes) in {train_seconds:.0f} s")

    if args.save is not None:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        atomic_save(
            args.save,
            lambda buffer: torch.save(
                {
                    "actor": actor.state_dict(),
                    "critic": critic.state_dict(),
                    "config": asdict(config),
                },
                buffer,
            ),
        )
        print(f"weights: {args.save}")
    validation = None
    if args.eval_episodes:
        validation = validation_win_rate(actor, config.counting, args.eval_episodes, args.eval_seed)
        print(
            f"validation: {validation['wins']} wins in {validation['episodes']} deals "
            f"({validation['win_rate']:.2%}, 95% [{validation['ci_low']:.2%}, "
            f"{validation['ci_high']:.2%}])"
        )
    if args.json is not None:
        record = {
            "what": "masked PPO with TorchRL on Cold Iron (docs/examples/torchrl_masked_ppo.py)",
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "config": asdict(config),
            "random_steps": args.random_steps,
            "random_illegal_actions": random_illegal,
            "frames": log.frames,
            "episodes": log.episodes,
            "illegal_actions": log.illegal,
            "training_wins_per_batch": [b.wins for b in log.batches],
            "training_episodes_per_batch": [b.episodes for b in log.batches],
            "seconds": time.perf_counter() - started,
            "train_seconds": train_seconds,
            "validation": validation,
            "weights": None if args.save is None else str(args.save),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
            "note": "2 shared cores: other work may have been running, times are approximate",
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "torchrl": torchrl.__version__,
                "tensordict": tensordict.__version__,
                "gymnasium": gym.__version__,
                "numpy": np.__version__,
                "coldiron": coldiron_env.__version__,
            },
            "git_commit": git_commit(),
            "git_dirty": git_dirty(),
            "written": utc_now(),
        }
        atomic_write_json(args.json, record)
        print(f"record: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
