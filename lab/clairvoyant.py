"""Watch the clairvoyant solver win a deal: it reads the whole deck, which no player can.

    .venv/bin/python -m lab.clairvoyant --seed 7            # the first deal of stream 7
    .venv/bin/python -m lab.clairvoyant --deck "5H 2S ..."   # a deal written out

The deal is the one ``scripts/play.py --seed S`` (or ``--deck``) deals; the solver
(:mod:`lab.solver`) searches it and, when some order of play wins, its line is played on the
product's ``Game`` and drawn move by move. Research, not a player: a move that depends on
the deck's order is no evidence about what a player can do.
"""

from __future__ import annotations

import argparse
import sys

from coldiron_env.actions import ACTION_NAMES
from coldiron_env.cards import deck_codes, parse_deck
from coldiron_env.env import ColdIronEnv
from coldiron_env.render import render_text
from lab.solver import solve_deck


def deck_of(seed: int | None, deck: str | None) -> list[int]:
    """The deal ``scripts/play.py`` would deal for ``--seed``/``--deck``."""
    if deck is not None:
        return parse_deck(deck.replace(",", " ").split())
    env = ColdIronEnv()
    env.reset(seed=seed)
    return list(env.game.deck)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--seed", type=int, default=0, help="the deal stream (default 0)")
    where.add_argument("--deck", help="the deal, cards separated by spaces")
    parser.add_argument("--max-nodes", type=int, default=0, help="search cap (0: none)")
    args = parser.parse_args(argv)
    deck = deck_of(args.seed, args.deck)
    solution = solve_deck(deck, max_nodes=args.max_nodes)
    searched = f"{solution.nodes:,} positions searched"
    if not solution.winnable:
        print(f"{solution.verdict}: no order of play wins this deal ({searched})")
        return 0
    env = ColdIronEnv()
    env.reset(options={"deck": deck_codes(deck)})
    game = env.game
    print(f"the clairvoyant wins this deal in {len(solution.actions)} moves ({searched}):")
    print(render_text(game))
    for action in solution.actions:
        env.step(action)
        print(f"clairvoyant plays: {action} {ACTION_NAMES[action]}")
        print(render_text(game))
    return 0 if game.won else 1


if __name__ == "__main__":
    sys.exit(main())
