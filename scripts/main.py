"""The main job: train the default agent, then evaluate it against the built-in players.

    .venv/bin/python scripts/main.py                      # configs/maskable_ppo.yaml, 10,000 deals
    .venv/bin/python scripts/main.py --timesteps 20000 --episodes 2000    # a quicker look

1. Trains ``--config`` (default ``configs/maskable_ppo.yaml``) into ``--out``
   (default ``runs/<config name>-<time>``), exactly as ``scripts/train.py`` would.
   Ctrl-C saves a resumable checkpoint; ``--resume DIR`` continues it and then
   evaluates.
2. Evaluates the trained agent, ``random``, ``threaten`` and ``heuristic`` on the
   same ``--episodes`` seeded deals (paired), prints the table (win rate with its
   Wilson 95% interval, outcomes, mean turns) and writes ``evaluation.json`` and
   the chart ``evaluation.png`` into the run directory.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from agents.atomic import check_writable
from agents.evaluation.arena import REPORT_SEED
from coldiron_env.dealer import check_evaluation_seed

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
DEFAULT_CONFIG = "configs/maskable_ppo.yaml"
BASELINES = ("random", "threaten", "heuristic")
EVAL_JSON = "evaluation.json"
EVAL_PNG = "evaluation.png"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--config", default=None, help=f"default {DEFAULT_CONFIG} (not with --resume)"
    )
    parser.add_argument(
        "--out", type=Path, help="run directory (default runs/<config name>-<time>)"
    )
    parser.add_argument("--resume", type=Path, metavar="DIR", help="continue an interrupted run")
    parser.add_argument("--timesteps", type=int, help="override training.total_timesteps")
    parser.add_argument("--episodes", type=int, default=10_000, help="evaluation deals")
    parser.add_argument(
        "--seed",
        type=int,
        default=REPORT_SEED,
        help=f"seed of the evaluation deals (default {REPORT_SEED}, the report seed: held out, "
        "nothing was tuned or trained on it)",
    )
    parser.add_argument(
        "--why",
        default="the main job: the trained default against the baselines",
        help="recorded in the look log when the deals are the report seed's",
    )
    parser.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="also write what the run measured (times, peak memory, the machine's load, the "
        "results) to FILE: the README's main-job table is docs/records/main_job.json",
    )
    parser.add_argument(
        "--note", default="", help="what else the machine was doing (kept in --record's file)"
    )
    parser.add_argument("--no-progress-bar", action="store_true")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    try:  # before training, not after it
        check_evaluation_seed(args.seed)
    except ValueError as err:
        parser.error(f"--seed: {err}")
    if args.record is not None:
        try:
            check_writable(args.record, "--record")
        except ValueError as err:
            parser.error(str(err))
    if args.resume is not None and args.config is not None:
        parser.error(
            "--config with --resume: a resumed run keeps its own config.yaml "
            f"({args.resume / 'config.yaml'}); --timesteps may raise its budget"
        )

    from agents.learning.config import ConfigError, apply_overrides, load_config
    from agents.learning.provenance import TrainingError
    from agents.learning.search_space import check_search
    from agents.learning.training import train

    started, load_before = time.perf_counter(), os.getloadavg()
    config_file = str(args.resume / "config.yaml") if args.resume else args.config or DEFAULT_CONFIG
    try:
        cfg = apply_overrides(load_config(config_file), timesteps=args.timesteps, file=config_file)
        check_search(cfg, config_file)
    except ConfigError as exc:
        print(f"error: invalid config: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.no_progress_bar:
        cfg.training.progress_bar = False
    try:
        result = train(
            cfg, args.out, resume=args.resume, config_file=None if args.resume else config_file
        )
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    rounds = len(result.expert_rounds)
    print(
        f"run directory: {result.run_dir}  ({result.timesteps} steps"
        + (f" and {rounds} round(s) of expert iteration" if rounds else "")
        + f", {result.wall_seconds:.0f} s)"
    )
    if result.interrupted:
        print(
            "interrupted; continue with: .venv/bin/python scripts/main.py "
            f"--resume {result.run_dir}"
        )
        return EXIT_INTERRUPTED

    from agents.atomic import atomic_write_json
    from agents.evaluation.arena import evaluate, format_paired, format_table, paired_lines, report
    from agents.evaluation.plots import plot_win_rates
    from agents.registry import make_agent, set_torch_threads

    set_torch_threads()  # training may use more; evaluation plays fastest on one

    trained = make_agent(str(result.run_dir))
    agents = [(cfg.name or "trained", trained), *((name, make_agent(name)) for name in BASELINES)]
    print(f"evaluating {len(agents)} agents on the same {args.episodes} deals (seed {args.seed})")
    results = evaluate(agents, args.episodes, args.seed, why=args.why)
    print(format_table(results))
    print(format_paired(paired_lines(results, "heuristic")))
    atomic_write_json(result.run_dir / EVAL_JSON, report(results, args.episodes, args.seed, {}))
    chart = plot_win_rates(results, result.run_dir / EVAL_PNG)
    print(f"results: {result.run_dir / EVAL_JSON}")
    print(f"chart: {chart}")
    if args.record is not None:
        record = main_job_record(
            result, results, time.perf_counter() - started, load_before, args, config_file
        )
        atomic_write_json(args.record, record)
        print(f"record: {args.record}")
    return 0


def main_job_record(
    trained: Any,
    results: Any,
    wall: float,
    load_before: tuple[float, float, float],
    args: argparse.Namespace,
    config_file: str,
) -> dict[str, Any]:
    """What the main job measured, for the README's table (``--record``)."""
    import json

    from agents.evaluation.arena import paired_lines
    from agents.gitinfo import git_commit, git_dirty, utc_now

    meta = json.loads((trained.run_dir / "meta.json").read_text(encoding="utf-8"))
    peak = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )  # KiB on Linux: the largest single process
    rates = {r.agent: r for r in results}
    pairs = {p["agent"]: p for p in paired_lines(results, "heuristic")}
    name = results[0].agent
    low, high = rates[name].interval
    hlow, hhigh = rates["heuristic"].interval
    pair = pairs[name]
    dlow, dhigh = pair["difference_ci95"]
    load_after = os.getloadavg()
    episodes = rates[name].episodes
    deals = (
        f"the report seed's {episodes:,} deals"
        if args.seed == REPORT_SEED
        else f"{episodes:,} evaluation deals of seed {args.seed}"
    )
    return {
        "command": ".venv/bin/python scripts/main.py " + " ".join(sys.argv[1:]),
        "config": config_file,
        "commit": git_commit(),
        "dirty": git_dirty(),
        "time": utc_now(),
        "machine": f"{os.cpu_count()} cores, load average {load_before[0]:.2f} before and "
        f"{load_after[0]:.2f} after; {args.note or 'no note'}",
        "wall_seconds": round(wall, 1),
        "training_seconds": meta.get("wall_seconds"),
        "timesteps": meta.get("timesteps"),
        "expert_iteration_rounds": meta.get("expert_iteration_rounds"),
        "peak_rss_mib": round(peak / 1024),
        "results": [r.to_dict() for r in results],
        "paired": list(pairs.values()),
        "summary": {
            "wall time, install excluded": f"{wall / 60:.0f} min {wall % 60:.0f} s",
            "of which training": f"{meta.get('wall_seconds', 0):.0f} s "
            f"({meta.get('timesteps', 0):,} RL steps, {meta.get('expert_iteration_rounds', 0)} "
            "rounds of expert iteration)",
            "peak memory (largest process)": f"{peak / 1024 / 1024:.2f} GiB",
            f"`{name}` on {deals}": (
                f"{100 * rates[name].win_rate:.2f}% [{100 * low:.2f}%, {100 * high:.2f}%]"
            ),
            "`heuristic` on the same deals": (
                f"{100 * rates['heuristic'].win_rate:.2f}% [{100 * hlow:.2f}%, {100 * hhigh:.2f}%]"
            ),
            "the two Wilson intervals": (
                f"apart by {100 * (low - hhigh):.2f} points"
                if low > hhigh
                else f"apart by {100 * (hlow - high):.2f} points, below `heuristic`'s"
                if high < hlow
                else f"overlap by {100 * (min(high, hhigh) - max(low, hlow)):.2f} points"
            ),
            "paired with `heuristic`": (
                f"{100 * pair['difference']:+.2f} points [{100 * dlow:+.2f}, {100 * dhigh:+.2f}], "
                f"McNemar p = {pair['p_two_sided']:.1g}"
            ),
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
