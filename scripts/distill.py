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
import sys
from pathlib import Path
from typing import Final, get_args

from pydantic import ValidationError

from agents.atomic import check_writable
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

EXIT_ERROR: Final = 2
EXIT_INTERRUPTED: Final = 130
DEFAULT_ROUNDS: Final = 8
SETTINGS_FLAGS: Final = ("rounds", "episodes", "budget", "epochs", "learning_rate", "workers",
                         "rollouts", "keep_rounds", "targets", "soft_z")  # fmt: skip
"""The flags that are ``expert_iteration`` settings, each named as its field."""


def main(argv: list[str] | None = None) -> int:
    defaults = ExpertIterationConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--start", default="trained", help="the network: a name, run dir or zip (default trained)"
    )
    parser.add_argument("--out", type=Path, required=True, help="run directory to write")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--episodes", type=int, default=defaults.episodes, help="deals a round")
    parser.add_argument("--budget", choices=sorted(BUDGETS), default=defaults.budget)
    parser.add_argument("--epochs", type=int, default=defaults.epochs, help="cloning epochs")
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--seed", type=int, default=0, help="seed of the deals")
    parser.add_argument(
        "--workers", type=int, default=defaults.workers, help="labelling processes (2: both cores)"
    )
    parser.add_argument(
        "--rollouts",
        choices=get_args(Rollouts),
        default=defaults.rollouts,
        help="who plays the planner's rollouts: the heuristic or the network being trained",
    )
    parser.add_argument(
        "--keep-rounds",
        type=int,
        default=defaults.keep_rounds,
        help="rounds of labels cloned on each round, this one's included (1: this one's only)",
    )
    parser.add_argument(
        "--targets",
        choices=get_args(Targets),
        default=defaults.targets,
        help="clone on the planner's choices (hard) or on each compared action's chance of "
        "being the best (soft)",
    )
    parser.add_argument(
        "--soft-z",
        type=float,
        default=defaults.soft_z,
        help="soft labels: the handicap of each alternative, in standard errors (default: the "
        "planner's z; 0: the plain chance of being the best)",
    )
    parser.add_argument("--torch-threads", type=int, default=PLAY_TORCH_THREADS)
    args = parser.parse_args(argv)
    try:
        check_writable(args.out, "--out", folder=True)
        if not 0 <= args.seed < STREAM_SEED_LIMIT:
            raise ValueError(f"--seed must be in 0..{STREAM_SEED_LIMIT - 1}, got {args.seed}")
        settings = ExpertIterationConfig(**{key: getattr(args, key) for key in SETTINGS_FLAGS})
        set_torch_threads(args.torch_threads)
        if is_builtin(args.start) or args.start in SEARCH_OVER_MODELS:
            raise TrainingError(f"{args.start!r} is not a trained network")
        result = distill(
            args.start,
            args.out,
            settings,
            args.seed,
            start_path=SHIPPED_MODELS.get(args.start, Path(args.start)),
            log=lambda line: print(line, flush=True),
        )
    except ValidationError as exc:
        error = config_error(exc, "the command line")
        flag = error.key.split(".")[0]
        if flag in SETTINGS_FLAGS:  # named by the flag that set it
            print(f"error: --{flag.replace('_', '-')}: {error.reason}", file=sys.stderr)
        else:
            print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except (TrainingError, ValueError) as exc:  # ModelLoadError, ConfigError among them
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if result.interrupted:
        return EXIT_INTERRUPTED
    print(f"{len(result.expert_rounds)} round(s) done: {result.run_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
