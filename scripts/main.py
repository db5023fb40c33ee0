"""The main job: train the default agent, then evaluate it against the built-in players.

    .venv/bin/python scripts/main.py --out runs/main      # configs/maskable_ppo.yaml, 10,000 deals
    .venv/bin/python scripts/main.py --config configs/maskable_ppo_quick.yaml --out runs/quick \\
        --episodes 2000                                   # a quick try (docs/training.md)

1. Trains ``--config`` (default ``configs/maskable_ppo.yaml``) into ``--out``
   (a new or empty folder), as ``scripts/train.py`` would, within ``--minutes``
   (default 20) here: fewer RL steps and rounds where the config's do not fit
   (docs/training.md#time-budget). Ctrl-C saves a resumable checkpoint;
   ``--resume DIR`` continues it and then evaluates.
2. Evaluates the trained agent, ``random``, ``threaten`` and ``heuristic`` on the
   same ``--episodes`` seeded deals (paired), prints the table (win rate with its
   Wilson 95% interval, outcomes, mean turns) and writes ``evaluation.json`` and
   the chart ``evaluation.png`` into the run directory.
"""

from __future__ import annotations

from pathlib import Path

from agents.cli import EXIT_INTERRUPTED, command_parser, refuse
from coldiron_env.dealer import check_evaluation_seed

DEFAULT_CONFIG = "configs/maskable_ppo.yaml"
BASELINES = ("random", "threaten", "heuristic")
EVAL_JSON = "evaluation.json"
EVAL_PNG = "evaluation.png"
DEFAULT_SEED = 0
DEFAULT_MINUTES = 20.0
TRAINING_SHARE = 0.9  # of --minutes; the rest: the evaluation (~70 s on a slow 2-core machine)


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(__doc__)
    add = parser.add_argument
    add("--config", default=None, help=f"default {DEFAULT_CONFIG} (not with --resume)")
    add("--out", type=Path, help="run directory to write (new or empty; not with --resume)")
    add("--resume", type=Path, metavar="DIR", help="continue an interrupted run")
    add("--timesteps", type=int, help="override training.total_timesteps")
    add("--episodes", type=int, default=10_000, help="evaluation deals")
    add("--seed", type=int, default=DEFAULT_SEED, help=f"seed of the evaluation deals (default "
        f"{DEFAULT_SEED}; docs/environment.md#seeding)")  # fmt: skip
    add("--minutes", type=float, default=DEFAULT_MINUTES, help="the whole job's time here "
        f"(default {DEFAULT_MINUTES:g}; 0: the config's budgets in full)")  # fmt: skip
    add("--no-progress-bar", action="store_true")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    if not args.minutes >= 0:  # NaN too
        parser.error(f"--minutes must be >= 0, got {args.minutes}")
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
    from agents.learning.multiseed import run_status
    from agents.learning.provenance import TrainingError
    from agents.learning.search_space import check_search
    from agents.learning.training import train

    config_file = str(args.resume / "config.yaml") if args.resume else args.config or DEFAULT_CONFIG
    try:
        cfg = apply_overrides(load_config(config_file), timesteps=args.timesteps, file=config_file)
        check_search(cfg, config_file)
    except ConfigError as exc:
        return refuse(f"invalid config: {exc}")
    if args.no_progress_bar:
        cfg.training.progress_bar = False
    cfg.training.minutes = TRAINING_SHARE * args.minutes if args.minutes else None
    done = args.resume is not None and run_status(args.resume) == "completed"
    if done and args.timesteps is None:  # stopped between training and evaluation
        print(f"{args.resume}: its training completed; evaluating it")
        run_dir = args.resume
    else:
        try:
            config = None if args.resume else config_file
            result = train(cfg, args.out, resume=args.resume, config_file=config)
        except TrainingError as exc:
            return refuse(exc)
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


if __name__ == "__main__":
    raise SystemExit(main())
