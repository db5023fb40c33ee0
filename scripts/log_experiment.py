"""Log a long run in docs/records/experiments.json, its figures read from its records.

    .venv/bin/python scripts/log_experiment.py --id e19-1 --what "the default, seed 1" \\
        --run runs/default-seed-1 --evaluation runs/x/validation.json:maskable_ppo \\
        --verdict "kept" --command ".venv/bin/python scripts/train.py ..."

See ``agents/experiment_log.py``; docs/experiments.md renders the log.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agents.experiment_log import evaluation_arg, log_experiment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--id", required=True, help="a short name; logging it again replaces it")
    parser.add_argument("--what", required=True, help="what the run tried")
    parser.add_argument("--verdict", required=True, help="what came of it (failures too)")
    parser.add_argument("--command", required=True, help="the command that made the run")
    parser.add_argument("--run", type=Path, help="its run directory (meta.json is read)")
    parser.add_argument(
        "--evaluation",
        action="append",
        default=[],
        metavar="FILE.json:AGENT",
        help="an evaluation JSON and the agent's label in it (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        evaluations = [evaluation_arg(item) for item in args.evaluation]
    except ValueError as error:
        parser.error(str(error))
    entry = log_experiment(args.id, args.what, args.verdict, args.command, args.run, evaluations)
    print(f"logged {entry['id']}: {len(entry['evaluations'])} evaluation(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
