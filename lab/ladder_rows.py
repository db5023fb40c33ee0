"""The committed ladder's upkeep: one more row on its deals, or a row renamed or dropped.

    .venv/bin/python -m lab.looks --why "..." -- .venv/bin/python -m lab.ladder_rows \\
        --add-row mcts --add-deals 500 --workers 1 --ladder docs/ladder/ladder.json \\
        --out-dir docs/ladder --record docs/records/ladder_add_mcts.json
    .venv/bin/python -m lab.ladder_rows --rename-row strongest=strongest-z2 \\
        --ladder docs/ladder/ladder.json --out-dir docs/ladder
    .venv/bin/python -m lab.ladder_rows --drop-row tabula-rasa \\
        --ladder docs/ladder/ladder.json --out-dir docs/ladder

    .venv/bin/python -m lab.ladder_rows --add-bound 2000 --workers 2 \\
        --ladder docs/ladder/ladder.json --out-dir docs/ladder

``--add-bound N``: the clairvoyant bound (:mod:`lab.solver`: the share of deals that can be
won at all with the deck order known) on the ladder's first N deals; a deal the search could
not settle (``--bound-max-nodes``) counts as won, so the row stays an upper bound.
``--add-row SPEC``: the player on the ladder's first ``--add-deals`` deals, paired with
``heuristic`` replayed on those deals (checked against the ladder's own ``heuristic`` row,
deal by deal), written as a new ladder (the old rows unchanged) and, with ``--record``, as a
standalone record. ``--rename-row OLD=NEW``: a registered name whose player changed keeps
naming the player its row measured; nothing is played. ``--drop-row NAME``: the row of a
player no longer shipped under any name (a network replaced by a later round of its run)
leaves the ladder, its record stays where it was written; nothing is played. The ladder is
the product's (``agents.ladder``); its report-seed looks go through :mod:`lab.looks`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from agents import ladder
from agents.atomic import atomic_write_json, check_writable
from agents.evaluation.arena import (
    EVALUATION_DEALS,
    VALIDATION_DEALS,
    AgentResult,
    ResultKind,
    decks_of,
)
from agents.gitinfo import code_stamp
from agents.ladder import (
    PLANNER_BASELINE,
    Ladder,
    LadderSettings,
    close_pool,
    compare,
    play_row,
    row_dict,
    worker_pool,
)
from agents.players.base import Agent
from agents.registry import make_agent, set_torch_threads
from lab import unpack_wins
from lab.solver import UNKNOWN, UNWINNABLE, WINNABLE, Solved, solve_decks

EXIT_ERROR: Final = 2
SOLVER_LABEL: Final = "clairvoyant bound"
SOLVER_CHUNK: Final = 25  # deals per solver task (a deal takes 0 to many seconds)
COMMITTED_LADDER: Final = Path("docs/ladder/ladder.json")
"""The ladder of the README and docs/evaluation.md."""


def added_kind(agent: Agent) -> ResultKind:
    """The kind of an added row: ``planner`` for a player that searches (coloured and
    chunked as the ladder's own planners), ``agent`` for the rest (a network added to the
    ladder is drawn as the networks are)."""
    return "planner" if agent.searches else "agent"


LOAD_AVERAGE_MINUTES: Final = 1
"""Which of ``os.getloadavg()``'s figures a record keeps (the 1-minute one)."""


def row_from_dict(row: dict[str, Any]) -> AgentResult:
    """The :class:`AgentResult` of a ``ladder.json`` row (:func:`row_dict`'s inverse)."""
    episodes = int(row["episodes"])
    return AgentResult(
        row["label"],
        episodes=episodes,
        outcomes=dict(row["outcomes"]),
        total_turns=round(row["mean_turns"] * episodes),
        total_steps=round(row["mean_steps"] * episodes),
        seconds=float(row["seconds"]),
        kind=row["kind"],
        won=unpack_wins(row["won_bits"], episodes),
        note=row.get("note", ""),
    )


def write_ladder(
    args: argparse.Namespace, result: Ladder, settings: LadderSettings, command: str
) -> list[Path]:
    """The product's :func:`agents.ladder.write_outputs`, then the old ``ladder.json``'s keys it
    does not write put back (the solver's deals, a bracket of commits): upkeep drops nothing."""
    old = json.loads(Path(args.ladder).read_text(encoding="utf-8"))
    paths = ladder.write_outputs(args.out_dir, result, settings, command)
    written = Path(args.out_dir) / "ladder.json"
    new = json.loads(written.read_text(encoding="utf-8"))
    atomic_write_json(written, {**new, **{k: v for k, v in old.items() if k not in new}})
    return paths


