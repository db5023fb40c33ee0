"""Throughput of Cold Iron against Gymnasium's Blackjack-v1, and of MaskablePPO training.

Prints one table, every figure measured in this run and process, under the same uniformly
random legal policy (Blackjack has no mask: all its actions are legal; the vector rows use
the batched form of the rule): ``Blackjack-v1`` and ColdIron (flat, then ``recall=True``)
through ``gymnasium.make``; a ``SyncVectorEnv`` of 8 ColdIron envs (``SAME_STEP``
autoreset); the native :class:`~coldiron_env.vector.ColdIronVectorEnv` at 64, 1,024 and
4,096 envs (numba-compiled, else its plain-Python fallback) and at 1,024 with ``counting``.
The rows are measured in five interleaved rounds, each reporting its best, which keeps the
ratios of one run comparable on a shared machine.

``steps/s`` counts env steps (one per game) per second inside the env's ``step``/``reset``;
``loop steps/s`` also counts the policy's time; ``x Blackjack`` is ``steps/s`` over
Blackjack's; ``bytes/env`` is the memory the env allocates (``tracemalloc``: built, reset
and stepped) per env. Then MaskablePPO (default hyperparameters, ``n_steps`` 256, 8 envs)
trains with the native vector env and with ``DummyVecEnv``; ``env share`` is the part of its
wall time spent in the VecEnv. The labelling rows time whole calls (worker processes started
and rollouts compiled included), so they understate a long run's speed-up from a second
process.

The machine may be shared: quote the ratios of one run, not absolute figures.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

import coldiron_env
from agents.atomic import atomic_write_json
from agents.gitinfo import code_stamp
from coldiron_env.batched import NUMBA_AVAILABLE
from coldiron_env.vector import ColdIronVectorEnv

BLACKJACK_ID = "Blackjack-v1"
NATIVE_BACKEND = "numba" if NUMBA_AVAILABLE else "python"
COUNTING_TAG = "(counting)"
SYNC_ENVS = 8
NATIVE_SIZES = (64, 1024, 4096)
PPO_ENVS = 8
PPO_N_STEPS = 256
TARGET_SINGLE = 4.0  # ColdIron single env / Blackjack-v1
TARGET_NATIVE = 100.0  # native vector env at 4,096 envs / Blackjack-v1
TARGET_NATIVE_ENVS = 4_096
TARGET_ENV_SHARE = 0.10  # of MaskablePPO training wall time
MEMORY_STEPS = 50  # steps taken while tracing memory
SINGLE_CHECK_EVERY = 500  # steps between clock checks
VECTOR_CHECK_EVERY = 5
ROUNDS = 5  # interleaved measuring rounds per row (the best is reported)
TORCH_THREADS = 1  # the machine is shared: one torch thread keeps the timing steady
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "maskable_ppo.yaml"
DEFAULT_CONFIG_STEPS = 1_000_000  # timed RL steps of the default config (whole rollouts)
QUICK_ENV_DIVISOR = 4
LABEL_PROCESSES = (1, 2)  # labelling processes compared (2: one per core)
TARGET_DEFAULT_CONFIG = 20_000.0  # env steps/s of the default config's RL phase on 2 cores


@dataclass
class Budget:
    seconds: float  # timed run of each throughput row
    ppo_steps: int  # MaskablePPO timesteps per vec env kind
    ppo_n_steps: int
    native_sizes: tuple[int, ...] = NATIVE_SIZES
    label_deals: int = 512  # deals labelled by the planner per labelling row


FULL = Budget(seconds=3.0, ppo_steps=12_288, ppo_n_steps=PPO_N_STEPS)
QUICK = Budget(
    seconds=0.25, ppo_steps=256, ppo_n_steps=16, native_sizes=(8, 64, 256), label_deals=8
)


@dataclass
class Row:
    name: str
    num_envs: int
    steps: int
    episodes: int
    env_seconds: float
    loop_seconds: float
    bytes_per_env: float
    steps_per_s: float = 0.0
    loop_steps_per_s: float = 0.0
    episodes_per_s: float = 0.0
    ratio: float = 0.0


@dataclass
class LabelRow:
    """Expert iteration's labelling: the network plays, the planner over it labels."""

    name: str
    processes: int
    deals: int
    decisions: int
    wall_seconds: float
    deals_per_s: float = 0.0
    speedup: float = 1.0


