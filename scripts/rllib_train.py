"""Train Cold Iron with RLlib's PPO and action masking, on one machine or a Ray cluster.

    .venv-rllib/bin/python scripts/rllib_train.py --steps 2000000 --out runs/rllib_ppo \\
        --record runs/rllib_ppo.json                                  # local Ray
    ray start --head                                                  # or a cluster:
    .venv-rllib/bin/python scripts/rllib_train.py --address auto --steps 2000000 \\
        --num-env-runners 8 --out runs/rllib_ppo --record runs/rllib_ppo.json

Ray pins its own Gymnasium: install in a venv of its own (``python3 -m venv .venv-rllib &&
.venv-rllib/bin/pip install torch==2.13.0 -e ".[rllib,fast]"``). Settings (env options, PPO's
hyperparameters, the networks) come from ``--config`` (``configs/rllib/ppo.yaml``).
Training stops at the first iteration that reaches ``--steps`` env steps; the checkpoint
(``--out``, an RLlib checkpoint directory) then plays in ``scripts/evaluate.py --agent DIR``.
A ``curriculum`` in the settings (fewer suits in the phrase first) switches the envs between
iterations; the checkpoint is always scored on the real game. Ctrl-C (or SIGTERM) stops
early and still saves the checkpoint and the record.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Any, Final

from agents.atomic import atomic_write_json
from agents.gitinfo import git_commit, git_dirty, utc_now
from agents.integrations.rllib import (
    build_config,
    load_rllib_agent,
    load_settings,
    save_env_options,
    set_training_env,
)
from coldiron_env.dealer import STREAM_SEED_BITS

DEFAULT_CONFIG: Final = Path(__file__).resolve().parent.parent / "configs" / "rllib" / "ppo.yaml"
STREAM_SEEDS: Final = 1 << STREAM_SEED_BITS
"""Seeds the deal streams take: each env runner's seed (``--seed`` + its index) must be one."""
EXIT_ERROR: Final = 2
EXIT_INTERRUPTED: Final = 130
VALIDATION_SEED: Final = 0
"""Seed of the validation deals the finished checkpoint is scored on (``--validation``)."""
SPEED_NOTE: Final = (
    "steps/s is wall-clock env steps over the whole run (sampling and learning); the "
    "machine is shared (2 cores): other work may have been running, see load_average"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--address",
        default=None,
        help="Ray cluster to join ('auto' or HOST:PORT from `ray start --head`); "
        "default: start a local Ray",
    )
    parser.add_argument("--steps", type=int, required=True, help="env steps to train for")
    parser.add_argument(
        "--num-env-runners",
        type=int,
        default=0,
        help="env-runner processes (default 0: sample in this process, the fastest on 2 "
        "cores; on a cluster, one per core to spare)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--out", required=True, help="checkpoint directory to write")
    parser.add_argument("--record", help="write steps, wall time, steps/s... as JSON here")
    parser.add_argument(
        "--config", default=str(DEFAULT_CONFIG), help="settings YAML (configs/rllib/ppo.yaml)"
    )
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        help="also save the checkpoint every N env steps (default: only at the end); with "
        "--validation, score each one: the record's learning curve",
    )
    parser.add_argument(
        "--validation",
        type=int,
        default=0,
        metavar="EPISODES",
        help="score the final checkpoint on this many validation deals (seed 0)",
    )
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="torch threads of the learner (default 1)"
    )
    args = parser.parse_args(argv)
    for name in ("steps", "torch_threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("num_env_runners", "checkpoint_every", "validation", "seed"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must not be negative")
    # RLlib seeds runner w's envs with seed + w; each becomes a training-stream seed
    if args.seed + args.num_env_runners >= STREAM_SEEDS:
        parser.error(
            f"--seed {args.seed} with {args.num_env_runners} env runners: seed + runners must "
            f"stay below {STREAM_SEEDS} (the deal streams' seeds)"
        )
    return args


def _metric(result: dict[str, Any], key: str) -> Any:
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS

    return (result.get(ENV_RUNNER_RESULTS) or {}).get(key)


def _save(algo: Any, out: Path, env_options: dict[str, Any]) -> None:
    algo.save_to_path(str(out.resolve()))
    save_env_options(out, env_options)


def _validate(out: Path, episodes: int) -> dict[str, Any]:
    from agents.evaluation.arena import evaluate

    agent = load_rllib_agent(out)
    (result,) = evaluate([(agent.name, agent)], episodes, VALIDATION_SEED, validation=True)
    return {
        "deals": "validation",
        "seed": VALIDATION_SEED,
        "episodes": episodes,
        "wins": result.wins,
        "win_rate": result.win_rate,
        "interval_95": list(result.interval),
    }


def _stop_on_signals() -> None:
    """SIGINT (Ctrl-C) and SIGTERM stop training with a saved checkpoint: raise
    KeyboardInterrupt (also where the shell started this in the background, with SIGINT
    ignored)."""

    def interrupt(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)


