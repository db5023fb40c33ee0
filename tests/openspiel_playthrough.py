"""Write the golden OpenSpiel playthroughs of ``python_cold_iron`` (``tests/golden/openspiel/``).

Each file is OpenSpiel's own playthrough format
(``open_spiel.python.algorithms.generate_playthrough.playthrough``): the game's type and
parameters, then every state on the way (history, observation string and tensor, legal
actions, chance outcomes with their probabilities) and each action applied. The actions
are those of a whole game: the chance outcomes are the cards of one shuffled deck in
order, the player's actions those of ``heuristic`` (deciding from what a player knows).
``tests/test_openspiel.py`` regenerates each file from its recorded actions and fails on
any difference.

Usage::

    .venv/bin/python tests/openspiel_playthrough.py           # rewrite the files
    .venv/bin/python tests/openspiel_playthrough.py --check   # exit 1 if any would change

Run it after an intended change of the rules, the observation or the OpenSpiel game, and
review ``git diff tests/golden/openspiel`` before committing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyspiel
from open_spiel.python.algorithms import generate_playthrough

from agents.atomic import atomic_write_text
from agents.players.heuristic import HeuristicAgent
from coldiron_env.dealer import shuffled_decks
from coldiron_env.knowledge import Knowledge
from coldiron_env.openspiel import SHORT_NAME, ColdIronState, game_string
from coldiron_env.options import VARIANTS

PUBLIC_FILE_MODE: Final = 0o644
GOLDEN_DIR: Final = Path(__file__).resolve().parent.parent / "tests" / "golden" / "openspiel"
FIRST_SEED: Final = 900
"""Deals are tried from this seed up (``shuffled_decks(default_rng(seed), 1)``)."""
MAX_SEEDS: Final = 500
PLAYTHROUGHS: Final = (
    # file name, game string, what the game must show
    ("python_cold_iron.txt", SHORT_NAME, ("won", "bonus", "iron")),
    ("python_cold_iron_bonus_more.txt", game_string(VARIANTS["more"]), ("bonus", "iron")),
)  # fmt: skip


def play(game_string: str, deck: list[int]) -> tuple[list[int], set[str]]:
    """The actions of one game on ``deck`` (chance outcomes its cards in order, player
    actions heuristic's) and what it showed (its outcome, the phases it passed)."""
    game = pyspiel.load_game(game_string)
    state: ColdIronState = game.new_initial_state()
    player = HeuristicAgent()
    actions: list[int] = []
    shown: set[str] = set()
    drawn = 0
    while not state.is_terminal():
        if state.is_chance_node():
            action = deck[drawn]
            drawn += 1
        else:
            engine = state.engine
            shown.add(("turn", "iron", "bonus", "over")[engine.phase])
            action = player.act_knowledge(Knowledge.from_game(engine))
        actions.append(action)
        state.apply_action(action)
    shown.add(str(state.outcome))
    return actions, shown


def find_game(game_string: str, wanted: tuple[str, ...]) -> list[int]:
    """The actions of the first deal from :data:`FIRST_SEED` whose game shows ``wanted``."""
    for seed in range(FIRST_SEED, FIRST_SEED + MAX_SEEDS):
        deck = shuffled_decks(np.random.default_rng(seed), 1)[0].tolist()
        actions, shown = play(game_string, deck)
        if set(wanted) <= shown:
            return actions
    raise SystemExit(f"no deal in {MAX_SEEDS} seeds from {FIRST_SEED} shows {wanted}")


def build() -> dict[str, str]:
    """File name -> playthrough text."""
    files = {}
    for name, spiel_game, wanted in PLAYTHROUGHS:
        actions = find_game(spiel_game, wanted)
        files[name] = generate_playthrough.playthrough(spiel_game, actions, seed=0)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if any file would change")
    parser.add_argument("--dir", type=Path, default=GOLDEN_DIR, help="output folder")
    args = parser.parse_args(argv)
    files = build()
    changed = [
        name
        for name, text in files.items()
        if not (args.dir / name).is_file() or (args.dir / name).read_text("utf-8") != text
    ]
    if args.check:
        if changed:
            print(f"playthroughs would change: {changed}", file=sys.stderr)
            return 1
        print(f"{len(files)} playthroughs up to date")
        return 0
    args.dir.mkdir(parents=True, exist_ok=True)
    for name in changed:
        atomic_write_text(args.dir / name, files[name])
        (args.dir / name).chmod(PUBLIC_FILE_MODE)  # temporary files are created private
    print(f"{len(files)} playthroughs; {len(changed)} written")
    return 0


def parse_playthrough(text: str) -> dict[str, Any]:
    """The game string and the action ids a playthrough file records."""
    game = None
    actions = []
    for line in text.splitlines():
        if line.startswith("game: "):
            game = line.removeprefix("game: ")
        elif line.startswith("action: "):
            actions.append(int(line.removeprefix("action: ")))
    if game is None:
        raise ValueError("not a playthrough: no 'game: ' line")
    return {"game_string": game, "action_sequence": actions}


if __name__ == "__main__":
    raise SystemExit(main())
