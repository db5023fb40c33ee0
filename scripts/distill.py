"""Expert iteration: the planner over a trained network teaches the network, round by round.

    .venv/bin/python scripts/distill.py --start trained --out runs/distilled

Each round the network plays ``--episodes`` deals (a deal stream of their own), the
planner with the network as its base policy labels every state it visited, and the
network is cloned on those labels (agents/learning/expert_iteration.py). ``--out`` is a
run directory (model.zip, config.yaml, meta.json) that evaluate.py, ladder.py and
play.py load; it is saved after every round, and rerunning the same command continues
an interrupted run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.learning.expert_iteration import (
    ROLLOUTS,
    DistillationError,
    SearchDistillation,
    run_distillation,
)
from agents.learning.sb3_agent import ModelLoadError
from agents.players.planner import BUDGETS
from agents.registry import (
    PLAY_TORCH_THREADS,
    SEARCH_OVER_MODELS,
    SHIPPED_MODELS,
    is_builtin,
    set_torch_threads,
)

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    defaults = SearchDistillation()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", default="trained", help="the network: a name, run dir or zip")
    parser.add_argument("--out", type=Path, required=True, help="run directory to write")
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--episodes", type=int, default=defaults.episodes, help="deals a round")
    parser.add_argument("--budget", choices=sorted(BUDGETS), default=defaults.budget)
    parser.add_argument("--epochs", type=int, default=defaults.epochs, help="cloning epochs")
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--seed", type=int, default=defaults.seed, help="seed of the deals")
    parser.add_argument(
        "--workers", type=int, default=defaults.workers, help="labelling processes (2: both cores)"
    )
    parser.add_argument(
        "--rollouts",
        choices=ROLLOUTS,
        default=defaults.rollouts,
        help="who plays the planner's rollouts: the heuristic or the network being trained",
    )
    parser.add_argument("--torch-threads", type=int, default=PLAY_TORCH_THREADS)
    args = parser.parse_args(argv)
    try:
        settings = SearchDistillation(
            rounds=args.rounds,
            episodes=args.episodes,
            budget=args.budget,
            epochs=args.epochs,
            learning_rate=args.learning_rate,
            seed=args.seed,
            workers=args.workers,
            rollouts=args.rollouts,
        )
        set_torch_threads(args.torch_threads)
        if is_builtin(args.start) or args.start in SEARCH_OVER_MODELS:
            raise DistillationError(f"{args.start!r} is not a trained network")
        result = run_distillation(
            args.start,
            args.out,
            settings,
            log=lambda line: print(line, flush=True),
            start_path=SHIPPED_MODELS.get(args.start, Path(args.start)),
        )
    except (DistillationError, ModelLoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if result.interrupted:
        return EXIT_INTERRUPTED
    print(f"{result.rounds_done} round(s) done: {result.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
