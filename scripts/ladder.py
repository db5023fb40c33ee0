"""The strength ladder on the command line (the ladder itself: ``agents.ladder``).

    nice -n 10 .venv/bin/python scripts/ladder.py --episodes 1000 --planner-episodes 200 \\
        --seed 0 --workers 2 --out-dir runs/ladder

writes ``ladder.md``, ``ladder.json`` and ``ladder.png`` into ``--out-dir``.

Exit status: 0 done, 2 bad arguments, 130 interrupted (the rows finished are written).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from agents import ladder
from agents.atomic import check_writable
from agents.cli import EXIT_INTERRUPTED, command_parser, refuse
from agents.evaluation.arena import add_deal_flags, validation_asked
from agents.gitinfo import code_stamp
from agents.players.planner import BUDGETS
from agents.registry import agent_names, make_agent, set_torch_threads


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(ladder.__doc__)
    add = parser.add_argument
    add("--episodes", type=int, default=ladder.DEFAULT_EPISODES, help="deals (default %(default)s)")
    add_deal_flags(parser)
    add("--planner-episodes", type=int,
        help=f"first deals the planners play (default {ladder.DEFAULT_PLANNER_EPISODES} or "
        "--episodes if fewer; at most --episodes)")  # fmt: skip
    add("--planner", action="append", metavar="NAME",
        help="planner budget to rank (repeatable; default "
        f"{' and '.join(ladder.DEFAULT_PLANNERS)})")  # fmt: skip
    add("--runs", nargs="*", metavar="DIR", help="trained run dirs")
    add("--workers", type=int, default=ladder.DEFAULT_WORKERS,
        help="processes (default %(default)s)")  # fmt: skip
    add("--out-dir", type=Path, required=True,
        help="the folder ladder.md, ladder.json and ladder.png are written to")  # fmt: skip
    return parser


def settings_of(args: argparse.Namespace) -> ladder.LadderSettings:
    """The ladder's settings from the arguments (``ValueError`` naming a bad option)."""
    episodes = args.episodes
    planner_episodes = args.planner_episodes
    if planner_episodes is None:
        planner_episodes = min(ladder.DEFAULT_PLANNER_EPISODES, episodes)
    least = {"--episodes": (episodes, 1), "--planner-episodes": (planner_episodes, 1),
             "--workers": (args.workers, 1)}  # fmt: skip
    for flag, (value, low) in least.items():
        if value < low:
            raise ValueError(f"{flag} must be {low} or more, got {value}")
    if planner_episodes > episodes:
        raise ValueError(f"--planner-episodes ({planner_episodes}) exceeds --episodes ({episodes})")
    for run in args.runs or ():
        if not Path(run).exists() and run not in agent_names():
            raise ValueError(f"--runs {run}: no such run directory, model or player name")
    check_writable(args.out_dir, "--out-dir", folder=True)
    planners = tuple(args.planner or ladder.DEFAULT_PLANNERS)
    for name in planners:  # an unknown planner, or a player that does not search, is refused
        if not make_agent(name).searches:
            raise ValueError(
                f"--planner {name}: not a search player (a planner budget, "
                f"{', '.join(n for n in BUDGETS if n in agent_names())}, a search over a network "
                "such as strongest, or mcts)"
            )
    return ladder.LadderSettings(
        seed=args.seed, episodes=episodes, validation=validation_asked(args),
        planner_episodes=planner_episodes, planners=planners, runs=tuple(args.runs or ()),
        workers=args.workers,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    set_torch_threads()  # trained rows play fastest on one thread (workers inherit it)
    arguments = sys.argv[1:] if argv is None else argv
    command = shlex.join([".venv/bin/python", "scripts/ladder.py", *arguments])
    outputs = [args.out_dir / name for name in ladder.OUTPUT_FILES]  # its own, not the code
    stamp = code_stamp(outputs)  # before it plays
    at = f"at commit {stamp['commit']}{' (with changes)' if stamp['dirty'] else ''}"
    try:
        settings = settings_of(args)
    except ValueError as err:
        return refuse(err)
    result = ladder.run_ladder(settings, progress=ladder.print_progress)
    result.notes.append(f"ladder played {at}, {stamp['date']}")
    paths = ladder.write_outputs(args.out_dir, result, settings, command)
    print(ladder.table_markdown(result.rows, settings.seed, settings.episodes, settings.validation))
    for path in paths:
        print(f"wrote {path}")
    return EXIT_INTERRUPTED if result.interrupted else 0


if __name__ == "__main__":
    raise SystemExit(main())
