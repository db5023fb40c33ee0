"""The README's main-job record: run ``scripts/main.py`` and write what it measured.

    .venv/bin/python -m lab.main_job --record docs/records/main_job.json --note "quiet" \\
        --why "the main job under the new default" -- --out runs/main --seed 20261130

Everything after ``--`` goes to ``scripts/main.py`` (``--out`` is required: the record reads
the run directory's ``meta.json`` and ``evaluation.json``). The command runs as a child
process; the record keeps its wall time, the peak memory of its largest process
(``RUSAGE_CHILDREN``), the machine's load before and after, the training's own figures and
the evaluation's results, paired with ``heuristic``. On the report seed the look is logged
first (:mod:`lab.looks`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

from agents.atomic import atomic_write_json, check_writable
from agents.evaluation.arena import AgentResult
from agents.evaluation.stats import mcnemar
from agents.gitinfo import git_commit, git_dirty, utc_now
from lab import ROOT, unpack_wins
from lab.looks import REPORT_SEED, command_deals, record_look

MAIN: Final = ROOT / "scripts" / "main.py"
BASELINE = "heuristic"


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or the platform's word for it."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or "an unnamed CPU"


def results_of(run_dir: Path) -> list[AgentResult]:
    """The agents' results ``scripts/main.py`` wrote in ``run_dir/evaluation.json``."""
    doc = json.loads((run_dir / "evaluation.json").read_text(encoding="utf-8"))
    out = []
    for entry in doc["agents"]:
        n = int(entry["episodes"])
        won = unpack_wins(entry["won_bits"], n)
        out.append(AgentResult(entry["agent"], n, dict(entry["outcomes"]), won=won))
    return out


def main_job_record(
    run_dir: Path,
    results: list[AgentResult],
    wall: float,
    peak_kib: int,
    load: tuple[float, float],
    seed: int,
    note: str,
    command: list[str],
) -> dict[str, Any]:
    """What the main job measured, for the README's table."""
    meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
    rates = {r.agent: r for r in results}
    name = results[0].agent
    base = rates[BASELINE]
    pair = {"agent": name, "against": BASELINE, **mcnemar(base.won, rates[name].won)}
    low, high = rates[name].interval
    hlow, hhigh = base.interval
    dlow, dhigh = pair["difference_ci95"]
    episodes = rates[name].episodes
    deals = (
        f"the report seed's {episodes:,} deals"
        if seed == REPORT_SEED
        else f"{episodes:,} evaluation deals of seed {seed}"
    )
    return {
        "command": shlex.join(command),
        "config": meta.get("config_file"),
        "commit": git_commit(),
        "dirty": git_dirty(),
        "time": utc_now(),
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, load average {load[0]:.2f} before "
        f"and {load[1]:.2f} after; {note or 'no note'}",
        "wall_seconds": round(wall, 1),
        "training_seconds": meta.get("wall_seconds"),
        "timesteps": meta.get("timesteps"),
        "expert_iteration_rounds": meta.get("expert_iteration_rounds"),
        "time_budget": meta.get("time_budget"),  # RL's measured rate and what was cut
        "peak_rss_mib": round(peak_kib / 1024),
        "results": [r.to_dict() for r in results],
        "paired": [pair],
        "summary": {
            "wall time, install excluded": f"{wall // 60:.0f} min {wall % 60:.0f} s",
            "of which training": f"{meta.get('wall_seconds', 0):.0f} s "
            f"({meta.get('timesteps', 0):,} RL steps, {meta.get('expert_iteration_rounds', 0)} "
            "rounds of expert iteration)",
            "peak memory (largest process)": f"{peak_kib / 1024 / 1024:.2f} GiB",
            f"`{name}` on {deals}": (
                f"{100 * rates[name].win_rate:.2f}% [{100 * low:.2f}%, {100 * high:.2f}%]"
            ),
            "`heuristic` on the same deals": (
                f"{100 * base.win_rate:.2f}% [{100 * hlow:.2f}%, {100 * hhigh:.2f}%]"
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--record", type=Path, required=True, help="the record to write")
    parser.add_argument("--note", default="", help="what else the machine was doing")
    parser.add_argument("--why", help="why the report seed is looked at (its look log)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then scripts/main.py's")
    args = parser.parse_args(argv)
    forwarded = args.args[1:] if args.args[:1] == ["--"] else args.args
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--out", type=Path)
    out.add_argument("--seed", type=int, default=0)
    known, _ = out.parse_known_args(forwarded)
    if known.out is None:
        parser.error("give scripts/main.py an --out: the record reads its run directory")
    try:
        check_writable(args.record, "--record")
    except ValueError as err:
        parser.error(str(err))
    command = [".venv/bin/python", "scripts/main.py", *forwarded]
    if known.seed == REPORT_SEED:
        if not args.why:
            parser.error(f"--why: the main job looks at the report seed {REPORT_SEED}")
        _, episodes, _ = command_deals(forwarded)
        record_look(known.seed, episodes, ["the main job's network", BASELINE], args.why, command)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(MAIN), *forwarded], check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        print(f"scripts/main.py exited {done.returncode}: no record written", file=sys.stderr)
        return done.returncode
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    load = (load_before, os.getloadavg()[0])
    record = main_job_record(
        known.out, results_of(known.out), wall, peak, load, known.seed, args.note, command
    )
    atomic_write_json(args.record, record)
    print(f"record: {args.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
