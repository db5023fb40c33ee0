"""What an rl-zoo3 run on Cold Iron did in training: wins, episode length, illegal actions.

    .venv/bin/python scripts/zoo_report.py logs/ppo/coldiron-ColdIron-v0_1 [--last 5000]

Reads the ``*.monitor.csv`` files rl-zoo3 writes (one per env; each episode's reward
``r`` and length ``l``, and its ``outcome`` when the hyperparameter file asks the
monitor for it, as ``configs/rl_zoo3/*.yml`` do) of a run trained with
``illegal_action: penalize`` and prints, over the first and the last ``--last``
episodes: the share won, the mean episode length, the share of episodes that ended at
their first step, and the share of actions that were illegal.

Under ``penalize`` an episode's reward is its end reward (``win_reward`` if won,
``loss_reward`` if lost, its ``max_illegal_actions``-th illegal action's forfeit
included) plus ``illegal_reward`` per illegal action, so the illegal actions of each
episode are read off its reward. The reward options are the run's own (rl-zoo3's
``config.yml`` in the run folder; the env's defaults if there is none). Without an
``outcome`` column, each episode's outcome is the first of won, lost, forfeited whose
end reward explains its reward with a whole number of illegal actions (a forfeit has
exactly ``max_illegal_actions``, a loss fewer). Runs made before 2026-12-04, when a forfeit
was a truncation without the loss's reward, are read right only with ``loss_reward`` 0.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.integrations.zoo_files import zoo_env_kwargs
from agents.learning.sb3_agent import ModelLoadError
from coldiron_env.env import DEFAULT_ILLEGAL_REWARD, DEFAULT_MAX_ILLEGAL

EXIT_ERROR = 2
WON, ILLEGAL = "won", "illegal"
TOLERANCE = 1e-4
"""How far from a whole number of illegal actions a decoded count may be (float sums)."""


@dataclass(frozen=True)
class Episode:
    """One monitored episode: its reward, length, end time and outcome (None: not logged)."""

    reward: float
    length: int
    time: float
    outcome: str | None


@dataclass(frozen=True)
class Rewards:
    """The reward options an episode's reward is made of."""

    win: float = 1.0
    loss: float = 0.0
    illegal: float = DEFAULT_ILLEGAL_REWARD
    max_illegal: int = DEFAULT_MAX_ILLEGAL

    @classmethod
    def of(cls, env_kwargs: dict[str, Any]) -> Rewards:
        return cls(
            float(env_kwargs.get("win_reward", cls.win)),
            float(env_kwargs.get("loss_reward", cls.loss)),
            float(env_kwargs.get("illegal_reward", cls.illegal)),
            int(env_kwargs.get("max_illegal_actions", cls.max_illegal)),
        )

    def decode(self, episode: Episode) -> tuple[bool, int]:
        """``(won, illegal actions)`` of ``episode``."""
        ends = {WON: self.win, "lost": self.loss, ILLEGAL: self.loss}  # a forfeit is lost
        order = [episode.outcome] if episode.outcome else list(ends)
        for outcome in order:
            end = ends.get(outcome, self.loss)  # slain, deck exhausted, midnight: lost
            count = (episode.reward - end) / self.illegal if self.illegal else 0.0
            whole = round(count)
            limit = self.max_illegal if outcome == ILLEGAL else self.max_illegal - 1
            if abs(count - whole) < TOLERANCE and 0 <= whole <= limit:
                return outcome == WON, whole
        raise ValueError(
            f"episode reward {episode.reward} (length {episode.length}) is not an end reward "
            f"plus whole illegal actions under {self}"
        )


def episodes(run: Path) -> list[Episode]:
    """Every episode of every env of ``run``, in time order."""
    rows: list[Episode] = []
    for path in sorted(run.glob("*.monitor.csv")):
        with path.open(encoding="utf-8") as fh:
            fh.readline()  # the JSON header line
            rows += [
                Episode(float(r["r"]), int(r["l"]), float(r["t"]), r.get("outcome") or None)
                for r in csv.DictReader(fh)
            ]
    rows.sort(key=lambda row: row.time)
    return rows


def summary(rows: list[Episode], rewards: Rewards) -> tuple[float, float, float, float]:
    """``(share won, mean length, share ended at step 1, share of actions illegal)``."""
    decoded = [rewards.decode(row) for row in rows]
    steps = sum(row.length for row in rows)
    won = sum(w for w, _ in decoded)
    illegal = sum(n for _, n in decoded)
    first_step = sum(row.length == 1 for row in rows)
    return won / len(rows), steps / len(rows), first_step / len(rows), illegal / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="an rl-zoo3 run folder (holding *.monitor.csv)")
    parser.add_argument("--last", type=int, default=5000, help="episodes at each end")
    args = parser.parse_args(argv)
    rows = episodes(args.run)
    if not rows:
        print(f"error: {args.run}: no *.monitor.csv with episodes", file=sys.stderr)
        return EXIT_ERROR
    try:
        rewards = Rewards.of(zoo_env_kwargs(args.run) or {})
    except (ModelLoadError, TypeError, ValueError) as exc:
        print(f"error: {args.run}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    n = min(args.last, len(rows))
    print(f"{args.run}: {len(rows)} episodes")
    for label, part in (("first", rows[:n]), ("last", rows[-n:])):
        try:
            won, length, first_step, illegal = summary(part, rewards)
        except ValueError as exc:
            print(f"error: {args.run}: {exc}", file=sys.stderr)
            return EXIT_ERROR
        print(
            f"{label} {n} episodes: won {won:.2%}, mean length {length:.1f} steps, "
            f"ended at step 1 {first_step:.2%}, illegal actions {illegal:.2%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
