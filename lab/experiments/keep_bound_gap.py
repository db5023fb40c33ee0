"""How often the counting observation's ``hopeless`` flags a position that can still be won.

    python -m lab.experiments.keep_bound_gap --seed 8 --episodes 2000 \\
        --json lab/records/keep_bound_gap.json

``keep_bound`` (:class:`coldiron_env.analysis.Counting`, :func:`~coldiron_env.analysis.max_keeps`)
spends at most 5 Hurt on the Iron; an application at Hurt 5 keeps its card before its Hurt
slays and wins if the card completes the phrase (RULES.md R7, R11), one card more. The
players' own test (the planner's ``hopeless``, :func:`max_keeps`) counts that card; the
observation's feature, which the networks were trained on, does not. This plays
``heuristic`` on validation deals and counts the turn decisions where the observation says
``hopeless`` and the players' test does not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agents.atomic import atomic_write_json  # noqa: E402
from agents.evaluation.arena import validation_decks  # noqa: E402
from agents.evaluation.lockstep import Move, play_lockstep  # noqa: E402
from agents.gitinfo import code_stamp  # noqa: E402
from agents.players.heuristic import HeuristicAgent  # noqa: E402
from agents.players.planner import hopeless  # noqa: E402
from coldiron_env.actions import PHASE_TURN  # noqa: E402
from coldiron_env.cards import deck_codes  # noqa: E402
from coldiron_env.knowledge import Knowledge  # noqa: E402
from coldiron_env.observation import COUNTING_FIELDS, COUNTING_KEY  # noqa: E402

HOPELESS: Final = next(f for f in COUNTING_FIELDS if f.name == "hopeless")


def observation_says_hopeless(kn: Knowledge) -> bool:
    """The counting observation's ``hopeless`` (its ``keep_bound`` spends the Iron's Hurt only
    up to 5), read from the observation a player in ``kn`` is shown."""
    counting = kn.observation("dict", counting=True)[COUNTING_KEY]
    return bool(counting[0, HOPELESS.start])


def measure(seed: int, episodes: int) -> dict[str, Any]:
    counts = {"decisions": 0, "flagged": 0}
    games: list[int] = []

    def count(move: Move) -> None:
        kn = move.obs
        if kn.phase == PHASE_TURN:
            counts["decisions"] += 1
            if observation_says_hopeless(kn) and not hopeless(kn):
                counts["flagged"] += 1
                if not games or games[-1] != move.game:
                    games.append(move.game)

    player = HeuristicAgent()
    resets = [
        {"options": {"deck": deck_codes(deck)}}
        for deck in validation_decks(seed, episodes).tolist()
    ]
    play_lockstep(lambda _: player, {}, resets, engine="game", on_move=count)
    return {**counts, "games": games}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True, help="validation seed of the deals")
    parser.add_argument("--episodes", type=int, required=True, help="deals to play")
    parser.add_argument("--json", type=Path, required=True, help="record to write")
    args = parser.parse_args(argv)
    stamp = code_stamp(args.json)  # the code that plays, before it plays
    found = measure(args.seed, args.episodes)
    doc = {
        "what": "turn decisions of heuristic where the observation says hopeless, the players not",
        "deals": "validation",
        "seed": args.seed,
        "episodes": args.episodes,
        **found,
        **stamp,
        "command": " ".join(["lab/experiments/keep_bound_gap.py", *(argv or sys.argv[1:])]),
    }
    atomic_write_json(args.json, doc)
    print(
        f"{found['flagged']} of {found['decisions']} turn decisions in "
        f"{len(found['games'])} of {args.episodes} games"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
