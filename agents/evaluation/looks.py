"""The look log: every evaluation on the report seed, appended to a committed file.

The README's figures are on the deals of :data:`~agents.evaluation.arena.REPORT_SEED`. A
figure stays held out only while no choice was made after looking at it, so every
evaluation on that seed (``scripts/evaluate.py``, ``scripts/main.py``,
``scripts/ladder.py``, ``scripts/bound.py``: all through :func:`record_look`) appends one
line to ``docs/report_looks.jsonl``: the date, the commit (and whether the tree had
changes), the seed, the deals, the agents and why it was looked at. Choices (rounds,
checkpoints, hyperparameters, which model ships) are made on validation deals; the log
shows what was seen before each choice.

``$COLDIRON_LOOK_LOG`` names another file (the tests point it at a temporary one); the
log is written only in a checkout (where ``docs/`` exists) unless that variable is set.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from agents.gitinfo import REPO_ROOT, git_commit, git_dirty, utc_now

LOOK_LOG_VARIABLE: Final = "COLDIRON_LOOK_LOG"
LOOK_LOG: Final = REPO_ROOT / "docs" / "report_looks.jsonl"
NO_REASON: Final = "not given"


def look_log_path() -> Path | None:
    """Where looks are logged: ``$COLDIRON_LOOK_LOG``, else the checkout's docs/ (or None)."""
    override = os.environ.get(LOOK_LOG_VARIABLE)
    if override:
        return Path(override)
    return LOOK_LOG if LOOK_LOG.parent.is_dir() else None


def record_look(
    seed: int, episodes: int, agents: Sequence[str], why: str | None, report_seed: int
) -> dict[str, Any] | None:
    """Append a look to the log when ``seed`` is the report seed; returns the entry (None
    when it was not a look at the report seed, or there is no log to write)."""
    if seed != report_seed:
        return None
    path = look_log_path()
    if path is None:
        return None
    entry = {
        "date": utc_now(),
        "commit": git_commit(),
        "dirty": git_dirty(),
        "seed": seed,
        "episodes": episodes,
        "agents": list(agents),
        "why": why.strip() if why and why.strip() else NO_REASON,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:  # one short line: appends do not interleave
        fh.write(json.dumps(entry) + "\n")
    print(
        f"note: seed {seed} is the report seed (held-out deals); this look is logged in "
        f"{path} (why: {entry['why']}). Try things and choose on --deals validation.",
        file=sys.stderr,
    )
    return entry


def read_looks(path: Path | None = None) -> list[dict[str, Any]]:
    """Every entry of the look log (the committed one by default)."""
    target = LOOK_LOG if path is None else path
    if not target.is_file():
        return []
    return [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines() if line]
