"""Expert iteration: the planner over a trained network teaches the network, round by round.

    .venv/bin/python scripts/distill.py --start trained --out runs/distilled

The expert-iteration phase of a training run on a start network: each round the network
plays ``--episodes`` deals of their own stream, the planner over it labels every state it
visited, and it is cloned on those labels (``--keep-rounds K``: the last K rounds' labels;
``--targets soft``: each compared action's chance of being the best). ``--out`` is a run
directory that evaluate.py, ladder.py and play.py load, saved after every round; rerunning
the command continues it (with a larger ``--rounds``, a finished one).
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Final, get_args

from pydantic import ValidationError

from agents.atomic import check_writable
from agents.cli import EXIT_INTERRUPTED, refuse
from agents.learning.config import (
    STREAM_SEED_LIMIT,
    ExpertIterationConfig,
    Rollouts,
    Targets,
    config_error,
)
from agents.learning.provenance import TrainingError
from agents.learning.training import distill
from agents.players.planner import BUDGETS
from agents.registry import (
    PLAY_TORCH_THREADS,
    SEARCH_OVER_MODELS,
    SHIPPED_MODELS,
    is_builtin,
    set_torch_threads,
)

DEFAULT_ROUNDS: Final = 8
SETTINGS_FLAGS: Final = ("rounds", "episodes", "budget", "epochs", "learning_rate", "workers",
                         "rollouts", "keep_rounds", "targets", "soft_z")  # fmt: skip
"""The flags that are ``expert_iteration`` settings, each named as its field."""


def main(argv: list[str] | None = None) -> int:
    defaults = ExpertIterationConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--start", default="trained", help="the network: a name, run dir or zip (default trained)")
    add("--out", type=Path, required=True, help="run directory to write")
    add("--rounds", type=int, default=DEFAULT_ROUNDS)
    add("--episodes", type=int, default=defaults.episodes, help="deals a round")
    add("--budget", choices=sorted(BUDGETS), default=defaults.budget)
    add("--epochs", type=int, default=defaults.epochs, help="cloning epochs")
    add("--learning-rate", type=float, default=defaults.learning_rate)
    add("--seed", type=int, default=0, help="seed of the deals")
    add("--workers", type=int, default=defaults.workers, help="labelling processes (2: both cores)")
    add("--rollouts", choices=get_args(Rollouts), default=defaults.rollouts,
        help="who plays the planner's rollouts: the heuristic or the network being "
        "trained")  # fmt: skip
    add("--keep-rounds", type=int, default=defaults.keep_rounds,
        help="rounds of labels cloned on each round, this one's included (1: this one's "
        "only)")  # fmt: skip
    add("--targets", choices=get_args(Targets), default=defaults.targets,
        help="clone on the planner's choices (hard) or on each compared action's chance of "
        "being the best (soft)")  # fmt: skip
    add("--soft-z", type=float, default=defaults.soft_z,
        help="soft labels: the handicap of each alternative, in standard errors (default: the "
        "planner's z; 0: the plain chance of being the best)")  # fmt: skip
    add("--torch-threads", type=int, default=PLAY_TORCH_THREADS)
    args = parser.parse_args(argv)
    try:
        check_writable(args.out, "--out", folder=True)
        if not 0 <= args.seed < STREAM_SEED_LIMIT:
            raise ValueError(f"--seed must be in 0..{STREAM_SEED_LIMIT - 1}, got {args.seed}")
        settings = ExpertIterationConfig(**{key: getattr(args, key) for key in SETTINGS_FLAGS})
        set_torch_threads(args.torch_threads)
        if is_builtin(args.start) or args.start in SEARCH_OVER_MODELS:
            raise TrainingError(f"{args.start!r} is not a trained network")
        start, log = SHIPPED_MODELS.get(args.start, Path(args.start)), partial(print, flush=True)
        result = distill(args.start, args.out, settings, args.seed, start_path=start, log=log)
    except ValidationError as exc:
        error = config_error(exc, "the command line")
        flag = error.key.split(".")[0]
        if flag in SETTINGS_FLAGS:  # named by the flag that set it
            return refuse(f"--{flag.replace('_', '-')}: {error.reason}")
        return refuse(error)
    except (TrainingError, ValueError) as exc:  # ModelLoadError, ConfigError among them
        return refuse(exc)
    if result.interrupted:
        return EXIT_INTERRUPTED
    print(f"{len(result.expert_rounds)} round(s) done: {result.run_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
