"""What an rl-zoo3 run on Cold Iron did in training: wins, episode length, illegal actions.

    .venv/bin/python scripts/zoo_report.py logs/ppo/coldiron-ColdIron-v0_1 [--last 5000]

Reads the ``*.monitor.csv`` files rl-zoo3 writes (one per env; each episode's reward
``r`` and length ``l``) of a run trained with ``illegal_action: penalize`` and prints,
over the first and the last ``--last`` episodes: the share won, the mean episode
length, and the share of actions that were illegal. Under ``penalize`` an episode's
reward is ``win_reward`` (1 if won) plus ``illegal_reward`` (-0.1) per illegal action,
so the illegal actions of each episode are read off its reward.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from coldiron_env.env import DEFAULT_ILLEGAL_REWARD

EXIT_ERROR = 2
WIN_REWARD = 1.0


def episodes(run: Path) -> list[tuple[float, int, float]]:
    """``(reward, length, end time)`` of every episode of every env, in time order."""
    rows: list[tuple[float, int, float]] = []
    for path in sorted(run.glob("*.monitor.csv")):
        with path.open(encoding="utf-8") as fh:
            fh.readline()  # the JSON header line
            rows += [(float(r["r"]), int(r["l"]), float(r["t"])) for r in csv.DictReader(fh)]
    rows.sort(key=lambda row: row[2])
    return rows


def summary(rows: list[tuple[float, int, float]]) -> tuple[float, float, float]:
    """``(share won, mean length, share of actions illegal)`` of ``rows``."""
    won = [reward > 0 for reward, _, _ in rows]
    illegal = [
        round(((WIN_REWARD if w else 0.0) - reward) / -DEFAULT_ILLEGAL_REWARD)
        for (reward, _, _), w in zip(rows, won, strict=True)
    ]
    steps = sum(length for _, length, _ in rows)
    return sum(won) / len(rows), steps / len(rows), sum(illegal) / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="an rl-zoo3 run folder (holding *.monitor.csv)")
    parser.add_argument("--last", type=int, default=5000, help="episodes at each end")
    args = parser.parse_args(argv)
    rows = episodes(args.run)
    if not rows:
        print(f"error: {args.run}: no *.monitor.csv with episodes", file=sys.stderr)
        return EXIT_ERROR
    n = min(args.last, len(rows))
    print(f"{args.run}: {len(rows)} episodes")
    for label, part in (("first", rows[:n]), ("last", rows[-n:])):
        won, length, illegal = summary(part)
        print(
            f"{label} {n} episodes: won {won:.2%}, mean length {length:.1f} steps, "
            f"illegal actions {illegal:.2%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