def load_ladder(path: Path) -> tuple[Ladder, LadderSettings, str]:
    """A written ``ladder.json``: its rows and comparisons, settings, and command."""
    if not path.is_file():
        raise ValueError(f"no ladder at {path} (write one with scripts/ladder.py first)")
    doc = json.loads(path.read_text(encoding="utf-8"))
    missing = [k for k in ("seed", "episodes", "rows", "command") if k not in doc]
    if missing:
        raise ValueError(f"{path} is not a ladder.json: it lacks {missing}")
    absent = [r["label"] for r in doc["rows"] if "won_bits" not in r]
    if absent:
        raise ValueError(f"{path}: rows {absent} lack per-deal wins (won_bits); replay the ladder")
    ladder = Ladder(
        rows=[row_from_dict(r) for r in doc["rows"]],
        comparisons=dict(doc.get("paired", {})),
        notes=list(doc.get("notes", [])),
        interrupted=bool(doc.get("interrupted", False)),
    )
    deals = doc.get("deals", EVALUATION_DEALS)  # ladders written before the key: evaluation
    if deals not in (EVALUATION_DEALS, VALIDATION_DEALS):
        raise ValueError(
            f"{path}: deals must be {EVALUATION_DEALS!r} or {VALIDATION_DEALS!r}, got {deals!r}"
        )
    settings = LadderSettings(
        seed=int(doc["seed"]),
        episodes=int(doc["episodes"]),
        validation=deals == VALIDATION_DEALS,
        planner_episodes=int(doc.get("planner_episodes", doc["episodes"])),
    )
    return ladder, settings, str(doc["command"])


def add_row(
    ladder: Ladder,
    settings: LadderSettings,
    spec: str,
    deals: int,
    workers: int = 1,
    progress: Callable[[AgentResult], None] | None = None,
) -> tuple[AgentResult, AgentResult, dict[str, Any]]:
    """Play ``spec`` on the ladder's first ``deals`` deals and add its row (and ``heuristic``
    on those deals, unless the ladder has that row already) to ``ladder``, with the paired
    comparison. Returns (the baseline row, the new row, the comparison)."""
    if isinstance(deals, bool) or not isinstance(deals, int) or not 0 < deals <= settings.episodes:
        raise ValueError(f"deals must be in 1..{settings.episodes} (the ladder's), got {deals!r}")
    labels = [r.agent for r in ladder.rows]
    if spec in labels:
        raise ValueError(f"the ladder already has a row {spec!r}")
    full = next((r for r in ladder.rows if r.agent == PLANNER_BASELINE), None)
    if full is None or full.episodes != settings.episodes:
        raise ValueError(f"the ladder has no {PLANNER_BASELINE!r} row on all its deals")
    kind = added_kind(make_agent(spec))  # an unknown player is refused before anything runs
    seed, n, val = settings.seed, settings.episodes, settings.validation
    label = f"{PLANNER_BASELINE} (first {deals})" if deals < n else PLANNER_BASELINE
    pool = worker_pool(workers)
    try:
        base = next((r for r in ladder.rows if r.agent == label and r.episodes == deals), None)
        if base is None:
            base = play_row(pool, PLANNER_BASELINE, label, "baseline-subset", seed, n, deals, val)
            if base.won != full.won[:deals]:
                raise RuntimeError(
                    f"{PLANNER_BASELINE} replayed on the first {deals} deals does not win the "
                    "deals the ladder's row says it won: the deals or the player changed"
                )
            ladder.rows.append(base)
        row = play_row(pool, spec, spec, kind, seed, n, deals, val)
    finally:
        close_pool(pool)
    ladder.rows.append(row)
    if progress is not None:
        progress(row)
    pair = compare(base, row)
    ladder.comparisons[spec] = pair
    return base, row, pair


def _solver_chunk(task: tuple[int, int, bool, int, int, int]) -> list[Solved]:
    """The solver on deals ``start:stop`` of (seed, episodes, validation)."""
    seed, episodes, validation, start, stop, max_nodes = task
    return solve_decks(decks_of(seed, episodes, validation)[start:stop].tolist(), max_nodes)


