"""The main job: train the default agent, then evaluate it against the built-in players.

    .venv/bin/python scripts/main.py --out runs/main      # configs/maskable_ppo.yaml, 10,000 deals
    .venv/bin/python scripts/main.py --config configs/maskable_ppo_quick.yaml --out runs/quick \\
        --episodes 2000                                   # a quick try (docs/training.md)

1. Trains ``--config`` (default ``configs/maskable_ppo.yaml``) into ``--out``
   (a new or empty folder), exactly as ``scripts/train.py`` would.
   Ctrl-C saves a resumable checkpoint; ``--resume DIR`` continues it and then
   evaluates.
2. Evaluates the trained agent, ``random``, ``threaten`` and ``heuristic`` on the
   same ``--episodes`` seeded deals (paired), prints the table (win rate with its
   Wilson 95% interval, outcomes, mean turns) and writes ``evaluation.json`` and
   the chart ``evaluation.png`` into the run directory.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from coldiron_env.dealer import check_evaluation_seed

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
DEFAULT_CONFIG = "configs/maskable_ppo.yaml"
BASELINES = ("random", "threaten", "heuristic")
EVAL_JSON = "evaluation.json"
EVAL_PNG = "evaluation.png"
DEFAULT_SEED = 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--config", default=None, help=f"default {DEFAULT_CONFIG} (not with --resume)"
    )
    parser.add_argument(
        "--out", type=Path, help="run directory to write (a new or empty folder; not with --resume)"
    )
    parser.add_argument("--resume", type=Path, metavar="DIR", help="continue an interrupted run")
    parser.add_argument("--timesteps", type=int, help="override training.total_timesteps")
    parser.add_argument("--episodes", type=int, default=10_000, help="evaluation deals")
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"seed of the evaluation deals (default {DEFAULT_SEED}; docs/environment.md#seeding)",
    )
    parser.add_argument("--no-progress-bar", action="store_true")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    try:  # before training, not after it
        check_evaluation_seed(args.seed)
    except ValueError as err:
        parser.error(f"--seed: {err}")
    if args.resume is None and args.out is None:
        parser.error("--out DIR: the run directory to write (the main job writes nowhere else)")
    if args.resume is not None and args.config is not None:
        parser.error(
            "--config with --resume: a resumed run keeps its own config.yaml "
            f"({args.resume / 'config.yaml'}); --timesteps may raise its budget"
        )

    from agents.learning.config import ConfigError, apply_overrides, load_config
    from agents.learning.provenance import TrainingError
    from agents.learning.search_space import check_search
    from agents.learning.training import train

    config_file = str(args.resume / "config.yaml") if args.resume else args.config or DEFAULT_CONFIG
    try:
        cfg = apply_overrides(load_config(config_file), timesteps=args.timesteps, file=config_file)
        check_search(cfg, config_file)
    except ConfigError as exc:
        print(f"error: invalid config: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.no_progress_bar:
        cfg.training.progress_bar = False
    if args.resume is not None and args.timesteps is None and trained_to_the_end(args.resume):
        print(f"{args.resume}: its training completed; evaluating it")  # stopped after training
        run_dir = args.resume
    else:
        try:
            result = train(
                cfg, args.out, resume=args.resume, config_file=None if args.resume else config_file
            )
        except TrainingError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        rounds, run_dir = len(result.expert_rounds), result.run_dir
        print(
            f"run directory: {run_dir}  ({result.timesteps} steps"
            + (f" and {rounds} round(s) of expert iteration" if rounds else "")
            + f", {result.wall_seconds:.0f} s)"
        )
        if result.interrupted:
            resume = f".venv/bin/python scripts/main.py --resume {run_dir}"
            print(f"interrupted; continue with: {resume}")
            return EXIT_INTERRUPTED

    from agents.atomic import atomic_write_json
    from agents.evaluation.arena import evaluate, format_paired, format_table, paired_lines, report
    from agents.evaluation.plots import plot_win_rates
    from agents.registry import make_agent, set_torch_threads

    set_torch_threads()  # training may use more; evaluation plays fastest on one

    trained = make_agent(str(run_dir))
    agents = [(cfg.name or "trained", trained), *((name, make_agent(name)) for name in BASELINES)]
    print(f"evaluating {len(agents)} agents on the same {args.episodes} deals (seed {args.seed})")
    results = evaluate(agents, args.episodes, args.seed)
    print(format_table(results))
    print(format_paired(paired_lines(results, "heuristic")))
    atomic_write_json(run_dir / EVAL_JSON, report(results, args.episodes, args.seed, {}))
    chart = plot_win_rates(results, run_dir / EVAL_PNG)
    print(f"results: {run_dir / EVAL_JSON}")
    print(f"chart: {chart}")
    return 0


def trained_to_the_end(run_dir: Path) -> bool:
    """Whether ``run_dir``'s ``meta.json`` says its training completed (then ``--resume``
    evaluates it: the job was stopped between training and evaluation)."""
    try:
        meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # train() names what is wrong with it
    return isinstance(meta, dict) and meta.get("status") == "completed"


if __name__ == "__main__":
    raise SystemExit(main())
