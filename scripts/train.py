"""Train an agent for Cold Iron from a YAML config.

    .venv/bin/python scripts/train.py --config configs/maskable_ppo.yaml
    .venv/bin/python scripts/train.py --config configs/ppo.yaml --timesteps 200000 --seed 3 \\
        --out runs/ppo-3
    .venv/bin/python scripts/train.py --resume runs/ppo-3            # continue after Ctrl-C
    .venv/bin/python scripts/train.py --resume runs/ppo-3 --timesteps 400000  # extend the budget
    .venv/bin/python scripts/train.py --config configs/ppo.yaml --seeds 0-4 --out runs/ppo-seeds

The config is validated before anything runs; a bad one is refused with the file, the key
and the reason (exit status 2). Ctrl-C saves a resumable checkpoint (exit status 130). The
run directory layout is described in ``docs/run_directory.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agents.cli import EXIT_INTERRUPTED, refuse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Train an agent for Cold Iron from a YAML config.",
        epilog="Run directory layout: docs/run_directory.md",
    )
    add = parser.add_argument
    add("--config", help="YAML run description (configs/*.yaml)")
    add("--timesteps", type=int, help="override training.total_timesteps")
    add("--seed", type=int, help="override the top-level seed")
    add("--out", type=Path, help="run directory to write (new or empty; not with --resume)")
    add("--resume", type=Path, metavar="DIR", help="continue the run in DIR")
    add("--seeds", metavar="SPEC", help="one run per seed (0-4 or 0,2,5) into OUT/seed-N; "
        "rerun with the same --out to continue")  # fmt: skip
    add("--no-progress-bar", action="store_true", help="disable the progress bar")
    args = parser.parse_args(argv)

    if args.resume is None and args.config is None:
        parser.error("give --config FILE (or --resume DIR)")
    if args.resume is None and args.out is None:
        parser.error("--out DIR: the run directory to write (training writes nowhere else)")
    if args.resume is not None and (args.config or args.out or args.seed is not None):
        parser.error("--resume DIR uses the run's own config.yaml, seed and directory")
    seeds: list[int] | None = None
    if args.seeds is not None:
        if args.resume is not None or args.seed is not None:
            parser.error("--seeds cannot be combined with --seed or --resume")
        from agents.learning.multiseed import parse_seeds

        try:
            seeds = parse_seeds(args.seeds)
        except ValueError as exc:
            parser.error(str(exc))

    from agents.learning.config import ConfigError, apply_overrides, load_config
    from agents.learning.search_space import check_search

    config_file = str(args.resume / "config.yaml") if args.resume else args.config
    if args.resume is not None and not Path(config_file).is_file():
        return refuse(f"{args.resume}: not a run directory (no config.yaml)")
    try:
        cfg = load_config(config_file)
        cfg = apply_overrides(cfg, timesteps=args.timesteps, seed=args.seed, file=config_file)
        check_search(cfg, config_file)  # a tuning config trains too: its search: must be valid
    except ConfigError as exc:
        return refuse(f"invalid config: {exc}")
    if args.no_progress_bar:
        cfg.training.progress_bar = False

    from agents.learning.provenance import TrainingError
    from agents.learning.training import sigterm_as_ctrl_c, train

    sigterm_as_ctrl_c()  # a scheduler's SIGTERM saves a checkpoint, as Ctrl-C does
    if seeds is not None:
        return train_several(cfg, seeds, args.out, config_file, args.seeds)
    try:
        config = None if args.resume else config_file
        result = train(cfg, args.out, resume=args.resume, config_file=config)
    except TrainingError as exc:
        return refuse(exc)
    print(f"run directory: {result.run_dir}")
    print(f"timesteps: {result.timesteps}  wall time: {result.wall_seconds:.1f} s")
    if result.history:
        last = result.history[-1]
        print(
            f"last evaluation: {last['win_rate']:.2%} won "
            f"[{last['ci_low']:.2%}, {last['ci_high']:.2%}] on {last['episodes']} deals"
            + (" (the end of RL)" if result.expert_rounds else "")
        )
    if result.expert_rounds:
        print(
            f"after {len(result.expert_rounds)} round(s) of expert iteration: "
            f"{result.expert_rounds[-1]['validation_win_rate']:.2%} won on the same deals"
        )
    return EXIT_INTERRUPTED if result.interrupted else 0


def train_several(cfg: Any, seeds: list[int], root: Path, config_file: str, seeds_arg: str) -> int:
    """``--seeds``: one run per seed, then the mean win rate across seeds."""
    from agents.learning.config import ConfigError
    from agents.learning.multiseed import aggregate_results, format_aggregates, train_seeds
    from agents.learning.provenance import TrainingError

    stem = cfg.name or Path(config_file).stem
    try:
        results = train_seeds(cfg, seeds, root, config_file=config_file)
    except (TrainingError, ConfigError) as exc:  # ConfigError: a seed the config refuses
        return refuse(exc)
    print(f"run directories: {root}/seed-N for seeds {seeds}")
    agg = aggregate_results(results, stem)
    if agg is not None:
        print(format_aggregates([agg]))
    if any(r.interrupted for r in results):
        print(
            "continue with: .venv/bin/python scripts/train.py "
            f"--config {config_file} --seeds {seeds_arg} --out {root}"
        )
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