def solver_row(
    settings: LadderSettings, count: int, max_nodes: int = 0, workers: int = 1
) -> AgentResult:
    """The clairvoyant bound on the ladder's first ``count`` deals (``outcomes`` tallies the
    verdicts; a deal left ``unknown`` counts as won, so the row stays an upper bound)."""
    if isinstance(count, bool) or not isinstance(count, int) or not 0 < count <= settings.episodes:
        raise ValueError(f"--add-bound must be in 1..{settings.episodes}, got {count!r}")
    if max_nodes < 0:
        raise ValueError(f"--bound-max-nodes must be 0 (none) or more, got {max_nodes}")
    seed, n, val = settings.seed, settings.episodes, settings.validation
    tasks = [
        (seed, n, val, a, min(a + SOLVER_CHUNK, count), max_nodes)
        for a in range(0, count, SOLVER_CHUNK)
    ]
    pool = worker_pool(workers)
    try:
        parts = list(map(_solver_chunk, tasks) if pool is None else pool.imap(_solver_chunk, tasks))
    finally:
        close_pool(pool)
    solved = [deal for part in parts for deal in part]
    verdicts, seconds = [v for v, _, _ in solved], sum(t for _, _, t in solved)
    tally = {v: verdicts.count(v) for v in (WINNABLE, UNWINNABLE, UNKNOWN)}
    won = [v != UNWINNABLE for v in verdicts]
    return AgentResult(
        SOLVER_LABEL, episodes=count, outcomes=tally, seconds=seconds, kind="bound", won=won
    )


def row_index(ladder: Ladder, name: str) -> int:
    """Where row ``name`` is on the ladder (a ValueError naming the rows if it is not)."""
    labels = [r.agent for r in ladder.rows]
    if name not in labels:
        raise ValueError(f"the ladder has no row {name!r} (rows: {', '.join(labels)})")
    return labels.index(name)


def rename_row(ladder: Ladder, old: str, new: str) -> AgentResult:
    """Give row ``old`` the name ``new`` (with its paired comparison): for a registered name
    whose player changes, so that the row keeps naming the player it measured. ``new`` must
    be a player :func:`make_agent` knows and a label the ladder does not have yet."""
    row = ladder.rows[row_index(ladder, old)]
    if any(r.agent == new for r in ladder.rows):
        raise ValueError(f"the ladder already has a row {new!r}")
    make_agent(new)  # the renamed row must still name a player that can be replayed
    row.agent = new
    if old in ladder.comparisons:
        ladder.comparisons[new] = ladder.comparisons.pop(old)
    return row


def drop_row(ladder: Ladder, name: str) -> AgentResult:
    """Take row ``name`` (and its paired comparison) off the ladder; ``heuristic``, the row
    every other is paired with, stays."""
    index = row_index(ladder, name)
    if name == PLANNER_BASELINE:
        raise ValueError(f"row {name!r} is the one every other row is paired with")
    ladder.comparisons.pop(name, None)
    return ladder.rows.pop(index)


def load_average() -> float | None:
    """The 1-minute load average (None where the platform has none)."""
    try:
        return os.getloadavg()[LOAD_AVERAGE_MINUTES - 1]
    except (AttributeError, OSError):
        return None


def added_record(
    base: AgentResult,
    row: AgentResult,
    pair: dict[str, Any],
    settings: LadderSettings,
    command: str,
    load: tuple[float | None, float | None],
) -> dict[str, Any]:
    """The standalone record of an added row: both rows, the comparison, speed, machine load."""
    return {
        "seed": settings.seed,
        "ladder_episodes": settings.episodes,
        "deals": row.episodes,
        "rows": [row_dict(base), row_dict(row)],
        "paired": {row.agent: pair},
        "seconds_per_decision": row.seconds_per_decision,
        "mean_decisions_per_game": row.mean_steps,
        "load_average_before": load[0],
        "load_average_after": load[1],
        "note": "processing seconds on a shared 2-core machine; other work may have been "
        "running, so speed figures are approximate",
        "command": command,
        "interval": "Wilson score, 95% (z = 1.96)",
    }


def edit_row_main(args: argparse.Namespace, command: str) -> int:
    """``--rename-row OLD=NEW`` or ``--drop-row NAME``: the existing ladder again, one row
    under another name or without it (nothing played)."""
    old, sep, new = str(args.rename_row).partition("=")
    try:
        if args.drop_row is None and not (sep and old and new):
            raise ValueError(f"--rename-row expects OLD=NEW, got {args.rename_row!r}")
        result, settings, old_command = load_ladder(args.ladder)
        if args.drop_row is not None:
            dropped = drop_row(result, args.drop_row)
            done = f"row {dropped.agent} ({dropped.episodes} deals) dropped"
        else:
            rename_row(result, old, new)
            done = f"row {old} renamed {new}"
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    result.notes.append(f"{done} by: {command}")
    for path in write_ladder(args, result, settings, old_command):
        print(f"wrote {path}")
    return 0