def train(args: argparse.Namespace) -> int:
    import ray
    import torch
    from ray.rllib.utils.metrics import (
        EPISODE_LEN_MEAN,
        EPISODE_RETURN_MEAN,
        NUM_ENV_STEPS_SAMPLED_LIFETIME,
    )

    settings = load_settings(args.config)
    config = build_config(settings, num_env_runners=args.num_env_runners, seed=args.seed)
    torch.set_num_threads(args.torch_threads)
    out = Path(args.out)
    load_start = os.getloadavg()
    if args.address is None:
        ray.init(include_dashboard=False, configure_logging=False)
    else:
        try:
            ray.init(address=args.address, configure_logging=False)
        except ConnectionError as exc:
            raise ValueError(
                f"cannot join the Ray cluster at {args.address!r}: {exc}. Start one with "
                "`ray start --head`; Ray 2.60 turns token authentication on, which "
                "`--address auto` picks up on the head node: with an explicit address set "
                "RAY_AUTH_MODE=token (and the cluster's token, `ray get-auth-token`)"
            ) from None
    resources = ray.cluster_resources()
    algo = config.build_algo()
    _stop_on_signals()
    history: list[dict[str, Any]] = []
    curve: list[dict[str, Any]] = []  # validation win rate by env steps and training seconds
    stages: list[dict[str, Any]] = []
    steps = 0
    last_saved = 0
    interrupted = False
    env_now = dict(settings.env)
    start = time.perf_counter()
    try:
        while steps < args.steps:
            wanted = settings.env_at(steps / args.steps)
            if wanted != env_now or (not stages and settings.curriculum):
                set_training_env(algo, wanted)
                env_now = wanted
                stages.append({"from_env_steps": steps, "env": wanted})
                print(f"env from {steps:,} steps: {wanted}", flush=True)
            result = algo.train()
            steps = int(_metric(result, NUM_ENV_STEPS_SAMPLED_LIFETIME) or 0)
            elapsed = time.perf_counter() - start
            entry = {
                "iteration": len(history) + 1,
                "env_steps": steps,
                "seconds": round(elapsed, 2),
                "episode_return_mean": _metric(result, EPISODE_RETURN_MEAN),
                "episode_len_mean": _metric(result, EPISODE_LEN_MEAN),
            }
            history.append(entry)
            print(
                f"iter {entry['iteration']}: {steps:,} steps, {elapsed:.0f} s, "
                f"{steps / elapsed:,.0f} steps/s, return {entry['episode_return_mean']}",
                flush=True,
            )
            if args.checkpoint_every and steps - last_saved >= args.checkpoint_every:
                _save(algo, out, settings.env)
                last_saved = steps
                if args.validation:  # its time is not training time
                    scored, point = time.perf_counter(), _validate(out, args.validation)
                    curve.append({"env_steps": steps, "seconds": round(elapsed, 2), **point})
                    start += time.perf_counter() - scored
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: saving the checkpoint", file=sys.stderr, flush=True)
    wall = time.perf_counter() - start
    _save(algo, out, settings.env)
    algo.stop()
    ray.shutdown()
    print(f"checkpoint: {out}")
    record: dict[str, Any] = {
        "what": "RLlib PPO with action masking on coldiron/ColdIron-v0 (scripts/rllib_train.py)",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "finished": utc_now(),
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
        "checkpoint": str(out),
        "interrupted": interrupted,
        "address": args.address or "local",
        "num_env_runners": args.num_env_runners,
        "torch_threads": args.torch_threads,
        "seed": args.seed,
        "settings": settings.to_dict(),
        "budget_steps": args.steps,
        "env_steps": steps,
        "iterations": len(history),
        "wall_seconds": round(wall, 1),
        "steps_per_second": round(steps / wall, 1) if wall > 0 else None,
        "speed_note": SPEED_NOTE,
        "cpu_count": os.cpu_count(),
        "ray_cpus": resources.get("CPU"),
        "load_average_start": list(load_start),
        "load_average_end": list(os.getloadavg()),
        "versions": {
            "ray": ray.__version__,
            "torch": torch.__version__,
            "gymnasium": __import__("gymnasium").__version__,
            "python": platform.python_version(),
        },
        "curriculum_applied": stages,
        "history": history,
        "curve": curve,
    }
    if args.validation and not interrupted:
        record["validation"] = _validate(out, args.validation)
        print(f"validation: {record['validation']}")
    if args.record:
        atomic_write_json(args.record, record)
        print(f"record: {args.record}")
    return EXIT_INTERRUPTED if interrupted else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return train(args)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "ray":
            raise
        print(
            f"error: training with RLlib needs ray[rllib] ({exc}); install it in a venv of its "
            "own: python3 -m venv .venv-rllib && .venv-rllib/bin/pip install torch==2.13.0 "
            '-e ".[rllib,fast]"',
            file=sys.stderr,
        )
        return EXIT_ERROR
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
