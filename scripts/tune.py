"""Search hyperparameters with Optuna over the ``search:`` section of a config.

    .venv/bin/python scripts/tune.py --config configs/tune_maskable_ppo.yaml --trials 40 \\
        --out runs/tune
    .venv/bin/python scripts/tune.py --config FILE --trials 40 --workers 2 --out runs/tune
    .venv/bin/python scripts/tune.py --config FILE --trials 40 --workers 2 \\
        --storage postgresql://USER:PASSWORD@HOST/DB --study NAME --out runs/tune-NAME

``--trials N`` is the number of finished (complete or pruned) trials the study must hold
(K workers may finish up to K - 1 more): rerunning the same command after Ctrl-C continues
the study. ``--workers K`` runs K copies of this command, one worker each; another machine
joins by running the command with the same ``--storage`` URL and ``--study`` name. Default
storage: ``OUT/study.db`` (SQLite); default study: the config's ``name``. See docs/tuning.md.

Exit status: 0 done, 2 bad config or arguments or a failed search, 130 interrupted.
"""

from __future__ import annotations

from pathlib import Path

from agents.cli import EXIT_INTERRUPTED, command_parser, refuse


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(__doc__)
    add = parser.add_argument
    add("--config", required=True, help="YAML config with a search: section")
    add("--trials", type=int, required=True, help="finished trials the study must reach")
    add("--storage", help="SQLAlchemy URL of the study storage (default: sqlite OUT/study.db)")
    add("--study", help="study name (default: the config's name)")
    add("--workers", type=int, default=1, help="worker processes on this machine (default 1)")
    add("--out", type=Path, required=True, help="output folder: the trials' runs, the reports")
    add("--no-reports", action="store_true", help="write no summary at the end (the copies "
        "--workers starts; another process does)")  # fmt: skip
    args = parser.parse_args(argv)  # --trials and --workers: refused by tune() by name

    from agents.atomic import check_writable
    from agents.learning.config import ConfigError
    from agents.learning.training import sigterm_as_ctrl_c
    from agents.learning.tuning import TuneError, tune

    sigterm_as_ctrl_c()  # SIGTERM stops the workers and keeps every finished trial, as Ctrl-C
    try:
        check_writable(args.out, "--out", folder=True)
        result = tune(
            args.config,
            args.trials,
            storage=args.storage,
            study_name=args.study,
            workers=args.workers,
            out=args.out,
            reports=not args.no_reports,
        )
    except ConfigError as exc:
        return refuse(f"invalid config: {exc}")
    except (TuneError, ValueError) as exc:
        return refuse(exc)
    if result.best_number is not None and "best_config" in result.files:
        print(
            f"best: trial {result.best_number}, win rate {result.best_value:.2%}; "
            "train it with: .venv/bin/python scripts/train.py "
            f"--config {result.files['best_config']}"
        )
    return EXIT_INTERRUPTED if result.interrupted else 0


if __name__ == "__main__":
    raise SystemExit(main())