def add_row_main(args: argparse.Namespace, command: str, stamp: dict[str, Any], at: str) -> int:
    """``--add-row``: one more row on the existing ladder's first ``--add-deals`` deals."""
    if args.workers <= 0:
        print(f"error: --workers must be positive, got {args.workers}", file=sys.stderr)
        return EXIT_ERROR
    before = load_average()
    try:
        check_outputs(args)
        result, settings, old_command = load_ladder(args.ladder)
        played = VALIDATION_DEALS if settings.validation else EVALUATION_DEALS
        if args.deals not in (None, played):
            raise ValueError(f"--deals {args.deals}: {args.ladder} played its {played} deals")
        if args.seed not in (None, settings.seed):
            raise ValueError(f"--seed {args.seed}: {args.ladder} played seed {settings.seed}")
        if args.episodes not in (None, settings.episodes):
            raise ValueError(
                f"--episodes {args.episodes}: {args.ladder} played {settings.episodes} deals "
                "(--add-row plays its first --add-deals)"
            )
        base, row, pair = add_row(
            result,
            settings,
            args.add_row,
            args.add_deals,
            workers=args.workers,
            progress=ladder.print_progress,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    load = (before, load_average())
    result.notes.append(f"row {row.agent} ({row.episodes} deals) added {at} by: {command}")
    paths = write_ladder(args, result, settings, old_command)
    if args.record is not None:
        record = {**added_record(base, row, pair, settings, command, load), **stamp}
        atomic_write_json(args.record, record)
        paths.append(args.record)
    print(ladder.table_markdown([base, row], settings.seed, settings.episodes, settings.validation))
    for path in paths:
        print(f"wrote {path}")
    return 0


def add_bound_main(args: argparse.Namespace, command: str, at: str) -> int:
    """``--add-bound N``: the clairvoyant bound's row on the ladder's first N deals."""
    try:
        check_outputs(args)
        result, settings, old_command = load_ladder(args.ladder)
        if any(r.agent == SOLVER_LABEL for r in result.rows):
            raise ValueError(f"the ladder already has a row {SOLVER_LABEL!r}")
        row = solver_row(settings, args.add_bound, args.bound_max_nodes, args.workers)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    result.rows.append(row)
    result.notes.append(f"row {row.agent} ({row.episodes} deals) added {at} by: {command}")
    for path in write_ladder(args, result, settings, old_command):
        print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--add-row", metavar="SPEC", help="the player whose row to add")
    what.add_argument("--rename-row", metavar="OLD=NEW", help="a row to rename")
    what.add_argument("--drop-row", metavar="NAME", help="a row to drop")
    what.add_argument("--add-bound", type=int, metavar="N", help="the clairvoyant bound's deals")
    parser.add_argument("--bound-max-nodes", type=int, default=0, help="node cap (0: none)")
    parser.add_argument(
        "--add-deals",
        type=int,
        default=ladder.DEFAULT_PLANNER_EPISODES,
        help=f"the ladder's first deals it plays (default {ladder.DEFAULT_PLANNER_EPISODES})",
    )
    parser.add_argument("--ladder", type=Path, default=COMMITTED_LADDER, help="its ladder.json")
    parser.add_argument("--out-dir", type=Path, required=True, help="where the new ladder goes")
    parser.add_argument("--record", type=Path, help="--add-row: the added rows' record")
    parser.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    parser.add_argument("--deals", choices=(EVALUATION_DEALS, VALIDATION_DEALS))
    parser.add_argument("--seed", type=int)
    parser.add_argument("--episodes", type=int)
    return parser


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse outputs that could not be written, before anything is played."""
    check_writable(args.out_dir, "--out-dir", folder=True)
    if args.record is not None:
        check_writable(args.record, "--record")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    set_torch_threads()
    arguments = sys.argv[1:] if argv is None else argv
    command = shlex.join([".venv/bin/python", "-m", "lab.ladder_rows", *arguments])
    outputs = [args.out_dir / name for name in ladder.OUTPUT_FILES]
    stamp = code_stamp([*outputs, *([args.record] if args.record else [])])  # before it plays
    at = f"at commit {stamp['commit']}{' (with changes)' if stamp['dirty'] else ''}"
    if args.add_row is not None:
        return add_row_main(args, command, stamp, at)
    if args.add_bound is not None:
        return add_bound_main(args, command, at)
    return edit_row_main(args, command)


if __name__ == "__main__":
    raise SystemExit(main())
