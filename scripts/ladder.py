"""The strength ladder on the command line (the ladder itself: ``agents.ladder``).

    nice -n 10 .venv/bin/python scripts/ladder.py --episodes 1000 --planner-episodes 200 \\
        --seed 0 --workers 2

writes ``runs/ladder/`` (``ladder.md``, ``ladder.json``, ``ladder.png``); the committed ladder
of the README is rewritten only by naming it, ``--out-dir docs/ladder`` (its command is in
docs/evaluation.md). Without ``--seed`` the deals are the report seed's, and the look is
logged.

One more player on an existing ladder's first N deals (paired with ``heuristic`` there),
without replaying the ladder; the new ladder goes to ``--out-dir``, the added rows also to
``--record``::

    flock /tmp/coldiron-cpu.lock nice -n 5 .venv/bin/python scripts/ladder.py --add-row mcts \
        --add-deals 500 --workers 1 --ladder docs/ladder/ladder.json --out-dir docs/ladder \
        --record docs/records/ladder_add_mcts.json --why "..."

A row renamed, for a registered name whose player changed (nothing is played)::

    .venv/bin/python scripts/ladder.py --rename-row strongest=strongest-z2 \
        --ladder docs/ladder/ladder.json --out-dir docs/ladder

Exit status: 0 done, 2 bad arguments, 130 interrupted (the rows finished are written).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any, Final

from agents import ladder
from agents.atomic import atomic_write_json, check_writable
from agents.evaluation.arena import EVALUATION_DEALS, REPORT_SEED, VALIDATION_DEALS, decks_of
from agents.gitinfo import code_stamp
from agents.players.planner import BUDGETS
from agents.registry import agent_names, make_agent, set_torch_threads

EXIT_ERROR: Final = 2
EXIT_INTERRUPTED: Final = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=ladder.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help=f"deals (default {ladder.DEFAULT_EPISODES}; --add-row: its --ladder's)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help=f"seed of the deals (default {REPORT_SEED}, the report seed: every look is logged; "
        "--add-row plays the seed of its --ladder)",
    )
    parser.add_argument(
        "--deals",
        choices=(EVALUATION_DEALS, VALIDATION_DEALS),
        default=None,
        help="the seed's evaluation deals (default; reported results) or its validation deals "
        "(what choices are made on; never a look at the report seed); --add-row plays the "
        "deals of its --ladder",
    )
    parser.add_argument(
        "--planner-episodes",
        type=int,
        default=None,
        help=f"first deals the planners play (default {ladder.DEFAULT_PLANNER_EPISODES} or "
        "--episodes if fewer; at most --episodes)",
    )
    parser.add_argument(
        "--solver-episodes",
        type=int,
        default=None,
        help="first deals the clairvoyant solver decides (default: all --episodes)",
    )
    parser.add_argument(
        "--planner",
        action="append",
        default=None,
        metavar="NAME",
        help="planner budget to rank (repeatable; default "
        f"{' and '.join(ladder.DEFAULT_PLANNERS)})",
    )
    parser.add_argument("--runs", nargs="*", default=None, metavar="DIR", help="trained run dirs")
    parser.add_argument(
        "--workers",
        type=int,
        default=ladder.DEFAULT_WORKERS,
        help=f"processes (default {ladder.DEFAULT_WORKERS})",
    )
    parser.add_argument("--solver-max-nodes", type=int, default=0, help="node cap (0: none)")
    parser.add_argument(
        "--why", metavar="TEXT", help="why the report seed is looked at (the look log)"
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=ladder.DEFAULT_OUT_DIR,
        help=f"output folder (default {ladder.DEFAULT_OUT_DIR}; the committed ladder is "
        f"{ladder.COMMITTED_LADDER.parent}: pass it to rewrite it)",
    )
    parser.add_argument(
        "--add-row",
        metavar="SPEC",
        help="add this player's row to the existing --ladder instead of playing a ladder",
    )
    parser.add_argument(
        "--add-deals",
        type=int,
        default=ladder.DEFAULT_PLANNER_EPISODES,
        help="--add-row: the first deals of the ladder it plays "
        f"(default {ladder.DEFAULT_PLANNER_EPISODES})",
    )
    parser.add_argument(
        "--ladder",
        type=Path,
        default=ladder.COMMITTED_LADDER,
        help="--add-row: the ladder.json to add to (its seed and deals are used)",
    )
    parser.add_argument(
        "--record", type=Path, help="--add-row: also write the added rows to this JSON file"
    )
    parser.add_argument(
        "--rename-row",
        metavar="OLD=NEW",
        help="rename a row of the existing --ladder (a registered name whose player changed: "
        "the row keeps naming the player it measured); nothing is played",
    )
    return parser


def rename_row_main(args: argparse.Namespace, command: str) -> int:
    """``--rename-row OLD=NEW``: the existing ladder again, one row under another name."""
    old, sep, new = str(args.rename_row).partition("=")
    try:
        if not (sep and old and new):
            raise ValueError(f"--rename-row expects OLD=NEW, got {args.rename_row!r}")
        result, settings, old_command = ladder.load_ladder(args.ladder)
        ladder.rename_row(result, old, new)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    result.notes.append(f"row {old} renamed {new} by: {command}")
    for path in ladder.write_outputs(args.out_dir, result, settings, old_command):
        print(f"wrote {path}")
    return 0


def add_row_main(args: argparse.Namespace, command: str, stamp: dict[str, Any], at: str) -> int:
    """``--add-row``: one more row on the existing ladder's first ``--add-deals`` deals."""
    if args.workers <= 0:
        print(f"error: --workers must be positive, got {args.workers}", file=sys.stderr)
        return EXIT_ERROR
    before = ladder.load_average()
    try:
        check_outputs(args)
        result, settings, old_command = ladder.load_ladder(args.ladder)
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
        base, row, pair = ladder.add_row(
            result,
            settings,
            args.add_row,
            args.add_deals,
            workers=args.workers,
            why=args.why,
            progress=ladder.print_progress,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    load = (before, ladder.load_average())
    result.notes.append(f"row {row.agent} ({row.episodes} deals) added {at} by: {command}")
    paths = ladder.write_outputs(args.out_dir, result, settings, old_command)
    if args.record is not None:
        record = {**ladder.added_record(base, row, pair, settings, command, load), **stamp}
        atomic_write_json(args.record, record)
        args.record.chmod(ladder.PUBLIC_FILE_MODE)  # temporary files are created private
        paths.append(args.record)
    print(ladder.table_markdown([base, row], settings.seed, settings.episodes, settings.validation))
    for path in paths:
        print(f"wrote {path}")
    return 0


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse outputs that could not be written, before anything is played."""
    check_writable(args.out_dir, "--out-dir", folder=True)
    if args.record is not None:
        check_writable(args.record, "--record")


def settings_of(args: argparse.Namespace) -> ladder.LadderSettings:
    """The ladder's settings from the arguments (``ValueError`` naming a bad option)."""
    if args.episodes is None:
        args.episodes = ladder.DEFAULT_EPISODES
    if args.planner_episodes is None:
        args.planner_episodes = min(ladder.DEFAULT_PLANNER_EPISODES, args.episodes)
    for name in ("episodes", "planner_episodes", "workers"):
        if getattr(args, name) <= 0:
            raise ValueError(
                f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}"
            )
    if args.planner_episodes > args.episodes:
        raise ValueError(
            f"--planner-episodes ({args.planner_episodes}) exceeds --episodes ({args.episodes})"
        )
    if args.solver_max_nodes < 0:
        raise ValueError(
            f"--solver-max-nodes must be 0 (no cap) or positive, got {args.solver_max_nodes}"
        )
    for run in args.runs or ():
        if not Path(run).exists() and run not in agent_names():
            raise ValueError(f"--runs {run}: no such run directory, model or player name")
    check_outputs(args)
    solver_episodes = args.episodes if args.solver_episodes is None else args.solver_episodes
    if not 0 <= solver_episodes <= args.episodes:
        raise ValueError(f"--solver-episodes must be in 0..{args.episodes}, got {solver_episodes}")
    validation = args.deals == VALIDATION_DEALS
    if args.seed is None:
        args.seed = REPORT_SEED
    try:
        decks_of(args.seed, 1, validation)
    except ValueError as err:
        raise ValueError(f"--seed {args.seed}: {err}") from None
    planners = tuple(args.planner or ladder.DEFAULT_PLANNERS)
    for name in planners:  # an unknown planner, or a player that does not search, is refused
        if not make_agent(name).searches:
            raise ValueError(
                f"--planner {name}: not a search player (a planner budget, "
                f"{', '.join(BUDGETS)}, a search over a network such as strongest, or mcts)"
            )
    return ladder.LadderSettings(
        seed=args.seed,
        episodes=args.episodes,
        validation=validation,
        planner_episodes=args.planner_episodes,
        solver_episodes=solver_episodes,
        planners=planners,
        runs=None if args.runs is None else tuple(args.runs),
        workers=args.workers,
        solver_max_nodes=args.solver_max_nodes,
        why=args.why,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    set_torch_threads()  # trained rows play fastest on one thread (workers inherit it)
    arguments = sys.argv[1:] if argv is None else argv
    command = shlex.join([".venv/bin/python", "scripts/ladder.py", *arguments])
    outputs = [args.out_dir / name for name in ladder.OUTPUT_FILES]  # its own, not the code
    stamp = code_stamp([*outputs, *([args.record] if args.record else [])])  # before it plays
    at = f"at commit {stamp['commit']}{' (with changes)' if stamp['dirty'] else ''}"
    if args.add_row is not None:
        return add_row_main(args, command, stamp, at)
    if args.rename_row is not None:
        return rename_row_main(args, command)
    try:
        settings = settings_of(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    result = ladder.run_ladder(settings, progress=ladder.print_progress)
    result.notes.append(f"ladder played {at}, {stamp['date']}")
    paths = ladder.write_outputs(args.out_dir, result, settings, command)
    print(ladder.table_markdown(result.rows, settings.seed, settings.episodes, settings.validation))
    for path in paths:
        print(f"wrote {path}")
    return EXIT_INTERRUPTED if result.interrupted else 0


if __name__ == "__main__":
    raise SystemExit(main())