@dataclass
class TrainRow:
    name: str
    timesteps: int
    wall_seconds: float
    env_seconds: float
    steps_per_s: float = field(init=False)
    env_share: float = field(init=False)

    def __post_init__(self) -> None:
        self.steps_per_s = self.timesteps / self.wall_seconds
        self.env_share = self.env_seconds / self.wall_seconds


class RandomLegal:
    """Uniformly random legal action from a mask (all actions legal when there is none)."""

    def __init__(self, num_actions: int, seed: int) -> None:
        self._rng = random.Random(seed)
        self._all = np.ones(num_actions, dtype=np.int8)
        self._legal: dict[bytes, tuple[int, ...]] = {}

    def act(self, mask: np.ndarray | None) -> int:
        m = self._all if mask is None else mask
        key = m.tobytes()
        legal = self._legal.get(key)
        if legal is None:
            legal = self._legal[key] = tuple(np.flatnonzero(m).tolist())
        return legal[int(self._rng.random() * len(legal))]


class BatchedRandomLegal:
    """The same rule for a batch of masks (N, A): each row read as an integer code, the legal
    lists of the codes seen tabulated, so a batch costs a handful of array operations."""

    def __init__(self, num_actions: int, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._weights = (2.0 ** np.arange(num_actions)).astype(np.float64)
        self._num_actions = num_actions
        self._codes = np.zeros(0, dtype=np.int64)
        self._counts = np.zeros(0, dtype=np.int64)
        self._table = np.zeros((0, num_actions), dtype=np.int64)

    def act(self, masks: np.ndarray) -> np.ndarray:
        codes = (masks @ self._weights).astype(np.int64)
        slot = np.searchsorted(self._codes, codes)
        known = slot < self._codes.size
        if not (
            known.all() and (self._codes[np.minimum(slot, self._codes.size - 1)] == codes).all()
        ):
            self._learn(codes)
            slot = np.searchsorted(self._codes, codes)
        pick = (self._rng.random(codes.size) * self._counts[slot]).astype(np.int64)
        return self._table[slot, pick]

    def _learn(self, codes: np.ndarray) -> None:
        self._codes = np.union1d(self._codes, codes)
        self._counts = np.zeros(self._codes.size, dtype=np.int64)
        self._table = np.zeros((self._codes.size, self._num_actions), dtype=np.int64)
        for j, code in enumerate(self._codes.tolist()):
            legal = [a for a in range(self._num_actions) if code >> a & 1]
            self._counts[j] = len(legal)
            self._table[j, : len(legal)] = legal


def run_single(
    env: gym.Env[Any, Any], seconds: float, seed: int, check_every: int = SINGLE_CHECK_EVERY
) -> Row:
    """Random legal play of ``env`` (reset on each game's end) for ``seconds``, checked every
    ``check_every`` steps (0 seconds: ``check_every`` steps, as memory is measured)."""
    policy = RandomLegal(int(env.action_space.n), seed)  # type: ignore[attr-defined]
    step, reset = env.step, env.reset
    clock = time.perf_counter
    _, info = reset(seed=seed)
    steps = episodes = 0
    env_time = 0.0
    start = clock()
    deadline = start + seconds
    while True:
        for _ in range(check_every):
            action = policy.act(info.get("action_mask"))
            t0 = clock()
            _, _, terminated, truncated, info = step(action)
            if terminated or truncated:
                _, info = reset()
                episodes += 1
            env_time += clock() - t0
            steps += 1
        if clock() > deadline:
            break
    loop = clock() - start
    return Row("", 1, steps, episodes, env_time, loop, 0.0)


def run_vector(envs: Any, seconds: float, seed: int, check_every: int = VECTOR_CHECK_EVERY) -> Row:
    """:func:`run_single` for a Gymnasium VectorEnv with SAME_STEP autoreset and an
    ``action_mask`` info key."""
    n = envs.num_envs
    policy = BatchedRandomLegal(int(envs.single_action_space.n), seed)
    clock = time.perf_counter
    _, info = envs.reset(seed=seed)
    steps = episodes = 0
    env_time = 0.0
    start = clock()
    deadline = start + seconds
    while True:
        for _ in range(check_every):
            actions = policy.act(info["action_mask"])
            t0 = clock()
            _, _, terminated, truncated, info = envs.step(actions)
            env_time += clock() - t0
            episodes += int(np.count_nonzero(terminated | truncated))
            steps += n
        if clock() > deadline:
            break
    loop = clock() - start
    return Row("", n, steps, episodes, env_time, loop, 0.0)


def traced_build(build: Callable[[], Any], drive: Callable[[Any], object]) -> tuple[Any, int]:
    """``build()`` then ``drive(env)`` under ``tracemalloc``: the env and the bytes it holds."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        env = build()
        drive(env)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return env, held


def throughput_rows(budget: Budget, seed: int) -> list[Row]:
    """Every row measured in :data:`ROUNDS` interleaved rounds, each reporting its best: the
    other load of a shared machine spreads over all rows, and the best round is the least
    disturbed one."""

    def make_sync() -> Any:
        return gym.make_vec(
            coldiron_env.ENV_ID,
            num_envs=SYNC_ENVS,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        )

    def make_native(n: int, backend: str, **kwargs: Any) -> Callable[[], Any]:
        return lambda: ColdIronVectorEnv(n, backend=backend, **kwargs)

    backend = NATIVE_BACKEND
    counting_envs = budget.native_sizes[len(budget.native_sizes) // 2]
    plan: list[tuple[str, Callable[[], Any], bool]] = [
        (BLACKJACK_ID, lambda: gym.make(BLACKJACK_ID), False),
        ("ColdIron single (flat)", lambda: gym.make(coldiron_env.ENV_ID), False),
        ("ColdIron single (recall)", lambda: gym.make(coldiron_env.ENV_ID, recall=True), False),
        (f"SyncVectorEnv x{SYNC_ENVS}", make_sync, True),
        *((f"native {backend} x{n:,}", make_native(n, backend), True) for n in budget.native_sizes),
        (
            f"native {backend} x{counting_envs:,} {COUNTING_TAG}",
            make_native(counting_envs, backend, counting=True),
            True,
        ),
    ]
    built: list[tuple[str, Any, bool, float]] = []
    for name, build, vector in plan:
        drive = partial(run_vector if vector else run_single, seconds=0.0, seed=0,
                        check_every=MEMORY_STEPS)  # fmt: skip
        # warm up first: imports, caches and JIT compiles are not memory per env
        small = partial(ColdIronVectorEnv, 2, backend=backend, counting=COUNTING_TAG in name)
        warm = small() if name.startswith("native") else build()
        drive(warm)
        warm.close()
        env, held = traced_build(build, drive)
        per_env = held / (env.num_envs if vector else 1)
        built.append((name, env, vector, per_env))
    best: dict[str, Row] = {}
    chunk = budget.seconds / ROUNDS
    for r in range(ROUNDS):
        for name, env, vector, per_env in built:
            row = (run_vector if vector else run_single)(env, chunk, seed + r)
            row.name, row.bytes_per_env = name, per_env
            row.steps_per_s = row.steps / row.env_seconds
            if name not in best or row.steps_per_s > best[name].steps_per_s:
                best[name] = row
    for _, env, _, _ in built:
        env.close()
    rows = [best[name] for name, _, _, _ in built]
    base_rate = rows[0].steps_per_s
    for row in rows:
        row.loop_steps_per_s = row.steps / row.loop_seconds
        row.episodes_per_s = row.episodes / row.env_seconds
        row.ratio = row.steps_per_s / base_rate
    return rows


def training_rows(budget: Budget, seed: int) -> list[TrainRow]:
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import VecEnvWrapper

    torch.set_num_threads(TORCH_THREADS)

    from agents.learning.training import StreamSeededVecEnv, build_vec_env
    from coldiron_env.dealer import DealStream

    class TimedVecEnv(VecEnvWrapper):
        """Adds up the wall time spent in the wrapped VecEnv."""

        def __init__(self, venv: Any) -> None:
            super().__init__(venv)
            self.seconds = 0.0

        def _timed(self, call: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = call(*args, **kwargs)
            self.seconds += time.perf_counter() - t0
            return out

        def reset(self) -> Any:
            return self._timed(self.venv.reset)

        def step_async(self, actions: np.ndarray) -> None:
            self._timed(self.venv.step_async, actions)

        def step_wait(self) -> Any:
            return self._timed(self.venv.step_wait)

        def env_method(self, method_name: str, *args: Any, **kwargs: Any) -> list[Any]:
            out: list[Any] = self._timed(self.venv.env_method, method_name, *args, **kwargs)
            return out

    rows: list[TrainRow] = [default_config_row(budget, TimedVecEnv)]
    torch.set_num_threads(TORCH_THREADS)
    for kind in ("native", "dummy"):
        # training deals, whoever seeds them (a raw seed would deal evaluation deals)
        base = StreamSeededVecEnv(build_vec_env(kind, PPO_ENVS, {}), DealStream.TRAINING)
        venv = TimedVecEnv(base)
        model = MaskablePPO(
            "MlpPolicy",
            venv,
            n_steps=budget.ppo_n_steps,
            batch_size=min(64, budget.ppo_n_steps * PPO_ENVS),
            seed=seed,
            device="cpu",
            verbose=0,
        )
        t0 = time.perf_counter()
        model.learn(total_timesteps=budget.ppo_steps)
        wall = time.perf_counter() - t0
        venv.close()
        vec_name = "native vector env" if kind == "native" else "DummyVecEnv"
        name = f"MaskablePPO + {vec_name} x{PPO_ENVS}"
        rows.append(TrainRow(name, int(model.num_timesteps), wall, venv.seconds))
    return rows


def default_config_row(budget: Budget, timed: Callable[[Any], Any]) -> TrainRow:
    """The RL phase of ``configs/maskable_ppo.yaml`` as shipped: its algorithm, network,
    envs, torch threads and hyperparameters, for whole rollouts (no imitation: its speed is
    the learner's). Quick: one rollout of a 4x smaller env count."""
    import torch

    from agents.learning.config import load_config
    from agents.learning.training import RunDir, build_model, make_training_env

    cfg = load_config(DEFAULT_CONFIG)
    hyper = cfg.algorithm.hyperparameters
    if budget is QUICK:  # a smoke test: the same config, one small rollout
        cfg.training.n_envs = max(1, cfg.training.n_envs // QUICK_ENV_DIVISOR)
        hyper["batch_size"] = min(int(hyper.get("batch_size", 64)), cfg.training.n_envs * 2)
        hyper["n_steps"] = 2
    rollout = int(hyper.get("n_steps", 2048)) * cfg.training.n_envs
    rollouts = 1 if budget is QUICK else max(1, DEFAULT_CONFIG_STEPS // rollout)
    torch.set_num_threads(cfg.training.torch_threads)
    venv = timed(make_training_env(cfg))
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(cfg, venv, RunDir(Path(tmp)))
        model.tensorboard_log = None
        model.learn(total_timesteps=rollout)  # warm-up: compiles, first allocations
        venv.seconds = 0.0
        t0 = time.perf_counter()
        model.learn(total_timesteps=rollouts * rollout, reset_num_timesteps=False)
        wall = time.perf_counter() - t0
    venv.close()
    threads = cfg.training.torch_threads
    name = f"default config x{cfg.training.n_envs:,}, {threads} thread{'s' * (threads > 1)}"
    return TrainRow(name, rollouts * rollout, wall, venv.seconds)


def labelling_rows(budget: Budget, seed: int) -> list[LabelRow]:
    """A round's labelling (the default config's ``expert_iteration`` budget, the shipped
    ``trained`` network) with the planner's Python rollouts in one process, then with its
    compiled rollouts in one process and in one per core, on the same deals: the labels
    are the same (checked here; tests/test_expert_iteration.py, tests/test_rollouts.py),
    only the wall time differs. Speed-ups are over the first row."""
    import torch

    from agents.learning.config import load_config
    from agents.learning.expert_iteration import Labellers
    from agents.learning.sb3_agent import SB3Agent
    from agents.players.rollouts import COMPILED
    from agents.registry import make_agent
    from coldiron_env.dealer import DealStream, stream_seed

    budget_name = load_config(DEFAULT_CONFIG).expert_iteration.budget
    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    first = stream_seed(DealStream.SEARCH, seed, 0)
    torch.set_num_threads(1)
    out: list[LabelRow] = []
    labels: list[np.ndarray] = []
    settings = [(1, False)] + [(processes, True) for processes in LABEL_PROCESSES]
    for processes, compiled in settings:
        if compiled and not COMPILED:
            continue  # no numba: the Python rollouts only
        with Labellers(processes, compiled=compiled) as labellers:
            t0 = time.perf_counter()
            demos = labellers.label(agent, budget_name, budget.label_deals, first, 1.0)
            wall = time.perf_counter() - t0
        assert demos is not None
        labels.append(demos.actions)
        rollouts = "compiled" if compiled else "Python"
        row = LabelRow(
            f"{budget_name}, {rollouts} rollouts, {processes} process{'es' * (processes > 1)}",
            processes,
            budget.label_deals,
            len(demos),
            wall,
        )
        row.deals_per_s = row.deals / wall
        row.speedup = out[0].wall_seconds / wall if out else 1.0
        out.append(row)
    if any(not np.array_equal(labels[0], other) for other in labels[1:]):
        raise AssertionError("the labelling rows gave different labels on the same deals")
    return out


def machine_state(note: str, before: tuple[float, float, float]) -> dict[str, Any]:
    """What the machine was doing: its cores and the load average around the run."""
    return {
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "note": note,
    }


def _goal(value: float, target: float, met: bool | None = None) -> dict[str, Any]:
    """A target's record; ``met`` by default when ``value`` reaches ``target``."""
    return {"value": value, "target": target, "met": value >= target if met is None else met}


def targets(rows: list[Row], train: list[TrainRow], largest: int) -> dict[str, dict[str, Any]]:
    by_name = {r.name: r for r in rows}
    out = {"single_vs_blackjack": _goal(by_name["ColdIron single (flat)"].ratio, TARGET_SINGLE)}
    if largest == TARGET_NATIVE_ENVS:  # --quick measures fewer envs: no target to hold them to
        ratio = by_name[f"native {NATIVE_BACKEND} x{largest:,}"].ratio
        out[f"native_{NATIVE_BACKEND}_{largest}_vs_blackjack"] = _goal(ratio, TARGET_NATIVE)
    defaults = [t for t in train if t.name.startswith("default config")]
    if defaults:
        out["default_config_steps_per_s"] = _goal(defaults[0].steps_per_s, TARGET_DEFAULT_CONFIG)
    if train:
        share = max(t.env_share for t in train)
        out["training_env_share"] = _goal(share, TARGET_ENV_SHARE, share < TARGET_ENV_SHARE)
    return out


def benchmark_text(doc: dict[str, Any]) -> str:
    """The benchmark's three tables as text (docs/speed.md shows the same)."""
    header = (
        f"{'env':<28} {'envs':>6} {'steps/s':>12} {'loop steps/s':>13} {'episodes/s':>11} "
        f"{'x Blackjack':>12} {'bytes/env':>10}"
    )
    lines = [header, "-" * len(header)]
    for r in doc["throughput"]:
        lines.append(
            f"{r['name']:<28} {r['num_envs']:>6,} {r['steps_per_s']:>12,.0f} "
            f"{r['loop_steps_per_s']:>13,.0f} {r['episodes_per_s']:>11,.0f} "
            f"{r['ratio']:>11.1f}x {r['bytes_per_env']:>10,.0f}"
        )
    if doc["training"]:
        theader = (
            f"{'training':<40} {'timesteps':>10} {'steps/s':>9} {'wall s':>8} {'env share':>10}"
        )
        lines += ["", theader, "-" * len(theader)]
        for t in doc["training"]:
            lines.append(
                f"{t['name']:<40} {t['timesteps']:>10,} {t['steps_per_s']:>9,.0f} "
                f"{t['wall_seconds']:>8.1f} {t['env_share']:>9.1%}"
            )
    if doc["labelling"]:
        lheader = (
            f"{'expert-iteration labelling':<40} {'deals':>6} {'decisions':>10} {'wall s':>8} "
            f"{'deals/s':>8} {'speed-up':>9}"
        )
        lines += ["", lheader, "-" * len(lheader)]
        for lab in doc["labelling"]:
            lines.append(
                f"{lab['name']:<40} {lab['deals']:>6,} {lab['decisions']:>10,} "
                f"{lab['wall_seconds']:>8.1f} {lab['deals_per_s']:>8.1f} {lab['speedup']:>8.2f}x"
            )
    return "\n".join(lines)


def targets_text(goals: dict[str, dict[str, Any]]) -> str:
    """The benchmark's targets, one line each: the value measured, the target, met or not."""
    return "\n".join(
        f"target {name}: {goal['value']:.3g} (target {goal['target']}) "
        f"{'met' if goal['met'] else 'NOT met'}"
        for name, goal in goals.items()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="a tiny budget (smoke test)")
    add("--json", type=Path, help="also write the figures to this JSON file")
    add("--seed", type=int, default=0, help="seed of the envs and the training")
    add("--note", default="", help="what else the machine was doing (in the JSON, with the load)")
    add("--no-train", action="store_true", help="skip the MaskablePPO training rows")
    add("--no-label", action="store_true", help="skip the expert-iteration labelling rows")
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    if args.json is not None and args.json.is_dir():
        parser.error(f"--json {args.json}: is a directory, not a file")
    budget = QUICK if args.quick else FULL
    stamp = code_stamp(args.json)  # the code measured, before it runs
    load_before = os.getloadavg()
    rows = throughput_rows(budget, args.seed)
    train = [] if args.no_train else training_rows(budget, args.seed)
    labels = [] if args.no_label else labelling_rows(budget, args.seed)
    doc = {
        "throughput": [asdict(r) for r in rows],
        "training": [asdict(t) for t in train],
        "labelling": [asdict(lab) for lab in labels],
    }
    print(benchmark_text(doc))
    goals = targets(rows, train, budget.native_sizes[-1])
    print()
    print(targets_text(goals))
    if args.json is not None:
        atomic_write_json(
            args.json,
            {
                "command": " ".join(["python", "scripts/benchmark.py", *(argv or sys.argv[1:])]),
                "quick": args.quick,
                "seed": args.seed,
                **doc,
                "targets": goals,
                "machine": machine_state(args.note, load_before),
                **stamp,
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
