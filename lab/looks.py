"""The report seed and its look log: every look at the held-out deals, logged before it is made.

    .venv/bin/python -m lab.looks --why "the ladder after distilled was reshipped" -- \\
        .venv/bin/python scripts/ladder.py --seed 20261130 --out-dir docs/ladder ...

The README's results are on the evaluation deals of :data:`REPORT_SEED`. A figure stays
held out only while no choice is made after looking at it, so the project looks at that
seed only through this command: it appends one line to :data:`LOOK_LOG` (the date, the
commit and whether the tree had changes, the seed, the deals, the agents, why, the command),
then runs the command. Choices (rounds, checkpoints, hyperparameters, which model ships)
are made on validation deals; the log shows what was seen before each choice.

The product knows nothing of this: ``scripts/evaluate.py --seed 20261130`` run by hand
evaluates on the same deals and logs nothing. The discipline is the lab's.

``$COLDIRON_LOOK_LOG`` names another log file (the lab's tests point it at a temporary one).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from agents.gitinfo import git_commit, git_dirty, utc_now
from lab import RECORDS, ROOT

REPORT_SEED: Final = 20_261_130
"""The evaluation seed of the README's results (since 2026-11-30): held out. No player,
threshold or hyperparameter was tuned on its deals (the heuristic's thresholds and the
planner's budgets were set on seed 0; choices are made on validation deals), no model
trained on them (training, imitation, labelling and validation deal from streams apart
from every evaluation seed, ``coldiron_env.dealer.DealStream``, checked on the decks
actually dealt), and every look at it is logged here."""
LOOK_LOG_VARIABLE: Final = "COLDIRON_LOOK_LOG"
LOOK_LOG: Final = RECORDS / "report_looks.jsonl"
NO_REASON: Final = "not given"


def look_log_path() -> Path:
    """Where looks are logged: ``$COLDIRON_LOOK_LOG``, else :data:`LOOK_LOG`."""
    override = os.environ.get(LOOK_LOG_VARIABLE)
    return Path(override) if override else LOOK_LOG


def record_look(
    seed: int, episodes: int, agents: Sequence[str], why: str | None, command: Sequence[str]
) -> dict[str, Any] | None:
    """Append a look to the log when ``seed`` is the report seed; returns the entry (None
    when it is not a look at the report seed)."""
    if seed != REPORT_SEED:
        return None
    path = look_log_path()
    entry = {
        "date": utc_now(),
        "commit": git_commit(),
        "dirty": git_dirty(),
        "seed": seed,
        "episodes": episodes,
        "agents": list(agents),
        "why": why.strip() if why and why.strip() else NO_REASON,
        "command": shlex.join(command),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:  # one short line: appends do not interleave
        fh.write(json.dumps(entry) + "\n")
    print(f"look at the report seed logged in {path} (why: {entry['why']})", file=sys.stderr)
    return entry


def read_looks(path: Path | None = None) -> list[dict[str, Any]]:
    """Every entry of the look log (the committed one by default)."""
    target = LOOK_LOG if path is None else path
    if not target.is_file():
        return []
    return [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines() if line]


def command_deals(command: Sequence[str]) -> tuple[int | None, int, list[str]]:
    """The seed, deal count and agents a product command plays (``--seed``, ``--episodes``,
    ``--agent``/``--add-row``; the defaults of ``scripts/evaluate.py`` otherwise)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--agent", action="append", default=[])
    parser.add_argument("--add-row", dest="agent", action="append")
    parser.add_argument("--deals", default="evaluation")
    known, _ = parser.parse_known_args(list(command))
    seed = known.seed if known.deals == "evaluation" else None  # validation deals: no look
    return seed, known.episodes, list(known.agent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--why", required=True, help="why the held-out deals are looked at")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    seed, episodes, agents = command_deals(command)
    if seed != REPORT_SEED:
        parser.error(f"the command does not play the report seed (--seed {REPORT_SEED}): run it")
    record_look(seed, episodes, agents, args.why, command)
    return subprocess.run(command, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
